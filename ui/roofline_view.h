#pragma once
// The roofline view: every op group of the engine's newest timed steps on this machine's
// roofline. Log-log axes: arithmetic intensity (FLOP per byte moved) across, achieved GFLOP/s
// up; the roof is the measured memory bandwidth's slope (GFLOP/s = AI x GB/s) up to the ridge,
// then the measured peak compute, flat. Points are coloured by op and shaped by step (▲
// prefill, ● decode); each decode FFN point is labelled with its batch, so a batch sweep
// shows decode climbing the slope toward the ridge. Hovering a point shows its FLOPs, bytes,
// AI, time and GFLOP/s. "Measure again" asks the app to re-run the roof micro-benchmark.
#include <QWidget>

#include "ui/roofline_types.h"

class QCustomPlot;
class QLabel;
class QPushButton;

namespace kvs::ui {

class RooflineView : public QWidget {
    Q_OBJECT
public:
    explicit RooflineView(QWidget* parent = nullptr);

    void setFrame(const RooflineFrame& frame);
    void setRoof(const MachineRoofInfo& roof);
    void setMeasuring(const QString& what);  // "measuring…" in the roof line; empty: done
    const RooflineFrame& frame() const { return m_frame; }
    const MachineRoofInfo& roof() const { return m_roof; }

    // The points drawn (timed ops with FLOPs), in drawing order.
    struct Point {
        double x = 0, y = 0;  // FLOP/byte, GFLOP/s
        QString op;
        bool prefill = false;
        int batch = 0;  // decode tokens (decode) or tokens (prefill)
        RooflineOp src;  // its numbers
    };
    const QVector<Point>& points() const { return m_points; }
    QString pointToolTip(int i) const;
    // The roof's polyline in data coordinates: (x0, bw*x0), (ridge, peak), (x1, peak); empty
    // without a roof.
    QVector<QPointF> roofLine() const;
    QString roofText() const;  // the line above the plot
    QCustomPlot* plot() const { return m_plot; }
    static QColor opColor(const QString& op);

    QSize sizeHint() const override { return {640, 460}; }

Q_SIGNALS:
    void remeasureRequested();
    void roofWanted();  // shown without a roof: the app loads or measures one

protected:
    bool eventFilter(QObject* obj, QEvent* ev) override;
    void changeEvent(QEvent* ev) override;
    void showEvent(QShowEvent* ev) override;

private:
    void rebuild();
    int pointNear(const QPoint& pixel) const;

    QCustomPlot* m_plot;
    QLabel* m_roofLabel;
    QPushButton* m_measure;
    RooflineFrame m_frame;
    MachineRoofInfo m_roof;
    QString m_measuring;
    bool m_dirty = false;  // a frame came while hidden: rebuilt when shown
    QVector<Point> m_points;
};

}  // namespace kvs::ui
