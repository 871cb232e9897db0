#include "engine/core/progress.h"

#include <algorithm>
#include <string_view>

namespace kvs {

namespace {
constexpr std::string_view kCancelledSuffix = ": cancelled";

double clamp01(double x) { return x != x ? 0.0 : std::clamp(x, 0.0, 1.0); }  // NaN -> 0
}  // namespace

Progress::Progress(Listener listener, const CancelFlag* cancel) : m_shared(std::make_shared<Shared>()) {
    m_shared->listener = std::move(listener);
    m_shared->cancel = cancel;
}

void Progress::report(const std::string& stage, double fraction) const {
    if (!m_shared) return;
    const double f = m_lo + clamp01(fraction) * (m_hi - m_lo);
    std::lock_guard<std::mutex> lk(m_shared->mu);
    m_shared->last = std::max(m_shared->last, clamp01(f));
    if (m_shared->listener) m_shared->listener(stage, m_shared->last);
}

void Progress::report(const std::string& stage, int64_t done, int64_t total) const {
    report(stage, total > 0 ? double(done) / double(total) : 0.0);
}

bool Progress::cancelled() const {
    return m_shared && m_shared->cancel && m_shared->cancel->load(std::memory_order_relaxed);
}

Progress Progress::part(double from, double to) const {
    Progress p = *this;
    from = clamp01(from);
    to = std::max(from, clamp01(to));
    p.m_lo = m_lo + from * (m_hi - m_lo);
    p.m_hi = m_lo + to * (m_hi - m_lo);
    return p;
}

Progress Progress::step(int64_t i, int64_t n) const {
    if (n <= 0) return part(0.0, 1.0);
    return part(double(i) / double(n), double(i + 1) / double(n));
}

Status Progress::cancelled_status(const std::string& what) {
    return Status::error((what.empty() ? std::string("work") : what) + std::string(kCancelledSuffix));
}

bool Progress::is_cancelled(const Status& s) {
    if (s.is_ok()) return false;
    const std::string& m = s.message();
    return m.size() >= kCancelledSuffix.size() &&
           std::string_view(m).substr(m.size() - kCancelledSuffix.size()) == kCancelledSuffix;
}

Status Progress::check(const std::string& what) const { return cancelled() ? cancelled_status(what) : Status::ok(); }

double Progress::last_fraction() const {
    if (!m_shared) return 0.0;
    std::lock_guard<std::mutex> lk(m_shared->mu);
    return m_shared->last;
}

}  // namespace kvs
