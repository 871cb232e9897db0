#pragma once
// kvscope bench --serve URL: a client-side serving benchmark against any OpenAI-compatible
// server (kvscope serve, llama-server, vLLM), in the manner of `vllm bench serve`.
#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace kvs::app {

struct HttpBenchOptions {
    std::string url;                // --serve
    std::string dataset = "mixed";  // random | mixed | shared-prefix | poisson | uniform, with :key=value,...
    int num_prompts = 0;            // 0: the dataset's own n
    std::string request_rate = "inf";
    int max_concurrency = 0;  // 0: no limit
    std::string model;        // served model name; empty: the first of /v1/models
    std::string api_key;
    std::string goodput;  // "ttft:MS tpot:MS e2el:MS"
    std::string json_out;
    std::string endpoint = "completions";  // completions | chat
    bool text_prompts = false;             // send text (decoded by --tokenizer) instead of token ids
    std::string tokenizer;                 // model whose tokenizer decodes the prompts (text / chat)
    uint64_t seed = 1;
    int vocab = 0;  // token ids drawn below this (0: the tokenizer's, else SmolLM2's 49152)
    double timeout_s = 600;
    bool no_progress = false;
    std::string label;  // a name for this run in the table and the JSON (e.g. "kvscope", "llama-server")
};

// Adds --serve and its options to the bench subcommand. --json-out is bench's own.
void add_bench_http_options(CLI::App* bench, HttpBenchOptions& o);
int cmd_bench_http(const HttpBenchOptions& o);

}  // namespace kvs::app
