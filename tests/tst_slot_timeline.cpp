// ctest-labels: ui
// The batch slot timeline and the metrics view, offscreen, fed by a small scheduler
// simulation (tests/support/batch_sim.h: continuous batching with chunked prefill, a
// token budget, a block pool that runs out and preempts by recompute or swap; static
// batching that pads finished seats). Checks what the widgets expose (cells, hit tests, tooltips, computed
// utilization and throughput, plot data), a few pixel colours, following and scrolling
// back, the step ring, and prints how long appending and painting take. Screenshots go to
// tests/output/.
#include <QSignalSpy>
#include <QtTest>
#include <cmath>
#include <map>

#include "ui/qcp.h"

#include "tests/support/batch_sim.h"
#include "ui/dark_palette.h"
#include "tests/support/test_paths.h"
#include "tests/support/widget_probe.h"
#include "ui/memory_bar.h"
#include "ui/metrics_view.h"
#include "ui/slot_timeline.h"

using kvs::ui::MetricsPoint;
using kvs::ui::RequestRow;
using kvs::ui::SlotState;
using kvs::ui::SlotTimelineView;
using kvs::ui::StepPoint;

namespace {

using Sim = kvs::test::BatchSim;
using SimConfig = kvs::test::BatchSimConfig;
using kvs::ui::dark_palette;

// Pixels against the colours a view paints.
bool near(const QColor& a, const QColor& b) { return kvs::test::colors_near(a, b, 6); }

QString out(const char* name) { return QString::fromStdString(kvs::test::output_path(name)); }

int feed(SlotTimelineView& v, Sim& sim, int maxSteps = 100000) {
    int n = 0;
    bool reported = false;  // one step more after the last finish, which shows it
    while (!reported && n < maxSteps) {
        reported = sim.done();
        auto [sp, rows] = sim.step();
        v.appendStep(sp, rows);
        ++n;
    }
    return n;
}

}  // namespace

class TestSlotTimeline : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void continuousBatchingRun();
    void staticBatchingShowsPadding();
    void followAndScrollBack();
    void ringKeepsLastSteps();
    void shiftedCacheMatchesFullRedraw();
    void clickSelectsRequest();
    void appendAndPaintCost();
    void metricsView();
};

