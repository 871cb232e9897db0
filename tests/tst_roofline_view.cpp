// ctest-labels: ui
// The roofline view: an engine snapshot's op_steps become the view's frame (app/view_convert),
// the view draws one point per timed op at (FLOPs / bytes, FLOPs / ms / 1e6), recomputed
// here from the snapshot's numbers; the roof is the measured bandwidth's slope up to the ridge
// (peak / bandwidth) and the peak after it; tooltips carry the numbers; the lesson facts read
// the same frame. Then a real engine on the tiny model: prefill and decode points appear.
// Screenshot: tests/output/roofline_view.png. With the default model installed, the roofline
// lesson is played in the window until decode has run at batch 64 (tests/output/roofline_lesson.png,
// the picture in docs/screenshots/).
#include <QDockWidget>
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "app/lesson_condition.h"
#include "app/lesson_player.h"
#include "app/main_window.h"
#include "ui/chat_view.h"
#include "ui/kv_block_map.h"
#include "app/view_convert.h"
#include "engine/model/op_costs.h"
#include "tests/support/test_paths.h"
#include "ui/qcp.h"
#include "ui/roofline_view.h"

using namespace kvs;

namespace {
OpStepRecord step(int64_t n, bool prefill, int decodes, int tokens, double scale) {
    OpStepRecord r;
    r.step = n;
    r.prefill = prefill;
    r.decode_tokens = decodes;
    r.n_tokens = tokens;
    r.n_seqs = prefill ? 1 : decodes;
    for (int k = 0; k < n_op_kinds; ++k) {
        r.ops[static_cast<size_t>(k)].flops = 1e6 * (k + 1) * tokens;
        r.ops[static_cast<size_t>(k)].bytes = 2e5 * (k + 1) + 1e3 * tokens * scale;
        r.ops[static_cast<size_t>(k)].ms = 0.05 * (k + 1) + 0.01 * tokens;
    }
    return r;
}

EngineSnapshot snapshot() {
    EngineSnapshot s;
    s.op_steps = {step(0, true, 0, 256, 1.0), step(3, false, 1, 1, 1.0), step(9, false, 8, 8, 1.0),
                  step(20, false, 64, 64, 1.0)};
    s.op_steps[1].ops[static_cast<size_t>(OpKind::lm_head)].ms = 0;  // an untimed op is not drawn
    return s;
}
}  // namespace

class TestRooflineView : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void snapshotBecomesFrameAndPoints() {
        const EngineSnapshot s = snapshot();
        const ui::EngineFrame f = app::to_frame(s, [](RequestId id) { return QString::number(id); });
        QCOMPARE(int(f.roofline.steps.size()), 4);
        QVERIFY(f.roofline.steps[0].prefill);
        QCOMPARE(f.roofline.steps[3].decodeTokens, 64);
        QCOMPARE(int(f.roofline.steps[2].ops.size()), n_op_kinds);
        QCOMPARE(f.roofline.steps[2].ops[2].op, QString("ffn_gate_up"));

