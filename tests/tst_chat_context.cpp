// ctest-labels: ui
// A chat's context (app/chat_controller, ui/context_gauge): the gauge reads "Context used: N of
// M tokens" with N the conversation as the model sees it — for the default model the same
// count as Hugging Face `tokenizers` on the ChatML text (tests/tools/count_chat_tokens.py) —
// and M the engine's context; it grows while a reply streams and says when no model is
// loaded. When the chat no longer fits: "stop" refuses the message inline and names the
// other choice; "drop the oldest turns" sends it with the oldest exchanges left out of what
// the model sees, kept in the chat (saved, shown after a restart with a line where the
// model's view begins).
#include <QComboBox>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "app/chat_controller.h"
#include "app/chat_store.h"
#include "app/engine_bridge.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"
#include "ui/context_gauge.h"

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

// A chat file with one conversation of `exchanges` question/answer pairs.
void writeChat(const QString& path, int exchanges, const QString& policy, int maxTokens = 8) {
    ChatStore store(path);
    Conversation& c = store.add("Long chat");
    for (int i = 0; i < exchanges; ++i)
        c.turns << turn("user", QString("question number %1 about blocks").arg(i))
                << turn("assistant", QString("answer number %1 about pages").arg(i));
    c.settings.maxTokens = maxTokens;
    c.settings.seed = 3;
    c.settings.contextPolicy = policy;
    QString err;
    QVERIFY2(store.save(&err), qPrintable(err));
}

QPushButton* button(kvs::ui::ChatView* v, const char* name) { return v->findChild<QPushButton*>(name); }

void send(kvs::ui::ChatView* v, const QString& text) {
    QTRY_VERIFY_WITH_TIMEOUT(button(v, "sendButton")->isEnabled(), 20000);
    v->findChild<QPlainTextEdit*>("chatPrompt")->setPlainText(text);
    QTest::mouseClick(button(v, "sendButton"), Qt::LeftButton);
}

}  // namespace