void TestSlotTimeline::continuousBatchingRun() {
    SlotTimelineView v;
    v.resize(1500, 950);
    v.setCellWidth(4);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    Sim sim(SimConfig{});
    const int steps = feed(v, sim);
    QVERIFY2(steps > 150 && steps < 512, qPrintable(QString::number(steps)));
    QVERIFY2(sim.preemptionsTotal > 0, "the simulation should run out of blocks");
    QCOMPARE(v.stepCount(), steps);
    QCOMPARE(v.rowCount(), 64);
    QCOMPARE(v.newestStep(), qint64(steps - 1));
    QVERIFY(v.isFollowing());
    QCOMPARE(v.lastVisibleStep(), v.newestStep());
    const auto ids = v.rowRequestIds();
    QVERIFY(std::is_sorted(ids.begin(), ids.end()));

    // Every fed cell is there, once a request finished nothing more is drawn.
    QHash<qint64, int> finishedCells;
    int checked = 0;
    for (const auto& [step, rows] : sim.truth) {
        for (const RequestRow& r : rows) {
            SlotState s;
            int tokens = -1;
            qint64 id = -1;
            const bool has = v.cellAt(step, v.rowOf(r.id), &s, &tokens, &id);
            if (r.slot == SlotState::Finished) {
                if (has) ++finishedCells[r.id];
                continue;
            }
            QVERIFY2(has, qPrintable(QString("step %1 req %2").arg(step).arg(r.id)));
            QCOMPARE(int(s), int(r.slot));
            QCOMPARE(tokens, r.scheduledTokens);
            QCOMPARE(id, r.id);
            ++checked;
        }
    }
    QVERIFY(checked > 5000);
    QCOMPARE(finishedCells.size(), 64);
    for (int n : finishedCells) QCOMPARE(n, 1);

    // Computed numbers.
    for (qint64 s : {qint64(10), qint64(steps / 2), qint64(steps - 1)}) {
        const StepPoint* p = v.stepAt(s);
        QVERIFY(p);
        QCOMPARE(v.utilizationAt(s), 100.0 * p->nSeqs / p->maxSeqs);
        double tok = 0, ms = 0;
        for (qint64 k = std::max<qint64>(0, s - v.throughputWindow() + 1); k <= s; ++k) {
            tok += v.stepAt(k)->prefillTokens + v.stepAt(k)->decodeTokens;
            ms += v.stepAt(k)->durationMs;
        }
        QVERIFY(std::abs(v.throughputAt(s) - tok * 1000 / ms) < 1e-6);
    }
    QCOMPARE(v.plot()->graph(0)->dataCount(), steps);

    // Hit tests, tooltips and pixel colours of visible cells of several states.
    QTest::qWait(80);  // the plots replot at most every 50 ms while steps stream
    const QImage img = v.grab().toImage();
    QVERIFY(img.save(out("slot_timeline_continuous.png")));
    const qreal dpr = img.devicePixelRatio();
    QSet<int> seenStates;
    for (qint64 s = v.newestStep(); s >= v.firstVisibleStep() && seenStates.size() < 5; --s) {
        for (const RequestRow& r : sim.truth[s]) {
            if (r.slot == SlotState::Finished || seenStates.contains(int(r.slot))) continue;
            const QRect cell = v.cellRect(s, v.rowOf(r.id));
            if (cell.width() < 3 || cell.height() < 3) continue;
            const QPoint c = cell.center();
            const auto hit = v.hitTest(c);
            QVERIFY(hit.onCell);
            QCOMPARE(hit.step, s);
            QCOMPARE(hit.requestId, r.id);
            QCOMPARE(int(hit.state), int(r.slot));
            const QString tip = v.toolTipAt(c);
            QVERIFY2(tip.contains(QString("Step %1").arg(s)) && tip.contains(r.label) &&
                         tip.contains(SlotTimelineView::stateName(r.slot)),
                     qPrintable(tip));
            const QColor px = img.pixelColor((QPointF(cell.topLeft()) * dpr).toPoint() + QPoint(1, 1));
            QVERIFY2(near(px, SlotTimelineView::stateColor(r.slot, v.palette())),
                     qPrintable(
                         QString("%1 at step %2: %3").arg(SlotTimelineView::stateName(r.slot)).arg(s).arg(px.name())));
            seenStates.insert(int(r.slot));
        }
    }
    QVERIFY2(seenStates.contains(int(SlotState::Decode)) && seenStates.contains(int(SlotState::Waiting)),
             qPrintable(QString::number(seenStates.size())));

    // Selecting a request highlights its row; hovering a cell marks its column in the plots.
    const qint64 picked = ids.at(40);
    v.setSelectedRequest(picked);
    const QRect pickedCell = v.cellRect(v.newestStep() - 60, v.rowOf(picked));
    QTest::mouseMove(v.canvas(), v.canvas()->mapFrom(&v, pickedCell.center()));
    QTRY_VERIFY(v.plot()->item(0)->visible());  // the step cursor
    QTest::qWait(30);
    QVERIFY(v.grab().save(out("slot_timeline_hover_selected.png")));

    // The same run in the dark theme and in seats mode.
    v.setPalette(dark_palette());
    QTest::qWait(80);  // the plots replot at most every 50 ms while steps stream
    const QImage dark = v.grab().toImage();
    QVERIFY(dark.save(out("slot_timeline_continuous_dark.png")));
    const QRect anyCell = v.cellRect(v.newestStep(), 0);
    QVERIFY(qGray(dark.pixel(QPoint(anyCell.right() + 2, 2) * dpr)) < 80);  // dark background
    v.setRowMode(SlotTimelineView::RowMode::Seats);
    QCOMPARE(v.rowCount(), sim.cfg.maxSeqs);
    QTest::qWait(80);  // the plots replot at most every 50 ms while steps stream
    QVERIFY(v.grab().save(out("slot_timeline_continuous_seats_dark.png")));
}

