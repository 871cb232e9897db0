#pragma once
// The data behind the batch slot timeline, without any painting: the kept engine steps
// (one column of cells per step), the request rows, which batch seat each running
// request sits in, and the per-step numbers the plots show (slot utilization, tokens per
// step, throughput over a sliding window of steps). SlotTimelineView (ui/slot_timeline.h)
// draws it; tests can drive it directly.
//
// Rows: one per request, ordered by id, from its first step to its first Finished cell.
// Seats: a request that runs (prefill, decode or padding) holds a seat from the step it
// starts running to the step it stops; a freed seat goes to the next newcomer, lowest
// seat first. A preempted or finished request is shown in the seat it just left.
#include <QHash>
#include <QString>
#include <QVector>
#include <deque>

#include "ui/view_types.h"

namespace kvs::ui {

enum class TimelineRowMode { Requests, Seats };

// What one request did in one step.
struct TimelineCell {
    qint64 id = 0;
    qint32 computed = 0;      // tokens in its KV after the step
    quint16 tokens = 0;       // tokens run for it in the step
    quint8 state = 0;         // SlotState
    qint16 seat = -1;         // batch seat (seats mode), -1: none
    bool seatChange = false;  // another request held this seat in the step before
    // A watermarked request: output tokens it got since its previous cell, and how many of
    // them are green (RequestRow::greenTokens); green -1 when it is not watermarked.
    qint8 sampled = 0;
    qint8 green = -1;
};

// One kept step.
struct TimelineColumn {
    StepPoint point;
    double tput = 0;              // (prefill + decode) tokens/s over the window ending here
    double decodeTput = 0;        // decode tokens/s over the same window
    QVector<TimelineCell> cells;  // by request id
};

// One request's row.
struct TimelineRow {
    qint64 id = 0;
    QString label;
    qint64 lastStep = -1;   // last step with a cell
    bool finished = false;  // its Finished cell is drawn; later steps draw nothing
    RequestRow latest;      // what the newest step said about it
};

class SlotTimelineModel {
public:
    // What an append changed, for the view's caches.
    struct AppendResult {
        bool rowsMoved = false;    // existing rows changed index (a row cache must be redrawn)
        bool rowsChanged = false;  // rows moved, or rows were added or dropped
        bool trimmed = false;      // the oldest steps fell off (maxSteps)
    };

    // One engine step and every known request's state in it. A step number not above the
    // newest kept one means the engine restarted: everything is cleared first. Rows whose
    // every cell fell off the left are dropped in batches.
    AppendResult append(const StepPoint& step, const QVector<RequestRow>& requests);
    void clear();

    void setMaxSteps(int steps);  // steps kept (default 512); trims at once
    int maxSteps() const { return m_maxSteps; }
    void setThroughputWindow(int steps);  // steps of the throughput window (default 16), for later steps
    int throughputWindow() const { return m_tputWindow; }

    // Steps, oldest first, strictly increasing.
    const std::deque<TimelineColumn>& columns() const { return m_cols; }
    std::deque<TimelineColumn>::const_iterator firstColumnFrom(qint64 step) const;  // first with step >= `step`
    const TimelineColumn* column(qint64 step) const;                                // nullptr when not kept
    bool isEmpty() const { return m_cols.empty(); }
    qint64 oldestStep() const { return m_cols.empty() ? -1 : m_cols.front().point.step; }
    qint64 newestStep() const { return m_cols.empty() ? -1 : m_cols.back().point.step; }
    int stepCount() const { return int(m_cols.size()); }

    // Rows.
    const QVector<TimelineRow>& rows() const { return m_rows; }
    int requestRow(qint64 id) const { return m_rowOf.value(id, -1); }  // request row of a request, -1
    int seatCount() const { return m_seatRows; }  // max(maxSeqs of the newest step, seats ever used)
    int rowCount(TimelineRowMode mode) const;
    int rowOf(qint64 id, TimelineRowMode mode) const;      // request row, or the last seat it held; -1
    QVector<qint64> rowRequestIds() const;                 // request id per request row
    int layoutVersion() const { return m_layoutVersion; }  // bumps when existing rows move

    // The cell drawn at (step, row): in seats mode the seat's holder wins over a request
    // shown in the seat it just left. nullptr when there is none.
    const TimelineCell* cellAt(qint64 step, int row, TimelineRowMode mode) const;
    // Some request seen since the last clear was watermarked (the view's legend names the marks).
    bool hasWatermark() const { return m_watermark; }

    // Per-step numbers; -1 for a step that is not kept.
    static double utilization(const StepPoint& s);  // nSeqs / maxSeqs in % (0 without seats)
    double utilizationAt(qint64 step) const;
    double throughputAt(qint64 step) const;  // tokens/s (prefill + decode) over the window
    double decodeThroughputAt(qint64 step) const;
    // Largest batch tokens (or token budget) and throughput over the kept steps in [from, to]
    // (at least 1 each), for the plots' y ranges.
    struct Peaks {
        double tokens = 1;
        double tput = 1;
    };
    Peaks peaks(qint64 from, qint64 to) const;

    static bool holdsSeat(SlotState s) {
        return s == SlotState::Prefill || s == SlotState::Decode || s == SlotState::Padding;
    }

private:
    // Requests that stopped running give their seat back; returns request id -> seat left.
    QHash<qint64, int> releaseSeats(const QVector<RequestRow>& requests);
    int takeSeat(qint64 id, bool* newcomer);            // the seat it holds, or the lowest free one
    int rowFor(const RequestRow& r, bool* rowsMoved);   // its row, inserted in id order when new
    void computeThroughput(TimelineColumn& col) const;  // over the window ending at col
    bool dropDeadRows();                                // rows with no kept cell, in batches
    void rebuildRowIndex();

    std::deque<TimelineColumn> m_cols;
    QVector<TimelineRow> m_rows;    // by request id
    QHash<qint64, int> m_rowOf;     // request id -> index in m_rows
    QVector<qint64> m_seatHolder;   // seat -> request id holding it, -1 free
    QHash<qint64, int> m_seatOf;    // request id -> seat it holds now
    QHash<qint64, int> m_lastSeat;  // request id -> last seat it held
    int m_seatRows = 0;
    int m_layoutVersion = 0;
    int m_maxSteps = 512;
    int m_tputWindow = 16;
    bool m_watermark = false;
};

}  // namespace kvs::ui
