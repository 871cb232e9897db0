#pragma once
// kvscope watermark-detect: is a text (or a list of token ids) watermarked with KV Scope's
// green-list watermark (engine/sampling/watermark.h)? Prints green count, z and p-value.
#include <string>

namespace CLI {
class App;
}

namespace kvs::app {

struct WatermarkDetectOptions {
    std::string model;  // tokenizer and vocabulary size
    std::string text;
    std::string file;
    std::string ids;  // "12,345,6" instead of text
    int vocab = 0;    // with --ids: the vocabulary size, so no model is needed
    float gamma = 0.5f;
    double threshold = 4.0;  // z above this: "watermarked"
    bool json = false;
};

CLI::App* add_watermark_command(CLI::App& app, WatermarkDetectOptions& o);
int cmd_watermark_detect(const WatermarkDetectOptions& o);

}  // namespace kvs::app