        ui::RooflineView v;
        v.resize(800, 560);
        v.show();
        v.setFrame(f.roofline);
        QCOMPARE(int(v.points().size()), 4 * n_op_kinds - 1);
        for (const auto& p : v.points()) {
            // find the snapshot op it came from, recompute its coordinates
            const OpStepRecord* src = nullptr;
            for (const auto& r : s.op_steps)
                if (r.prefill == p.prefill && (r.prefill ? r.n_tokens : r.decode_tokens) == p.batch) src = &r;
            QVERIFY(src);
            int k = 0;
            while (op_kind_name(static_cast<OpKind>(k)) != p.op.toStdString()) ++k;
            const OpCost& c = src->ops[static_cast<size_t>(k)];
            QCOMPARE(p.x, c.flops / c.bytes);
            QCOMPARE(p.y, c.flops / (c.ms * 1e6));
        }
        // no roof yet: nothing but points; then the measured roof
        QVERIFY(v.roofLine().isEmpty());
        ui::MachineRoofInfo roof;
        roof.peakGflops = 120;
        roof.memGbps = 15;
        roof.kernel = "cpu-avx2";
        roof.threads = 2;
        v.setRoof(roof);
        const auto line = v.roofLine();
        QCOMPARE(int(line.size()), 3);
        QCOMPARE(line[1], QPointF(8.0, 120.0));                     // the ridge: 120 / 15 FLOP per byte
        QCOMPARE(line[0].y(), 15 * line[0].x());                    // the slope: GB/s x AI
        QCOMPARE(line[2].y(), 120.0);                               // flat at the peak
        QVERIFY(v.roofText().contains("ridge at <b>8.00 FLOP/byte"));
        QCOMPARE(v.plot()->xAxis->scaleType(), QCPAxis::stLogarithmic);
        QCOMPARE(v.plot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
        // a tooltip says the numbers of its point
        const QString tip = v.pointToolTip(0);
        QVERIFY2(tip.contains("FLOPs") && tip.contains("bytes") && tip.contains("GFLOP/s") && tip.contains("AI"),
                 qPrintable(tip));

        // the lesson's facts read the same frame: FFN gate/up intensity rises with the batch
        const app::LessonFacts x = app::lesson_facts(f, {});
        QCOMPARE(x.value("roof_decode_classes"), qint64(3));
        QCOMPARE(x.value("roof_max_decode_batch"), qint64(64));
        QCOMPARE(x.value("roof_prefill_tokens"), qint64(256));
        QCOMPARE(x.value("ffn_ai_rises"), qint64(1));
        const auto ai = [&](int i) {
            const auto& c = s.op_steps[static_cast<size_t>(i)].ops[static_cast<size_t>(OpKind::ffn_gate_up)];
            return c.flops / c.bytes;
        };
        QCOMPARE(x.value("ffn_ai_growth"), qRound64(ai(3) / ai(1)));
        v.plot()->replot();  // the view queues its replots
        QVERIFY(v.grab().save(QString::fromStdString(test::output_path("roofline_view.png"))));
    }

    void intensityThatFallsIsNotCalledRising() {
        EngineSnapshot s = snapshot();
        auto& up = s.op_steps[3].ops[static_cast<size_t>(OpKind::ffn_gate_up)];
        up.bytes = up.flops * 10;  // batch 64 made less intense than batch 8
        const ui::EngineFrame f = app::to_frame(s, [](RequestId id) { return QString::number(id); });
        QCOMPARE(app::lesson_facts(f, {}).value("ffn_ai_rises"), qint64(0));
        QCOMPARE(app::lesson_facts(ui::EngineFrame{}, {}).value("roof_decode_classes"), qint64(0));
    }

    void lessonOnTheDefaultModel() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("the default model is not installed");
        QTemporaryDir dir;
        QStandardPaths::setTestModeEnabled(true);  // the window's settings go to the test folders
        app::MainWindow w(QString::fromStdString(model), nullptr, dir.filePath("chats.json"));
        w.resize(1500, 950);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 60000);
        QString err;
        QVERIFY2(w.playLesson("06_roofline.json", &err), qPrintable(err));
        auto* step = w.findChild<QPushButton*>("stepButton");
        auto* view = w.findChild<ui::RooflineView*>();
        QVERIFY(view);
        QTRY_VERIFY_WITH_TIMEOUT(w.findChild<QPushButton*>("pauseButton")->isChecked(), 10000);
        QTRY_VERIFY_WITH_TIMEOUT(view->roof().valid(), 60000);  // cached, or measured when shown
        auto* map = w.findChild<ui::KvBlockMapView*>();
        QVERIFY(map);
        bool b64 = false;
        for (int i = 0; i < 80 && !b64; ++i) {
            const qint64 before = map->frame().requests.isEmpty() ? -1 : map->frame().step.step;
            QTest::mouseClick(step, Qt::LeftButton);
            (void)QTest::qWaitFor([&] { return !map->frame().requests.isEmpty() && map->frame().step.step > before; }, 10000);
            QTest::qWait(60);
            for (const auto& st : view->frame().steps) b64 |= !st.prefill && st.decodeTokens >= 64;
        }
        QVERIFY(b64);
        QTest::qWait(1500);  // the caption's reading pause
        // the plot gets most of the right column: the picture is the roofline
        if (auto* dock = w.findChild<QDockWidget*>("rooflineDock"); dock && !dock->isFloating())
            w.resizeDocks({dock}, {w.height() * 3 / 5}, Qt::Vertical);
        QTest::qWait(300);
        view->plot()->replot();
        QVERIFY(w.grab().save(QString::fromStdString(test::output_path("roofline_lesson.png"))));
        QVERIFY(view->grab().save(QString::fromStdString(test::output_path("roofline_lesson_view.png"))));
    }
};

QTEST_MAIN(TestRooflineView)
#include "tst_roofline_view.moc"
