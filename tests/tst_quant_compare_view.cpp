// ctest-labels: ui
// The Quantization compare view from a recorded sequence of events built here (plain ui
// types, no engine): the first divergence found and highlighted in both columns, the
// teacher-forced picks marked after it, the KL plot's data equal to the events, the running
// top-1 agreement and the figures (memory, bits per weight, decode speed) computed by hand,
// the controls' signals, and the scheme list the worker offers. Saves a screenshot under
// the build tree (tests/output/).
#include <QComboBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTextBlock>
#include <QTextDocument>
#include <QtTest>
#include <cmath>
#include <vector>

#include "app/quant_compare_worker.h"
#include "tests/support/test_paths.h"
#include "tests/support/widget_probe.h"
#include "ui/qcp.h"
#include "ui/quant_compare_view.h"

using kvs::ui::QuantCompareView;
using kvs::ui::QuantSideInfo;
using kvs::ui::QuantTokenEvent;

namespace {

using kvs::test::format_of;

struct Row {
    const char* ref;
    const char* var;
    int refId, varId;
    double kl;
    bool agree;
};

// Six positions; the picks first differ at position 3; teacher-forced from then on, the
// variant picks the reference's token at 4 and another one at 5.
const Row kRows[] = {
    {"The", "The", 10, 10, 0.002, true},           {" sky", " sky", 11, 11, 0.010, true},
    {" looks", " looks", 12, 12, 0.030, true},     {" blue", " azure", 13, 14, 0.400, false},
    {" because", " because", 15, 15, 0.050, true}, {" light", " air", 16, 17, 0.250, false},
};
constexpr int kN = 6;

std::vector<QuantTokenEvent> recordedEvents() {
    std::vector<QuantTokenEvent> out;
    bool diverged = false;
    for (int i = 0; i < kN; ++i) {
        const Row& r = kRows[i];
        QuantTokenEvent e;
        e.index = i;
        e.refToken = r.refId;
        e.variantToken = r.varId;
        e.refPiece = r.ref;
        e.variantPiece = r.var;
        e.kl = r.kl;
        e.top1Agree = r.agree;
        e.teacherForced = diverged;  // the context holds reference tokens from the position after
        diverged = diverged || r.refId != r.varId;
        e.diverged = diverged;
        e.refMs = i == 0 ? 500 : 10;  // the prompt's pass, then 10 ms a token
        e.variantMs = i == 0 ? 300 : 4;
        out.push_back(e);
    }
    return out;
}

QuantSideInfo info(const QString& label, qint64 bytes, double bits) {
    QuantSideInfo s;
    s.label = label;
    s.weightBytes = bytes;
    s.bitsPerWeight = bits;
    return s;
}

}  // namespace

class TestQuantCompareView : public QObject {
    Q_OBJECT

    static void feed(QuantCompareView& v) {
        v.setReady(true);
        v.begin(info("reference (Q4_1 dequantized to F32)", 540LL << 20, 32.0), info("Q4_0 (RTN)", 90LL << 20, 4.5));
        for (const auto& e : recordedEvents()) v.appendEvent(e);
        v.finish("Done (max tokens)");
    }

private Q_SLOTS:
    void divergenceIsFoundAndHighlighted() {
        QuantCompareView v;
        v.resize(1000, 800);
        feed(v);
        QCOMPARE(v.firstDivergence(), 3);
        QVERIFY2(v.figure("divergence").contains("first divergence at token 3"), qPrintable(v.figure("divergence")));
        const QColor div = QuantCompareView::divergenceColor(v.palette());
        QCOMPARE(format_of(v.referenceDocument(), " blue").background().color(), div);
        QCOMPARE(format_of(v.variantDocument(), " azure").background().color(), div);
        // Before it: no tint; the columns hold the pieces in order.
        QCOMPARE(format_of(v.referenceDocument(), " looks").background().style(), Qt::NoBrush);
        QCOMPARE(format_of(v.variantDocument(), " looks").background().style(), Qt::NoBrush);
        QCOMPARE(v.referenceDocument()->toPlainText(), QString("The sky looks blue because light"));
        // After the divergence each teacher-forced pick is set off by a boundary mark: it
        // continues the reference's text, not the variant's previous pick.
        QCOMPARE(v.variantDocument()->toPlainText(), QString("The sky looks azure\u2502 because\u2502 air"));
    }

    void teacherForcedPicksAreMarked() {
        QuantCompareView v;
        feed(v);
        // After the divergence the variant's picks are italic; the one that is not the
        // reference's token is tinted; the reference column stays plain.
        const QTextCharFormat same = format_of(v.variantDocument(), " because");
        QVERIFY(same.fontItalic());
        QCOMPARE(same.background().style(), Qt::NoBrush);
        const QTextCharFormat other = format_of(v.variantDocument(), " air");
        QVERIFY(other.fontItalic());
        QCOMPARE(other.background().color(), QuantCompareView::disagreeColor(v.palette()));
        QVERIFY(!format_of(v.referenceDocument(), " light").fontItalic());
        QVERIFY(!format_of(v.variantDocument(), " sky").fontItalic());
        QVERIFY(!v.findChild<QLabel*>("teacherForcedCaption")->text().isEmpty());
    }

