// ctest-labels: ui
// Chats that never lose a word (app/chat_controller, app/chat_store, app/chat_list_panel,
// ui/chat_view), each as a user met it: a reply is saved while it streams (a SIGKILL loses
// at most the last half second) and one cut off by closing the window or by a kill comes
// back marked interrupted; Delete acts only on the chat shown and selected, and Undo brings
// it back; a message longer than the context is refused inline with the text kept in the
// box; Edit removes nothing until the edited message is sent; a reply's stats line survives
// a redraw and a restart; after Stop the keyboard stays in the prompt box.
// Screenshots go to the build tree (tests/output/).
#include <QAction>
#include <QApplication>
#include <QDateTime>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QToolButton>
#include <QtTest>
#include <cstdio>

#include "app/chat_controller.h"
#include "app/chat_store.h"
#include "app/engine_bridge.h"
#include "app/main_window.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"

using kvs::app::ChatStore;
using kvs::app::Conversation;
using kvs::app::SavedTurn;

namespace {

SavedTurn turn(const QString& role, const QString& content) {
    SavedTurn t;
    t.role = role;
    t.content = content;
    return t;
}

// A chat file with one conversation whose replies are long (400 tokens), for replies that
// are still streaming when the test acts.
void writeLongReplyChat(const QString& path, int maxTokens = 400) {
    ChatStore store(path);
    Conversation& c = store.add("Long replies");
    c.settings.maxTokens = maxTokens;
    c.settings.seed = 7;
    QString err;
    QVERIFY2(store.save(&err), qPrintable(err));
}

QString png(const char* name) { return QString::fromStdString(kvs::test::output_path(name)); }

}  // namespace

