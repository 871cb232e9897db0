#include "engine/telemetry/spec_tracker.h"

#include <algorithm>

#include "engine/runtime/engine.h"

namespace kvs {

SpecTracker::SpecTracker(std::vector<std::string> drafts) {
    auto first = std::make_shared<SpecSnapshot>();
    first->drafts = std::move(drafts);
    m_snapshot = std::move(first);
}

void SpecTracker::on_submit(RequestId id, const SpecParams& spec) { m_tracks[id].spec = spec; }

void SpecTracker::on_rejected(RequestId id) { m_tracks.erase(id); }

DecodeRate SpecTracker::decode_rate(const RequestMetrics& m, bool solo) {
    DecodeRate d;
    d.id = m.id;
    d.solo = solo;
    const double tpot = m.tpot_ms();
    if (m.token_times_ms.size() < 2 || tpot <= 0) return d;
    d.n_tokens = static_cast<int>(m.token_times_ms.size()) - 1;
    d.tok_per_s = 1000.0 / tpot;
    return d;
}

std::shared_ptr<const SpecSnapshot> SpecTracker::on_step(const Engine& engine, const StepResult& res) {
    bool changed = false;
    for (const ScheduledChunk& ch : res.out.chunks) {
        auto it = m_tracks.find(ch.id);
        const SchedRequest* s = engine.scheduler().request(ch.id);
        const RequestMetrics* m = engine.request_metrics(ch.id);
        if (it == m_tracks.end() || !s || !m) continue;
        Track& t = it->second;
        if (t.seen_first && res.out.chunks.size() > 1) t.solo = false;
        t.seen_first = m->n_output >= 1;
        const bool finished = s->status == RequestStatus::finished;
        if (t.spec.enabled()) {
            auto v = std::make_shared<SpecRequestView>();
            v->id = ch.id;
            v->proposer = t.spec.proposer;
            v->k = t.spec.k;
            v->adaptive = t.spec.adaptive;
            v->finished = finished;
            v->stats = engine.spec_stats(ch.id);
            v->fates = engine.spec_events(ch.id);
            v->rate = decode_rate(*m, t.solo);
            m_views[ch.id] = std::move(v);
            changed = true;
        } else if (finished) {
            const DecodeRate d = decode_rate(*m, t.solo);
            if (d.solo && d.n_tokens >= 8) {
                m_baseline = d;
                changed = true;
            }
        }
        if (finished) m_tracks.erase(it);
    }
    // Requests cancelled between steps never show up in a chunk again.
    if (m_tracks.size() > 256)
        std::erase_if(m_tracks, [&engine](const auto& kv) {
            const SchedRequest* s = engine.scheduler().request(kv.first);
            return !s || s->status == RequestStatus::finished;
        });
    while (m_views.size() > kMaxViews) m_views.erase(m_views.begin());
    if (!changed) return nullptr;
    publish(engine, res.out.step);
    return m_snapshot;
}

void SpecTracker::publish(const Engine& engine, int64_t step) {
    auto snap = std::make_shared<SpecSnapshot>();
    snap->step = step;
    for (const auto& [id, v] : m_views) snap->requests.push_back(v);
    snap->totals = engine.spec_totals();
    snap->drafts = engine.draft_names();
    snap->plain_baseline = m_baseline;
    m_snapshot = std::move(snap);
}

}  // namespace kvs