class TestChatContext : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;
    std::string m_default;  // the installed default model ("" when none)

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_default = kvs::test::default_model_path();
        // Chats go to files of m_dir named by each test (the user's data dir holds the venv and model).
        QStandardPaths::setTestModeEnabled(true);
        m_model = m_dir.filePath("tiny.gguf");
        kvs::test::TinyModelSpec spec;
        spec.n_ctx_train = 256;  // a context a few exchanges fill
        spec.weight_type = kvs::DType::Q8_0;
        const auto st = kvs::test::write_tiny_gguf(m_model.toStdString(), spec);
        QVERIFY2(st.is_ok(), st.message().c_str());
    }

    // The count against an independent tokenizer, on the default model.
    void gaugeCountsLikeHuggingFaceTokenizers() {
        const std::string model = m_default;
        if (model.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        const QString path = m_dir.filePath("gauge-default.json");
        {
            ChatStore store(path);
            Conversation& c = store.add("Mixed");
            c.turns << turn("user", "How do I reverse a list in Python?")
                    << turn("assistant", "Use `xs[::-1]` or:\n\n```python\nxs.reverse()\n```\n\n| a | b |\n|---|---|\n")
                    << turn("user", "안녕하세요, 페이지드 어텐션 수업입니다 — 12345 tokens?");
            QString err;
            QVERIFY2(store.save(&err), qPrintable(err));
        }
        kvs::app::EngineBridge bridge;
        bridge.loadModel(QString::fromStdString(model));
        kvs::app::ChatController chats(&bridge, path);
        QString err;
        QVERIFY2(chats.load(&err), qPrintable(err));
        chats.setReady(true);
        QJsonArray msgs;
        for (const auto& t : chats.store().conversations()[0].turns)
            msgs.append(QJsonObject{{"role", t.role}, {"content", t.content}});
        const QString msgPath = m_dir.filePath("messages.json");
        QFile f(msgPath);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QJsonDocument(msgs).toJson());
        f.close();
        const auto r = kvs::test::run_python({QString::fromStdString(kvs::test::tool_path("count_chat_tokens.py")),
                                              QString::fromStdString(model), msgPath});
        if (!r.ok && (r.error.contains("No module named 'gguf'") || r.error.contains("No module named 'tokenizers'")))
            QSKIP("the venv lacks gguf or tokenizers (installer/setup.sh installs them)");
        QVERIFY2(r.ok, qPrintable(r.error));
        const int expected = r.out.trimmed().toInt();
        QVERIFY(expected > 40);
        kvs::ui::ContextGauge* g = chats.currentView()->contextGauge();
        QCOMPARE(g->used(), expected);
        QCOMPARE(g->limit(), 4096);  // SmolLM2's context as the engine runs it (default_max_model_len)
        QCOMPARE(g->text(),
                 QString("Context used: %1 of %2 tokens").arg(QLocale().toString(expected), QLocale().toString(4096)));
    }

    void gaugeFollowsTheReply() {
        const QString path = m_dir.filePath("gauge-live.json");
        writeChat(path, 0, "stop", 40);
        kvs::app::EngineBridge bridge;
        kvs::app::ChatController chats(&bridge, path);
        QString err;
        QVERIFY2(chats.load(&err), qPrintable(err));
        kvs::ui::ChatView* v = chats.currentView();
        QCOMPARE(v->contextGauge()->limit(), 0);
        QCOMPARE(v->contextGauge()->text(), QString("Context: no model loaded"));
        bridge.loadModel(m_model);
        bridge.setStepDelayMs(20);
        chats.setReady(true);
        const int empty = v->contextGauge()->used();
        QCOMPARE(v->contextGauge()->limit(), 256);
        QVERIFY(empty >= 0);
        chats.views()->show();
        QList<int> seen;
        connect(
            &bridge, &kvs::app::EngineBridge::tokenText, this, [&] { seen << v->contextGauge()->used(); },
            Qt::QueuedConnection);
        send(v, "Tell me about pages");
        const int prompt = v->contextGauge()->used();
        QVERIFY2(prompt > empty, qPrintable(QString("%1 after send, %2 before").arg(prompt).arg(empty)));
        QTRY_VERIFY_WITH_TIMEOUT(button(v, "sendButton")->isEnabled() &&
                                     chats.store().conversations()[0].turns.size() == 2 &&
                                     chats.store().conversations()[0].turns[1].state == SavedTurn::State::Complete,
                                 30000);
        QVERIFY2(seen.size() >= 3, qPrintable(QString::number(seen.size())));
        for (int i = 1; i < seen.size(); ++i) QVERIFY(seen[i] >= seen[i - 1]);  // it only grows while streaming
        QVERIFY(seen.last() > prompt);
        // Once the reply is in, the count is the conversation's as the next message will see it.
        const auto& c = chats.store().conversations()[0];
        const kvs::app::ContextUse u = bridge.countContext(c.messages(), c.settings);
        QCOMPARE(v->contextGauge()->used(), u.used);
        QVERIFY(u.used > prompt);
    }

    void stopRefusesAndNamesTheChoice() {
        const QString path = m_dir.filePath("stop.json");
        writeChat(path, 12, "stop");
        kvs::app::EngineBridge bridge;
        bridge.loadModel(m_model);
        kvs::app::ChatController chats(&bridge, path);
        QString err;
        QVERIFY2(chats.load(&err), qPrintable(err));
        chats.setReady(true);
        kvs::ui::ChatView* v = chats.currentView();
        QVERIFY2(v->contextGauge()->used() >= v->contextGauge()->limit(), qPrintable(v->contextGauge()->text()));
        chats.views()->show();
        send(v, "one more question");
        QTRY_VERIFY(v->transcriptText().contains("Not sent"));
        QVERIFY2(v->transcriptText().contains("drop the oldest turns"), qPrintable(v->transcriptText().right(400)));
        QCOMPARE(v->promptText(), QString("one more question"));
        QCOMPARE(chats.store().conversations()[0].turns.size(), 24);  // nothing added, nothing dropped
        QCOMPARE(chats.store().conversations()[0].contextStart, 0);
    }

    void dropOldestKeepsTheChatAndSends() {
        const QString path = m_dir.filePath("drop.json");
        writeChat(path, 12, "stop");
        {
            kvs::app::EngineBridge bridge;
            bridge.loadModel(m_model);
            kvs::app::ChatController chats(&bridge, path);
            QString err;
            QVERIFY2(chats.load(&err), qPrintable(err));
            chats.setReady(true);
            kvs::ui::ChatView* v = chats.currentView();
            chats.views()->show();
            // The user picks the other choice in the gauge's box (saved with the chat).
            auto* policy = v->findChild<QComboBox*>("contextPolicy");
            policy->setFocus();
            QTest::keyClick(policy, Qt::Key_Down);
            QCOMPARE(chats.store().conversations()[0].settings.contextPolicy, QString("drop-oldest"));
            send(v, "one more question");
            QTRY_VERIFY_WITH_TIMEOUT(
                chats.store().conversations()[0].turns.size() == 26 &&
                    chats.store().conversations()[0].turns.last().state == SavedTurn::State::Complete,
                30000);
            const Conversation& c = chats.store().conversations()[0];
            QVERIFY(c.contextStart > 0 && c.contextStart < 24);
            QCOMPARE(c.turns[c.contextStart].role, QString("user"));
            QCOMPARE(c.turns[0].content, QString("question number 0 about blocks"));  // kept in the chat
            QVERIFY2(v->transcriptText().contains("no longer fit the context"),
                     qPrintable(v->transcriptText().right(400)));
            // What the model saw fits with room for the reply; one more exchange would not have.
            const kvs::app::ContextUse seen =
                bridge.countContext(c.messages(24) << kvs::app::ChatTurn{"user", "one more question"}, c.settings);
            QVERIFY2(seen.used + std::min(c.settings.maxTokens, seen.limit / 4) <= seen.limit,
                     qPrintable(QString("%1 of %2").arg(seen.used).arg(seen.limit)));
            Conversation wider = c;
            wider.contextStart = c.contextStart - 2;
            const kvs::app::ContextUse more =
                bridge.countContext(wider.messages(24) << kvs::app::ChatTurn{"user", "one more question"}, c.settings);
            QVERIFY(more.used + std::min(c.settings.maxTokens, more.limit / 4) > more.limit);
        }
        // After a restart: all turns, the same start, a line where the model's view begins.
        kvs::app::EngineBridge bridge;
        kvs::app::ChatController again(&bridge, path);
        QString err;
        QVERIFY2(again.load(&err), qPrintable(err));
        QCOMPARE(again.store().conversations()[0].turns.size(), 26);
        QVERIFY(again.store().conversations()[0].contextStart > 0);
        QVERIFY(again.currentView()->transcriptText().contains("The turns above no longer fit the context"));
        QVERIFY(again.currentView()->transcriptText().contains("question number 0 about blocks"));
    }
};

QTEST_MAIN(TestChatContext)
#include "tst_chat_context.moc"