void TestSlotTimeline::staticBatchingShowsPadding() {
    SlotTimelineView v;
    v.resize(1300, 800);
    v.setCellWidth(3);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    SimConfig cfg;
    cfg.staticBatching = true;
    cfg.nRequests = 32;
    cfg.maxSeqs = 8;
    cfg.tokenBudget = 512;
    cfg.nBlocks = 4000;
    cfg.arrivalSpread = 0;
    cfg.seed = 11;
    Sim sim(cfg);
    const int steps = feed(v, sim);
    QVERIFY(steps < 512);
    int padding = 0;
    for (qint64 s = 0; s < steps; ++s) padding += v.stepAt(s)->paddingTokens;
    QVERIFY(padding > 100);
    // Padding cells are drawn hatched in the padding colour.
    qint64 padStep = -1;
    int padRow = -1;
    for (qint64 s = v.newestStep(); s >= v.firstVisibleStep() && padStep < 0; --s)
        for (const RequestRow& r : sim.truth[s])
            if (r.slot == SlotState::Padding) {
                padStep = s;
                padRow = v.rowOf(r.id);
                break;
            }
    QVERIFY(padStep >= 0);
    SlotState st;
    QVERIFY(v.cellAt(padStep, padRow, &st));
    QCOMPARE(st, SlotState::Padding);
    QTest::qWait(80);  // the plots replot at most every 50 ms while steps stream
    QImage img = v.grab().toImage();
    QVERIFY(img.save(out("slot_timeline_static.png")));
    const QRect cell = v.cellRect(padStep, padRow);
    const QColor pad = SlotTimelineView::stateColor(SlotState::Padding, v.palette());
    bool sawPad = false, sawHatch = false;
    for (int x = cell.left(); x <= cell.right(); ++x)
        for (int y = cell.top(); y < cell.bottom(); ++y) {
            const QColor c = img.pixelColor(QPoint(x, y) * img.devicePixelRatio());
            sawPad |= near(c, pad);
            sawHatch |= near(c, pad.darker(150));
        }
    QVERIFY2(sawPad && sawHatch, qPrintable(QString("cell %1,%2 %3x%4 pad %5 hatch %6 centre %7")
                                                .arg(cell.x())
                                                .arg(cell.y())
                                                .arg(cell.width())
                                                .arg(cell.height())
                                                .arg(sawPad)
                                                .arg(sawHatch)
                                                .arg(img.pixelColor(cell.center()).name())));

    // Seats: one row per seat, a request keeps its seat while it runs.
    v.setRowMode(SlotTimelineView::RowMode::Seats);
    QCOMPARE(v.rowCount(), 8);
    for (const auto& [step, rows] : sim.truth) {
        for (const RequestRow& r : rows) {
            if (r.slot != SlotState::Decode) continue;
            qint64 id = -1;
            SlotState s;
            QVERIFY(v.cellAt(step, v.rowOf(r.id), &s, nullptr, &id));
            QCOMPARE(id, r.id);
        }
    }
    QTest::qWait(80);  // the plots replot at most every 50 ms while steps stream
    QVERIFY(v.grab().save(out("slot_timeline_static_seats.png")));
}

