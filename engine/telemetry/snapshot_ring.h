#pragma once
// SnapshotRing: the last published engine snapshots, for the GUI (which polls every
// 25-40 ms) and for `kvscope bench --trace`.
//
// Two rings behind one mutex:
//   - full snapshots (block map + request table), default 64: heavy (a block map is
//     n_blocks entries), so only the recent ones are kept;
//   - StepRecords, default 4096: a few hundred bytes each, enough for a long step timeline.
// publish() puts the snapshot in the first and a copy of its StepRecord in the second;
// publish_step() adds a StepRecord alone (for steps whose full snapshot is skipped).
//
// Thread safety: one engine thread publishes, any number of threads read. A snapshot is
// built completely before publish() and is shared as shared_ptr<const EngineSnapshot>, so
// a reader holds either the whole old one or the whole new one, never a half-written one.
// The lock only guards the ring slots (a few pointer copies), never the building.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/telemetry/snapshot.h"

namespace kvs {

class SnapshotRing {
public:
    using SnapshotPtr = std::shared_ptr<const EngineSnapshot>;

    // Capacities are at least 1.
    explicit SnapshotRing(size_t capacity = 64, size_t step_capacity = 4096);

    // Publishes a finished snapshot (null is ignored); the oldest one drops out when full.
    void publish(SnapshotPtr snapshot);
    void publish(EngineSnapshot&& snapshot);
    // Records a step without a full snapshot (it shows in recent_steps, not in recent).
    void publish_step(const StepRecord& step);

    SnapshotPtr latest() const;                            // null before the first publish
    std::vector<SnapshotPtr> recent(size_t n) const;       // the last min(n, size) snapshots, oldest first
    std::vector<StepRecord> recent_steps(size_t n) const;  // the last min(n, size) step records, oldest first
    // Step records with step > after_step, oldest first (a poller passes the last step it saw).
    std::vector<StepRecord> steps_after(int64_t after_step) const;

    size_t capacity() const { return m_capacity; }
    size_t step_capacity() const { return m_step_capacity; }
    size_t size() const;                    // snapshots held now (<= capacity)
    size_t step_count() const;              // step records held now (<= step_capacity)
    int64_t total_published() const;        // snapshots published since construction/clear
    int64_t total_steps_published() const;  // step records published (publish + publish_step)
    void clear();

private:
    const size_t m_capacity;  // fixed at construction: readable without the lock
    const size_t m_step_capacity;
    mutable std::mutex m_mutex;
    std::vector<SnapshotPtr> m_snapshots;  // [capacity] slot i = publish number i mod capacity
    std::vector<StepRecord> m_steps;       // [step_capacity] same scheme
    int64_t m_n_snapshots = 0;             // total published; the next goes to slot n % capacity
    int64_t m_n_steps = 0;
};

}  // namespace kvs
