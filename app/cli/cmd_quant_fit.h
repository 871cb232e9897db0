#pragma once
// kvscope quant-fit: "Which quantization fits?" (engine/quant/quant_fit.h) in a terminal: a
// model (installed name or file, a preset with published numbers, or a parameter count and
// attention shape), a device (memory in GiB, cpu or gpu; default: this machine's available
// RAM) and a goal; a ranked table of the schemes with their weights, KV room and quality,
// or --json.
#include <string>

namespace CLI {
class App;
}

namespace kvs::app {

struct QuantFitOptions {
    std::string model;   // name or path; empty with --preset / --params / a shape
    std::string preset;  // Llama-2-7B, ...
    double params = 0;   // parameter count (e.g. 7e9)
    int layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
    long long hidden = 0, ffn = 0, vocab = 0;
    int trained_ctx = 0;
    double memory_gib = 0;  // 0: available RAM
    std::string device = "cpu";
    double usable = 0.9;
    std::string goal = "quality";
    long long ctx = 0;  // 0: min(4096, the model's trained context)
    long long batch = 1;
    std::string kv_type = "f16";
    std::string table;    // kvscope-quant-table JSON
    std::string schemes;  // comma list; empty: the default list
    bool json = false;
};

CLI::App* add_quant_fit_command(CLI::App& app, QuantFitOptions& o);
int cmd_quant_fit(const QuantFitOptions& o);

}  // namespace kvs::app
