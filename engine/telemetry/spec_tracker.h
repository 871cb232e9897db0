#pragma once
// Speculative decoding seen across steps, for the GUI's draft-acceptance view: after each
// step that ran, the tracker refreshes the view of every speculative request in it (its
// SpecStats, token fates and decode rate) and keeps the last plain request that decoded
// alone as the baseline, then publishes an immutable SpecSnapshot when anything changed.
//
// It measures no time itself: a decode rate is derived from the request's RequestMetrics
// (engine/telemetry/snapshot.h), the engine's one record of when each token came, so the
// rate agrees with the TTFT / TPOT the window, bench and /metrics report. What it keeps
// between steps is only what RequestMetrics cannot say: a request's SpecParams and whether
// it ever shared a step with another request after its first token (solo).
//
// Engine thread only (EngineLoop owns one); the snapshots it returns are immutable.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/speculative/spec_params.h"
#include "engine/telemetry/snapshot.h"

namespace kvs {

class Engine;
struct StepResult;

class SpecTracker {
public:
    // Requests whose view the snapshot keeps (the newest by id).
    static constexpr size_t kMaxViews = 64;

    // drafts: the engine's draft models, for the first (empty) snapshot.
    explicit SpecTracker(std::vector<std::string> drafts);

    // A request was submitted (before the engine runs it) / refused by the engine.
    void on_submit(RequestId id, const SpecParams& spec);
    void on_rejected(RequestId id);
    // After a step that ran: the new snapshot when anything it shows changed, else null.
    std::shared_ptr<const SpecSnapshot> on_step(const Engine& engine, const StepResult& step);

    // The newest snapshot (never null).
    const std::shared_ptr<const SpecSnapshot>& snapshot() const { return m_snapshot; }

    // Decode rate of a request from its milestones: the output tokens after the first, per
    // second between the first and the last (1000 / RequestMetrics::tpot_ms()).
    static DecodeRate decode_rate(const RequestMetrics& m, bool solo);

private:
    struct Track {
        SpecParams spec;
        bool seen_first = false;  // had an output token before the step being looked at
        bool solo = true;         // no step after its first token had another request in it
    };
    void publish(const Engine& engine, int64_t step);

    std::map<RequestId, Track> m_tracks;                                  // unfinished requests
    std::map<RequestId, std::shared_ptr<const SpecRequestView>> m_views;  // the newest kMaxViews
    DecodeRate m_baseline;
    std::shared_ptr<const SpecSnapshot> m_snapshot;
};

}  // namespace kvs