void TestSlotTimeline::followAndScrollBack() {
    SlotTimelineView v;
    v.resize(900, 600);
    v.setCellWidth(6);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    SimConfig cfg;
    cfg.maxOut = 400;
    cfg.minOut = 300;
    Sim sim(cfg);
    QSignalSpy followSpy(&v, &SlotTimelineView::followingChanged);
    feed(v, sim, 300);
    QVERIFY(v.visibleSteps() < 200);
    QCOMPARE(v.lastVisibleStep(), qint64(299));
    QVERIFY(v.isFollowing());
    auto* bar = v.findChild<QScrollBar*>("slotTimelineScroll");
    QVERIFY(bar);
    QCOMPARE(bar->value(), bar->maximum());

    v.scrollToStep(150);
    QVERIFY(!v.isFollowing());
    QCOMPARE(followSpy.count(), 1);
    QCOMPARE(v.lastVisibleStep(), qint64(150));
    feed(v, sim, 20);
    QCOMPARE(v.lastVisibleStep(), qint64(150));  // scrolled back: the view stays put
    QVERIFY(bar->value() < bar->maximum());
    // The plots show the same steps as the cells.
    const QCPRange range = v.plot()->axisRect(0)->axis(QCPAxis::atBottom)->range();
    QVERIFY(std::abs(range.upper - 150.5) < 1e-9);
    QVERIFY(std::abs(range.lower - (150.5 - range.size())) < 1e-9);
    // The cell of step 150 and the bar of step 150 line up.
    const QRect cell = v.cellRect(150, 0);
    const double barX = v.plot()->axisRect(0)->axis(QCPAxis::atBottom)->coordToPixel(150.0);
    const QPoint barInView = v.plot()->mapTo(&v, QPoint(int(barX), 0));
    QVERIFY2(std::abs(barInView.x() - cell.center().x()) <= 2,
             qPrintable(QString("%1 vs %2").arg(barInView.x()).arg(cell.center().x())));

    QTest::keyClick(v.canvas(), Qt::Key_Left);
    QCOMPARE(v.lastVisibleStep(), qint64(149));
    QTest::keyClick(v.canvas(), Qt::Key_End);
    QVERIFY(v.isFollowing());
    QCOMPARE(v.lastVisibleStep(), qint64(319));
    bar->setValue(bar->maximum() - 10);
    QVERIFY(!v.isFollowing());
    QCOMPARE(v.lastVisibleStep(), qint64(309));
    auto* follow = v.findChild<QToolButton*>("slotTimelineFollow");
    QVERIFY(follow && !follow->isChecked());
    follow->click();
    QVERIFY(v.isFollowing());
    QCOMPARE(v.lastVisibleStep(), qint64(319));
    const int shown = v.visibleSteps();
    v.setCellWidth(3);
    QVERIFY(v.visibleSteps() > shown);
}

void TestSlotTimeline::ringKeepsLastSteps() {
    SlotTimelineView v;
    v.resize(900, 600);
    v.setMaxSteps(100);
    v.show();
    SimConfig cfg;
    cfg.nRequests = 64;
    cfg.arrivalSpread = 280;
    cfg.minOut = 10;
    cfg.maxOut = 40;
    Sim sim(cfg);
    const int n = feed(v, sim, 300);
    QCOMPARE(n, 300);
    QCOMPARE(v.stepCount(), 100);
    QCOMPARE(v.oldestStep(), qint64(200));
    QCOMPARE(v.plot()->graph(0)->dataCount(), 100);
    QVERIFY(!v.stepAt(199));
    // Early requests that only lived before step 200 are gone from the rows.
    QVERIFY2(v.rowOf(100) < 0, qPrintable(QString::number(v.rowCount())));
    QVERIFY(v.rowCount() < 64);
    // A step number going back means a new engine: start over.
    StepPoint restart;
    restart.step = 0;
    restart.maxSeqs = 4;
    RequestRow r;
    r.id = 1;
    r.slot = SlotState::Prefill;
    r.scheduledTokens = 12;
    v.appendStep(restart, {r});
    QCOMPARE(v.stepCount(), 1);
    QCOMPARE(v.rowCount(), 1);
    QCOMPARE(v.plot()->graph(0)->dataCount(), 1);
    v.clear();
    QCOMPARE(v.stepCount(), 0);
    QCOMPARE(v.newestStep(), qint64(-1));
}

