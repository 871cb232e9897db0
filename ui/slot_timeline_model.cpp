#include "ui/slot_timeline_model.h"

#include <algorithm>

namespace kvs::ui {

SlotTimelineModel::AppendResult SlotTimelineModel::append(const StepPoint& sp, const QVector<RequestRow>& requests) {
    if (!m_cols.empty() && sp.step <= m_cols.back().point.step) clear();
    AppendResult res;
    const int rowsBefore = m_rows.size();
    TimelineColumn col;
    col.point = sp;
    col.cells.reserve(requests.size());

    const QHash<qint64, int> released = releaseSeats(requests);
    for (const RequestRow& r : requests) {
        const int ri = rowFor(r, &res.rowsMoved);
        if (ri < 0) continue;
        TimelineRow& row = m_rows[ri];
        TimelineCell c;
        if (r.greenTokens >= 0) {  // the tokens since its last cell, and the green ones among them
            const bool seen = row.latest.id == r.id;
            const int before = seen ? row.latest.outputTokens : 0;
            const int greenBefore = seen ? std::max(0, row.latest.greenTokens) : 0;
            c.sampled = qint8(std::clamp(r.outputTokens - before, 0, 127));
            c.green = qint8(std::clamp(r.greenTokens - greenBefore, 0, int(c.sampled)));
            m_watermark = true;
        }
        row.label = r.label;
        row.lastStep = sp.step;
        row.latest = r;
        row.finished = r.slot == SlotState::Finished;

        c.id = r.id;
        c.state = quint8(r.slot);
        c.tokens = quint16(std::clamp(r.scheduledTokens, 0, 65535));
        c.computed = r.computedTokens;
        if (holdsSeat(r.slot)) c.seat = qint16(takeSeat(r.id, &c.seatChange));
        else if (r.slot == SlotState::Preempted || r.slot == SlotState::Finished)
            c.seat = qint16(released.value(r.id, -1));  // shown in the seat it just left
        col.cells.push_back(c);
    }
    m_seatRows = std::max(sp.maxSeqs, int(m_seatHolder.size()));
    computeThroughput(col);
    m_cols.push_back(std::move(col));

    while (int(m_cols.size()) > m_maxSteps) {
        m_cols.pop_front();
        res.trimmed = true;
    }
    if (res.trimmed && dropDeadRows()) res.rowsMoved = true;
    if (res.rowsMoved) ++m_layoutVersion;
    res.rowsChanged = res.rowsMoved || m_rows.size() != rowsBefore;
    return res;
}

QHash<qint64, int> SlotTimelineModel::releaseSeats(const QVector<RequestRow>& requests) {
    QHash<qint64, const RequestRow*> now;
    now.reserve(requests.size());
    for (const RequestRow& r : requests) now.insert(r.id, &r);
    QHash<qint64, int> released;
    for (int s = 0; s < m_seatHolder.size(); ++s) {
        const qint64 h = m_seatHolder[s];
        if (h < 0) continue;
        const RequestRow* r = now.value(h, nullptr);
        if (!r || !holdsSeat(r->slot)) {
            released.insert(h, s);
            m_seatOf.remove(h);
            m_seatHolder[s] = -1;
        }
    }
    return released;
}

int SlotTimelineModel::takeSeat(qint64 id, bool* newcomer) {
    int seat = m_seatOf.value(id, -1);
    *newcomer = seat < 0;
    if (seat < 0) {
        seat = int(std::find(m_seatHolder.begin(), m_seatHolder.end(), -1) - m_seatHolder.begin());
        if (seat == m_seatHolder.size()) m_seatHolder.push_back(-1);
        m_seatHolder[seat] = id;
        m_seatOf.insert(id, seat);
    }
    m_lastSeat.insert(id, seat);
    return seat;
}

int SlotTimelineModel::rowFor(const RequestRow& r, bool* rowsMoved) {
    int ri = m_rowOf.value(r.id, -1);
    if (ri >= 0) return m_rows[ri].finished ? -1 : ri;  // finished earlier: nothing more to draw
    if (r.slot == SlotState::Finished) return -1;       // finished before we saw it
    TimelineRow row;
    row.id = r.id;
    if (m_rows.isEmpty() || r.id > m_rows.back().id) {
        m_rows.push_back(row);
        ri = m_rows.size() - 1;
        m_rowOf.insert(r.id, ri);
        return ri;
    }
    auto it =
        std::lower_bound(m_rows.begin(), m_rows.end(), r.id, [](const TimelineRow& a, qint64 id) { return a.id < id; });
    ri = int(it - m_rows.begin());
    m_rows.insert(ri, row);
    rebuildRowIndex();
    *rowsMoved = true;
    return ri;
}

void SlotTimelineModel::computeThroughput(TimelineColumn& col) const {
    // Durations only: pauses between steps do not count.
    const StepPoint& sp = col.point;
    double tokens = sp.prefillTokens + sp.decodeTokens, decode = sp.decodeTokens, ms = sp.durationMs;
    int n = 1;
    for (auto it = m_cols.rbegin(); it != m_cols.rend() && n < m_tputWindow; ++it, ++n) {
        tokens += it->point.prefillTokens + it->point.decodeTokens;
        decode += it->point.decodeTokens;
        ms += it->point.durationMs;
    }
    col.tput = ms > 0 ? tokens * 1000.0 / ms : 0;
    col.decodeTput = ms > 0 ? decode * 1000.0 / ms : 0;
}

bool SlotTimelineModel::dropDeadRows() {
    // Dropping moves the rows below up, so wait until it is worth it.
    const qint64 oldest = oldestStep();
    int dead = 0;
    for (const TimelineRow& r : m_rows) dead += r.lastStep < oldest;
    if (dead == 0 || (dead < 8 && dead * 4 < m_rows.size())) return false;
    for (const TimelineRow& r : m_rows)
        if (r.lastStep < oldest) m_lastSeat.remove(r.id);
    m_rows.erase(
        std::remove_if(m_rows.begin(), m_rows.end(), [oldest](const TimelineRow& r) { return r.lastStep < oldest; }),
        m_rows.end());
    rebuildRowIndex();
    return true;
}

void SlotTimelineModel::rebuildRowIndex() {
    m_rowOf.clear();
    for (int i = 0; i < m_rows.size(); ++i) m_rowOf.insert(m_rows[i].id, i);
}

void SlotTimelineModel::clear() {
    m_cols.clear();
    m_rows.clear();
    m_rowOf.clear();
    m_seatHolder.clear();
    m_seatOf.clear();
    m_lastSeat.clear();
    m_seatRows = 0;
    m_watermark = false;
    ++m_layoutVersion;
}

void SlotTimelineModel::setMaxSteps(int steps) {
    m_maxSteps = std::max(1, steps);
    while (int(m_cols.size()) > m_maxSteps) m_cols.pop_front();
}

void SlotTimelineModel::setThroughputWindow(int steps) { m_tputWindow = std::max(1, steps); }

std::deque<TimelineColumn>::const_iterator SlotTimelineModel::firstColumnFrom(qint64 step) const {
    return std::lower_bound(m_cols.begin(), m_cols.end(), step,
                            [](const TimelineColumn& c, qint64 s) { return c.point.step < s; });
}

const TimelineColumn* SlotTimelineModel::column(qint64 step) const {
    auto it = firstColumnFrom(step);
    return it != m_cols.end() && it->point.step == step ? &*it : nullptr;
}

int SlotTimelineModel::rowCount(TimelineRowMode mode) const {
    return mode == TimelineRowMode::Seats ? m_seatRows : m_rows.size();
}

int SlotTimelineModel::rowOf(qint64 id, TimelineRowMode mode) const {
    return mode == TimelineRowMode::Seats ? m_lastSeat.value(id, -1) : m_rowOf.value(id, -1);
}

QVector<qint64> SlotTimelineModel::rowRequestIds() const {
    QVector<qint64> ids;
    ids.reserve(m_rows.size());
    for (const TimelineRow& r : m_rows) ids.push_back(r.id);
    return ids;
}

const TimelineCell* SlotTimelineModel::cellAt(qint64 step, int row, TimelineRowMode mode) const {
    const TimelineColumn* c = column(step);
    if (!c || row < 0) return nullptr;
    if (mode == TimelineRowMode::Requests) {
        if (row >= m_rows.size()) return nullptr;
        for (const TimelineCell& cell : c->cells)
            if (cell.id == m_rows[row].id) return &cell;
        return nullptr;
    }
    const TimelineCell* found = nullptr;
    for (const TimelineCell& cell : c->cells)
        if (cell.seat == row && (!found || holdsSeat(SlotState(cell.state)))) found = &cell;
    return found;
}

double SlotTimelineModel::utilization(const StepPoint& s) { return s.maxSeqs > 0 ? 100.0 * s.nSeqs / s.maxSeqs : 0; }

double SlotTimelineModel::utilizationAt(qint64 step) const {
    const TimelineColumn* c = column(step);
    return c ? utilization(c->point) : -1;
}

double SlotTimelineModel::throughputAt(qint64 step) const {
    const TimelineColumn* c = column(step);
    return c ? c->tput : -1;
}

double SlotTimelineModel::decodeThroughputAt(qint64 step) const {
    const TimelineColumn* c = column(step);
    return c ? c->decodeTput : -1;
}

SlotTimelineModel::Peaks SlotTimelineModel::peaks(qint64 from, qint64 to) const {
    Peaks p;
    for (auto it = firstColumnFrom(from); it != m_cols.end() && it->point.step <= to; ++it) {
        p.tokens = std::max<double>({p.tokens, double(it->point.batchTokens()), double(it->point.tokenBudget)});
        p.tput = std::max(p.tput, it->tput);
    }
    return p;
}

}  // namespace kvs::ui
