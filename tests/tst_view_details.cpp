// ctest-labels: ui
// The smaller things of issue 16 (item 11), each on the real widget or window: slot
// timeline rows named by chat title and request id; speculative k shown as the setting,
// with the mean drafts per pass apart; the Quantization compare view empty as soon as a new
// run is asked for, and teacher-forced picks set off from each other; the memory planner
// sized to this machine's RAM; the utilization plot's axis labels apart; a minimum window
// size; export errors as one dialog worded one way.
#include <QAbstractButton>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include "app/chat_store.h"
#include "app/main_window.h"
#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"
#include "ui/draft_acceptance_view.h"
#include "ui/memory_planner.h"
#include "ui/qcp.h"
#include "ui/quant_compare_view.h"
#include "ui/slot_timeline.h"

using namespace kvs::ui;

namespace {
QuantTokenEvent tokenEvent(int i, const QString& ref, const QString& var, int refId, int varId, bool forced,
                           bool diverged) {
    QuantTokenEvent e;
    e.index = i;
    e.refPiece = ref;
    e.variantPiece = var;
    e.refToken = refId;
    e.variantToken = varId;
    e.teacherForced = forced;
    e.diverged = diverged;
    e.top1Agree = refId == varId;
    return e;
}

QuantSideInfo side(const QString& label) {
    QuantSideInfo s;
    s.label = label;
    s.weightBytes = 1000;
    s.bitsPerWeight = 4.5;
    return s;
}
}  // namespace

class TestViewDetails : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;
    QString m_default;  // the installed default model, if any

