#pragma once
// The engine views' feed: on each call of poll() (the window's timer) it reads the telemetry
// the engine published since the last call from app/engine_bridge, converts it for the views
// (app/view_convert) and hands it to them: every new step to the slot timeline, the newest
// to the KV block map and the metrics (throughput over the recent steps, TTFT and TPOT
// percentiles of the recently finished requests, memory), speculative decoding to the draft
// acceptance view. It also names requests in the views and writes the trace of
// File ▸ Export. The GUI's only reader of engine telemetry types.
#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QSet>
#include <QString>
#include <algorithm>
#include <memory>

#include "ui/view_types.h"

namespace kvs {
struct EngineSnapshot;
}
namespace kvs::ui {
class DraftAcceptanceView;
class KvBlockMapView;
class MetricsView;
class SlotTimelineView;
}  // namespace kvs::ui

namespace kvs::app {

class EngineBridge;

class TelemetryFeed : public QObject {
    Q_OBJECT
public:
    struct Views {
        ui::KvBlockMapView* blockMap = nullptr;
        ui::SlotTimelineView* timeline = nullptr;
        ui::MetricsView* metrics = nullptr;
        ui::DraftAcceptanceView* draft = nullptr;
    };
    TelemetryFeed(EngineBridge* bridge, const Views& views, QObject* parent = nullptr);

    // How the views name a request ("Hello there", "synthetic 12"); unnamed: "req <id>".
    void setLabel(qint64 id, const QString& label);
    // Updates the views with what is new; false when the engine published nothing since the
    // last call. A snapshot published again for the same step (after a cancel between steps:
    // Engine::republish) replaces the frame without adding a step to the timeline.
    bool poll();
    // While on (the engine is paused and runs a step per Step click), poll() draws every new
    // step in turn, the oldest not drawn yet, one per call: Step clicks that land while a step
    // runs queue steps that then run back to back, and none of their frames is skipped (a
    // lesson caption may wait for a state that lasts one step, such as a prefill). Off: the
    // newest step is drawn and the ones between go only to the timeline.
    void setEveryStep(bool on) { m_everyStep = on; }
    // A fresh engine: its steps count from 0 again, and no view keeps the old engine's frame.
    void restart();
    void resetSpec();  // a new model: the draft view takes its next speculative snapshot
    // Requests the draft acceptance view leaves out (those of deleted chats); it is redrawn.
    void setHiddenRequests(const QSet<qint64>& ids);
    const ui::EngineFrame& frame() const { return m_frame; }  // the newest step's
    qint64 lastStep() const { return m_lastStep; }            // the step drawn
    // The newest step the engine has published (ahead of lastStep() while every step is drawn).
    qint64 newestStep() const { return std::max(m_lastStep, m_newestStep); }
    // The status bar's line for the newest step: step, running, waiting, KV use, tokens/s.
    QString liveFigures() const;
    // The engine's recent steps and newest snapshot as a trace (`kvscope bench --trace`'s
    // format); meta names the source and the model.
    bool writeTrace(const QString& path, const QString& model, QString* error) const;

private:
    void pollSpec();       // the draft acceptance view, at most 5 times a second
    void appendMetrics();  // one metrics point for the newest step
    QString blockText(qint64 request, int tableIndex) const;

    EngineBridge* m_bridge;
    Views m_views;
    QHash<qint64, QString> m_labels;  // request id -> its name in the views
    ui::EngineFrame m_frame;
    std::shared_ptr<const EngineSnapshot> m_snap;  // the newest, for block text on hover
    qint64 m_lastStep = -1;
    qint64 m_newestStep = -1;
    bool m_everyStep = false;
    qint64 m_specStep = -1;  // the spec snapshot the draft view shows
    QSet<qint64> m_hidden;   // left out of the draft view
    QElapsedTimer m_specClock;
};

}  // namespace kvs::app