void TestSlotTimeline::shiftedCacheMatchesFullRedraw() {
    // Painted step by step, the cell cache is shifted and one column drawn each time; the
    // result must be what drawing everything anew gives, scrolled back and forth too.
    SlotTimelineView v;
    v.resize(900, 600);
    v.setCellWidth(5);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    SimConfig cfg;
    cfg.nRequests = 30;
    cfg.arrivalSpread = 0;
    Sim sim(cfg);
    feed(v, sim, 10);
    QApplication::processEvents();
    const int fullBefore = v.fullCacheRedraws();
    for (int i = 0; i < 150; ++i) {
        feed(v, sim, 1);
        QApplication::processEvents();
    }
    QVERIFY2(v.fullCacheRedraws() - fullBefore <= 3, qPrintable(QString::number(v.fullCacheRedraws() - fullBefore)));
    const auto fresh = [&] {
        const qreal w = v.cellWidth();
        v.setCellWidth(w + 1);
        (void)v.canvas()->grab();
        v.setCellWidth(w);
        return v.canvas()->grab().toImage();
    };
    const QImage shifted = v.canvas()->grab().toImage();
    QVERIFY(shifted == fresh());
    // Scroll back by a few columns (shift right, draw the left edge), then forward again.
    v.scrollToStep(v.newestStep() - 7);
    const QImage back = v.canvas()->grab().toImage();
    QVERIFY(back == fresh());
    v.scrollToStep(v.newestStep() - 2);
    const QImage forth = v.canvas()->grab().toImage();
    QVERIFY(forth == fresh());
}

void TestSlotTimeline::clickSelectsRequest() {
    SlotTimelineView v;
    v.resize(900, 600);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    Sim sim(SimConfig{});
    feed(v, sim, 60);
    QSignalSpy spy(&v, &SlotTimelineView::requestSelected);
    const qint64 id = v.rowRequestIds().at(3);
    const QRect cell = v.cellRect(v.newestStep(), 3);
    QVERIFY2(!cell.isEmpty(), qPrintable(QString("rows %1 canvas %2x%3 visible %4 last %5")
                                             .arg(v.rowCount())
                                             .arg(v.canvas()->width())
                                             .arg(v.canvas()->height())
                                             .arg(v.canvas()->isVisible())
                                             .arg(v.lastVisibleStep())));
    QTest::mouseClick(v.canvas(), Qt::LeftButton, {}, v.canvas()->mapFrom(&v, cell.center()));
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toLongLong(), id);
    QCOMPARE(v.selectedRequest(), id);
    QTest::mouseClick(v.canvas(), Qt::LeftButton, {}, v.canvas()->mapFrom(&v, cell.center()));
    QCOMPARE(v.selectedRequest(), qint64(-1));
}