class TestChatLifecycle : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;

    QString chats(const char* name) const { return m_dir.filePath(QString("chats-%1.json").arg(name)); }

    static QPlainTextEdit* prompt(kvs::app::MainWindow& w) {
        return w.chatView()->findChild<QPlainTextEdit*>("chatPrompt");
    }
    static QPushButton* button(kvs::app::MainWindow& w, const char* name) {
        return w.chatView()->findChild<QPushButton*>(name);
    }
    static void send(kvs::app::MainWindow& w, const QString& text) {
        QTRY_VERIFY_WITH_TIMEOUT(button(w, "sendButton")->isEnabled(), 20000);
        prompt(w)->setPlainText(text);
        QTest::mouseClick(button(w, "sendButton"), Qt::LeftButton);
    }
    static bool replyDone(kvs::app::MainWindow& w) {
        const auto& c = w.store().conversations();
        return !c.isEmpty() && c[0].turns.size() >= 2 && c[0].turns.last().state == SavedTurn::State::Complete &&
               button(w, "sendButton")->isEnabled();
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setQuitOnLastWindowClosed(false);  // closing a window ends no test
        m_model = qEnvironmentVariable("KVS_CHAT_CHILD_MODEL");
        if (!m_model.isEmpty()) return;  // a child: the parent made the model
        m_model = m_dir.filePath("tiny.gguf");
        kvs::test::TinyModelSpec spec;
        spec.weight_type = kvs::DType::Q8_0;
        const auto st = kvs::test::write_tiny_gguf(m_model.toStdString(), spec);
        QVERIFY2(st.is_ok(), st.message().c_str());
    }

    // ---- 1. replies are saved as they stream ------------------------------------------

    // Run as a child by replySavedWhileStreamingSurvivesKill: streams a long reply slowly and
    // prints, after every piece, the time and how many characters have streamed so far.
    void streamingChild() {
        const QString path = qEnvironmentVariable("KVS_CHAT_CHILD_STORE");
        if (path.isEmpty()) QSKIP("only runs as the child of replySavedWhileStreamingSurvivesKill");
        kvs::app::EngineBridge bridge;
        bridge.loadModel(m_model);
        bridge.setStepDelayMs(25);
        kvs::app::ChatController controller(&bridge, path);
        QString err;
        QVERIFY2(controller.load(&err), qPrintable(err));
        controller.setReady(true);
        qsizetype streamed = 0;
        connect(&bridge, &kvs::app::EngineBridge::tokenText, this, [&](qint64, const QString& piece) {
            streamed += piece.size();
            std::printf("streamed %lld %lld\n", static_cast<long long>(QDateTime::currentMSecsSinceEpoch()),
                        static_cast<long long>(streamed));
            std::fflush(stdout);
        });
        controller.send(controller.currentId(), "Tell me a very long story about a lighthouse");
        QTest::qWait(60000);  // killed long before
    }

    void replySavedWhileStreamingSurvivesKill() {
        const QString path = chats("killed");
        writeLongReplyChat(path);
        QProcess child;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("KVS_CHAT_CHILD_STORE", path);
        env.insert("KVS_CHAT_CHILD_MODEL", m_model);
        child.setProcessEnvironment(env);
        child.start(QCoreApplication::applicationFilePath(), {"streamingChild"});
        QVERIFY(child.waitForStarted());
        // What the child reports: (time, characters streamed by then).
        QList<QPair<qint64, qint64>> progress;
        QByteArray buffered;
        const auto readProgress = [&] {
            buffered += child.readAllStandardOutput();
            qsizetype nl;
            while ((nl = buffered.indexOf('\n')) >= 0) {
                const QList<QByteArray> f = buffered.left(nl).trimmed().split(' ');
                buffered.remove(0, nl + 1);
                if (f.size() == 3 && f[0] == "streamed") progress.append({f[1].toLongLong(), f[2].toLongLong()});
            }
        };
        QElapsedTimer clock;
        clock.start();
        while (clock.elapsed() < 60000 &&
               (progress.isEmpty() || progress.last().first - progress.first().first < 2500)) {
            child.waitForReadyRead(100);
            readProgress();
        }
        QVERIFY2(progress.size() > 10, "the child streamed nothing");
        const qint64 killedAt = QDateTime::currentMSecsSinceEpoch();
        child.kill();  // SIGKILL mid-reply
        child.waitForFinished();
        readProgress();
        // Everything streamed a second before the kill is on disk, marked as still streaming.
        qint64 secondBefore = 0;
        for (const auto& [t, n] : progress)
            if (t <= killedAt - 1000) secondBefore = n;
        QVERIFY2(secondBefore > 0, "the reply had not streamed for a second");
        ChatStore store(path);
        QString err;
        QVERIFY2(store.load(&err), qPrintable(err));
        QCOMPARE(store.conversations().size(), 1);
        const QList<SavedTurn> turns = store.conversations()[0].turns;
        QCOMPARE(turns.size(), 2);
        QCOMPARE(turns[0].content, QString("Tell me a very long story about a lighthouse"));
        QCOMPARE(turns[1].role, QString("assistant"));
        QVERIFY2(turns[1].content.size() >= secondBefore,
                 qPrintable(QString("saved %1 characters, %2 had streamed a second before the kill")
                                .arg(turns[1].content.size())
                                .arg(secondBefore)));
        QVERIFY(turns[1].state == SavedTurn::State::Streaming);

        // The restart finds it: shown, kept in the chat, marked interrupted (and saved so).
        kvs::app::EngineBridge bridge;
        kvs::app::ChatController again(&bridge, path);
        QVERIFY2(again.load(&err), qPrintable(err));
        const SavedTurn& reply = again.store().conversations()[0].turns[1];
        QVERIFY(reply.state == SavedTurn::State::Interrupted);
        QVERIFY(again.currentView()->transcriptText().contains(reply.content.left(40).simplified().left(10)));
        QVERIFY2(again.currentView()->transcriptText().contains("interrupted"),
                 qPrintable(again.currentView()->transcriptText().right(200)));
        ChatStore reread(path);
        QVERIFY(reread.load(&err));
        QVERIFY(reread.conversations()[0].turns[1].state == SavedTurn::State::Interrupted);
    }

    void closingMidReplyKeepsItInterrupted() {
        const QString path = chats("closed");
        writeLongReplyChat(path);
        QString partial;
        {
            kvs::app::MainWindow w(m_model, nullptr, path);
            w.show();
            QTRY_VERIFY_WITH_TIMEOUT(button(w, "sendButton")->isEnabled(), 20000);
            w.bridge()->setStepDelayMs(25);
            send(w, "Tell me a very long story about a lighthouse");
            auto* transcript = w.chatView()->findChild<QTextBrowser*>("chatTranscript");
            // Some of the reply has streamed (the transcript grows past the prompt).
            const int base = transcript->toPlainText().size();
            QTRY_VERIFY_WITH_TIMEOUT(transcript->toPlainText().size() > base + 40, 20000);
            QVERIFY(button(w, "stopButton")->isEnabled());  // still streaming
            w.close();                                      // File ▸ Quit
            const auto& turns = w.store().conversations()[0].turns;
            QCOMPARE(turns.size(), 2);
            partial = turns[1].content;
            QVERIFY(!partial.isEmpty());
            QVERIFY(turns[1].state == SavedTurn::State::Interrupted);
        }
        ChatStore store(path);
        QString err;
        QVERIFY2(store.load(&err), qPrintable(err));
        QCOMPARE(store.conversations()[0].turns.size(), 2);
        QCOMPARE(store.conversations()[0].turns[1].content, partial);
        QVERIFY(store.conversations()[0].turns[1].state == SavedTurn::State::Interrupted);
        // Restarted: the partial reply is there, marked.
        kvs::app::MainWindow w(m_model, nullptr, path);
        w.resize(1100, 700);
        w.show();
        const QString text = w.chatView()->transcriptText();
        QVERIFY2(text.contains("interrupted before it finished"), qPrintable(text.right(300)));
        QVERIFY(text.contains(partial.simplified().left(12)));
        QTRY_VERIFY_WITH_TIMEOUT(button(w, "sendButton")->isEnabled(), 20000);
        QVERIFY(w.grab().save(png("chat_interrupted_after_restart.png")));
    }

    // ---- 2. Delete acts on what is shown and selected, and can be undone ----------------

    void deleteActsOnTheShownSelection() {
        const QString path = chats("delete");
        {
            ChatStore store(path);
            Conversation& a = store.add("Apples");
            a.turns << turn("user", "tell me about apples") << turn("assistant", "apples are red");
            Conversation& b = store.add("Bananas");
            b.turns << turn("user", "tell me about bananas") << turn("assistant", "bananas are yellow");
            QString err;
            QVERIFY2(store.save(&err), qPrintable(err));
        }
        kvs::app::MainWindow w(m_dir.filePath("no-such-model.gguf"), nullptr, path);
        w.show();
        auto* list = w.findChild<QListWidget*>("chatList");
        auto* search = w.findChild<QLineEdit*>("chatSearch");
        auto* del = w.findChild<QPushButton*>("deleteChatButton");
        QVERIFY(list && search && del);
        QCOMPARE(list->count(), 2);
        // Select Apples, then filter so that only Bananas shows: nothing shown is selected.
        list->setCurrentRow(list->item(0)->text() == "Apples" ? 0 : 1);
        QCOMPARE(w.chats()->currentTitle(), QString("Apples"));
        search->setText("banana");
        QCOMPARE(list->count(), 1);
        QCOMPARE(list->item(0)->text(), QString("Bananas"));
        QVERIFY2(!del->isEnabled(), "Delete is enabled with no visible chat selected");
        QTest::mouseClick(del, Qt::LeftButton);
        QCOMPARE(w.conversationCount(), 2);
        // Select the one shown: Delete removes it (not the hidden current one), and Undo
        // brings it back with its history, on disk too.
        QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, list->visualItemRect(list->item(0)).center());
        QVERIFY(del->isEnabled());
        QTest::mouseClick(del, Qt::LeftButton);
        QCOMPARE(w.conversationCount(), 1);
        QCOMPARE(w.store().conversations()[0].title, QString("Apples"));
        auto* undoButton = w.findChild<QToolButton*>("undoDeleteButton");
        auto* undoAction = w.findChild<QAction*>("undoDeleteAction");
        QVERIFY(undoButton && undoAction);
        QVERIFY(undoButton->isVisible() && undoAction->isEnabled());
        QVERIFY2(undoAction->text().contains("Bananas"), qPrintable(undoAction->text()));
        {
            ChatStore onDisk(path);
            QString err;
            QVERIFY(onDisk.load(&err));
            QCOMPARE(onDisk.conversations().size(), 1);
        }
        w.resize(1100, 700);
        QVERIFY(w.grab().save(png("chat_deleted_undo.png")));
        undoAction->trigger();  // Edit ▸ Undo delete "Bananas"
        QCOMPARE(w.conversationCount(), 2);
        QCOMPARE(w.chats()->currentTitle(), QString("Bananas"));
        QCOMPARE(w.store().conversations()[w.store().indexOf(w.chats()->currentId())].turns.size(), 2);
        QVERIFY(w.chatView()->transcriptText().contains("bananas are yellow"));
        QVERIFY(!undoAction->isEnabled() && !undoButton->isVisible());
        ChatStore onDisk(path);
        QString err;
        QVERIFY(onDisk.load(&err));
        QCOMPARE(onDisk.conversations().size(), 2);
    }

    // ---- 3. a message over the context: refused inline, the text stays editable --------

    void tooLongMessageIsRefusedInline() {
        kvs::app::MainWindow w(m_model, nullptr, chats("toolong"));
        w.resize(1100, 700);
        w.show();
        const QString text = QString("word ").repeated(4000).trimmed();  // ~20,000 characters
        send(w, text);
        const QString transcript = w.chatView()->transcriptText();
        QVERIFY2(transcript.contains("Not sent"), qPrintable(transcript.left(400)));
        QVERIFY2(transcript.contains("context holds 511 tokens"), qPrintable(transcript.left(400)));
        QVERIFY2(transcript.contains("your message"), qPrintable(transcript.left(400)));
        QVERIFY(!transcript.contains("word word word"));  // not shown as sent
        QCOMPARE(prompt(w)->toPlainText(), text);
        QVERIFY(!prompt(w)->isReadOnly() && prompt(w)->isEnabled());
        QVERIFY(button(w, "sendButton")->isEnabled());
        QVERIFY(!button(w, "stopButton")->isEnabled());
        QVERIFY(w.store().conversations()[0].turns.isEmpty());
        // Still editable: shorten it and send.
        prompt(w)->setPlainText("A short question instead");
        QTest::mouseClick(button(w, "sendButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(replyDone(w), 60000);
        QCOMPARE(w.store().conversations()[0].turns[0].content, QString("A short question instead"));
        prompt(w)->setPlainText(text);
        QTest::mouseClick(button(w, "sendButton"), Qt::LeftButton);
        QCOMPARE(prompt(w)->toPlainText(), text);
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);
        QVERIFY(w.grab().save(png("chat_too_long_refused.png")));
    }

    // ---- 4. Edit removes nothing until the edited message is sent ----------------------

    void editRemovesNothingUntilSent() {
        const QString path = chats("edit");
        kvs::app::MainWindow w(m_model, nullptr, path);
        w.show();
        send(w, "Say something short");
        QTRY_VERIFY_WITH_TIMEOUT(replyDone(w), 60000);
        const QList<SavedTurn> before = w.store().conversations()[0].turns;
        auto* edit = button(w, "editButton");
        const auto onDisk = [&path] {
            ChatStore s(path);
            QString err;
            s.load(&err);
            return s.conversations().isEmpty() ? 0 : int(s.conversations()[0].turns.size());
        };
        prompt(w)->setPlainText("a draft of the next message");
        QTest::mouseClick(edit, Qt::LeftButton);
        QCOMPARE(prompt(w)->toPlainText(), QString("Say something short"));
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);
        QCOMPARE(onDisk(), 2);
        QVERIFY(w.chatView()->transcriptText().contains("Say something short"));
        QCOMPARE(edit->text(), QString("Cancel edit"));
        QVERIFY(!button(w, "regenerateButton")->isEnabled());
        // Cancel: all as it was, the draft back in the box.
        QTest::mouseClick(edit, Qt::LeftButton);
        QCOMPARE(prompt(w)->toPlainText(), QString("a draft of the next message"));
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);
        QCOMPARE(w.store().conversations()[0].turns[1].content, before[1].content);
        QCOMPARE(onDisk(), 2);
        QCOMPARE(edit->text(), QString("Edit"));
        // Edit and send: only now the exchange is replaced.
        QTest::mouseClick(edit, Qt::LeftButton);
        prompt(w)->setPlainText("Say something else");
        QTest::mouseClick(button(w, "sendButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(replyDone(w), 60000);
        QCOMPARE(w.store().conversations()[0].turns.size(), 2);
        QCOMPARE(w.store().conversations()[0].turns[0].content, QString("Say something else"));
        QCOMPARE(onDisk(), 2);
        QVERIFY(!w.chatView()->transcriptText().contains("Say something short"));
    }

    // ---- 5. stats lines survive; Stop keeps the keyboard in the prompt box ---------------

    void statsLineSurvivesRedrawAndRestart() {
        const QString path = chats("stats");
        writeLongReplyChat(path, 60);  // short replies: two exchanges fit the 512-token context
        QString summary;
        {
            kvs::app::MainWindow w(m_model, nullptr, path);
            w.show();
            send(w, "First question");
            QTRY_VERIFY_WITH_TIMEOUT(replyDone(w), 60000);
            summary = w.store().conversations()[0].turns[1].summary;
            QVERIFY2(summary.contains("tok/s") && summary.contains("seed"), qPrintable(summary));
            send(w, "Second question");
            QTRY_VERIFY_WITH_TIMEOUT(replyDone(w) && w.store().conversations()[0].turns.size() == 4, 60000);
            // Regenerate redraws the whole conversation: the first reply keeps its line.
            QTest::mouseClick(button(w, "regenerateButton"), Qt::LeftButton);
            QTRY_VERIFY_WITH_TIMEOUT(replyDone(w), 60000);
            QVERIFY2(w.chatView()->transcriptText().contains(summary), qPrintable(w.chatView()->transcriptText()));
        }
        kvs::app::MainWindow w(m_model, nullptr, path);
        w.resize(1100, 700);
        w.show();
        const QString text = w.chatView()->transcriptText();
        QVERIFY2(text.contains(summary), qPrintable(text));
        QCOMPARE(text.count("tok/s"), 2);
        QTRY_VERIFY_WITH_TIMEOUT(button(w, "sendButton")->isEnabled(), 20000);
        QVERIFY(w.grab().save(png("chat_stats_after_restart.png")));
    }

    void oldChatFilesStillLoad() {
        // A file from before replies had "summary" and "state".
        const QString path = chats("old");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        const QJsonArray turns{QJsonObject{{"role", "user"}, {"content", "hi"}},
                               QJsonObject{{"role", "assistant"}, {"content", "hello"}}};
        const QJsonObject conv{{"id", "c1"}, {"title", "Old"}, {"updated", "2024-01-01T00:00:00Z"}, {"turns", turns}};
        f.write(
            QJsonDocument(QJsonObject{{"format", "kvscope-chats"}, {"version", 1}, {"conversations", QJsonArray{conv}}})
                .toJson());
        f.close();
        ChatStore store(path);
        QString err;
        QVERIFY2(store.load(&err), qPrintable(err));
        QCOMPARE(store.conversations().size(), 1);
        const auto& t = store.conversations()[0].turns;
        QCOMPARE(t.size(), 2);
        QCOMPARE(t[1].content, QString("hello"));
        QVERIFY(t[1].summary.isEmpty());
        QVERIFY(t[1].state == SavedTurn::State::Complete);
        // and a complete reply saves without the new fields' defaults
        QVERIFY(store.save(&err));
        QFile back(path);
        QVERIFY(back.open(QIODevice::ReadOnly));
        QVERIFY(!back.readAll().contains("\"state\""));
    }

    void stopKeepsFocusInThePrompt() {
        const QString path = chats("stop");
        writeLongReplyChat(path);
        kvs::app::MainWindow w(m_model, nullptr, path);
        w.show();
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        QTRY_VERIFY_WITH_TIMEOUT(button(w, "sendButton")->isEnabled(), 20000);
        w.bridge()->setStepDelayMs(25);
        send(w, "Tell me a very long story about a lighthouse");
        auto* stop = button(w, "stopButton");
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->transcriptText().size() > 80, 20000);
        QVERIFY(stop->isEnabled());
        QTest::mouseClick(stop, Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->transcriptText().contains("cancelled"), 10000);
        QVERIFY(!stop->isEnabled());
        QWidget* focus = QApplication::focusWidget();
        QVERIFY2(focus == prompt(w), focus ? qPrintable(focus->objectName()) : "nothing has the focus");
        // and the cancelled reply's line is saved with it
        QVERIFY(w.store().conversations()[0].turns[1].summary.contains("cancelled"));
    }
};

QTEST_MAIN(TestChatLifecycle)
#include "tst_chat_lifecycle.moc"
