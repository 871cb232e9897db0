#pragma once
// GET /metrics: Prometheus text (format 0.0.4) with vLLM's metric names, types, help texts
// and histogram buckets (vllm/v1/metrics/loggers.py), each labelled model_name and
// engine="0", so dashboards built for vLLM (its examples/online_serving/prometheus_grafana
// dashboard) read KV Scope unchanged.
//
// Two sources: what the engine holds right now (EngineGauges, read on the engine thread at
// scrape time: running / waiting / swapped requests, KV usage, prefix-cache and preemption
// counters, token totals, speculative-decoding counters, the steps since the last scrape),
// and each finished request's milestones (RequestMetrics, the engine's one measurement of
// TTFT / TPOT), recorded as the request ends.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/runtime/session.h"

namespace kvs::server {

// A cumulative histogram as prometheus_client keeps one.
class Histogram {
public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double v);
    // name_bucket{labels,le="..."} lines (cumulative, then +Inf), name_sum, name_count.
    void render(std::string& out, const std::string& name, const std::string& labels) const;
    uint64_t count() const { return m_count; }

private:
    std::vector<double> m_bounds;
    std::vector<uint64_t> m_counts;  // [bounds + 1] per bucket, not cumulative; the last is +Inf
    double m_sum = 0;
    uint64_t m_count = 0;
};

// vLLM's build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50, ... up to max.
std::vector<double> buckets_1_2_5(int max_value);

// The engine's state at scrape time (filled on the engine thread).
struct EngineGauges {
    int n_running = 0, n_waiting = 0, n_swapped = 0;
    int n_blocks = 0, blocks_used = 0;
    int n_host_blocks = 0, host_blocks_used = 0;
    int block_size = 0;
    std::string kv_type;
    bool prefix_caching = true;
    int64_t prefix_queries = 0, prefix_hits = 0;  // tokens
    int64_t preemptions = 0;
    int64_t prompt_tokens = 0, generation_tokens = 0;
    SpecStats spec;
    std::vector<StepRecord> new_steps;  // steps since the previous scrape (at most the ring's 4096)
    int64_t last_step = -1;
};

// Reads EngineGauges from an engine; call on its thread. after_step: the last step the
// previous scrape saw.
EngineGauges read_engine_gauges(const Engine& e, int64_t after_step);

class ServerMetrics {
public:
    ServerMetrics(std::string model_name, int max_model_len);

    // One engine request ended (any reason); max_tokens_param: its max_tokens (0: none given).
    void on_request_finished(const RequestMetrics& m, int max_tokens_param);
    // One HTTP request ended: its n and the most tokens any of its choices generated.
    void on_api_request_finished(int n, int max_generation_tokens);
    // The whole exposition; folds g.new_steps into the iteration-token histogram.
    std::string render(const EngineGauges& g);
    int64_t last_step() const;

private:
    std::string labels() const;

    const std::string m_model;
    mutable std::mutex m_mu;
    Histogram m_ttft, m_itl, m_tpot_req, m_e2e, m_queue, m_inference, m_prefill, m_decode, m_prefill_per_token;
    Histogram m_prompt_len, m_gen_len, m_max_tokens, m_max_gen, m_n, m_iter_tokens;
    int64_t m_success[3] = {0, 0, 0};  // stop, length, abort
    int64_t m_last_step = -1;
};

}  // namespace kvs::server
