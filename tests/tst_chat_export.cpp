// ctest-labels: ui
// Chats to files and back (app/chat_export, ChatController::exportChat / importChats): a JSON
// export read back gives the same chat (every field, Hangul and emoji included) and is read
// the same by Python's json module; the Markdown export renders with a heading per turn;
// a damaged import (truncated, another format, a wrong field at any depth) gives one message
// naming the field and what was expected, adds nothing and leaves the saved chats' file as
// it was byte for byte.
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QTextDocument>
#include <QtTest>

#include "app/chat_controller.h"
#include "app/chat_export.h"
#include "app/chat_list_panel.h"
#include "app/chat_store.h"
#include "app/engine_bridge.h"
#include "tests/support/run_python.h"

using kvs::app::ChatStore;
using kvs::app::Conversation;
using kvs::app::SavedTurn;

namespace {

SavedTurn turn(const QString& role, const QString& content, const QString& summary = {},
               SavedTurn::State state = SavedTurn::State::Complete) {
    SavedTurn t;
    t.role = role;
    t.content = content;
    t.summary = summary;
    t.state = state;
    return t;
}

Conversation sample() {
    Conversation c;
    c.id = "c0ffee00-0000-4000-8000-000000000001";
    c.title = "Sorting 정렬 🚀";
    c.updated = QDateTime(QDate(2026, 11, 20), QTime(9, 30, 0), Qt::UTC);
    c.turns << turn("user", "How do I sort?\nTwo lines, \"quotes\" and \\ backslash.")
            << turn("assistant", "## Sorting\n\n```python\nsorted(x)\n```\n", "12 tokens · 40 tok/s · seed 7")
            << turn("user", "안녕하세요") << turn("assistant", "Cut off mid", {}, SavedTurn::State::Interrupted);
    c.settings.temperature = 0.3;
    c.settings.topK = 12;
    c.settings.topP = 0.8;
    c.settings.minP = 0.1;
    c.settings.repeatPenalty = 1.1;
    c.settings.maxTokens = 99;
    c.settings.seed = 1234567;
    c.settings.systemPrompt = "Be brief.";
    c.settings.speculative = "ngram";
    c.settings.specK = 3;
    c.settings.specAdaptive = true;
    c.settings.contextPolicy = "drop-oldest";
    c.contextStart = 2;
    return c;
}

void compareConversations(const Conversation& a, const Conversation& b) {
    QCOMPARE(a.title, b.title);
    QCOMPARE(a.updated, b.updated);
    QCOMPARE(a.turns.size(), b.turns.size());
    for (int i = 0; i < a.turns.size(); ++i) {
        QCOMPARE(a.turns[i].role, b.turns[i].role);
        QCOMPARE(a.turns[i].content, b.turns[i].content);
        QCOMPARE(a.turns[i].summary, b.turns[i].summary);
        QCOMPARE(int(a.turns[i].state), int(b.turns[i].state));
    }
    QCOMPARE(a.settings.temperature, b.settings.temperature);
    QCOMPARE(a.settings.topK, b.settings.topK);
    QCOMPARE(a.settings.topP, b.settings.topP);
    QCOMPARE(a.settings.minP, b.settings.minP);
    QCOMPARE(a.settings.repeatPenalty, b.settings.repeatPenalty);
    QCOMPARE(a.settings.maxTokens, b.settings.maxTokens);
    QCOMPARE(a.settings.seed, b.settings.seed);
    QCOMPARE(a.settings.systemPrompt, b.settings.systemPrompt);
    QCOMPARE(a.settings.speculative, b.settings.speculative);
    QCOMPARE(a.settings.specK, b.settings.specK);
    QCOMPARE(a.settings.specAdaptive, b.settings.specAdaptive);
    QCOMPARE(a.settings.contextPolicy, b.settings.contextPolicy);
    QCOMPARE(a.contextStart, b.contextStart);
}

QByteArray readAll(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class TestChatExport : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private Q_SLOTS:
    void jsonRoundTrip() {
        const Conversation c = sample();
        const QByteArray json = kvs::app::chatToJson(c);
        QList<Conversation> back;
        QString err;
        QVERIFY2(kvs::app::parseChatImport(json, "chat.json", &back, &err), qPrintable(err));
        QCOMPARE(back.size(), 1);
        compareConversations(back[0], c);
    }

    // Python's json module (another reader) sees the same chat in the export.
    void jsonReadByPython() {
        const QString path = m_dir.filePath("py.json");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(kvs::app::chatToJson(sample()));
        f.close();
        const auto r = kvs::test::run_python(
            {"-c",
             "import json,sys; d=json.load(open(sys.argv[1],encoding='utf-8')); c=d['conversation']; "
             "print(d['format'], d['version'], len(c['turns']), c['turns'][2]['content'].encode('utf-8').hex(), "
             "c['turns'][1]['summary'].replace(' ','_'), c['turns'][3]['state'], c['settings']['seed'], "
             "c['settings']['context_policy'], c['context_start'], c['title'].encode('utf-8').hex())",
             path});
        QVERIFY2(r.ok, qPrintable(r.error));
        const QStringList f2 = r.out.trimmed().split(' ');
        QCOMPARE(f2.size(), 10);
        QCOMPARE(f2[0], QString("kvscope-chat"));
        QCOMPARE(f2[1], QString("1"));
        QCOMPARE(f2[2], QString("4"));
        QCOMPARE(f2[3], QString::fromLatin1(QString("안녕하세요").toUtf8().toHex()));
        QCOMPARE(f2[4], QString("12_tokens_·_40_tok/s_·_seed_7"));
        QCOMPARE(f2[5], QString("interrupted"));
        QCOMPARE(f2[6], QString("1234567"));
        QCOMPARE(f2[7], QString("drop-oldest"));
        QCOMPARE(f2[8], QString("2"));
        QCOMPARE(f2[9], QString::fromLatin1(sample().title.toUtf8().toHex()));
    }

    void markdownExport() {
        const QString md = kvs::app::chatToMarkdown(sample());
        QVERIFY(md.startsWith("# Sorting 정렬 🚀\n"));
        QVERIFY(md.contains("```python\nsorted(x)\n```"));
        QVERIFY(md.contains("*12 tokens · 40 tok/s · seed 7*"));
        QVERIFY(md.contains("interrupted before it finished"));
        // Rendered by Qt's importer: the title, the system prompt, then one heading per turn in order.
        QTextDocument doc;
        doc.setMarkdown(md);
        QStringList headings;
        for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
            if (b.blockFormat().headingLevel() > 0) headings << b.text();
        QCOMPARE(headings,
                 QStringList({"Sorting 정렬 🚀", "System", "You", "Assistant", "Sorting", "You", "Assistant"}));
        QVERIFY(doc.toPlainText().contains("Two lines, \"quotes\" and \\ backslash."));
    }

    void damagedImportIsRefused_data() {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("expected");
        const QByteArray good = kvs::app::chatToJson(sample());
        QTest::newRow("truncated") << good.left(good.size() / 2) << "chat.json is not valid JSON";
        QTest::newRow("empty file") << QByteArray() << "not valid JSON";
        QTest::newRow("an array") << QByteArray("[1,2]") << "expected a JSON object";
        QTest::newRow("another program's JSON")
            << QByteArray(R"({"messages": []})") << "format: expected \"kvscope-chat\"";
        QTest::newRow("no conversation") << QByteArray(R"({"format":"kvscope-chat","version":1})")
                                         << "conversation: expected an object, found nothing";
        QTest::newRow("turns not a list")
            << QByteArray(R"({"format":"kvscope-chat","version":1,"conversation":{"turns":"hi"}})")
            << "conversation.turns: expected an array of {role, content}, found a string";
        QTest::newRow("role a number")
            << QByteArray(
                   R"({"format":"kvscope-chat","version":1,"conversation":{"turns":[{"role":"user","content":"a"},{"role":42,"content":"b"}]}})")
            << "conversation.turns[1].role: expected \"user\", \"assistant\" or \"system\", found a number";
        QTest::newRow("unknown role")
            << QByteArray(
                   R"({"format":"kvscope-chat","version":1,"conversation":{"turns":[{"role":"robot","content":"b"}]}})")
            << "turns[0].role: expected \"user\", \"assistant\" or \"system\", found \"robot\"";
        QTest::newRow("content missing")
            << QByteArray(R"({"format":"kvscope-chat","version":1,"conversation":{"turns":[{"role":"user"}]}})")
            << "turns[0].content: expected a string, found nothing";
        QTest::newRow("summary a list")
            << QByteArray(
                   R"({"format":"kvscope-chat","version":1,"conversation":{"turns":[{"role":"user","content":"a","summary":[]}]}})")
            << "turns[0].summary: expected a string, found an array";
        QTest::newRow("settings a string")
            << QByteArray(R"({"format":"kvscope-chat","version":1,"conversation":{"turns":[],"settings":"x"}})")
            << "conversation.settings: expected an object, found a string";
        QTest::newRow("newer version") << QByteArray(
                                              R"({"format":"kvscope-chat","version":7,"conversation":{"turns":[]}})")
                                       << "version 7 is newer";
        QTest::newRow("chats file, one bad")
            << QByteArray(
                   R"({"format":"kvscope-chats","conversations":[{"turns":[]},{"turns":[{"role":"user","content":5}]}]})")
            << "conversations[1].turns[0].content: expected a string, found a number";
    }
    void damagedImportIsRefused() {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, expected);
        QList<Conversation> out;
        out << sample();
        QString err;
        QVERIFY(!kvs::app::parseChatImport(bytes, "chat.json", &out, &err));
        QVERIFY2(err.contains(expected), qPrintable(err));
        QVERIFY2(err.startsWith("chat.json"), qPrintable(err));  // the file is named
        QCOMPARE(out.size(), 1);                                 // nothing added
    }

