#pragma once
// The batch slot timeline: one row per request (or per batch seat), one column per engine
// step, each cell coloured by what that request did in that step (SlotState: prefill
// chunk, decode, padding, waiting, preempted, swapped, finished). Under it, plots on the
// same step axis: slot utilization, tokens per step (prefill / decode / padding) against
// the token budget, and throughput over a sliding window of steps.
//
// Fed one step at a time (appendStep); keeps the last maxSteps() steps. The newest step
// sits at the right edge while the view follows; scrolling back (scroll bar, wheel, Left /
// Home) stops following, End or the Follow button resumes it. The cell area is cached as
// an image: appending a step while following shifts the cache and paints one column.
// The data maths (rows, seats, utilization, throughput) is SlotTimelineModel's
// (ui/slot_timeline_model.h); this widget draws it.
#include <QColor>
#include <QVector>
#include <QWidget>
#include <memory>

#include "ui/slot_timeline_model.h"
#include "ui/view_types.h"

class QCustomPlot;
class QLabel;
class QComboBox;
class QScrollBar;
class QTimer;
class QToolButton;

namespace kvs::ui {

class TimelineCanvas;  // the cell area and row labels (slot_timeline_canvas.cpp)

// What lies under a point of the timeline.
struct TimelineHit {
    bool onCell = false;    // a drawn cell (request and state below are meaningful)
    qint64 step = -1;       // the column's step (-1: outside the cell area)
    int row = -1;           // row index: request row or seat
    qint64 requestId = -1;  // the row's request (requests mode) or the seat's occupant
    SlotState state = SlotState::Waiting;
    int tokens = 0;          // tokens run for the request in that step
    int computedTokens = 0;  // tokens in its KV after that step
};

class SlotTimelineView : public QWidget {
    Q_OBJECT
public:
    using RowMode = TimelineRowMode;

    explicit SlotTimelineView(QWidget* parent = nullptr);
    ~SlotTimelineView() override;

    // One engine step and every known request's state in it. A step number not above the
    // newest kept one means the engine restarted: the view clears first. A request shows
    // from its first appearance to its first Finished cell.
    void appendStep(const StepPoint& step, const QVector<RequestRow>& requests);
    void clear();

    void setMaxSteps(int steps);  // steps kept (default 512)
    int maxSteps() const;
    void setRowMode(RowMode mode);
    RowMode rowMode() const { return m_mode; }
    void setCellWidth(qreal logicalPx);  // column width, 1..32 (Ctrl+wheel zooms)
    qreal cellWidth() const { return m_cellWidth; }
    void setThroughputWindow(int steps);  // sliding window of the throughput plot (16)
    int throughputWindow() const;

    bool isFollowing() const { return m_following; }
    void setFollowing(bool follow);
    void scrollToStep(qint64 step);  // that step at the right edge
    qint64 firstVisibleStep() const;
    qint64 lastVisibleStep() const { return m_viewLast; }
    qint64 oldestStep() const;  // -1 when empty
    qint64 newestStep() const;
    int stepCount() const;
    int visibleSteps() const;  // columns that fit the cell area

    int rowCount() const;                   // request rows, or seats in seats mode
    QVector<qint64> rowRequestIds() const;  // requests mode: request id per row
    qint64 selectedRequest() const { return m_selected; }
    void setSelectedRequest(qint64 id);  // highlights its row; -1 clears

    // Geometry and content, in this widget's coordinates.
    QRect cellRect(qint64 step, int row) const;  // empty when not in view
    int rowOf(qint64 requestId) const;           // row of a request (seats: its seat), -1
    TimelineHit hitTest(const QPoint& pos) const;
    QString toolTipAt(const QPoint& pos) const;
    bool cellAt(qint64 step, int row, SlotState* state = nullptr, int* tokens = nullptr,
                qint64* requestId = nullptr) const;
    const StepPoint* stepAt(qint64 step) const;  // nullptr when not kept
    double utilizationAt(qint64 step) const;     // nSeqs / maxSeqs in %, -1 when not kept
    double throughputAt(qint64 step) const;      // tokens/s (prefill + decode) over the window
    double decodeThroughputAt(qint64 step) const;
    const SlotTimelineModel& model() const;  // the data behind the cells and plots

    QCustomPlot* plot() const { return m_plot; }
    QWidget* canvas() const;
    int canvasPaintCount() const;  // paint events of the cell area (tests)
    int fullCacheRedraws() const;  // full re-renders of the cell cache (tests)

    static QColor stateColor(SlotState s, const QPalette& pal);
    // The strip a watermarked request's cells carry: its new tokens in the green list, or not.
    static QColor watermarkColor(bool green);
    static QString stateName(SlotState s);
    static QColor requestColor(qint64 id);  // the block map's colours (ui/request_colors.h)

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

Q_SIGNALS:
    void requestSelected(qint64 id);  // a row or cell was clicked (-1: cleared)
    void followingChanged(bool following);

protected:
    void changeEvent(QEvent* ev) override;
    bool eventFilter(QObject* obj, QEvent* ev) override;

private:
    friend class TimelineCanvas;
    struct Data;

    void buildPlots();
    void addPlotRect(int row, const QString& title);
    void buildGraphs();
    void stylePlots();
    void appendPlotPoint(const TimelineColumn& column);
    void trimPlots();
    void syncView();  // scroll bars, plot range, repaint after data/scroll changes
    void syncPlotRange();
    void updateSummary();
    void setHoverStep(qint64 step);
    void scrollBy(qint64 columns);
    void onScrollValue(int value);
    void setFollowingInternal(bool follow);
    QString stepSummary(const StepPoint& s) const;

    std::unique_ptr<Data> d;
    TimelineCanvas* m_canvas = nullptr;
    QScrollBar* m_hscroll = nullptr;
    QScrollBar* m_vscroll = nullptr;
    QWidget* m_plotSpacer = nullptr;
    QCustomPlot* m_plot = nullptr;
    QLabel* m_summary = nullptr;
    QComboBox* m_modeBox = nullptr;
    QToolButton* m_followButton = nullptr;
    QTimer* m_replotTimer = nullptr;

    RowMode m_mode = RowMode::Requests;
    qreal m_cellWidth = 6;
    bool m_following = true;
    qint64 m_viewLast = -1;  // step at the right edge
    qint64 m_selected = -1;
    qint64 m_hoverStep = -1;
    bool m_syncingScroll = false;
    bool m_appending = false;
};

}  // namespace kvs::ui