private Q_SLOTS:
    void initTestCase() {
        m_default = QString::fromStdString(kvs::test::default_model_path());  // before XDG_DATA_HOME moves
        QVERIFY(m_dir.isValid());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        m_model = m_dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(m_model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
    }

    // k = 3 set, 2.9 drafts per pass on average (a lookup found fewer once): both are shown,
    // each for what it is.
    void speculativeKIsTheSetting() {
        DraftAcceptanceView v;
        SpecFrame f;
        SpecRequestFrame r;
        r.id = 1;
        r.label = "chat #1";
        r.proposer = "layer-skip:1";
        r.k = 3;
        r.verifySteps = 10;
        r.sumK = 29;
        r.drafted = 29;
        r.evaluated = 20;
        r.accepted = 15;
        r.emitted = 25;
        r.posEvaluated = {10, 6, 4};
        r.posAccepted = {8, 4, 3};
        r.acceptedLenHist = {2, 4, 1, 3};
        f.requests << r;
        v.setFrame(f);
        const QString mean = v.figure("meanAccepted");
        QVERIFY2(mean.contains("k = 3 ") && mean.contains("2.9 drafted per pass") && !mean.contains("k = 2.9"),
                 qPrintable(mean));
        f.requests[0].adaptive = true;
        v.setFrame(f);
        QVERIFY2(v.figure("meanAccepted").contains("k = 3 (adaptive)"), qPrintable(v.figure("meanAccepted")));
    }

    // After the first divergence each teacher-forced pick continues the reference's text:
    // " scattered" then "lected" must not read as one word.
    void teacherForcedPicksStayApart() {
        QuantCompareView v;
        v.resize(900, 600);
        v.begin(side("reference"), side("variant"));
        v.appendEvent(tokenEvent(0, "Light", "Light", 10, 10, false, false));
        v.appendEvent(tokenEvent(1, " is", " gets", 11, 12, false, true));       // first divergence
        v.appendEvent(tokenEvent(2, " col", " scattered", 13, 14, true, true));  // forced: fed " is"
        v.appendEvent(tokenEvent(3, "lected", "lected", 15, 15, true, true));    // forced: fed " col"
        const QString var = v.findChild<QTextBrowser*>("quantVariantText")->toPlainText();
        QVERIFY2(!var.contains("scatteredlected"), qPrintable(var));
        QVERIFY2(var.contains("scattered") && var.contains("lected"), qPrintable(var));
        QCOMPARE(v.findChild<QTextBrowser*>("quantRefText")->toPlainText(), QString("Light is collected"));
    }

    void windowDetails() {
        kvs::app::MainWindow w(m_model, nullptr, m_dir.filePath("chats.json"));
        w.resize(1400, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);

        // A minimum size: the window cannot be squeezed to nothing.
        QVERIFY2(w.minimumWidth() >= 800 && w.minimumHeight() >= 560,
                 qPrintable(QString("%1 x %2").arg(w.minimumWidth()).arg(w.minimumHeight())));

        // The memory planner starts from this machine's RAM, as the model manager does.
        const qint64 ram = kvs::Session::machine_ram_bytes();
        QVERIFY(ram > 0);
        const qint64 planned = w.findChild<MemoryPlannerView*>()->inputs().availableBytes;
        QVERIFY2(qAbs(planned - ram) <= ram / 1000,  // the planner holds GiB with 2 decimals
                 qPrintable(QString("%1 vs %2 bytes").arg(planned).arg(ram)));

        // A chat's request is named by the chat's title and its request id in every view.
        w.findChild<QDoubleSpinBox*>("temperature")->setValue(0);
        auto* prompt = w.chatView()->findChild<QPlainTextEdit*>("chatPrompt");
        prompt->setPlainText("What is a KV cache block?");
        QTest::mouseClick(w.chatView()->findChild<QPushButton*>("sendButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!w.lastFrame().requests.isEmpty(), 20000);
        const RequestRow& r = w.lastFrame().requests.back();
        const QString title = w.store().conversations()[0].title;
        QCOMPARE(r.label, QString("%1 #%2").arg(title.left(24)).arg(r.id));

        // Export errors: one dialog, the same words for a view and for the trace.
        const QString bad = m_dir.filePath("no-such-dir/out");
        QVERIFY(!w.exportTraceTo(bad + ".json"));
        auto* box = w.findChild<QMessageBox*>("exportError");
        QVERIFY(box && box->isVisible());
        QVERIFY2(box->text().startsWith("Could not export the trace to ") && box->text().contains(".json: "),
                 qPrintable(box->text()));
        box->close();
        QTRY_VERIFY(!w.findChild<QMessageBox*>("exportError"));
        QVERIFY(!w.exportViewTo(w.findChild<SlotTimelineView*>(), bad + ".png"));
        box = w.findChild<QMessageBox*>("exportError");
        QVERIFY(box && box->isVisible());
        QVERIFY2(box->text().startsWith("Could not export the view to ") && box->text().contains(".png: "),
                 qPrintable(box->text()));
        box->close();

        // Compare: the previous result leaves the screen as soon as a new run is asked for.
        auto* quant = w.quantView();
        quant->begin(side("reference"), side("variant"));
        quant->appendEvent(tokenEvent(0, "Old", "Old", 10, 10, false, false));
        quant->finish("done");
        QVERIFY(!quant->findChild<QTextBrowser*>("quantRefText")->toPlainText().isEmpty());
        quant->findChild<QPlainTextEdit*>("quantPrompt")->setPlainText("Hi");
        QTest::mouseClick(quant->findChild<QPushButton*>("quantCompareButton"), Qt::LeftButton);
        QVERIFY(quant->findChild<QTextBrowser*>("quantRefText")->toPlainText().isEmpty());
        QVERIFY(quant->findChild<QTextBrowser*>("quantVariantText")->toPlainText().isEmpty());
        QCOMPARE(quant->events().size(), 0);
    }

    // A chat in Korean (the course is written in Korean), on the default model when it is
    // installed: the window with the chat is saved for a look (korean_chat.png).
    void koreanChat() {
        const QString model = m_default.isEmpty() ? m_model : m_default;
        kvs::app::MainWindow w(model, nullptr, m_dir.filePath("korean.json"));
        w.resize(1600, 1000);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 60000);
        w.findChild<QDoubleSpinBox*>("temperature")->setValue(0);
        for (auto* sb : w.findChildren<QSpinBox*>())
            if (sb->minimum() == 1 && sb->maximum() == 4096 && sb->value() == 512) sb->setValue(96);  // max tokens
        const QString text =
            QString::fromUtf8("안녕하세요! PagedAttention이 KV 캐시를 블록으로 나누는 이유를 설명해 주세요.");
        w.chatView()->findChild<QPlainTextEdit*>("chatPrompt")->setPlainText(text);
        QTest::mouseClick(w.chatView()->findChild<QPushButton*>("sendButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(w.store().conversations().size() == 1 &&
                                     w.store().conversations()[0].turns.size() == 2 &&
                                     w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(),
                                 180000);
        auto* transcript = w.chatView()->findChild<QTextBrowser*>("chatTranscript");
        QVERIFY(transcript && transcript->toPlainText().contains(text));
        QVERIFY(QFontMetrics(transcript->font()).inFont(QChar(0xD55C)));  // 한
        QTest::qWait(600);  // the request table and the map's texts follow at most 5 times a second
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("korean_chat.png"))));
    }

    // The utilization plot's y tick labels do not run into the plot below it.
    void utilizationLabelsApart_data() {
        QTest::addColumn<QSize>("size");
        QTest::newRow("dock in the window") << QSize(620, 470);
        QTest::newRow("wide") << QSize(900, 420);
        QTest::newRow("tall") << QSize(700, 900);
    }
    void utilizationLabelsApart() {
        QFETCH(QSize, size);
        SlotTimelineView v;
        v.resize(size);
        v.show();
        for (int s = 0; s < 40; ++s) {
            StepPoint p;
            p.step = s;
            p.durationMs = 10;
            p.decodeTokens = 3;
            p.nSeqs = 3;
            p.maxSeqs = 4;
            p.tokenBudget = 512;
            RequestRow row;
            row.id = 1;
            row.slot = SlotState::Decode;
            v.appendStep(p, {row});
        }
        QTest::qWait(100);
        auto* plot = v.findChild<QCustomPlot*>("slotTimelinePlots");
        QVERIFY(plot);
        plot->replot();
        const QFontMetrics fm(plot->axisRect(0)->axis(QCPAxis::atLeft)->tickLabelFont());
        // Within a row, neighbouring labels (each centred on its tick) must not overlap.
        for (int i = 0; i < 3; ++i) {
            QCPAxis* a = plot->axisRect(i)->axis(QCPAxis::atLeft);
            QVector<double> ys;
            for (double t : a->tickVector())
                if (a->range().contains(t)) ys << a->coordToPixel(t);
            std::sort(ys.begin(), ys.end());
            for (int j = 1; j < ys.size(); ++j)
                QVERIFY2(ys[j] - ys[j - 1] >= fm.height(),
                         qPrintable(QString("row %1: labels %2 px apart, text %3 px (row %4 px high)")
                                        .arg(i)
                                        .arg(ys[j] - ys[j - 1])
                                        .arg(fm.height())
                                        .arg(plot->axisRect(i)->height())));
        }
        QVERIFY(plot->axisRect(0)->axis(QCPAxis::atLeft)->tickVector().contains(100));  // 100 % is labelled
        // The lowest label of a row and the highest of the row under it must not overlap.
        for (int i = 0; i + 1 < 3; ++i) {
            QCPAxis* up = plot->axisRect(i)->axis(QCPAxis::atLeft);
            QCPAxis* down = plot->axisRect(i + 1)->axis(QCPAxis::atLeft);
            const QVector<double> upTicks = up->tickVector(), downTicks = down->tickVector();
            QVERIFY(!upTicks.isEmpty() && !downTicks.isEmpty());
            double lowest = -1e9, highest = 1e9;
            for (double t : upTicks)
                if (up->range().contains(t)) lowest = std::max(lowest, up->coordToPixel(t));
            for (double t : downTicks)
                if (down->range().contains(t)) highest = std::min(highest, down->coordToPixel(t));
            QVERIFY2(highest - lowest >= fm.height(),
                     qPrintable(QString("row %1's lowest label at y %2, row %3's highest at y %4 (text %5 px)")
                                    .arg(i)
                                    .arg(lowest)
                                    .arg(i + 1)
                                    .arg(highest)
                                    .arg(fm.height())));
        }
    }
};

QTEST_MAIN(TestViewDetails)
#include "tst_view_details.moc"
