// ctest-labels: unit ui
// The slot timeline's data model (ui/slot_timeline_model.h) without a widget: rows in id
// order, seats handed out and given back, what a cell at (step, row) is, the throughput
// window, utilization, the step ring and the dropping of rows that fell off it; then
// invariants over whole simulated runs (tests/support/batch_sim.h), continuous and static.
#include <QtTest>

#include <map>
#include <set>

#include "tests/support/batch_sim.h"
#include "ui/slot_timeline_model.h"

using kvs::ui::RequestRow;
using kvs::ui::SlotState;
using kvs::ui::SlotTimelineModel;
using kvs::ui::StepPoint;
using kvs::ui::TimelineCell;
using kvs::ui::TimelineRowMode;

namespace {

constexpr auto kRequests = TimelineRowMode::Requests;
constexpr auto kSeats = TimelineRowMode::Seats;

RequestRow req(qint64 id, SlotState slot, int tokens = 0) {
    RequestRow r;
    r.id = id;
    r.slot = slot;
    r.scheduledTokens = tokens;
    r.label = QStringLiteral("req %1").arg(id);
    return r;
}

StepPoint point(qint64 step, int maxSeqs = 2) {
    StepPoint p;
    p.step = step;
    p.maxSeqs = maxSeqs;
    return p;
}

StepPoint tokens(qint64 step, int prefill, int decode, double ms, int padding = 0) {
    StepPoint p = point(step, 4);
    p.prefillTokens = prefill;
    p.decodeTokens = decode;
    p.paddingTokens = padding;
    p.durationMs = ms;
    return p;
}

SlotState stateOf(const TimelineCell* c) { return SlotState(c->state); }

}  // namespace

class TestSlotTimelineModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void seatsAndRows();
    void restartClears();
    void throughputAndUtilization();
    void ringDropsDeadRowsInBatches();
    void simulatedRunInvariants_data();
    void simulatedRunInvariants();
};

void TestSlotTimelineModel::seatsAndRows() {
    SlotTimelineModel m;
    QVERIFY(m.isEmpty());
    QCOMPARE(m.oldestStep(), qint64(-1));
    // Step 0: two prefills sit down in seats 0 and 1; the third waits without a seat.
    auto res =
        m.append(point(0), {req(1, SlotState::Prefill, 8), req(2, SlotState::Prefill, 8), req(3, SlotState::Waiting)});
    QVERIFY(res.rowsChanged && !res.rowsMoved && !res.trimmed);
    QCOMPARE(m.rowCount(kRequests), 3);
    QCOMPARE(m.rowCount(kSeats), 2);
    QCOMPARE(m.cellAt(0, 0, kSeats)->id, qint64(1));
    QVERIFY(m.cellAt(0, 0, kSeats)->seatChange);
    QCOMPARE(m.cellAt(0, 1, kSeats)->id, qint64(2));
    QCOMPARE(m.cellAt(0, 2, kRequests)->seat, qint16(-1));
    QCOMPARE(m.cellAt(0, 0, kRequests)->tokens, quint16(8));

    // Step 1: request 1 finishes and is shown in the seat it left, where request 3 sits down.
    res =
        m.append(point(1), {req(1, SlotState::Finished), req(2, SlotState::Decode, 1), req(3, SlotState::Prefill, 5)});
    QVERIFY(!res.rowsChanged);
    const TimelineCell* seat0 = m.cellAt(1, 0, kSeats);
    QCOMPARE(seat0->id, qint64(3));  // the holder wins over the request that just left
    QVERIFY(seat0->seatChange);
    QCOMPARE(stateOf(m.cellAt(1, 0, kRequests)), SlotState::Finished);
    QCOMPARE(m.cellAt(1, 0, kRequests)->seat, qint16(0));
    QVERIFY(!m.cellAt(1, 1, kSeats)->seatChange);  // request 2 stays
    QCOMPARE(m.rowOf(1, kSeats), 0);
    QCOMPARE(m.rowOf(3, kSeats), 0);
    QVERIFY(m.rows()[0].finished);

    // Step 2: a finished row draws nothing more; a preempted request is shown in its old seat.
    m.append(point(2), {req(1, SlotState::Finished), req(2, SlotState::Preempted), req(3, SlotState::Decode, 1),
                        req(4, SlotState::Waiting)});
    QVERIFY(m.cellAt(2, 0, kRequests) == nullptr);
    QCOMPARE(m.column(2)->cells.size(), 3);
    QCOMPARE(stateOf(m.cellAt(2, 1, kSeats)), SlotState::Preempted);
    QCOMPARE(m.cellAt(2, 1, kSeats)->id, qint64(2));

    // Step 3: a lower id arrives (rows move), newcomers take the lowest free seat, then a
    // new one; a request first seen finished gets no row.
    const int layout = m.layoutVersion();
    res = m.append(point(3), {req(0, SlotState::Prefill, 4), req(2, SlotState::Waiting), req(3, SlotState::Decode, 1),
                              req(4, SlotState::Prefill, 4), req(9, SlotState::Finished)});
    QVERIFY(res.rowsMoved && res.rowsChanged);
    QCOMPARE(m.layoutVersion(), layout + 1);
    QCOMPARE(m.rowRequestIds(), (QVector<qint64>{0, 1, 2, 3, 4}));
    QCOMPARE(m.requestRow(0), 0);
    QCOMPARE(m.requestRow(9), -1);
    QCOMPARE(m.rowOf(0, kSeats), 1);
    QCOMPARE(m.rowOf(4, kSeats), 2);
    QCOMPARE(m.seatCount(), 3);
    QCOMPARE(m.rowCount(kSeats), 3);
    QCOMPARE(m.stepCount(), 4);
    QCOMPARE(m.oldestStep(), qint64(0));
    QCOMPARE(m.newestStep(), qint64(3));
    QVERIFY(m.column(7) == nullptr);
    QVERIFY(m.cellAt(7, 0, kRequests) == nullptr);
    QVERIFY(m.cellAt(3, -1, kSeats) == nullptr);
    QCOMPARE(m.rows()[m.requestRow(4)].latest.scheduledTokens, 4);
}

