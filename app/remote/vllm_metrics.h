#pragma once
// What a /metrics page in vLLM's names says about the server's engine (vLLM v1's
// vllm/v1/metrics/loggers.py and spec_decode/metrics.py; kvscope serve writes the same
// names), plus the few llama-server names that mean the same thing. No Qt.
//
// These are aggregates: counts and gauges over the whole server, histograms of finished
// requests. The KV "block map" they allow is used / total blocks
// (vllm:kv_cache_usage_perc x num_gpu_blocks of vllm:cache_config_info), not which block
// holds what. Several engines (data parallel, label engine) of one model are summed
// (histogram buckets too); a page serving several models is read for one model_name.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/remote/prometheus_text.h"
#include "engine/core/status.h"

namespace kvs::remote {

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// A Prometheus histogram: (upper bound le, cumulative count) sorted by le.
struct PromHistogram {
    std::vector<std::pair<double, double>> buckets;
    double sum = kUnknown;
    double count = kUnknown;
    bool present() const { return !buckets.empty(); }
};

// Prometheus's histogram_quantile (promql/quantile.go, bucketQuantile): linear
// interpolation inside the bucket holding rank q x count, the first bucket starting at 0, a
// rank in the +Inf bucket answered with the highest finite bound; buckets with the same le
// merged, counts made monotonic. NaN when there is no +Inf bucket, fewer than 2 buckets or
// no observation; q < 0 gives -Inf, q > 1 +Inf.
double histogram_quantile(double q, const PromHistogram& h);

// The histogram `name` (its _bucket, _sum, _count samples) of the samples that pass `keep`.
PromHistogram histogram_of(const PromPage& page, std::string_view name, std::string_view model_name);

enum class MetricsDialect { None, Vllm, LlamaCpp };

struct VllmMetrics {
    MetricsDialect dialect = MetricsDialect::None;
    std::string model_name;                   // the model read ("" when the page has no model_name label)
    std::vector<std::string> models_on_page;  // every model_name seen
    int n_engines = 0;                        // distinct engine labels summed

    // Scheduler gauges.
    double num_running = kUnknown, num_waiting = kUnknown;
    double kv_usage = kUnknown;  // 0..1
    // vllm:cache_config_info
    double num_gpu_blocks = kUnknown, num_cpu_blocks = kUnknown, block_size = kUnknown;
    std::string cache_dtype;
    // Counters (totals since the server started).
    double prefix_queries = kUnknown, prefix_hits = kUnknown;
    double preemptions = kUnknown;
    double prompt_tokens = kUnknown, generation_tokens = kUnknown;
    std::map<std::string, double> request_success;  // by finished_reason
    double spec_drafts = kUnknown, spec_draft_tokens = kUnknown, spec_accepted = kUnknown;
    std::vector<double> spec_accepted_per_pos;  // by position 0, 1, ...
    // Histograms of finished requests / steps.
    PromHistogram ttft, tpot, itl, e2e, queue, iteration_tokens;

    // Derived (NaN when the parts are unknown or the denominator is 0).
    double kv_blocks_used() const { return kv_usage * num_gpu_blocks; }
    double prefix_hit_rate() const { return ratio(prefix_hits, prefix_queries); }
    double spec_acceptance_rate() const { return ratio(spec_accepted, spec_draft_tokens); }
    // vLLM's "mean acceptance length": 1 + accepted / drafts (the bonus token counted).
    double spec_mean_acceptance_length() const { return 1.0 + ratio(spec_accepted, spec_drafts); }
    // Per-position acceptance rate: accepted at position i / drafts.
    std::vector<double> spec_acceptance_per_pos() const;
    double mean_tokens_per_iteration() const { return ratio(iteration_tokens.sum, iteration_tokens.count); }

    static double ratio(double a, double b) {
        return (std::isfinite(a) && std::isfinite(b) && b > 0) ? a / b : kUnknown;
    }
};

// Reads the page for `model_name` (empty: the first model_name on the page). An error when
// the page has neither vLLM's nor llama-server's names, naming a few it does have.
Result<VllmMetrics> read_vllm_metrics(const PromPage& page, std::string_view model_name = {});

}  // namespace kvs::remote
