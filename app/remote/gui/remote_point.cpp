#include "app/remote/gui/remote_point.h"

#include <cmath>

namespace kvs::remote {

PromHistogram histogram_delta(const PromHistogram& cur, const PromHistogram* prev) {
    if (!prev || prev->buckets.size() != cur.buckets.size()) return cur;
    PromHistogram d = cur;
    for (size_t i = 0; i < cur.buckets.size(); ++i) {
        if (cur.buckets[i].first != prev->buckets[i].first || cur.buckets[i].second < prev->buckets[i].second)
            return cur;  // other buckets, or counts went down: the server restarted
        d.buckets[i].second = cur.buckets[i].second - prev->buckets[i].second;
    }
    d.sum = cur.sum - prev->sum;
    d.count = cur.count - prev->count;
    return d;
}

namespace {

double delta(double cur, double prev) {
    if (!std::isfinite(cur) || !std::isfinite(prev) || cur < prev) return kUnknown;
    return cur - prev;
}

}  // namespace

ui::RemoteMetricsPoint to_view_point(const MetricsReading& cur, const MetricsReading* prev) {
    const VllmMetrics& m = cur.m;
    const VllmMetrics* p = prev ? &prev->m : nullptr;
    ui::RemoteMetricsPoint v;
    v.tS = cur.t_s;
    v.kvUsage = m.kv_usage;
    v.blocksTotal = m.num_gpu_blocks;
    v.blocksUsed = m.kv_blocks_used();
    v.running = m.num_running;
    v.waiting = m.num_waiting;
    const PromHistogram ttft = histogram_delta(m.ttft, p ? &p->ttft : nullptr);
    const PromHistogram tpot = histogram_delta(m.tpot, p ? &p->tpot : nullptr);
    const PromHistogram e2e = histogram_delta(m.e2e, p ? &p->e2e : nullptr);
    v.ttftP50 = histogram_quantile(0.5, ttft);
    v.ttftP90 = histogram_quantile(0.9, ttft);
    v.ttftP99 = histogram_quantile(0.99, ttft);
    v.tpotP50 = histogram_quantile(0.5, tpot);
    v.tpotP99 = histogram_quantile(0.99, tpot);
    v.e2eP50 = histogram_quantile(0.5, e2e);
    v.e2eP99 = histogram_quantile(0.99, e2e);
    v.ttftP50All = histogram_quantile(0.5, m.ttft);
    v.tpotP50All = histogram_quantile(0.5, m.tpot);
    v.prefixHitRateTotal = m.prefix_hit_rate();
    v.preemptions = m.preemptions;
    v.specAcceptance = m.spec_acceptance_rate();
    v.specMeanLength = m.spec_mean_acceptance_length();
    for (double r : m.spec_acceptance_per_pos()) v.specPerPosition.push_back(r);
    v.hasSlots = cur.has_slots;
    for (const LlamaSlot& sl : cur.slots) v.slots.push_back({sl.id, sl.n_ctx, sl.context_used(), sl.processing});
    if (p) {
        v.prefixHitRate =
            VllmMetrics::ratio(delta(m.prefix_hits, p->prefix_hits), delta(m.prefix_queries, p->prefix_queries));
        const PromHistogram it = histogram_delta(m.iteration_tokens, &p->iteration_tokens);
        v.tokensPerIteration = VllmMetrics::ratio(it.sum, it.count);
        const double dt = cur.t_s - prev->t_s;
        const double dg = delta(m.generation_tokens, p->generation_tokens);
        if (dt > 0 && std::isfinite(dg)) v.generationTokPerS = dg / dt;
    } else {
        v.prefixHitRate = v.prefixHitRateTotal;
        v.tokensPerIteration = m.mean_tokens_per_iteration();
    }
    return v;
}

}  // namespace kvs::remote