void TestSlotTimelineModel::restartClears() {
    SlotTimelineModel m;
    m.append(point(5), {req(1, SlotState::Prefill, 3)});
    m.append(point(6), {req(1, SlotState::Decode, 1), req(2, SlotState::Prefill, 3)});
    const int layout = m.layoutVersion();
    // A step number not above the newest: the engine restarted.
    m.append(point(2), {req(7, SlotState::Prefill, 3)});
    QCOMPARE(m.stepCount(), 1);
    QCOMPARE(m.oldestStep(), qint64(2));
    QCOMPARE(m.rowRequestIds(), (QVector<qint64>{7}));
    QCOMPARE(m.rowOf(1, kSeats), -1);
    QCOMPARE(m.cellAt(2, 0, kSeats)->id, qint64(7));  // seats start over too
    QVERIFY(m.layoutVersion() > layout);
    m.clear();
    QVERIFY(m.isEmpty());
    QCOMPARE(m.rowCount(kRequests), 0);
    QCOMPARE(m.rowCount(kSeats), 0);
}

void TestSlotTimelineModel::throughputAndUtilization() {
    SlotTimelineModel m;
    m.setThroughputWindow(3);
    QCOMPARE(m.throughputWindow(), 3);
    m.append(tokens(0, 10, 0, 10), {});
    m.append(tokens(1, 0, 5, 5), {});
    m.append(tokens(2, 20, 5, 25), {});
    m.append(tokens(3, 0, 6, 4, /*padding*/ 2), {});
    // (prefill + decode) tokens over the durations of the last 3 steps; padding is no throughput.
    QCOMPARE(m.throughputAt(0), 1000.0);
    QCOMPARE(m.decodeThroughputAt(0), 0.0);
    QCOMPARE(m.throughputAt(1), 15 * 1000.0 / 15);
    QCOMPARE(m.decodeThroughputAt(1), 5 * 1000.0 / 15);
    QCOMPARE(m.throughputAt(2), 40 * 1000.0 / 40);
    QCOMPARE(m.decodeThroughputAt(2), 10 * 1000.0 / 40);
    QCOMPARE(m.throughputAt(3), 36 * 1000.0 / 34);
    QCOMPARE(m.decodeThroughputAt(3), 16 * 1000.0 / 34);
    QCOMPARE(m.throughputAt(9), -1.0);
    m.setThroughputWindow(0);  // at least 1
    QCOMPARE(m.throughputWindow(), 1);
    m.append(tokens(4, 3, 1, 2), {});
    QCOMPARE(m.throughputAt(4), 2000.0);
    m.append(tokens(5, 0, 0, 0), {});
    QCOMPARE(m.throughputAt(5), 0.0);  // no time: no rate

    StepPoint u = point(6, 4);
    u.nSeqs = 3;
    m.append(u, {});
    QCOMPARE(m.utilizationAt(6), 75.0);
    QCOMPARE(SlotTimelineModel::utilization(point(0, 0)), 0.0);  // no seats reported
    QCOMPARE(m.utilizationAt(99), -1.0);

    // Peaks for the plots' y ranges: batch tokens (padding included) or the budget.
    auto peak = m.peaks(0, 3);
    QCOMPARE(peak.tokens, 25.0);
    QCOMPARE(peak.tput, 36 * 1000.0 / 34);
    StepPoint budget = tokens(7, 1, 0, 1);
    budget.tokenBudget = 64;
    m.append(budget, {});
    QCOMPARE(m.peaks(7, 7).tokens, 64.0);
    peak = m.peaks(50, 60);
    QCOMPARE(peak.tokens, 1.0);
    QCOMPARE(peak.tput, 1.0);
}

