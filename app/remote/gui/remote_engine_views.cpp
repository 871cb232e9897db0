#include "app/remote/gui/remote_engine_views.h"

#include <QLabel>
#include <algorithm>
#include <QTabWidget>
#include <QVBoxLayout>

#include "app/view_convert.h"
#include "ui/draft_acceptance_view.h"
#include "ui/kv_block_map.h"
#include "ui/metrics_view.h"
#include "ui/slot_timeline.h"

namespace kvs::remote {

RemoteEngineViews::RemoteEngineViews(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("remoteEngineViews"));
    m_caption = new QLabel(this);
    m_caption->setObjectName(QStringLiteral("remoteEngineCaption"));
    m_caption->setWordWrap(true);
    m_caption->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_tabs = new QTabWidget(this);
    m_blockMap = new ui::KvBlockMapView(this);
    m_timeline = new ui::SlotTimelineView(this);
    m_metricsView = new ui::MetricsView(this);
    m_draft = new ui::DraftAcceptanceView(this);
    m_tabs->addTab(m_blockMap, tr("KV blocks"));
    m_tabs->addTab(m_timeline, tr("Batch slots"));
    m_tabs->addTab(m_metricsView, tr("Metrics"));
    m_tabs->addTab(m_draft, tr("Draft acceptance"));
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_caption);
    lay->addWidget(m_tabs, 1);
    m_blockMap->setTokenText([this](qint64 request, int tableIndex) { return blockText(request, tableIndex); });
    updateCaption();
}

void RemoteEngineViews::setSource(const QString& url) {
    m_url = url;
    m_status = url.isEmpty() ? QString() : tr("connecting…");
    updateCaption();
}

void RemoteEngineViews::clear() {
    m_timeline->clear();
    m_metricsView->clear();
    m_snap.reset();
    m_frame = ui::EngineFrame{};
    m_blockMap->setFrame(m_frame);
    m_draft->setFrame(ui::SpecFrame{});
    m_lastStep = -1;
    m_recent.clear();
    m_pieces.clear();
    m_server = TelemetryServerInfo{};
    m_fresh = true;
    updateCaption();
}

void RemoteEngineViews::onConnected(const QString&) {
    m_fresh = true;
    m_status = tr("live");
    updateCaption();
}

void RemoteEngineViews::onFailed(const QString& message, int retryInMs) {
    m_status = tr("%1 — trying again in %2 s; the views keep the last state received")
                   .arg(message)
                   .arg(retryInMs / 1000.0, 0, 'f', retryInMs % 1000 ? 1 : 0);
    m_fresh = true;
    updateCaption();
}

QString RemoteEngineViews::caption() const { return m_caption->text(); }

void RemoteEngineViews::updateCaption() {
    if (m_url.isEmpty()) {
        m_caption->setText(tr("No remote KV Scope server."));
        return;
    }
    QString head = tr("remote: %1, live telemetry").arg(m_url);
    if (!m_server.model.empty())
        head += tr(" · %1 · %2 blocks of %3 tokens (%4 KV)")
                    .arg(QString::fromStdString(m_server.model))
                    .arg(m_server.n_blocks)
                    .arg(m_server.block_size)
                    .arg(QString::fromStdString(m_server.kv_type));
    m_caption->setText(m_status.isEmpty() ? head : QString(head + QStringLiteral(" — ") + m_status));
}

void RemoteEngineViews::applyEvent(const TelemetryEvent& e) {
    if (e.snapshots.empty()) return;
    if (m_fresh) {
        m_fresh = false;
        m_pieces.clear();  // a new stream sends the text of every id it names again
        // Steps counting from below what is on screen: the server (or its engine) restarted.
        if (e.snapshots.front()->step.step < m_lastStep) {
            m_timeline->clear();
            m_lastStep = -1;
            m_recent.clear();
        }
    }
    m_server = e.server;
    for (const auto& [id, p] : e.pieces) m_pieces[id] = p;
    // Every new step to the timeline once (the local feed does the same: TelemetryFeed::poll).
    for (const auto& snap : e.snapshots) {
        if (snap->step.step <= m_lastStep) continue;
        m_lastStep = snap->step.step;
        m_timeline->appendStep(app::to_step_point(snap->step), app::to_request_rows(*snap));
        m_recent.push_back(snap->step);
        while (m_recent.size() > 16) m_recent.pop_front();
    }
    m_snap = e.snapshots.back();
    m_lastStep = std::max<qint64>(m_lastStep, m_snap->step.step);
    m_frame = app::to_frame(*m_snap);
    m_blockMap->setFrame(m_frame);

    // Metrics as the local window computes them (TelemetryFeed::appendMetrics).
    double ms = 0, tokens = 0;
    for (const StepRecord& r : m_recent) {
        ms += r.duration_ms;
        tokens += r.decode_tokens;
    }
    ui::MetricsPoint mp;
    mp.tMs = m_frame.step.tStartMs + m_frame.step.durationMs;
    mp.tokPerS = ms > 0 ? tokens * 1000.0 / ms : 0;
    if (e.latency.ttft_ms.count > 0) {
        mp.ttftP50Ms = e.latency.ttft_ms.p50;
        mp.ttftP99Ms = e.latency.ttft_ms.p99;
    }
    if (e.latency.tpot_ms.count > 0) {
        mp.tpotP50Ms = e.latency.tpot_ms.p50;
        mp.tpotP99Ms = e.latency.tpot_ms.p99;
    }
    mp.weightBytes = e.server.weight_bytes;
    mp.kvBytes = static_cast<qint64>(m_frame.step.blocksUsed) * e.server.kv_bytes_per_block;
    m_metricsView->appendPoint(mp);
    m_metricsView->setKvUsage(m_frame.step.kvUsage);

    if (e.spec) {
        auto pieces = [this](const std::vector<int32_t>& ids) {
            QStringList out;
            out.reserve(static_cast<int>(ids.size()));
            for (int32_t id : ids) {
                auto it = m_pieces.find(id);
                out << (it == m_pieces.end() || it->second.control ? QString()
                                                                   : QString::fromUtf8(it->second.bytes));
            }
            return out;
        };
        m_draft->setFrame(app::to_spec_frame(*e.spec, {}, pieces));
    }
    if (m_status.isEmpty() || m_status != tr("live")) m_status = tr("live");
    updateCaption();
}

QString RemoteEngineViews::piecesText(const std::vector<int32_t>& ids) const {
    std::string bytes;
    for (int32_t id : ids)
        if (auto it = m_pieces.find(id); it != m_pieces.end()) bytes += it->second.bytes;
    return QString::fromUtf8(bytes);
}

QString RemoteEngineViews::blockText(qint64 request, int tableIndex) const {
    if (!m_snap || tableIndex < 0) return {};
    for (const RequestView& r : m_snap->requests) {
        if (r.id != request) continue;
        const size_t bs = static_cast<size_t>(std::max(1, m_snap->block_size));
        const size_t from = static_cast<size_t>(tableIndex) * bs;
        if (from >= r.tokens.size()) return {};
        const size_t to = std::min(r.tokens.size(), from + bs);
        return piecesText(std::vector<int32_t>(r.tokens.begin() + from, r.tokens.begin() + to));
    }
    return {};
}

}  // namespace kvs::remote