    // Through the controller: export, import back as a new chat (saved), then a damaged file
    // that changes nothing at all.
    void controllerRoundTripAndBadImport() {
        const QString store = m_dir.filePath("chats.json");
        {
            ChatStore s(store);
            s.conversations() << sample();
            QString err;
            QVERIFY2(s.save(&err), qPrintable(err));
        }
        kvs::app::EngineBridge bridge;  // no model: exports and imports need none
        kvs::app::ChatController chats(&bridge, store);
        QString err;
        QVERIFY2(chats.load(&err), qPrintable(err));
        const QString id = chats.currentId();
        const QString json = m_dir.filePath("export.json"), md = m_dir.filePath("export.md");
        QVERIFY2(chats.exportChat(id, json, "json", &err), qPrintable(err));
        QVERIFY2(chats.exportChat(id, md, "md", &err), qPrintable(err));
        QVERIFY(readAll(md).startsWith("# Sorting"));
        QVERIFY(!chats.exportChat(id, m_dir.filePath("no/such/dir/x.json"), "json", &err));
        QVERIFY2(err.contains("no/such/dir/x.json"), qPrintable(err));

        QVERIFY2(chats.importChats(json, &err), qPrintable(err));
        QCOMPARE(chats.store().conversations().size(), 2);
        const Conversation& imported = chats.store().conversations()[0];
        QVERIFY(imported.id != id);  // a new chat, not a replacement
        QCOMPARE(chats.currentId(), imported.id);
        compareConversations(imported, sample());
        {
            ChatStore onDisk(store);
            QVERIFY(onDisk.load(&err));
            QCOMPARE(onDisk.conversations().size(), 2);
        }

        const QByteArray before = readAll(store);
        const QString bad = m_dir.filePath("bad.json");
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(kvs::app::chatToJson(sample()).replace("\"assistant\"", "\"narrator\""));
        f.close();
        QSignalSpy failed(&chats, &kvs::app::ChatController::importFailed);
        const QString current = chats.currentId();
        QVERIFY(!chats.importChats(bad, &err));
        QVERIFY2(err.contains("bad.json: conversation.turns[1].role") && err.contains("\"narrator\""), qPrintable(err));
        QCOMPARE(failed.size(), 1);
        QCOMPARE(failed[0][0].toString(), err);
        QCOMPARE(chats.store().conversations().size(), 2);
        QCOMPARE(chats.currentId(), current);
        QCOMPARE(readAll(store), before);
        // The Chats dock shows the failure under its buttons until an import succeeds.
        kvs::app::ChatListPanel panel;
        connect(&chats, &kvs::app::ChatController::importFailed, &panel, &kvs::app::ChatListPanel::showImportError);
        panel.showConversations(chats.store().conversations(), chats.currentId());
        panel.show();
        QVERIFY(panel.findChild<QPushButton*>("exportChatButton")->isEnabled());  // the shown chat is selected
        auto* label = panel.findChild<QLabel*>("chatImportError");
        QVERIFY(!label->isVisible());
        QVERIFY(!chats.importChats(bad, &err));
        QVERIFY(label->isVisible());
        QCOMPARE(label->text(), "Import failed: " + err);
        panel.showImportError({});
        QVERIFY(!label->isVisible());
        QVERIFY(!chats.importChats(m_dir.filePath("missing.json"), &err));
        QVERIFY2(err.contains("missing.json"), qPrintable(err));
        QCOMPARE(readAll(store), before);
    }
};

QTEST_MAIN(TestChatExport)
#include "tst_chat_export.moc"