void TestSlotTimelineModel::ringDropsDeadRowsInBatches() {
    SlotTimelineModel m;
    m.setMaxSteps(4);
    QCOMPARE(m.maxSteps(), 4);
    // Request k shows only in step k.
    SlotTimelineModel::AppendResult res;
    for (int k = 0; k <= 4; ++k) res = m.append(point(k), {req(k, SlotState::Decode, 1)});
    QVERIFY(res.trimmed);
    QCOMPARE(m.stepCount(), 4);
    QCOMPARE(m.oldestStep(), qint64(1));
    QVERIFY(!res.rowsMoved);  // one dead row of five: not worth moving the rows yet
    QCOMPARE(m.rowCount(kRequests), 5);
    res = m.append(point(5), {req(5, SlotState::Decode, 1)});
    QVERIFY(res.rowsMoved && res.rowsChanged);  // two dead of six: dropped together
    QCOMPARE(m.rowRequestIds(), (QVector<qint64>{2, 3, 4, 5}));
    QCOMPARE(m.rowOf(0, kRequests), -1);
    QCOMPARE(m.rowOf(0, kSeats), -1);
    QCOMPARE(m.rowOf(5, kRequests), 3);
    m.setMaxSteps(2);  // trims at once; rows stay until the next append
    QCOMPARE(m.stepCount(), 2);
    QCOMPARE(m.oldestStep(), qint64(4));
    m.setMaxSteps(0);
    QCOMPARE(m.maxSteps(), 1);
}

void TestSlotTimelineModel::simulatedRunInvariants_data() {
    QTest::addColumn<bool>("staticBatching");
    QTest::addColumn<int>("maxSteps");
    QTest::newRow("continuous") << false << 100000;
    QTest::newRow("continuous, ring of 40") << false << 40;
    QTest::newRow("static") << true << 100000;
}

void TestSlotTimelineModel::simulatedRunInvariants() {
    QFETCH(bool, staticBatching);
    QFETCH(int, maxSteps);
    kvs::test::BatchSimConfig cfg;
    cfg.nRequests = 48;
    cfg.maxSeqs = 12;
    cfg.nBlocks = staticBatching ? 1000 : 120;  // static batching never preempts: room for a whole batch
    cfg.staticBatching = staticBatching;
    kvs::test::BatchSim sim(cfg);
    SlotTimelineModel m;
    m.setMaxSteps(maxSteps);
    std::map<qint64, int> seatBefore;  // request -> seat it held in the step before
    int seatChanges = 0, steps = 0;
    for (bool last = false; !last && steps < 5000; ++steps) {
        last = sim.done();  // one more step after the last finish shows it
        const auto [sp, rows] = sim.step();
        m.append(sp, rows);
        const auto* col = m.column(sp.step);
        QVERIFY(col);
        QCOMPARE(m.utilizationAt(sp.step), SlotTimelineModel::utilization(sp));
        std::set<int> taken;
        std::map<qint64, int> seatNow;
        for (const TimelineCell& c : col->cells) {
            const bool holds = SlotTimelineModel::holdsSeat(SlotState(c.state));
            if (!holds) continue;
            // Every running request holds one seat of its own, within the seat rows.
            QVERIFY2(c.seat >= 0 && c.seat < m.seatCount(),
                     qPrintable(QString("step %1 req %2 seat %3").arg(sp.step).arg(c.id).arg(c.seat)));
            QVERIFY2(taken.insert(c.seat).second,
                     qPrintable(QString("step %1: seat %2 twice").arg(sp.step).arg(c.seat)));
            QCOMPARE(m.cellAt(sp.step, c.seat, kSeats)->id, c.id);
            // It keeps its seat while it runs; a seat change marks a newcomer.
            const auto before = seatBefore.find(c.id);
            QCOMPARE(c.seatChange, before == seatBefore.end());
            if (before != seatBefore.end()) QCOMPARE(int(c.seat), before->second);
            seatChanges += c.seatChange;
            seatNow[c.id] = c.seat;
        }
        seatBefore = seatNow;
        QVERIFY(int(taken.size()) <= sp.maxSeqs);
    }
    QVERIFY(sim.done());
    QVERIFY(seatChanges >= cfg.nRequests);  // everyone sat down at least once
    if (!staticBatching) QVERIFY2(sim.preemptionsTotal > 0, "the pool was never tight");
    QCOMPARE(m.stepCount(), std::min(steps, maxSteps));
    // Every kept cell matches what the simulation fed for that step.
    for (const auto& col : m.columns()) {
        const auto& fed = sim.truth.at(col.point.step);
        for (const TimelineCell& c : col.cells) {
            auto it = std::find_if(fed.begin(), fed.end(), [&](const RequestRow& r) { return r.id == c.id; });
            QVERIFY(it != fed.end());
            QCOMPARE(SlotState(c.state), it->slot);
            QCOMPARE(int(c.tokens), it->scheduledTokens);
            QCOMPARE(int(c.computed), it->computedTokens);
        }
    }
}

QTEST_GUILESS_MAIN(TestSlotTimelineModel)
#include "tst_slot_timeline_model.moc"