    void plotDataEqualsEvents() {
        QuantCompareView v;
        feed(v);
        auto* kl = v.klGraph()->data().data();
        QCOMPARE(kl->size(), kN);
        for (int i = 0; i < kN; ++i) {
            QCOMPARE(kl->at(i)->key, double(i));
            QCOMPARE(kl->at(i)->value, kRows[i].kl);
        }
        // Running top-1 agreement, by hand: 1/1, 2/2, 3/3, 3/4, 4/5, 4/6.
        const double expected[kN] = {100, 100, 100, 75, 80, 400.0 / 6};
        auto* top1 = v.top1Graph()->data().data();
        QCOMPARE(top1->size(), kN);
        for (int i = 0; i < kN; ++i)
            QVERIFY2(std::abs(top1->at(i)->value - expected[i]) < 1e-9, qPrintable(QString::number(i)));
        QVERIFY(std::abs(v.top1Percent() - 400.0 / 6) < 1e-9);
        QVERIFY2(v.figure("top1").contains("66.7% (4/6)"), qPrintable(v.figure("top1")));
        // Mean KL 0.742 / 6 = 0.123667, max 0.4.
        QVERIFY2(v.figure("kl").contains("0.124") && v.figure("kl").contains("0.4"), qPrintable(v.figure("kl")));
        QVERIFY(v.klGraph()->valueAxis()->range().upper >= 0.4);
    }

    void figuresAndLabels() {
        QuantCompareView v;
        feed(v);
        QCOMPARE(v.figure("refLabel"), QString("reference (Q4_1 dequantized to F32)"));
        QCOMPARE(v.figure("variantLabel"), QString("Q4_0 (RTN)"));
        QCOMPARE(v.figure("refWeights"), QString("540.0 MiB"));
        QCOMPARE(v.figure("variantWeights"), QString("90.0 MiB"));
        QCOMPARE(v.figure("refBits"), QString("32.00"));
        QCOMPARE(v.figure("variantBits"), QString("4.50"));
        // Decode speed from the single-token passes only: 5 tokens in 50 ms and in 20 ms.
        QCOMPARE(v.figure("refSpeed"), QString("100.0"));
        QCOMPARE(v.figure("variantSpeed"), QString("250.0"));
        QCOMPARE(v.figure("status"), QString("Done (max tokens)"));
        QVERIFY(v.grab().save(QString::fromStdString(kvs::test::output_path("quant_compare_view.png"))));
    }

    void beginClearsTheLastRun() {
        QuantCompareView v;
        feed(v);
        v.begin(info("ref", 1, 32), info("INT8", 1, 8));
        QCOMPARE(v.firstDivergence(), -1);
        QVERIFY(v.events().isEmpty());
        QVERIFY(v.referenceDocument()->isEmpty() && v.variantDocument()->isEmpty());
        QCOMPARE(v.klGraph()->data()->size(), 0);
        QuantTokenEvent e;
        e.refPiece = e.variantPiece = "x";
        e.top1Agree = true;
        v.appendEvent(e);
        QVERIFY2(v.figure("divergence").contains("no divergence"), qPrintable(v.figure("divergence")));
    }

    void controlsSignalTheRequest() {
        QuantCompareView v;
        v.setSchemes({"q8_0", "q4_0", "int8"}, "int8");
        auto* compare = v.findChild<QPushButton*>("quantCompareButton");
        auto* stop = v.findChild<QPushButton*>("quantStopButton");
        QVERIFY(!compare->isEnabled());  // no model yet
        v.setReady(true);
        QVERIFY(compare->isEnabled() && !stop->isEnabled());
        QSignalSpy asked(&v, &QuantCompareView::compareRequested);
        QSignalSpy stopped(&v, &QuantCompareView::stopRequested);
        v.setPrompt("  ");
        QTest::mouseClick(compare, Qt::LeftButton);
        QCOMPARE(asked.count(), 0);  // an empty prompt asks for nothing
        v.setPrompt("Why is the sky blue?");
        QTest::mouseClick(compare, Qt::LeftButton);
        QCOMPARE(asked.count(), 1);
        const auto req = asked[0][0].value<kvs::ui::QuantCompareRequest>();
        QCOMPARE(req.scheme, QString("int8"));
        QCOMPARE(req.prompt, QString("Why is the sky blue?"));
        QCOMPARE(req.temperature, 0.0);
        v.setBusy("Quantizing…");
        QVERIFY(!compare->isEnabled() && stop->isEnabled());
        QTest::mouseClick(stop, Qt::LeftButton);
        QCOMPARE(stopped.count(), 1);
        QVERIFY(compare->isEnabled());
        v.setBusy("Quantizing…");
        v.showError("rows of 576 are not a multiple of 128");
        QVERIFY(v.figure("status").contains("not a multiple of 128"));
        QVERIFY(compare->isEnabled() && !stop->isEnabled());
    }

    void schemeChoicesHaveNoAliases() {
        QStringList s = kvs::app::QuantCompareWorker::schemeChoices();
        for (const char* want : {"q8_0", "q4_0", "int8", "int4-rtn", "int4-sym", "int4-awq"})
            QVERIFY2(s.contains(want), want);
        for (const char* not_there : {"ref", "rtn4", "sym4", "awq4"}) QVERIFY2(!s.contains(not_there), not_there);
        QCOMPARE(s.removeDuplicates(), 0);
    }
};

QTEST_MAIN(TestQuantCompareView)
#include "tst_quant_compare_view.moc"
