// Percentiles (numpy "linear") and the per-request latency summary.
#include "engine/telemetry/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvs {

static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double percentile_sorted(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return kNaN;
    p = std::clamp(p, 0.0, 100.0);
    const double h = static_cast<double>(sorted.size() - 1) * p / 100.0;
    const size_t lo = static_cast<size_t>(std::floor(h));
    const size_t hi = std::min(lo + 1, sorted.size() - 1);
    const double frac = h - static_cast<double>(lo);
    return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

double percentile(std::vector<double> values, double p) {
    std::sort(values.begin(), values.end());
    return percentile_sorted(values, p);
}

double mean(const std::vector<double>& values) {
    if (values.empty()) return kNaN;
    double sum = 0;
    for (double v : values) sum += v;
    return sum / static_cast<double>(values.size());
}

Distribution describe(std::vector<double> values) {
    Distribution d;
    d.count = static_cast<int64_t>(values.size());
    if (values.empty()) {
        d.mean = d.min = d.max = d.p50 = d.p90 = d.p99 = kNaN;
        return d;
    }
    std::sort(values.begin(), values.end());
    d.mean = mean(values);
    d.min = values.front();
    d.max = values.back();
    d.p50 = percentile_sorted(values, 50);
    d.p90 = percentile_sorted(values, 90);
    d.p99 = percentile_sorted(values, 99);
    return d;
}

LatencySummary summarize(const std::vector<RequestMetrics>& requests) {
    LatencySummary s;
    s.n_requests = static_cast<int>(requests.size());
    std::vector<double> ttft, tpot, itl, queue, e2e;
    double first_arrival = std::numeric_limits<double>::infinity();
    double last_finish = -std::numeric_limits<double>::infinity();
    for (const RequestMetrics& r : requests) {
        s.prompt_tokens += r.n_prompt;
        s.output_tokens += r.n_output;
        first_arrival = std::min(first_arrival, r.arrival_ms);
        if (r.finish_reason == FinishReason::cancelled) ++s.n_cancelled;
        if (r.finish_reason == FinishReason::rejected) ++s.n_rejected;
        if (r.finish_ms >= 0) {
            ++s.n_finished;
            last_finish = std::max(last_finish, r.finish_ms);
            e2e.push_back(r.e2e_ms());
        }
        if (r.first_token_ms >= 0) ttft.push_back(r.ttft_ms());
        if (r.first_scheduled_ms >= 0) queue.push_back(r.queue_ms());
        if (r.token_times_ms.size() >= 2) {
            tpot.push_back(r.tpot_ms());
            const std::vector<double> gaps = r.inter_token_ms();
            itl.insert(itl.end(), gaps.begin(), gaps.end());
        }
    }
    if (s.n_finished > 0 && last_finish > first_arrival) {
        s.span_ms = last_finish - first_arrival;
        s.output_tok_per_s = static_cast<double>(s.output_tokens) / (s.span_ms / 1000.0);
    }
    s.ttft_ms = describe(std::move(ttft));
    s.tpot_ms = describe(std::move(tpot));
    s.itl_ms = describe(std::move(itl));
    s.queue_ms = describe(std::move(queue));
    s.e2e_ms = describe(std::move(e2e));
    return s;
}

}  // namespace kvs
