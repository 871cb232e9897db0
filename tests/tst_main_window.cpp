// ctest-labels: ui
// The real main window, offscreen: load a tiny generated model, send a prompt, watch the
// reply stream in, stop a long reply, and survive a bad model file. Saves screenshots
// under the build tree (tests/output/).
#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTextDocument>
#include <QtTest>

#include "app/chat_controller.h"
#include "app/chat_store.h"
#include "app/engine_bridge.h"

#include "engine/telemetry/trace_json.h"

#include <algorithm>
#include <vector>

#include "app/main_window.h"
#include "app/quant_compare_dock.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"
#include "ui/draft_acceptance_view.h"
#include "ui/quant_compare_view.h"

class TestMainWindow : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;

    QString chats(const char* name) const { return m_dir.filePath(QString("chats-%1.json").arg(name)); }

    static void send(kvs::app::MainWindow& w, const QString& text) {
        // The current conversation's view (each chat has its own).
        auto* prompt = w.chatView()->findChild<QPlainTextEdit*>("chatPrompt");
        auto* button = w.chatView()->findChild<QPushButton*>("sendButton");
        QVERIFY(prompt && button);
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled(), 20000);
        prompt->setPlainText(text);
        QTest::mouseClick(button, Qt::LeftButton);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        // Saved chats go to this test's own data dir, never the user's.
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);  // window layout settings stay out of the user's config
        m_model = m_dir.filePath("tiny.gguf");
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 2;
        spec.n_embd = 64;
        spec.weight_type = kvs::DType::Q8_0;
        const auto st = kvs::test::write_tiny_gguf(m_model.toStdString(), spec);
        QVERIFY2(st.is_ok(), st.message().c_str());
    }

    void sendPromptStreamsReply() {
        kvs::app::MainWindow w(m_model, nullptr, chats(QTest::currentTestFunction()));
        w.resize(900, 600);
        w.show();
        send(w, "Hello there");
        auto* transcript = w.findChild<QTextBrowser*>("chatTranscript");
        auto* button = w.findChild<QPushButton*>("sendButton");
        QTRY_VERIFY_WITH_TIMEOUT(transcript->toPlainText().contains("Hello there"), 5000);
        // The reply finishes (Send is enabled again) with a summary footer in the transcript.
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled() && transcript->toPlainText().contains("tok/s"), 60000);
        const QString text = transcript->toPlainText();
        const int reply_at = text.indexOf("Assistant");
        QVERIFY2(reply_at >= 0 && text.size() > reply_at + 20, qPrintable(text));
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_chat.png"))));
    }

    void stopEndsGenerationAtOnce() {
        kvs::app::MainWindow w(m_model, nullptr, chats(QTest::currentTestFunction()));
        w.show();
        send(w, "Tell me a very long story");
        // Stop right away, before the engine thread has even picked the request up: the
        // reply must still end as cancelled, and Stop must be disabled again.
        auto* stop = w.findChild<QPushButton*>("stopButton");
        auto* transcript = w.findChild<QTextBrowser*>("chatTranscript");
        QVERIFY(stop->isEnabled());
        QTest::mouseClick(stop, Qt::LeftButton);
        QTRY_VERIFY2_WITH_TIMEOUT(transcript->toPlainText().contains("cancelled"),
                                  qPrintable(transcript->toPlainText().right(300)), 10000);
        QVERIFY(!stop->isEnabled());
        QVERIFY2(!transcript->toPlainText().contains("max tokens"), qPrintable(transcript->toPlainText()));
    }

    void historySurvivesRestart() {
        const QString path = chats("history");
        {
            kvs::app::MainWindow w(m_model, nullptr, path);
            w.show();
            send(w, "Remember the word lighthouse");
            auto* button = w.findChild<QPushButton*>("sendButton");
            auto* transcript = w.findChild<QTextBrowser*>("chatTranscript");
            QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled() && transcript->toPlainText().contains("tok/s"), 60000);
        }
        kvs::app::MainWindow w(m_model, nullptr, path);
        w.show();
        QCOMPARE(w.conversationCount(), 1);
        auto* list = w.findChild<QListWidget*>("chatList");
        QVERIFY(list && list->count() == 1);
        QVERIFY2(list->item(0)->text().contains("Remember the word"), qPrintable(list->item(0)->text()));
        auto* transcript = w.findChild<QTextBrowser*>("chatTranscript");
        QVERIFY(transcript->toPlainText().contains("Remember the word lighthouse"));
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);  // user + assistant
    }

    // Run as a child by historySurvivesKillMidWrite: saves a growing history forever.
    void chatStoreWriterChild() {
        const QString path = qEnvironmentVariable("KVS_CHATSTORE_WRITER");
        if (path.isEmpty()) QSKIP("only runs as the child of historySurvivesKillMidWrite");
        kvs::app::ChatStore store(path);
        for (int round = 0;; ++round) {
            auto& c = store.add(QString("chat %1").arg(round));
            for (int t = 0; t < 50; ++t) {
                kvs::app::SavedTurn turn;
                turn.role = "user";
                turn.content = QString("message %1 of round %2 ").arg(t).arg(round).repeated(20);
                c.turns.append(turn);
            }
            QString err;
            if (!store.save(&err)) qFatal("%s", qPrintable(err));
        }
    }

    void historySurvivesKillMidWrite() {
        const QString path = m_dir.filePath("killed/chats.json");
        for (int attempt = 0; attempt < 5; ++attempt) {
            QProcess child;
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert("KVS_CHATSTORE_WRITER", path);
            child.setProcessEnvironment(env);
            child.start(QCoreApplication::applicationFilePath(), {"chatStoreWriterChild"});
            QVERIFY(child.waitForStarted());
            QTest::qWait(150 + 70 * attempt);
            child.kill();  // SIGKILL, wherever the writer is
            child.waitForFinished();
            kvs::app::ChatStore store(path);
            QString err;
            QVERIFY2(store.load(&err), qPrintable(err));  // never a torn file
            // Every saved conversation is complete: 50 turns each.
            for (const auto& c : store.conversations()) QCOMPARE(c.turns.size(), 50);
        }
    }

    void refusedSubmitStaysInItsChat() {
        // The chat controller without a window, on a bridge with no model: a send the bridge
        // refuses is reported in the chat it came from (not the one on screen), its text goes
        // back into that chat's prompt box, and nothing is saved or left generating.
        kvs::app::EngineBridge bridge;
        kvs::app::ChatController controller(&bridge, chats("refused"));
        QString err;
        QVERIFY2(controller.load(&err), qPrintable(err));
        const QString first = controller.currentId();
        controller.newChat();
        const QString second = controller.currentId();
        QVERIFY(first != second);
        QSignalSpy submitted(&controller, &kvs::app::ChatController::requestSubmitted);
        QSignalSpy failed(&bridge, &kvs::app::EngineBridge::requestFailed);
        controller.send(first, "Are you there?");
        auto* view = controller.viewFor(first);
        QVERIFY2(view->transcriptText().contains("no model is loaded"), qPrintable(view->transcriptText()));
        QVERIFY(!view->transcriptText().contains("Are you there?"));
        QCOMPARE(view->promptText(), QString("Are you there?"));
        QVERIFY(!view->findChild<QPushButton*>("stopButton")->isEnabled());
        QVERIFY(!controller.viewFor(second)->transcriptText().contains("no model"));
        QVERIFY(controller.store().conversations()[controller.store().indexOf(first)].turns.isEmpty());
        QCOMPARE(controller.currentId(), second);
        QCOMPARE(submitted.size(), 0);
        QCOMPARE(failed.size(), 0);  // requestFailed carries real request ids only
        view->resize(700, 400);
        QVERIFY(view->grab().save(QString::fromStdString(kvs::test::output_path("chat_refused_submit.png"))));
    }

    void regenerateAndEdit() {
        kvs::app::MainWindow w(m_model, nullptr, chats("retry"));
        w.show();
        send(w, "Say something short");
        auto* view = w.chatView();
        auto* regen = view->findChild<QPushButton*>("regenerateButton");
        auto* edit = view->findChild<QPushButton*>("editButton");
        QVERIFY(regen && edit);
        QTRY_VERIFY_WITH_TIMEOUT(regen->isEnabled(), 60000);
        const QString first = w.store().conversations()[0].turns[1].content;
        QTest::mouseClick(regen, Qt::LeftButton);
        QVERIFY(!regen->isEnabled());  // generating again
        QTRY_VERIFY_WITH_TIMEOUT(regen->isEnabled(), 60000);
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);  // the answer was replaced, not added
        QCOMPARE(w.store().conversations()[0].turns[0].content, QString("Say something short"));
        QVERIFY(!first.isEmpty());
        // Edit takes the message back into the box but removes nothing until it is sent
        // (tst_chat_lifecycle: cancelling keeps the exchange, in the view and on disk).
        QTest::mouseClick(edit, Qt::LeftButton);
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);
        QCOMPARE(view->promptText(), QString("Say something short"));
        QVERIFY(view->transcriptText().contains("Say something short"));
        view->setPromptText("Say something else");
        QTest::mouseClick(view->findChild<QPushButton*>("sendButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(regen->isEnabled(), 60000);
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);
        QCOMPARE(w.store().conversations()[0].turns[0].content, QString("Say something else"));
        QVERIFY(!view->transcriptText().contains("Say something short"));
    }

    void twoChatsGenerateAtOnce() {
        kvs::app::MainWindow w(m_model, nullptr, chats("two"));
        w.resize(1280, 800);
        w.show();
        send(w, "First chat asks this");
        w.newChat();
        QCOMPARE(w.conversationCount(), 2);
        QCOMPARE(w.findChildren<kvs::ui::ChatView*>().size(), 2);
        send(w, "Second chat asks that");
        // Both replies finish, each in its own conversation.
        QTRY_VERIFY_WITH_TIMEOUT(w.store().conversations().size() == 2 &&
                                     w.store().conversations()[0].turns.size() == 2 &&
                                     w.store().conversations()[1].turns.size() == 2,
                                 60000);
        QCOMPARE(w.store().conversations()[0].turns[0].content, QString("Second chat asks that"));
        QCOMPARE(w.store().conversations()[1].turns[0].content, QString("First chat asks this"));
        // The engine saw both as separate requests; once done, every block is free again.
        QTRY_VERIFY_WITH_TIMEOUT(w.lastFrame().requests.size() >= 2, 5000);
        QTRY_COMPARE_WITH_TIMEOUT(w.lastFrame().step.blocksUsed, 0, 5000);
        // The request table lists unfinished requests only: it ends empty, not on a stale row.
        auto* table = w.findChild<QTableWidget*>("requestTable");
        auto rowText = [table] {
            QStringList cells;
            for (int c = 0; table->rowCount() > 0 && c < table->columnCount(); ++c)
                cells << (table->item(0, c) ? table->item(0, c)->text() : QString());
            return cells.join(" | ");
        };
        QTRY_VERIFY2_WITH_TIMEOUT(table->rowCount() == 0, qPrintable(rowText()), 2000);
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_two_chats.png"))));
        // File > Export: the trace reads back with the engine's own reader; a view as PNG.
        const QString trace = m_dir.filePath("gui-trace.json");
        QString err;
        QVERIFY2(w.exportTrace(trace, &err), qPrintable(err));
        auto t = kvs::read_trace(trace.toStdString());
        QVERIFY2(t.is_ok(), t.message().c_str());
        QVERIFY(!t->steps.empty());
        QCOMPARE(int(t->snapshots.size()), 1);
        QVERIFY(t->snapshots[0].requests.size() >= 2);
        const QString png = m_dir.filePath("blockmap.png");
        QVERIFY(w.exportPng(w.findChild<QWidget*>("kvBlockMap"), png));
        QVERIFY(QImage(png).width() > 100);
    }

    void frameTimesWith64Requests() {
        // 64 synthetic requests at once through the real window: every one shows up in the
        // views, all finish, and the GUI thread's time per poll and its event-loop gaps
        // are printed (measured, never asserted: timings are not tests).
        // KVS_FRAME_MODEL=<gguf> measures with a real model (docs: the default model).
        const QString model =
            qEnvironmentVariableIsSet("KVS_FRAME_MODEL") ? qEnvironmentVariable("KVS_FRAME_MODEL") : m_model;
        kvs::app::MainWindow w(model, nullptr, chats("load"));
        w.resize(1600, 1000);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        w.injectRequests(64, 48, 40, 0);
        QTRY_VERIFY_WITH_TIMEOUT(w.lastFrame().requests.size() > 0, 20000);
        QElapsedTimer clock;
        clock.start();
        qint64 last = clock.elapsed(), worst_gap = 0;
        std::vector<qint64> gaps;
        int most_seen = 0;
        while (clock.elapsed() < 120000) {
            QTest::qWait(5);
            const qint64 now = clock.elapsed();
            gaps.push_back(now - last);
            worst_gap = std::max(worst_gap, now - last);
            last = now;
            most_seen = std::max(most_seen, int(w.lastFrame().requests.size()));
            if (most_seen >= 64 && w.lastFrame().step.running == 0 && w.lastFrame().step.waiting == 0) break;
        }
        QVERIFY2(most_seen >= 64, qPrintable(QString("only %1 requests reached the views").arg(most_seen)));
        QTRY_COMPARE_WITH_TIMEOUT(w.lastFrame().step.blocksUsed, 0, 10000);
        std::sort(gaps.begin(), gaps.end());
        qInfo(
            "64 requests on %s: %lld ms of GUI time; poll (convert + update all views) max %.1f ms, last %.1f ms; "
            "event-loop gap p50 %lld ms, p99 %lld ms, max %lld ms (5 ms timer)",
            qPrintable(QFileInfo(model).fileName()), static_cast<long long>(clock.elapsed()), w.maxPollMs(),
            w.lastPollMs(), static_cast<long long>(gaps[gaps.size() / 2]),
            static_cast<long long>(gaps[gaps.size() * 99 / 100]), static_cast<long long>(worst_gap));
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_64_requests.png"))));
    }

    void speculativeChatMatchesPlain() {
        // Greedy: the same prompt with prompt lookup on streams exactly the text it streams
        // without it, the choice is saved with the chat, and the Draft acceptance dock shows
        // the reply's tokens with their fates.
        kvs::app::MainWindow w(m_model, nullptr, chats("spec"));
        w.resize(1400, 900);
        w.show();
        auto* temp = w.findChild<QDoubleSpinBox*>("temperature");
        auto* mode = w.findChild<QComboBox*>("speculativeMode");
        QVERIFY(temp && mode);
        const QString prompt = "Repeat after me: one two three four, one two three four, one two three four.";
        const auto replyDone = [&w] {
            const auto& c = w.store().conversations();
            return !c.isEmpty() && c[0].turns.size() == 2 &&
                   w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled();
        };
        temp->setValue(0);
        mode->setCurrentIndex(0);
        send(w, prompt);
        QTRY_VERIFY_WITH_TIMEOUT(replyDone(), 60000);
        const QString plain = w.store().conversations()[0].turns[1].content;
        QVERIFY(!plain.isEmpty());
        w.newChat();  // keeps temperature 0
        mode->setCurrentIndex(mode->findData("ngram"));
        send(w, prompt);
        QTRY_VERIFY_WITH_TIMEOUT(replyDone(), 60000);
        QCOMPARE(w.store().conversations()[0].turns[1].content, plain);
        QCOMPARE(w.store().conversations()[0].settings.speculative, QString("ngram"));
        QCOMPARE(w.store().conversations()[1].settings.speculative, QString());
        // The dock: the reply's request, its output tokens in order, drafts verified.
        auto* view = w.draftView();
        QTRY_VERIFY_WITH_TIMEOUT(!view->frame().requests.isEmpty() && view->frame().requests.back().finished, 5000);
        QVERIFY(!view->document()->isEmpty());
        const auto& r = view->frame().requests.back();
        QCOMPARE(view->shownRequest(), r.id);
        QCOMPARE(r.proposer, QString("prompt lookup"));
        QString output;
        for (const auto& t : r.tokens)
            if (t.fate != kvs::ui::TokenFate::Rejected && t.fate != kvs::ui::TokenFate::Discarded) output += t.text;
        QCOMPARE(output, plain);  // exactly the reply
        // an end-of-turn control token (what ends most replies) shows no text in the dock
        const kvs::Model& model = *w.bridge()->model();
        const QStringList pieces = w.bridge()->tokenPieces({model.vocab.eos_id, 100});  // 100: a byte token
        QCOMPARE(pieces.size(), 2);
        QVERIFY2(pieces[0].isEmpty(), qPrintable(pieces[0]));
        QVERIFY(!pieces[1].isEmpty());
        QVERIFY2(r.verifySteps > 0, "prompt lookup never proposed a draft on a repetitive prompt");
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_speculative.png"))));
    }

    void darkThemeIsRemembered() {
        {
            kvs::app::MainWindow w(m_model, nullptr, chats("theme"));
            w.resize(1600, 1000);
            w.show();
            const int light = QApplication::palette().color(QPalette::Window).lightness();
            w.setTheme("dark");
            QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 80);
            QVERIFY(light > QApplication::palette().color(QPalette::Window).lightness());
            QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
            QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_dark.png"))));
        }
        kvs::app::MainWindow again(m_model, nullptr, chats("theme"));  // a new window starts dark
        QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 80);
        again.setTheme("system");
        QVERIFY(QApplication::palette().color(QPalette::Window).lightness() > 80);
    }

    void quantCompareMatchesGreedyChat() {
        // The Quantization compare dock on a tiny F32 model: its reference (the linears
        // "dequantized" to F32) is then the chat engine's model itself, so the reference
        // column must stream exactly the text a plain greedy chat gives for the same prompt
        // (a Q8_0 model's chat kernels quantize the activations; the F32 reference does not).
        const QString model = m_dir.filePath("tiny-f32.gguf");
        kvs::test::TinyModelSpec spec;
        spec.weight_type = kvs::DType::F32;
        const auto st = kvs::test::write_tiny_gguf(model.toStdString(), spec);
        QVERIFY2(st.is_ok(), st.message().c_str());
        kvs::app::MainWindow w(model, nullptr, chats("quant"));
        w.resize(1400, 900);
        w.show();
        const QString prompt = "Why is the sky blue?";
        w.findChild<QDoubleSpinBox*>("temperature")->setValue(0);
        send(w, prompt);
        QTRY_VERIFY_WITH_TIMEOUT(w.store().conversations()[0].turns.size() == 2 &&
                                     w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(),
                                 60000);
        const QString plain = w.store().conversations()[0].turns[1].content;
        const int chatMax = w.store().conversations()[0].settings.maxTokens;
        QVERIFY(!plain.isEmpty());

        auto* view = w.quantView();
        auto* scheme = view->findChild<QComboBox*>("quantScheme");
        auto* compare = view->findChild<QPushButton*>("quantCompareButton");
        QVERIFY(scheme && compare && compare->isEnabled());
        scheme->setCurrentText("q4_0");
        view->findChild<QSpinBox*>("quantMaxTokens")->setValue(chatMax);
        view->setPrompt(prompt);
        QTest::mouseClick(compare, Qt::LeftButton);
        QTRY_VERIFY2_WITH_TIMEOUT(view->figure("status").startsWith("Done"), qPrintable(view->figure("status")),
                                  120000);
        QVERIFY(!view->events().isEmpty());
        QCOMPARE(view->referenceDocument()->toPlainText(), plain);
        QVERIFY(!view->variantDocument()->toPlainText().isEmpty());
        QVERIFY2(view->figure("refLabel").startsWith("reference"), qPrintable(view->figure("refLabel")));
        QVERIFY2(view->figure("variantLabel").contains("Q4_0"), qPrintable(view->figure("variantLabel")));
        QVERIFY(view->figure("variantBits").toDouble() > 4 && view->figure("variantBits").toDouble() < 5);
        QVERIFY(view->figure("refSpeed") != "–" && view->figure("variantSpeed") != "–");
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_quant_compare.png"))));

        // A scheme this model cannot take (rows of 64 values, Q4_K blocks of 256): a clear
        // message in the dock, and the window keeps working.
        scheme->setCurrentText("q4_k");
        QTest::mouseClick(compare, Qt::LeftButton);
        QTRY_VERIFY2_WITH_TIMEOUT(view->figure("status").contains("q4_k cannot be made"),
                                  qPrintable(view->figure("status")), 30000);
        QVERIFY2(view->figure("status").contains("256"), qPrintable(view->figure("status")));
        QVERIFY(compare->isEnabled());
        scheme->setCurrentText("q8_0");
        QTest::mouseClick(compare, Qt::LeftButton);
        QTRY_VERIFY2_WITH_TIMEOUT(view->figure("status").startsWith("Done"), qPrintable(view->figure("status")),
                                  120000);
        QCOMPARE(view->referenceDocument()->toPlainText(), plain);
        w.newChat();
        send(w, prompt);
        QTRY_VERIFY_WITH_TIMEOUT(w.store().conversations()[0].turns.size() == 2 &&
                                     w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(),
                                 60000);
        QCOMPARE(w.store().conversations()[0].turns[1].content, plain);
    }

    void badModelShowsErrorAndKeepsRunning() {
        const QString bad = m_dir.filePath("broken.gguf");
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("GGUF\x03\x00\x00\x00garbage", 15);
        f.close();
        kvs::app::MainWindow w(bad, nullptr, chats(QTest::currentTestFunction()));
        w.show();
        auto* hint = w.findChild<QLabel*>("chatHint");
        QTRY_VERIFY_WITH_TIMEOUT(hint->text().contains("Could not load the model"), 10000);
        QVERIFY2(hint->text().contains("broken.gguf"), qPrintable(hint->text()));
        QVERIFY(!w.findChild<QPushButton*>("sendButton")->isEnabled());
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_bad_model.png"))));
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
