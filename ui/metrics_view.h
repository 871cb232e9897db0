#pragma once
// The metrics view: serving figures over time from MetricsPoint samples. Tiles with the
// newest values, the memory split (weights / KV / scratch) as a bar, and four plots on
// one time axis: tokens/s; TTFT p50 and p99; TPOT p50 and p99; memory, stacked.
// statusText() is the one-line summary for the main window's status bar.
//
// The time axis follows the newest sample; dragging or zooming it (mouse, wheel) stops
// following, a double click resumes.
#include <QWidget>
#include <deque>

#include "ui/view_types.h"

class QCustomPlot;
class QCPGraph;
class QLabel;
class QTimer;

namespace kvs::ui {

class MemoryBar;

class MetricsView : public QWidget {
    Q_OBJECT
public:
    explicit MetricsView(QWidget* parent = nullptr);

    void appendPoint(const MetricsPoint& p);  // a tMs not above the newest one starts over
    void clear();
    void setKvUsage(double fraction);      // KV pool in use (StepPoint::kvUsage); < 0: unknown
    void setMemoryCapacity(qint64 bytes);  // RAM/VRAM the memory bar is drawn against; 0: none
    void setMaxPoints(int n);              // samples kept (default 3600)

    // "42.1 tok/s · TTFT p50 180 ms · KV 37%" (KV in bytes while the usage is unknown);
    // empty before the first sample.
    QString statusText() const;
    int pointCount() const { return int(m_points.size()); }
    const MetricsPoint* lastPoint() const { return m_points.empty() ? nullptr : &m_points.back(); }
    bool isFollowing() const { return m_following; }

    QCustomPlot* plot() const { return m_plot; }
    QCPGraph* tokPerSGraph() const { return m_tok; }
    QCPGraph* ttftGraph() const { return m_ttft50; }
    QCPGraph* ttftP99Graph() const { return m_ttft99; }
    QCPGraph* tpotGraph() const { return m_tpot50; }
    QCPGraph* tpotP99Graph() const { return m_tpot99; }

    QString toolTipAtTime(double seconds) const;  // the sample nearest to that time
    static QString formatMs(double ms);           // "7.5 ms", "180 ms", "12.3 s"; "–" when <= 0
    static QString formatRate(double tokPerS);

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

Q_SIGNALS:
    void statusTextChanged(const QString& text);

protected:
    void changeEvent(QEvent* ev) override;
    bool eventFilter(QObject* obj, QEvent* ev) override;

private:
    void buildPlots();
    void stylePlots();
    void addToPlots(const MetricsPoint& p);
    void rebuildMemorySeries();
    void updateTiles();
    void followRange();
    void setFollowing(bool follow);
    void emitStatus();

    QLabel* m_rateValue;
    QLabel* m_ttftValue;
    QLabel* m_tpotValue;
    QLabel* m_memValue;
    QList<QLabel*> m_captions;
    MemoryBar* m_bar;
    QCustomPlot* m_plot;
    QTimer* m_replotTimer = nullptr;
    QCPGraph* m_tok = nullptr;
    QCPGraph* m_ttft50 = nullptr;
    QCPGraph* m_ttft99 = nullptr;
    QCPGraph* m_tpot50 = nullptr;
    QCPGraph* m_tpot99 = nullptr;
    QCPGraph* m_memWeights = nullptr;  // stacked: weights, + KV, + scratch
    QCPGraph* m_memKv = nullptr;
    QCPGraph* m_memScratch = nullptr;

    std::deque<MetricsPoint> m_points;
    int m_maxPoints = 3600;
    double m_kvUsage = -1;
    qint64 m_capacity = 0;
    double m_memUnit = double(1 << 20);  // MiB, or GiB once the total passes 8 GiB
    bool m_following = true;
    bool m_settingRange = false;
    QString m_lastStatus;
};

}  // namespace kvs::ui
