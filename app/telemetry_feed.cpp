#include "app/telemetry_feed.h"

#include "app/engine_bridge.h"
#include "app/view_convert.h"
#include "engine/runtime/session.h"  // LatencySummary
#include "ui/draft_acceptance_view.h"
#include "ui/kv_block_map.h"
#include "ui/metrics_view.h"
#include "ui/slot_timeline.h"

namespace kvs::app {

TelemetryFeed::TelemetryFeed(EngineBridge* bridge, const Views& views, QObject* parent)
    : QObject(parent), m_bridge(bridge), m_views(views) {
    // Hovering a block shows the text it holds: that request's tokens of this table slot.
    m_views.blockMap->setTokenText([this](qint64 request, int tableIndex) { return blockText(request, tableIndex); });
}

void TelemetryFeed::setLabel(qint64 id, const QString& label) { m_labels.insert(id, label); }

bool TelemetryFeed::poll() {
    pollSpec();
    auto snaps = m_bridge->snapshotsAfter(m_lastStep);
    if (!snaps.empty()) m_newestStep = std::max<qint64>(m_newestStep, snaps.back()->step.step);
    if (m_everyStep && snaps.size() > 1) snaps.resize(1);  // the oldest not drawn; the next one at the next call
    if (snaps.empty()) {
        auto latest = m_bridge->latestSnapshot();  // republished for the step on screen?
        if (!latest || latest == m_snap || latest->step.step != m_lastStep) return false;
        snaps.push_back(std::move(latest));
    }
    // Requests the window did not send itself (the Local server's) are named by their client:
    // "alice #12" (the request's `user` field), "HTTP 127.0.0.1 #13".
    for (const auto& snap : snaps)
        for (const RequestView& r : snap->requests)
            if (!r.client.empty())  // ids start again with a new engine: always the newest name
                m_labels.insert(r.id, QStringLiteral("%1 #%2").arg(QString::fromStdString(r.client)).arg(r.id));
    auto label = [this](RequestId id) { return m_labels.value(id); };
    // Every step since the last poll goes to the timeline once; the newest to the other views.
    qint64 appended = m_lastStep;
    for (const auto& snap : snaps) {
        if (snap->step.step <= appended) continue;
        appended = snap->step.step;
        m_views.timeline->appendStep(to_step_point(snap->step), to_request_rows(*snap, label));
    }
    m_snap = snaps.back();
    m_lastStep = m_snap->step.step;
    m_frame = to_frame(*m_snap, label);
    m_views.blockMap->setFrame(m_frame);
    appendMetrics();
    return true;
}

void TelemetryFeed::restart() {
    m_views.timeline->clear();
    m_lastStep = -1;
    m_newestStep = -1;
    m_specStep = -1;
    m_snap.reset();
    m_frame = ui::EngineFrame{};
    m_views.blockMap->setFrame(m_frame);
    m_views.draft->setFrame(ui::SpecFrame{});
}

void TelemetryFeed::resetSpec() { m_specStep = -1; }

void TelemetryFeed::setHiddenRequests(const QSet<qint64>& ids) {
    if (ids == m_hidden) return;
    m_hidden = ids;
    m_specStep = -1;  // redraw from the newest speculative snapshot
    m_specClock.invalidate();
    pollSpec();
}

// Output tok/s over the last steps, latencies of recently finished requests, memory.
void TelemetryFeed::appendMetrics() {
    double ms = 0, tokens = 0;
    for (const auto& r : m_bridge->stepsAfter(m_lastStep - 16)) {
        ms += r.duration_ms;
        tokens += r.decode_tokens;
    }
    const LatencySummary lat = m_bridge->recentLatency();
    ui::MetricsPoint mp;
    mp.tMs = m_frame.step.tStartMs + m_frame.step.durationMs;
    mp.tokPerS = ms > 0 ? tokens * 1000.0 / ms : 0;
    if (lat.ttft_ms.count > 0) {
        mp.ttftP50Ms = lat.ttft_ms.p50;
        mp.ttftP99Ms = lat.ttft_ms.p99;
    }
    if (lat.tpot_ms.count > 0) {
        mp.tpotP50Ms = lat.tpot_ms.p50;
        mp.tpotP99Ms = lat.tpot_ms.p99;
    }
    mp.weightBytes = m_bridge->weightBytes();
    mp.kvBytes = static_cast<qint64>(m_frame.step.blocksUsed) * m_bridge->kvBytesPerBlock();
    m_views.metrics->appendPoint(mp);
    m_views.metrics->setKvUsage(m_frame.step.kvUsage);
}

void TelemetryFeed::pollSpec() {
    if (m_specClock.isValid() && m_specClock.elapsed() < 200) return;
    const auto spec = m_bridge->specSnapshot();
    if (!spec || spec->step == m_specStep) return;
    m_specClock.start();
    m_specStep = spec->step;
    auto label = [this](RequestId id) { return m_labels.value(id); };
    auto pieces = [this](const std::vector<int32_t>& ids) { return m_bridge->tokenPieces(ids); };
    ui::SpecFrame f = to_spec_frame(*spec, label, pieces);
    f.requests.removeIf([this](const ui::SpecRequestFrame& r) { return m_hidden.contains(r.id); });
    m_views.draft->setFrame(f);
}

QString TelemetryFeed::blockText(qint64 request, int tableIndex) const {
    if (!m_snap) return {};
    for (const RequestView& r : m_snap->requests) {
        if (r.id != request) continue;
        const size_t bs = static_cast<size_t>(m_snap->block_size);
        const size_t from = static_cast<size_t>(tableIndex) * bs;
        if (from >= r.tokens.size()) return {};
        const size_t to = std::min(r.tokens.size(), from + bs);
        return m_bridge->decodeTokens(std::vector<int32_t>(r.tokens.begin() + from, r.tokens.begin() + to));
    }
    return {};
}

QString TelemetryFeed::liveFigures() const {
    const ui::StepPoint& s = m_frame.step;
    const double tps = s.durationMs > 0 ? (s.decodeTokens + s.prefillTokens) * 1000.0 / s.durationMs : 0;
    return tr("step %1 · %2 running · %3 waiting · KV %4% (%5/%6 blocks) · %7 tok/s")
        .arg(s.step)
        .arg(s.running)
        .arg(s.waiting + s.swapped)
        .arg(100.0 * s.kvUsage, 0, 'f', 0)
        .arg(s.blocksUsed)
        .arg(s.nBlocks)
        .arg(tps, 0, 'f', 0);
}

bool TelemetryFeed::writeTrace(const QString& path, const QString& model, QString* error) const {
    return m_bridge->writeTrace(path, model, error);
}

}  // namespace kvs::app