void TestSlotTimeline::appendAndPaintCost() {
    // 64 requests that all stay for the whole run, 512 steps kept.
    SlotTimelineView v;
    v.resize(1400, 900);
    v.setCellWidth(3);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    SimConfig cfg;
    cfg.minOut = cfg.maxOut = 2000;
    cfg.maxSeqs = 48;
    cfg.nBlocks = 3000;
    cfg.arrivalSpread = 0;
    Sim sim(cfg);
    std::vector<std::pair<StepPoint, QVector<RequestRow>>> steps;
    for (int i = 0; i < 712; ++i) steps.push_back(sim.step());

    QElapsedTimer t;
    t.start();
    for (int i = 0; i < 512; ++i) v.appendStep(steps[i].first, steps[i].second);
    const double appendMs = t.nsecsElapsed() / 1e6;
    QCOMPARE(v.rowCount(), 64);
    QCOMPARE(v.stepCount(), 512);

    QWidget* canvas = v.canvas();
    QApplication::processEvents();
    const int reps = 10;
    t.restart();
    for (int i = 0; i < reps; ++i) {
        v.setCellWidth(i % 2 ? 3 : 4);  // another column width: the cache is drawn anew
        canvas->repaint();
    }
    const double fullMs = t.nsecsElapsed() / 1e6 / reps;

    // The steady state: append one step, then let the event loop paint what is dirty.
    const int fullBefore = v.fullCacheRedraws(), paintsBefore = v.canvasPaintCount();
    double appendOnly = 0, paintOnly = 0, worst = 0;
    for (int i = 512; i < 712; ++i) {
        t.restart();
        v.appendStep(steps[i].first, steps[i].second);
        const double a = t.nsecsElapsed() / 1e6;
        t.restart();
        QApplication::processEvents();  // paints the dirty cell area (and replots when due)
        const double p = t.nsecsElapsed() / 1e6;
        appendOnly += a;
        paintOnly += p;
        worst = std::max(worst, a + p);
    }
    const int fullAfter = v.fullCacheRedraws(), paints = v.canvasPaintCount() - paintsBefore;
    QCOMPARE(v.stepCount(), 512);
    QVERIFY(paints >= 150);  // painted (almost) every step
    // Appending while following shifts the cached cells: no full redraw per step.
    QVERIFY2(fullAfter - fullBefore <= 2, qPrintable(QString::number(fullAfter - fullBefore)));

    double replot = 0;
    for (int i = 0; i < reps; ++i) {
        t.restart();
        v.plot()->replot(QCustomPlot::rpImmediateRefresh);
        replot += t.nsecsElapsed() / 1e6;
    }
    t.restart();
    for (int i = 0; i < reps; ++i) (void)v.grab();
    const double grabMs = t.nsecsElapsed() / 1e6 / reps;
    qInfo("slot timeline, 64 requests x 512 steps, %d x %d px, dpr %.1f, %d columns in view:", v.width(), v.height(),
          v.devicePixelRatioF(), v.visibleSteps());
    qInfo("  appendStep while the ring fills: %.3f ms per step (%.1f ms for 512)", appendMs / 512, appendMs);
    qInfo("  appendStep, ring full, following: %.3f ms per step", appendOnly / 200);
    qInfo(
        "  event loop after it (cache shift + 1 column + blit; replot when due): %.3f ms per step, worst step %.2f ms",
        paintOnly / 200, worst);
    qInfo("  cell area drawn anew (zoom, theme): %.3f ms", fullMs);
    qInfo("  plots replot (3 plots x 512 steps, at most every 50 ms): %.3f ms", replot / reps);
    qInfo("  whole view grab: %.3f ms", grabMs);
}

