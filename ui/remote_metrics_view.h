#pragma once
// The remote engine view: what a remote server's /metrics tells over time, drawn as
// aggregates and labelled as such (a caption names the URL and says it is not a per-block
// map). Four plots on one time axis: KV blocks used of the total (or the usage fraction when
// the server does not say its block count), running / waiting requests, TTFT and TPOT
// quantiles of the requests finished between readings, tokens per iteration; bars of the
// speculative acceptance rate per draft position; tiles with the newest numbers.
#include <QWidget>
#include <deque>

#include "ui/remote_metrics_point.h"

class QCustomPlot;
class QCPGraph;
class QCPBars;
class QLabel;

namespace kvs::ui {

class RemoteMetricsView : public QWidget {
    Q_OBJECT
public:
    explicit RemoteMetricsView(QWidget* parent = nullptr);

    // Where the numbers come from, e.g. "vLLM at http://gpu:8000/metrics".
    void setSource(const QString& source);
    void appendPoint(const RemoteMetricsPoint& p);
    void setError(const QString& message);  // shown until the next point
    void clear();

    int pointCount() const { return int(m_points.size()); }
    QString captionText() const;
    QString tilesText() const;
    QString slotsText() const;  // llama-server's slots, one line each; "" when the server has none
    QCustomPlot* plot() const { return m_plot; }

private:
    void redraw();

    QLabel* m_caption;
    QLabel* m_tiles;
    QLabel* m_error;
    QLabel* m_slots;
    QCustomPlot* m_plot;
    QCPGraph* m_used;
    QCPGraph* m_total;
    QCPGraph* m_running;
    QCPGraph* m_waiting;
    QCPGraph* m_ttft50;
    QCPGraph* m_ttft99;
    QCPGraph* m_tpot50;
    QCPGraph* m_tpot99;
    QCPGraph* m_iterTokens;
    QCPBars* m_specBars;
    std::deque<RemoteMetricsPoint> m_points;
    QString m_source;
};

}  // namespace kvs::ui
