// ctest-labels: ui
// TGI's green-list watermark, drawn so it can be taught: a watermarked reply's pieces sit on
// their list's colour in the chat transcript (and a plain reply keeps its Markdown, no
// colour), the slot timeline's decode cells of a watermarked request carry a green / red strip
// for the tokens each step added (and the legend names them), and in the real window, on a
// tiny generated model, the Sampling dock's Watermark box turns it on for the chat: the reply's
// green count in its footer, the request's count in the engine's snapshot (RequestView::n_green
// through app/view_convert) and the timeline's strips all agree. Checked on the widgets' data
// and on grabbed pixels; screenshots go to tests/output/ (watermark_window.png: on the
// installed default model when there is one, else on the tiny model).
#include <QCheckBox>
#include <QDockWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextDocument>
#include <QtTest>

#include "app/engine_bridge.h"
#include "app/main_window.h"
#include "app/view_convert.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "tests/support/widget_probe.h"
#include "ui/chat_transcript.h"
#include "ui/chat_view.h"
#include "ui/slot_timeline.h"

using kvs::ui::RequestRow;
using kvs::ui::SlotState;
using kvs::ui::SlotTimelineView;
using kvs::ui::StepPoint;

namespace {

QString out(const char* name) { return QString::fromStdString(kvs::test::output_path(name)); }

// The colour a translucent background shows over the view's base colour.
QColor over(const QColor& top, const QColor& base) {
    const double a = top.alphaF();
    return QColor::fromRgbF(top.redF() * a + base.redF() * (1 - a), top.greenF() * a + base.greenF() * (1 - a),
                            top.blueF() * a + base.blueF() * (1 - a));
}

int countNear(const QImage& img, const QColor& c, int tol) {
    int n = 0;
    for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) n += kvs::test::colors_near(img.pixelColor(x, y), c, tol);
    return n;
}

// Each text fragment of the document with its watermark list (the UserProperty the transcript
// sets: 1 green, 0 red; -2 when the fragment has none).
QList<std::pair<QString, int>> fragments(QTextDocument* doc) {
    QList<std::pair<QString, int>> out;
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it) {
            const QTextFragment f = it.fragment();
            const QVariant v = f.charFormat().property(QTextFormat::UserProperty);
            out.append({f.text(), v.isValid() ? v.toInt() : -2});
        }
    return out;
}

StepPoint step(qint64 n) {
    StepPoint p;
    p.step = n;
    p.durationMs = 10;
    p.decodeTokens = 2;
    p.nSeqs = 2;
    p.maxSeqs = 4;
    p.tokenBudget = 64;
    return p;
}

RequestRow row(qint64 id, int output, int green, SlotState slot) {
    RequestRow r;
    r.id = id;
    r.label = id == 1 ? "watermarked" : "plain";
    r.status = slot == SlotState::Finished ? "finished" : "running";
    r.slot = slot;
    r.promptTokens = 4;
    r.outputTokens = output;
    r.maxTokens = 32;
    r.computedTokens = 4 + output;
    r.scheduledTokens = slot == SlotState::Decode ? 1 : 0;
    r.greenTokens = green;
    return r;
}

}  // namespace

