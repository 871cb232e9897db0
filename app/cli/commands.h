#pragma once
// Options and entry points of the headless subcommands. Each returns the process exit
// code: 0 on success, 1 when the input was bad (the message went to stderr).
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_options.h"
#include "engine/runtime/session.h"

namespace CLI {
class App;
}

namespace kvs::app {

struct GenerateOptions {
    std::string model;
    std::string prompt;
    std::string prompt_file;
    std::string system;
    bool chat = false;
    bool quiet_stats = false;
    SamplingParams sampling;
    RunnerOptions runner;
    // Speculative decoding (through the batching engine): "ngram", "int4", "layer-skip:N",
    // a draft model path, any of them with "@V"; empty: plain decoding.
    std::string spec;
    int spec_k = 4;
    bool spec_adaptive = false;
    // A LoRA adapter on top of the model: "PATH" or "NAME=PATH" (a PEFT folder or a GGUF
    // adapter), scaled by lora_scale x its own alpha / r.
    std::string lora;
    float lora_scale = 1.0f;
    int beams = 1;  // beam search width (1: off); sampling.length_penalty ranks the hypotheses
    KvTierFlags tiers;  // KV tiers (through the batching engine)
    std::string kv_evict;  // KV eviction "POLICY[:BUDGET]" (through the batching engine; engine/kv_cache/kv_eviction.h)
};
int cmd_generate(const GenerateOptions& o);

struct InspectOptions {
    std::string model;
    int ctx = 0;  // 0: the model's training context
    int batch = 1;
    bool tensors = false;
    bool json = false;
};
int cmd_inspect(const InspectOptions& o);

struct BenchOptions {
    std::string model;
    int n_prompt = 512;
    int n_gen = 128;
    int depth = 0;  // context tokens filled (untimed) before each pp / tg run
    int repetitions = 5;
    bool json = false;
    std::string json_out;
    RunnerOptions runner;
    // The batching engine under load (app/cli/cmd_bench_serve.cpp): --workload or --sweep.
    std::string workload;         // a workload spec, e.g. "mixed", "shared-prefix:n=32"
    std::string policy = "both";  // continuous, static, both
    int max_seqs = 16;            // most sequences per step (and the static batch size)
    int step_budget = 512;        // tokens per step
    int kv_blocks = 0;            // KV pool in blocks (0: from kv_mib)
    double kv_mib = 0;            // KV pool in MiB (0: the engine's default, 1 GiB)
    std::string preemption = "recompute";
    int host_blocks = 256;  // swap tier size with --preemption swap
    bool no_prefix_cache = false;
    std::string trace;  // write the first policy's steps, last snapshot and requests here
    std::string sweep;  // batch sizes, e.g. "1,2,4,8,16,32,64"
    int sweep_prompt = 32, sweep_gen = 64;
    // Speculative decoding (app/cli/cmd_bench_spec.cpp): --spec ngram,layer-skip:8,int4
    std::string spec;
    std::string spec_k = "2,4,8";
    std::string spec_workload = "both";  // repetitive, chat, both
    int spec_gen = 128;
    KvTierFlags tiers;  // KV tiers for --workload / --sweep, and --kv-tiers' sizes
    // --kv-tiers (app/cli/cmd_bench_tiers.cpp): TTFT of a long system prompt cold, from the
    // CPU tier and from disk after a restart, alternating, --repetitions runs each.
    bool kv_tiers_bench = false;
    int tier_prompt = 2000;  // system prompt tokens
};
int cmd_bench(const BenchOptions& o);
int cmd_bench_spec(const BenchOptions& o);
int cmd_bench_serve(const BenchOptions& o);
int cmd_bench_tiers(const BenchOptions& o);

struct QuantizeOptions {
    std::string model;
    std::string scheme;  // QuantScheme::parse spelling
    std::string out;     // .gguf file, or a folder for INT4 (AutoAWQ)
    std::string calib;   // calibration text for AWQ (default: default_calibration_text_path())
    int calib_tokens = 1024;
};
int cmd_quantize(const QuantizeOptions& o);
// kvscope eval (app/cli/cmd_eval.cpp): quantized variants against the reference.
struct EvalCommandOptions {
    std::string model;
    std::string quant;  // comma list; empty: the default schemes this build has
    std::string text = "/usr/share/common-licenses/GPL-3";
    std::string calib = "/usr/share/common-licenses/Apache-2.0";
    int calib_tokens = 1024;
    int calib_seed = 0;  // 0: the first calib_tokens tokens; else random windows (sample_calibration_tokens)
    int ctx = 512;
    int max_tokens = 2048;
    std::string prompts_file;
    int divergence_tokens = 64;
    std::string json_out;
    bool all = false;     // --all: the comparison table of every scheme (app/cli/cmd_eval_table.h)
    std::string csv_out;  // --all only: the table as CSV
    bool no_speed = false;
    int repeat = 1;
    RunnerOptions runner;  // backend, threads, simd
};
CLI::App* add_eval_command(CLI::App& app, EvalCommandOptions& o);
int cmd_eval(const EvalCommandOptions& o);

// kvscope serve (app/cli/cmd_serve.cpp): the OpenAI-compatible HTTP server on one model.
struct ServeOptions {
    std::string model;
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string api_key, api_key_file;
    std::string served_model_name;  // default: the --model argument
    std::vector<std::string> allowed_origins;
    int max_seqs = 64;
    double kv_mib = 0;  // 0: the session's default pool
    int max_queue = 512;
    int max_body_mib = 8;
    RunnerOptions runner;  // context, batch (the step's token budget), threads, block size, KV type
    KvTierFlags tiers;     // KV tiers below the pool
    // LoRA adapters served as models (vLLM's --lora-modules: NAME=PATH or a JSON object with
    // "name" and "path"); --enable-lora-runtime allows the load / unload routes.
    std::vector<std::string> lora_modules;
    bool enable_lora_runtime = false;
};
CLI::App* add_serve_command(CLI::App& app, ServeOptions& o);
int cmd_serve(const ServeOptions& o);

// Opens a session on a model by name or path (engine/runtime/session.h); prints the error
// and returns null when it cannot, and the model's warnings when it can.
std::shared_ptr<Session> open_session_or_report(const std::string& name_or_path, const SessionOptions& opt = {});
// The batching engine's options from the single-sequence ones the commands share (backend,
// threads, SIMD level, KV block size and type, context as max_model_len).
EngineOptions engine_options_from(const RunnerOptions& r);

}  // namespace kvs::app
