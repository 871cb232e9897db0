#include "app/server/prometheus_metrics.h"

#include <algorithm>
#include <cstdio>

#include "engine/kv_cache/kv_tensors.h"

namespace kvs::server {

namespace {

std::string fmt(double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    std::string s = buf;
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // prometheus_client writes floats
    return s;
}

std::string escape_label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\') out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
    out += name + "{" + labels + "} " + fmt(v) + "\n";
}

const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                             30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kPrefillPerTokenBuckets = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0};
const std::vector<double> kIterationBuckets = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : m_bounds(std::move(upper_bounds)), m_counts(m_bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
    const size_t i = static_cast<size_t>(std::lower_bound(m_bounds.begin(), m_bounds.end(), v) - m_bounds.begin());
    ++m_counts[i];  // le is inclusive: v == bound falls in that bucket
    m_sum += v;
    ++m_count;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
    uint64_t cum = 0;
    for (size_t i = 0; i < m_bounds.size(); ++i) {
        cum += m_counts[i];
        out += name + "_bucket{" + labels + ",le=\"" + fmt(m_bounds[i]) + "\"} " + fmt(double(cum)) + "\n";
    }
    cum += m_counts.back();
    out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + fmt(double(cum)) + "\n";
    out += name + "_count{" + labels + "} " + fmt(double(m_count)) + "\n";
    out += name + "_sum{" + labels + "} " + fmt(m_sum) + "\n";
}

std::vector<double> buckets_1_2_5(int max_value) {
    std::vector<double> b;
    for (int64_t scale = 1;; scale *= 10)
        for (int m : {1, 2, 5}) {
            if (m * scale > max_value) return b;
            b.push_back(double(m * scale));
        }
}

EngineGauges read_engine_gauges(const Engine& e, int64_t after_step) {
    EngineGauges g;
    const EngineSnapshot s = e.snapshot(StepRecord{});
    for (const RequestView& r : s.requests) {
        if (r.status == RequestStatus::running) ++g.n_running;
        else if (r.status == RequestStatus::waiting)
            ++g.n_waiting;
        else if (r.status == RequestStatus::swapped)
            ++g.n_swapped;
    }
    g.n_blocks = static_cast<int>(s.blocks.size());
    for (const BlockView& b : s.blocks)
        if (b.state == BlockSlotState::used) ++g.blocks_used;
    g.n_host_blocks = s.n_host_blocks;
    g.host_blocks_used = static_cast<int>(s.host_blocks.size());
    g.block_size = s.block_size;
    g.kv_type = kv_type_name(e.kv_type());
    g.prefix_caching = e.kv_cache().prefix_caching();
    g.prefix_queries = s.kv_stats.query_tokens;
    g.prefix_hits = s.kv_stats.hit_tokens;
    g.preemptions = s.total_preemptions;
    g.prompt_tokens = s.total_prompt_tokens;
    g.generation_tokens = s.total_generated_tokens;
    g.spec = e.spec_totals();
    g.new_steps = e.telemetry()->steps_after(after_step);
    g.last_step = g.new_steps.empty() ? after_step : g.new_steps.back().step;
    return g;
}

ServerMetrics::ServerMetrics(std::string model_name, int max_model_len)
    : m_model(std::move(model_name)),
      m_ttft(kTtftBuckets),
      m_itl(kItlBuckets),
      m_tpot_req(kItlBuckets),
      m_e2e(kLatencyBuckets),
      m_queue(kLatencyBuckets),
      m_inference(kLatencyBuckets),
      m_prefill(kLatencyBuckets),
      m_decode(kLatencyBuckets),
      m_prefill_per_token(kPrefillPerTokenBuckets),
      m_prompt_len(buckets_1_2_5(max_model_len)),
      m_gen_len(buckets_1_2_5(max_model_len)),
      m_max_tokens(buckets_1_2_5(max_model_len)),
      m_max_gen(buckets_1_2_5(max_model_len)),
      m_n({1, 2, 5, 10, 20}),
      m_iter_tokens(kIterationBuckets) {}

std::string ServerMetrics::labels() const { return "engine=\"0\",model_name=\"" + escape_label(m_model) + "\""; }