void TestSlotTimeline::metricsView() {
    kvs::ui::MetricsView m;
    m.resize(900, 700);
    m.show();
    QVERIFY(QTest::qWaitForWindowExposed(&m));
    QCOMPARE(m.objectName(), QString("metricsView"));
    QVERIFY(m.statusText().isEmpty());
    for (int i = 0; i < 240; ++i) {
        MetricsPoint p;
        p.tMs = i * 250.0;
        const double ramp = std::min(1.0, i / 40.0);
        p.tokPerS = 38 * ramp + 4 * std::sin(i / 7.0) + (i > 160 ? 10 : 0);
        p.ttftP50Ms = i < 8 ? 0 : 150 + 30 * std::sin(i / 11.0);
        p.ttftP99Ms = i < 8 ? 0 : p.ttftP50Ms * 2.3 + (i > 120 && i < 150 ? 400 : 0);
        p.tpotP50Ms = i < 10 ? 0 : 22 + 2 * std::sin(i / 5.0);
        p.tpotP99Ms = i < 10 ? 0 : 41 + 6 * std::sin(i / 9.0);
        p.weightBytes = 96468992;
        p.kvBytes = qint64(30 + 0.5 * i) << 20;
        p.scratchBytes = 12 << 20;
        m.appendPoint(p);
    }
    MetricsPoint last;
    last.tMs = 240 * 250.0;
    last.tokPerS = 42.06;
    last.ttftP50Ms = 180.2;
    last.ttftP99Ms = 412;
    last.tpotP50Ms = 23.4;
    last.tpotP99Ms = 48;
    last.weightBytes = 96468992;
    last.kvBytes = 150 << 20;
    last.scratchBytes = 12 << 20;
    m.appendPoint(last);
    QCOMPARE(m.statusText(), QString("42.1 tok/s · TTFT p50 180 ms · KV 150 MiB"));
    m.setKvUsage(0.37);
    QCOMPARE(m.statusText(), QString("42.1 tok/s · TTFT p50 180 ms · KV 37%"));
    QCOMPARE(m.pointCount(), 241);
    const QString tip = m.toolTipAtTime(59.99);
    QVERIFY2(tip.contains("t = 60.0 s") && tip.contains("42.1 tok/s") && tip.contains("TTFT p50 180 ms · p99 412 ms"),
             qPrintable(tip));
    auto* plot = m.findChild<QCustomPlot*>("metricsPlots");
    QVERIFY(plot);
    int graphsWithData = 0;
    for (int i = 0; i < plot->graphCount(); ++i) graphsWithData += plot->graph(i)->dataCount() == 241;
    QVERIFY(graphsWithData >= 5);
    // Before a first request finished, TTFT has no value: the series has a gap (NaN).
    QVERIFY(std::isnan(m.ttftGraph()->data()->at(0)->value));
    QTest::qWait(150);  // replots at most every 100 ms
    const QImage img = m.grab().toImage();
    QVERIFY(img.save(out("metrics_view.png")));
    // The memory split bar shows the weights colour at its left end.
    auto* bar = m.findChild<QWidget*>("metricsMemoryBar");
    QVERIFY(bar);
    auto* memBar = qobject_cast<kvs::ui::MemoryBar*>(bar);
    QVERIFY(memBar);
    QCOMPARE(memBar->total(), last.weightBytes + last.kvBytes + last.scratchBytes);
    const QPoint inBar = bar->mapTo(&m, QPoint(memBar->barRect().left() + 4, memBar->barRect().center().y()));
    QVERIFY2(near(img.pixelColor(inBar * img.devicePixelRatio()), kvs::ui::MemoryBar::weightsColor()),
             qPrintable(img.pixelColor(inBar * img.devicePixelRatio()).name()));
    m.setPalette(dark_palette());
    QTest::qWait(150);
    QVERIFY(m.grab().save(out("metrics_view_dark.png")));

    // An hour at one sample per second: appending stays cheap, a replot is a few ms.
    QSignalSpy status(&m, &kvs::ui::MetricsView::statusTextChanged);
    QElapsedTimer t;
    t.start();
    for (int i = 0; i < 3600; ++i) {
        MetricsPoint p = last;
        p.tMs = 70000 + i * 1000.0;
        p.tokPerS = 40 + 5 * std::sin(i / 30.0);
        m.appendPoint(p);
    }
    const double appendMs = t.nsecsElapsed() / 1e6;
    QCOMPARE(m.pointCount(), 3600);  // the oldest samples fell off
    QVERIFY(status.count() > 10);
    t.restart();
    for (int i = 0; i < 10; ++i) plot->replot(QCustomPlot::rpImmediateRefresh);
    qInfo("metrics view, 3600 samples, %d x %d px: appendPoint %.3f ms, replot %.2f ms", m.width(), m.height(),
          appendMs / 3600, t.nsecsElapsed() / 1e7);
}

QTEST_MAIN(TestSlotTimeline)
#include "tst_slot_timeline.moc"
