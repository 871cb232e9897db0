// Fixed-capacity rings indexed by publish count: publish number k lives in slot k % capacity,
// so the held items are numbers [max(0, total - capacity), total).
#include "engine/telemetry/snapshot_ring.h"

#include <algorithm>

namespace kvs {

SnapshotRing::SnapshotRing(size_t capacity, size_t step_capacity)
    : m_capacity(std::max<size_t>(capacity, 1)),
      m_step_capacity(std::max<size_t>(step_capacity, 1)),
      m_snapshots(m_capacity),
      m_steps(m_step_capacity) {}

void SnapshotRing::publish(SnapshotPtr snapshot) {
    if (!snapshot) return;
    SnapshotPtr dropped;  // released after unlocking: freeing a big block map under the lock would stall readers
    {
        std::lock_guard lock(m_mutex);
        SnapshotPtr& slot = m_snapshots[static_cast<size_t>(m_n_snapshots) % m_capacity];
        dropped = std::move(slot);
        m_steps[static_cast<size_t>(m_n_steps) % m_step_capacity] = snapshot->step;
        slot = std::move(snapshot);
        ++m_n_snapshots;
        ++m_n_steps;
    }
}

void SnapshotRing::publish(EngineSnapshot&& snapshot) {
    publish(std::make_shared<const EngineSnapshot>(std::move(snapshot)));
}

void SnapshotRing::publish_step(const StepRecord& step) {
    std::lock_guard lock(m_mutex);
    m_steps[static_cast<size_t>(m_n_steps) % m_step_capacity] = step;
    ++m_n_steps;
}

SnapshotRing::SnapshotPtr SnapshotRing::latest() const {
    std::lock_guard lock(m_mutex);
    if (m_n_snapshots == 0) return nullptr;
    return m_snapshots[static_cast<size_t>(m_n_snapshots - 1) % m_capacity];
}

std::vector<SnapshotRing::SnapshotPtr> SnapshotRing::recent(size_t n) const {
    std::lock_guard lock(m_mutex);
    const size_t cap = m_capacity;
    const size_t held = std::min(static_cast<size_t>(m_n_snapshots), cap);
    n = std::min(n, held);
    std::vector<SnapshotPtr> out;
    out.reserve(n);
    for (int64_t k = m_n_snapshots - static_cast<int64_t>(n); k < m_n_snapshots; ++k)
        out.push_back(m_snapshots[static_cast<size_t>(k) % cap]);
    return out;
}

std::vector<StepRecord> SnapshotRing::recent_steps(size_t n) const {
    std::lock_guard lock(m_mutex);
    const size_t cap = m_step_capacity;
    const size_t held = std::min(static_cast<size_t>(m_n_steps), cap);
    n = std::min(n, held);
    std::vector<StepRecord> out;
    out.reserve(n);
    for (int64_t k = m_n_steps - static_cast<int64_t>(n); k < m_n_steps; ++k)
        out.push_back(m_steps[static_cast<size_t>(k) % cap]);
    return out;
}

std::vector<StepRecord> SnapshotRing::steps_after(int64_t after_step) const {
    std::lock_guard lock(m_mutex);
    const size_t cap = m_step_capacity;
    const int64_t first = std::max<int64_t>(0, m_n_steps - static_cast<int64_t>(cap));
    // Step numbers grow with publish order, so walk back from the newest until one is old.
    int64_t k = m_n_steps;
    while (k > first && m_steps[static_cast<size_t>(k - 1) % cap].step > after_step) --k;
    std::vector<StepRecord> out;
    out.reserve(static_cast<size_t>(m_n_steps - k));
    for (; k < m_n_steps; ++k) out.push_back(m_steps[static_cast<size_t>(k) % cap]);
    return out;
}

size_t SnapshotRing::size() const {
    std::lock_guard lock(m_mutex);
    return std::min(static_cast<size_t>(m_n_snapshots), m_capacity);
}

size_t SnapshotRing::step_count() const {
    std::lock_guard lock(m_mutex);
    return std::min(static_cast<size_t>(m_n_steps), m_step_capacity);
}

int64_t SnapshotRing::total_published() const {
    std::lock_guard lock(m_mutex);
    return m_n_snapshots;
}

int64_t SnapshotRing::total_steps_published() const {
    std::lock_guard lock(m_mutex);
    return m_n_steps;
}

void SnapshotRing::clear() {
    std::vector<SnapshotPtr> dropped(m_capacity);
    {
        std::lock_guard lock(m_mutex);
        dropped.swap(m_snapshots);
        m_n_snapshots = 0;
        m_n_steps = 0;
    }
}

}  // namespace kvs