void ServerMetrics::on_request_finished(const RequestMetrics& m, int max_tokens_param) {
    std::lock_guard<std::mutex> lk(m_mu);
    const int reason = m.finish_reason == FinishReason::stop ? 0 : m.finish_reason == FinishReason::length ? 1 : 2;
    ++m_success[reason];
    if (m.e2e_ms() >= 0) m_e2e.observe(m.e2e_ms() / 1000.0);
    if (m.queue_ms() >= 0) m_queue.observe(m.queue_ms() / 1000.0);
    if (m.ttft_ms() >= 0) m_ttft.observe(m.ttft_ms() / 1000.0);
    for (double gap : m.inter_token_ms()) m_itl.observe(gap / 1000.0);
    if (m.n_output > 1) m_tpot_req.observe(m.tpot_ms() / 1000.0);
    if (m.first_scheduled_ms >= 0 && m.first_token_ms >= 0) {
        const double prefill_s = (m.first_token_ms - m.first_scheduled_ms) / 1000.0;
        const double decode_s = m.token_times_ms.empty() ? 0.0 : (m.token_times_ms.back() - m.first_token_ms) / 1000.0;
        m_prefill.observe(prefill_s);
        m_decode.observe(decode_s);
        m_inference.observe(prefill_s + decode_s);
        if (m.n_prompt > 0) m_prefill_per_token.observe(prefill_s / m.n_prompt);
    }
    m_prompt_len.observe(m.n_prompt);
    m_gen_len.observe(m.n_output);
    if (max_tokens_param > 0) m_max_tokens.observe(max_tokens_param);
}

void ServerMetrics::on_api_request_finished(int n, int max_generation_tokens) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_n.observe(n);
    m_max_gen.observe(max_generation_tokens);
}

int64_t ServerMetrics::last_step() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_last_step;
}

std::string ServerMetrics::render(const EngineGauges& g) {
    std::lock_guard<std::mutex> lk(m_mu);
    for (const StepRecord& s : g.new_steps)
        if (s.step > m_last_step) m_iter_tokens.observe(s.prefill_tokens + s.decode_tokens);
    m_last_step = std::max(m_last_step, g.last_step);

    const std::string L = labels();
    std::string o;
    o.reserve(32768);
    auto gauge = [&](const char* name, const char* help, double v) {
        header(o, name, "gauge", help);
        sample(o, name, L, v);
    };
    auto counter = [&](const std::string& base, const char* help, double v) {
        header(o, base + "_total", "counter", help);
        sample(o, base + "_total", L, v);
    };
    auto histogram = [&](const char* name, const char* help, const Histogram& h) {
        header(o, name, "histogram", help);
        h.render(o, name, L);
    };
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.", g.n_running);
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", g.n_waiting);
    gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", g.n_swapped);
    const double kv_usage = g.n_blocks ? double(g.blocks_used) / g.n_blocks : 0.0;
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv_usage);
    gauge("vllm:gpu_cache_usage_perc",
          "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.", kv_usage);
    gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.",
          g.n_host_blocks ? double(g.host_blocks_used) / g.n_host_blocks : 0.0);
    counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
            double(g.prefix_queries));
    counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", double(g.prefix_hits));
    counter("vllm:gpu_prefix_cache_queries",
            "GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use vllm:prefix_cache_queries "
            "instead.",
            double(g.prefix_queries));
    counter(
        "vllm:gpu_prefix_cache_hits",
        "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.",
        double(g.prefix_hits));
    counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", double(g.preemptions));
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", double(g.prompt_tokens));
    counter("vllm:generation_tokens", "Number of generation tokens processed.", double(g.generation_tokens));

    header(o, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
    const char* reasons[3] = {"stop", "length", "abort"};
    for (int i = 0; i < 3; ++i)
        sample(o, "vllm:request_success_total", L + ",finished_reason=\"" + reasons[i] + "\"", double(m_success[i]));

    histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", m_prompt_len);
    histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", m_gen_len);
    histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", m_iter_tokens);
    histogram("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
              m_max_gen);
    histogram("vllm:request_params_n", "Histogram of the n request parameter.", m_n);
    histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", m_max_tokens);
    histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m_ttft);
    histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", m_itl);
    histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m_itl);
    histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
              m_tpot_req);
    histogram("vllm:time_per_prefill_token_request_seconds", "Time spent per token during prefill  phase in seconds",
              m_prefill_per_token);
    histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m_e2e);
    histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", m_queue);
    histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
              m_inference);
    histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", m_prefill);
    histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", m_decode);

    counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", double(g.spec.verify_steps));
    counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", double(g.spec.drafted));
    counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", double(g.spec.accepted));
    header(o, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.");
    for (size_t i = 0; i < g.spec.pos_accepted.size(); ++i)
        sample(o, "vllm:spec_decode_num_accepted_tokens_per_pos_total", L + ",position=\"" + std::to_string(i) + "\"",
               double(g.spec.pos_accepted[i]));

    header(o, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
    sample(o, "vllm:cache_config_info",
           "block_size=\"" + std::to_string(g.block_size) + "\",cache_dtype=\"" + escape_label(g.kv_type) +
               "\",enable_prefix_caching=\"" + (g.prefix_caching ? "True" : "False") + "\",engine=\"0\"" +
               ",num_cpu_blocks=\"" + std::to_string(g.n_host_blocks) + "\",num_gpu_blocks=\"" +
               std::to_string(g.n_blocks) + "\",model_name=\"" + escape_label(m_model) + "\"",
           1.0);
    return o;
}

}  // namespace kvs::server