class TestWatermarkViews : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_tiny, m_default;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_default = QString::fromStdString(kvs::test::default_model_path());  // before XDG_DATA_HOME moves
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        m_tiny = m_dir.filePath("tiny.gguf");
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 2;
        spec.n_embd = 64;
        spec.weight_type = kvs::DType::Q8_0;
        const auto st = kvs::test::write_tiny_gguf(m_tiny.toStdString(), spec);
        QVERIFY2(st.is_ok(), st.message().c_str());
    }

    // Pieces with their lists: each on its colour, as plain text (no Markdown: "**" stays),
    // still so after the reply ends; a plain reply afterwards is Markdown without colours.
    void transcriptColoursEachPiece() {
        kvs::ui::ChatView v;
        v.resize(700, 400);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        auto* browser = v.findChild<QTextBrowser*>("chatTranscript");
        QVERIFY(browser);
        v.appendUserMessage("Tell me about cats.");
        v.beginAssistantMessage();
        const QList<std::pair<QString, int>> pieces = {{"Cats", 1},          {" are", 0}, {" **small**", 1},
                                                       {" hunters", 1},      {".", 0},    {"\nThey sleep", 1},
                                                       {" sixteen hours", 0}};
        for (const auto& [text, green] : pieces) v.appendAssistantText(text, green);
        v.endAssistantMessage("7 tokens · watermark: 4 of 7 tokens green, z = 0.4");
        QString greenText, redText;
        for (const auto& [text, list] : fragments(browser->document())) {
            if (list == 1) greenText += text;
            if (list == 0) redText += text;
        }
        QCOMPARE(greenText, QString("Cats **small** huntersThey sleep"));  // a new line starts a block
        QCOMPARE(redText, QString(" are. sixteen hours"));
        QVERIFY(browser->toPlainText().contains("**small**"));  // plain text: the markup is not rendered
        const QColor base = browser->palette().color(QPalette::Base);
        const QColor greenBg = over(kvs::ui::ChatTranscript::watermarkColor(true), base);
        const QColor redBg = over(kvs::ui::ChatTranscript::watermarkColor(false), base);
        const QImage img = browser->viewport()->grab().toImage();
        const int nGreen = countNear(img, greenBg, 6), nRed = countNear(img, redBg, 6);
        QVERIFY(img.save(out("watermark_transcript.png")));
        QVERIFY2(nGreen > 300 && nRed > 200, qPrintable(QString("green %1 px, red %2 px").arg(nGreen).arg(nRed)));

        v.beginAssistantMessage();  // a plain reply: Markdown, no list colours
        v.appendAssistantText("A **bold** plain reply.");
        v.endAssistantMessage({});
        QVERIFY(kvs::test::format_of(browser->document(), "bold").fontWeight() >= QFont::Bold);
        QCOMPARE(kvs::test::format_of(browser->document(), "plain reply").property(QTextFormat::UserProperty),
                 QVariant());
        const QImage after = browser->viewport()->grab().toImage();
        QCOMPARE(countNear(after, greenBg, 6), nGreen);  // nothing new in green
    }

    // A watermarked request's decode cells get a strip split green / red by the step's new
    // tokens; a plain request's cells none; the legend names the strip; the tooltip counts.
    void timelineStripsFollowTheGreenCount() {
        SlotTimelineView v;
        v.resize(900, 300);
        v.setCellWidth(12);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        const int legendBefore = v.findChild<QWidget*>("slotTimelineLegend")->sizeHint().width();
        v.appendStep(step(0), {row(1, 0, 0, SlotState::Prefill), row(2, 0, -1, SlotState::Prefill)});
        // Output grows by one token a step; green on steps 1, 2, 4, 5, 7 (not 3 and 6).
        const std::vector<bool> greenAt = {false, true, true, false, true, true, false, true};
        int green = 0;
        for (int s = 1; s < int(greenAt.size()); ++s) {
            green += greenAt[size_t(s)];
            v.appendStep(step(s), {row(1, s, green, SlotState::Decode), row(2, s, -1, SlotState::Decode)});
        }
        const auto& m = v.model();
        QVERIFY(m.hasWatermark());
        QVERIFY(v.findChild<QWidget*>("slotTimelineLegend")->sizeHint().width() > legendBefore);
        const int r1 = v.rowOf(1), r2 = v.rowOf(2);
        const QImage img = v.grab().toImage();
        const QColor decode = SlotTimelineView::stateColor(SlotState::Decode, v.palette());
        for (int s = 1; s < int(greenAt.size()); ++s) {
            const auto* c1 = m.cellAt(s, r1, kvs::ui::TimelineRowMode::Requests);
            const auto* c2 = m.cellAt(s, r2, kvs::ui::TimelineRowMode::Requests);
            QVERIFY(c1 && c2);
            QCOMPARE(int(c1->sampled), 1);
            QCOMPARE(int(c1->green), greenAt[size_t(s)] ? 1 : 0);
            QCOMPARE(int(c2->green), -1);
            const QRect cell1 = v.cellRect(s, r1), cell2 = v.cellRect(s, r2);
            QVERIFY(!cell1.isEmpty() && !cell2.isEmpty());
            const QPoint strip(cell1.center().x(), cell1.bottom() - 2), top(cell1.center().x(), cell1.top() + 1);
            const QColor want = SlotTimelineView::watermarkColor(greenAt[size_t(s)]);
            QVERIFY2(kvs::test::colors_near(img.pixelColor(strip), want, 6),
                     qPrintable(QString("step %1: %2 at the strip, want %3")
                                    .arg(s)
                                    .arg(img.pixelColor(strip).name(), want.name())));
            QVERIFY(kvs::test::colors_near(img.pixelColor(top), decode, 6));
            QVERIFY(kvs::test::colors_near(img.pixelColor(cell2.center().x(), cell2.bottom() - 2), decode, 6));
        }
        QVERIFY(v.grab().save(out("watermark_timeline.png")));
        const QRect c3 = v.cellRect(3, r1), c4 = v.cellRect(4, r1);
        QVERIFY2(v.toolTipAt(c3.center()).contains("This step: 0 of 1 new tokens green"),
                 qPrintable(v.toolTipAt(c3.center())));
        QVERIFY(v.toolTipAt(c4.center()).contains("This step: 1 of 1 new tokens green"));
        QVERIFY(v.toolTipAt(c4.center()).contains(QString("Watermarked: %1 of 7 output tokens green").arg(green)));
        // Two tokens in one step (speculative decoding), one green: half the strip each.
        v.appendStep(step(8), {row(1, 9, green + 1, SlotState::Decode), row(2, 8, -1, SlotState::Decode)});
        const auto* c8 = m.cellAt(8, r1, kvs::ui::TimelineRowMode::Requests);
        QVERIFY(c8 && c8->sampled == 2 && c8->green == 1);
        const QImage img8 = v.grab().toImage();
        const QRect cell8 = v.cellRect(8, r1);
        QVERIFY(kvs::test::colors_near(img8.pixelColor(cell8.left() + 1, cell8.bottom() - 2),
                                       SlotTimelineView::watermarkColor(true), 6));
        QVERIFY(kvs::test::colors_near(img8.pixelColor(cell8.right() - 2, cell8.bottom() - 2),
                                       SlotTimelineView::watermarkColor(false), 6));
    }

    // The engine's count reaches the views' rows: RequestView::n_green -> RequestRow::greenTokens.
    void viewConvertCarriesTheCount() {
        kvs::EngineSnapshot s;
        kvs::RequestView a, b;
        a.id = 1, a.n_output = 10, a.n_green = 8;
        b.id = 2, b.n_output = 10;  // not watermarked: -1
        kvs::RequestView c = a;
        c.id = 3, c.n_green = 99;  // a remote snapshot's nonsense: never more than the output
        s.requests = {a, b, c};
        const auto rows = kvs::app::to_request_rows(s);
        QCOMPARE(rows[0].greenTokens, 8);
        QCOMPARE(rows[1].greenTokens, -1);
        QCOMPARE(rows[2].greenTokens, 10);
    }

    // The real window: the Sampling dock's box turns the watermark on for the chat; the reply's
    // pieces are coloured, its footer counts the green tokens, the engine's snapshot has the
    // same count and the slot timeline's strips add up to it.
    void windowChatWatermarked() {
        const bool pretty = !m_default.isEmpty();  // the screenshot reads better on a real model
        kvs::app::MainWindow w(pretty ? m_default : m_tiny, nullptr, m_dir.filePath("chats.json"));
        w.resize(1400, 900);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* send = w.chatView()->findChild<QPushButton*>("sendButton");
        auto* prompt = w.chatView()->findChild<QPlainTextEdit*>("chatPrompt");
        auto* box = w.findChild<QCheckBox*>("watermark");
        QVERIFY(send && prompt && box);
        QTRY_VERIFY_WITH_TIMEOUT(send->isEnabled(), 60000);
        QVERIFY(!box->isChecked());
        box->setChecked(true);
        QSignalSpy done(w.bridge(), &kvs::app::EngineBridge::requestFinished);
        prompt->setPlainText("Write two sentences about the sea.");
        QTest::mouseClick(send, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(done.size(), 1, 120000);
        const QString summary = done.first().at(1).toString();
        const QRegularExpression re("watermark: (\\d+) of (\\d+) tokens green, z = (-?[0-9.]+)");
        const auto m = re.match(summary);
        QVERIFY2(m.hasMatch(), qPrintable(summary));
        const int nGreen = m.captured(1).toInt(), nScored = m.captured(2).toInt();
        QVERIFY(nScored >= 4);
        QVERIFY2(nGreen >= 0 && nGreen <= nScored,
                 qPrintable(summary));  // the z statistics: tst_watermark, tgi_client_check

        auto* browser = w.chatView()->findChild<QTextBrowser*>("chatTranscript");
        // The spy hears the bridge at once; the chat gets its queued pieces and footer after.
        QTRY_VERIFY_WITH_TIMEOUT(browser->toPlainText().contains(m.captured(0)), 10000);
        int gFrag = 0, rFrag = 0;
        for (const auto& [text, list] : fragments(browser->document())) gFrag += list == 1, rFrag += list == 0;
        QVERIFY2(gFrag > 0, qPrintable(browser->toPlainText()));
        QVERIFY(gFrag + rFrag <= nScored);  // one per piece; a piece is one token or more

        // The engine's count, as the views get it.
        const qint64 id = done.first().at(0).toLongLong();
        std::shared_ptr<const kvs::EngineSnapshot> snap = w.bridge()->latestSnapshot();
        QVERIFY(snap);
        const kvs::RequestView* rv = nullptr;
        for (const auto& r : snap->requests)
            if (r.id == id) rv = &r;
        QVERIFY(rv);
        QCOMPARE(rv->n_green, nGreen);
        QCOMPARE(rv->n_output, nScored);
        auto* timeline = w.findChild<SlotTimelineView*>("slotTimeline");
        QVERIFY(timeline);
        int sumGreen = 0, sumSampled = 0;  // the strips' counts add up to the request's (the feed polls)
        auto sums = [&] {
            sumGreen = sumSampled = 0;
            for (const auto& col : timeline->model().columns())
                for (const auto& c : col.cells)
                    if (c.id == id && c.green >= 0) sumGreen += c.green, sumSampled += c.sampled;
            return sumSampled == nScored;
        };
        QTRY_VERIFY_WITH_TIMEOUT(sums(), 5000);
        QVERIFY(timeline->model().hasWatermark());
        QCOMPARE(sumGreen, nGreen);
        for (QWidget* p = timeline; p; p = p->parentWidget())  // the timeline's dock in front, for the picture
            if (auto* dock = qobject_cast<QDockWidget*>(p)) dock->raise();
        QTest::qWait(300);
        QVERIFY(w.grab().save(out("watermark_window.png")));
        qInfo("%s: %d of %d tokens green; %d green and %d red pieces in the transcript",
              pretty ? "default model" : "tiny model", nGreen, nScored, gFrag, rFrag);
    }
};

QTEST_MAIN(TestWatermarkViews)
#include "tst_watermark_views.moc"
