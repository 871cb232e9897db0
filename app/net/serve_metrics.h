#pragma once
// What a client-side serving benchmark (`kvscope bench --serve`) reports, with the metric
// definitions of vLLM's `vllm bench serve` (vllm/benchmarks/serve.py, calculate_metrics):
//   completed / failed      requests that finished without / with an error
//   duration                first request sent to last request done (the benchmark's wall time)
//   request throughput      completed / duration; goodput: completed requests meeting every
//                           SLO given (ttft, tpot, e2el in ms; a 1-token request's tpot is 0) / duration
//   output tok/s            sum of output tokens / duration; total tok/s adds the prompt tokens
//   TTFT                    request sent to the first chunk with text (successful requests)
//   TPOT                    (latency - TTFT) / (output tokens - 1), requests with > 1 output token
//   ITL                     every gap between consecutive text chunks, pooled over requests
//   E2EL                    request sent to its last byte
// mean, median, std (population, numpy's np.std) and percentiles as numpy computes them
// (engine/telemetry/latency_stats.h: linear interpolation). Empty sets give 0, as vLLM's
// `np.mean(x or 0)` does.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace kvs::net {

// One request of the benchmark, as the client saw it. Times in seconds.
struct RequestOutcome {
    bool success = false;
    std::string error;
    double start_s = 0;         // sent, after the benchmark's start
    double ttft_s = 0;          // to the first text chunk
    double latency_s = 0;       // to the end
    std::vector<double> itl_s;  // gaps between text chunks
    int64_t prompt_len = 0;     // the server's usage.prompt_tokens when it said, else the tokens sent
    int64_t output_tokens = 0;  // usage.completion_tokens when given, else the text chunks
};

struct GoodputSlo {
    std::optional<double> ttft_ms, tpot_ms, e2el_ms;
    bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};
// "ttft:300 tpot:50" (also comma-separated); keys ttft, tpot, e2el; values in ms, > 0.
Result<GoodputSlo> parse_goodput(const std::string& text);

struct LatencyStat {
    double mean = 0, median = 0, std = 0, p90 = 0, p99 = 0;  // ms
    int64_t count = 0;
};

struct ServeMetrics {
    int completed = 0, failed = 0;
    int64_t total_input = 0, total_output = 0;
    double duration_s = 0;
    double request_throughput = 0, request_goodput = 0;
    double output_throughput = 0, total_token_throughput = 0;
    LatencyStat ttft, tpot, itl, e2el;
    bool goodput_measured = false;
};

ServeMetrics compute_serve_metrics(const std::vector<RequestOutcome>& outcomes, double duration_s,
                                   const GoodputSlo& slo = {});
nlohmann::json to_json(const ServeMetrics& m);
// The table `vllm bench serve` prints ("============ Serving Benchmark Result ============").
std::string format_table(const ServeMetrics& m, const std::string& title);

}  // namespace kvs::net
