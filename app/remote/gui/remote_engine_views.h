#pragma once
// A remote KV Scope server's engine, drawn by the same widgets as the local engine: the KV
// block map (every block), the slot timeline (one row per request, one column per step),
// the metrics (tok/s, TTFT / TPOT, memory) and the draft acceptance view (token fates), fed
// from the server's telemetry stream (app/remote/telemetry_client.h) through the same
// conversion the local views use (app/view_convert). Captioned "remote: <url>, live
// telemetry", and with the stream's faults (and reconnection) in that caption.
#include <QHash>
#include <QString>
#include <QWidget>
#include <deque>
#include <map>
#include <memory>

#include "engine/telemetry/telemetry_event.h"
#include "ui/view_types.h"

class QLabel;
class QTabWidget;

namespace kvs::ui {
class DraftAcceptanceView;
class KvBlockMapView;
class MetricsView;
class SlotTimelineView;
}  // namespace kvs::ui

namespace kvs::remote {

class RemoteEngineViews : public QWidget {
    Q_OBJECT
public:
    explicit RemoteEngineViews(QWidget* parent = nullptr);

    // The stream's address, for the caption ("" : none).
    void setSource(const QString& url);
    // Draws an event: every step to the timeline, the newest to the block map and metrics,
    // speculative decoding to the draft view.
    void applyEvent(const TelemetryEvent& e);
    // A fresh stream began (its first event follows).
    void onConnected(const QString& url);
    void onFailed(const QString& message, int retryInMs);
    void clear();

    const ui::EngineFrame& frame() const { return m_frame; }
    qint64 lastStep() const { return m_lastStep; }
    QString caption() const;
    // The text a block holds, from the pieces the stream sent (what the hover shows).
    QString blockText(qint64 request, int tableIndex) const;

    ui::KvBlockMapView* blockMap() const { return m_blockMap; }
    ui::SlotTimelineView* timeline() const { return m_timeline; }
    ui::MetricsView* metrics() const { return m_metricsView; }
    ui::DraftAcceptanceView* draft() const { return m_draft; }
    QTabWidget* tabs() const { return m_tabs; }

private:
    void updateCaption();
    QString piecesText(const std::vector<int32_t>& ids) const;

    QLabel* m_caption;
    QTabWidget* m_tabs;
    ui::KvBlockMapView* m_blockMap;
    ui::SlotTimelineView* m_timeline;
    ui::MetricsView* m_metricsView;
    ui::DraftAcceptanceView* m_draft;
    QString m_url;
    QString m_status;  // "live", or the last fault
    TelemetryServerInfo m_server;
    std::shared_ptr<const EngineSnapshot> m_snap;  // the newest whole snapshot
    ui::EngineFrame m_frame;
    qint64 m_lastStep = -1;
    bool m_fresh = true;                 // the next event is a new stream's first
    std::deque<StepRecord> m_recent;     // the last 16 steps, for tok/s
    std::map<int32_t, TokenPiece> m_pieces;  // token text, as the stream sent it
};

}  // namespace kvs::remote
