#pragma once
// The load generator of `kvscope bench --serve`, in the manner of `vllm bench serve`: each
// request is sent when its arrival time comes (Poisson arrivals or all at once, decided by
// the caller's arrival_s) and a slot is free (at most max_concurrency in flight), streamed,
// and timed on the client: send, first text chunk, every later chunk, end. One client
// (one keep-alive connection) per slot, each on its own thread. Metrics come from
// app/net/serve_metrics.h.
#include <functional>
#include <string>
#include <vector>

#include "app/net/openai_client.h"
#include "app/net/serve_metrics.h"

namespace kvs::net {

struct BenchRequest {
    double arrival_s = 0;
    std::vector<int32_t> prompt_ids;  // sent as token ids to /v1/completions when prompt_text is empty
    std::string prompt_text;          // sent as text (completions, or a user message with chat)
    int max_tokens = 16;
};

struct ServeBenchConfig {
    ClientOptions client;
    std::string model;
    bool chat = false;        // /v1/chat/completions (prompt_text as one user message)
    int max_concurrency = 0;  // 0: every request may be in flight at once
    double temperature = 0;   // vLLM's benchmark default: greedy
    bool ignore_eos = true;   // so each request generates exactly max_tokens
    nlohmann::json extra = nlohmann::json::object();
};

struct ServeBenchRun {
    std::vector<RequestOutcome> outcomes;  // in request order
    double duration_s = 0;
    int peak_in_flight = 0;
};

// Runs every request; on_done(done, total) after each one (from the worker threads, one at
// a time). Faults of single requests are outcomes (success false, error set), not errors.
ServeBenchRun run_serve_bench(const std::vector<BenchRequest>& requests, const ServeBenchConfig& cfg,
                              const std::function<void(int, int)>& on_done = {});

// One request, timed (used by run_serve_bench and for the ready check before a run).
RequestOutcome send_timed(OpenAIClient& client, const BenchRequest& r, const ServeBenchConfig& cfg, double start_s);

}  // namespace kvs::net
