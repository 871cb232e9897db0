#pragma once
// Latency statistics of a run: percentiles the way numpy computes them by default, and
// the per-request summary a benchmark reports (TTFT, TPOT, inter-token latency, queue time).
#include <cstdint>
#include <vector>

#include "engine/telemetry/snapshot.h"

namespace kvs {

// The p-th percentile (p in [0, 100]) with linear interpolation between the closest ranks,
// numpy.percentile's default method "linear": sorted x[0..n-1], position h = (n - 1) * p / 100,
// result x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]).
// NaN for an empty input; p outside [0, 100] is clamped.
double percentile(std::vector<double> values, double p);
// Same on values already sorted ascending (no copy).
double percentile_sorted(const std::vector<double>& sorted, double p);
double mean(const std::vector<double>& values);  // NaN for an empty input

// One latency distribution. With count == 0 every statistic is NaN (written as null in JSON).
struct Distribution {
    int64_t count = 0;
    double mean = 0, min = 0, max = 0;
    double p50 = 0, p90 = 0, p99 = 0;
};
Distribution describe(std::vector<double> values);

// What a benchmark reports about its requests. Which requests count where:
//   ttft_ms   requests that got a first token (first_token_ms >= 0)
//   tpot_ms   requests with >= 2 output tokens, one value (their mean gap) per request
//   itl_ms    every gap between consecutive output tokens of every request, pooled
//   queue_ms  requests that were scheduled at least once (first_scheduled_ms >= 0)
//   e2e_ms    finished requests (finish_ms >= 0), arrival to finish
struct LatencySummary {
    int n_requests = 0;
    int n_finished = 0;  // finish_ms >= 0, any reason
    int n_cancelled = 0;
    int n_rejected = 0;
    int64_t prompt_tokens = 0;    // sum of n_prompt
    int64_t output_tokens = 0;    // sum of n_output
    double span_ms = 0;           // first arrival to last finish (0 if nothing finished)
    double output_tok_per_s = 0;  // output_tokens / span (0 if span is 0)
    Distribution ttft_ms, tpot_ms, itl_ms, queue_ms, e2e_ms;
};
LatencySummary summarize(const std::vector<RequestMetrics>& requests);

}  // namespace kvs
