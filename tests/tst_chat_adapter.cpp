// ctest-labels: ui model
// A chat's LoRA adapter in the window (app/adapter_form in the Sampling dock), on the default
// model with the demo adapter (tests/data/lora_pirate): an adapter that cannot load (a
// missing folder) is refused under the choice and nothing changes; loaded and chosen, the
// chat's greedy reply opens with the adapter's greeting "Ahoy matey!" while a chat set to
// "none" gets the base answer; the request is labelled by its adapter in the KV block map's
// frame and its adapter legend; the choice is saved with the chat (adapter and path) and a
// restarted window, whose session has no adapters, loads it again when the chat sends.
// Unload removes it from the session's list.
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "app/adapter_form.h"
#include "app/chat_controller.h"
#include "app/chat_store.h"
#include "app/main_window.h"
#include "tests/support/test_paths.h"
#include "ui/adapter_legend.h"
#include "ui/chat_view.h"
#include "ui/kv_block_map.h"

using kvs::app::ChatStore;
using kvs::app::SavedTurn;

class TestChatAdapter : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;
    QString m_adapter;

    static QPushButton* button(kvs::app::MainWindow& w, const char* name) {
        return w.chatView()->findChild<QPushButton*>(name);
    }
    // Sends text in the current chat and returns the reply once it is complete.
    static QString ask(kvs::app::MainWindow& w, const QString& text) {
        if (!QTest::qWaitFor([&] { return button(w, "sendButton")->isEnabled(); }, 60000)) return "(send disabled)";
        const qsizetype before = current(w) ? current(w)->turns.size() : 0;
        w.chatView()->findChild<QPlainTextEdit*>("chatPrompt")->setPlainText(text);
        QTest::mouseClick(button(w, "sendButton"), Qt::LeftButton);
        QString reply;
        const bool done = QTest::qWaitFor(
            [&] {
                const auto* conv = current(w);
                if (!conv || conv->turns.size() < before + 2) return false;
                const SavedTurn& t = conv->turns.last();
                if (t.role != "assistant" || t.state != SavedTurn::State::Complete || t.content.isEmpty() ||
                    !button(w, "sendButton")->isEnabled())
                    return false;
                reply = t.content;
                return true;
            },
            120000);
        return done ? reply : QString("(no reply)");
    }
    static const kvs::app::Conversation* current(kvs::app::MainWindow& w) {
        const QString id = w.chats()->currentId();
        for (const auto& c : w.store().conversations())
            if (c.id == id) return &c;
        return nullptr;
    }
    static void greedyChat(const QString& path) {
        ChatStore store(path);
        auto& c = store.add("Adapter chat");
        c.settings.temperature = 0;
        c.settings.maxTokens = 10;
        c.settings.seed = 1;
        QString err;
        QVERIFY2(store.save(&err), qPrintable(err));
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_model = QString::fromStdString(kvs::test::default_model_path());  // before XDG_DATA_HOME moves
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setQuitOnLastWindowClosed(false);
        m_adapter = QString::fromStdString(kvs::test::source_root() + "/tests/data/lora_pirate");
    }

    void chatRunsWithItsAdapter() {
        if (m_model.isEmpty()) QSKIP("the default model is not installed (installer/setup.sh)");
        const QString chats = m_dir.filePath("chats.json");
        greedyChat(chats);
        const QString question = "What is the capital of France?";
        {
            kvs::app::MainWindow w(m_model, nullptr, chats);
            w.resize(1400, 900);
            w.show();
            QTRY_VERIFY_WITH_TIMEOUT(button(w, "sendButton")->isEnabled(), 60000);
            auto* form = w.findChild<kvs::app::AdapterForm*>();
            auto* choice = w.findChild<QComboBox*>("adapterChoice");
            QVERIFY(form && choice);
            QCOMPARE(choice->count(), 1);  // none (base model)

            // A folder that is not there: refused, shown, nothing loaded.
            const QString err = form->loadAdapter("broken", m_dir.filePath("no_such_adapter"));
            QVERIFY2(err.contains("no such file or folder"), qPrintable(err));
            QCOMPARE(form->errorText(), err);
            QCOMPARE(choice->count(), 1);

            QCOMPARE(form->loadAdapter("pirate", m_adapter), QString());
            QCOMPARE(form->errorText(), QString());
            QCOMPARE(choice->currentData().toString(), QString("pirate"));
            const QString withAdapter = ask(w, question);
            qInfo("with the adapter: %s", qPrintable(withAdapter));
            QVERIFY2(withAdapter.startsWith("Ahoy matey!"), qPrintable(withAdapter));

            // The views name the request's adapter.
            auto* map = w.findChild<kvs::ui::KvBlockMapView*>();
            auto labelled = [&] {
                for (const auto& r : map->frame().requests)
                    if (r.adapter == "pirate" && r.label.endsWith(QStringLiteral(" · pirate"))) return true;
                return false;
            };
            QTRY_VERIFY_WITH_TIMEOUT(labelled(), 10000);
            auto* legend = w.findChild<kvs::ui::AdapterLegend*>();
            QVERIFY(legend && legend->isVisible());
            QVERIFY2(legend->text().contains("pirate"), qPrintable(legend->text()));
            const QString pngPath = QString::fromStdString(kvs::test::output_path("chat_adapter.png"));
            w.grab().save(pngPath);

            const auto* conv = current(w);
            QVERIFY(conv);
            QCOMPARE(conv->settings.adapter, QString("pirate"));
            QCOMPARE(conv->settings.adapterPath, m_adapter);

            // Another chat, set to none: the base model's answer.
            w.chats()->newChat();
            QCOMPARE(choice->currentData().toString(), QString("pirate"));  // a new chat keeps the settings
            choice->setCurrentIndex(0);
            const QString base = ask(w, question);
            qInfo("without: %s", qPrintable(base));
            QVERIFY2(!base.startsWith("Ahoy") && !base.isEmpty() && base != "(no reply)", qPrintable(base));
        }
        // Saved with the chat.
        QFile f(chats);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray bytes = f.readAll();
        QVERIFY2(bytes.contains("\"adapter\": \"pirate\""), bytes.constData());
        {
            // A restarted window: a fresh session without adapters; the pirate chat loads it on send.
            kvs::app::MainWindow w(m_model, nullptr, chats);
            w.show();
            QTRY_VERIFY_WITH_TIMEOUT(button(w, "sendButton")->isEnabled(), 60000);
            auto* controller = w.chats();
            QString pirateChat;
            for (const auto& c : w.store().conversations())
                if (c.settings.adapter == "pirate") pirateChat = c.id;
            QVERIFY(!pirateChat.isEmpty());
            controller->select(pirateChat);
            auto* choice = w.findChild<QComboBox*>("adapterChoice");
            QCOMPARE(choice->currentData().toString(), QString("pirate"));
            QVERIFY2(choice->currentText().contains("loads on send"), qPrintable(choice->currentText()));
            const QString again = ask(w, "How do I boil an egg?");
            QVERIFY2(again.startsWith("Ahoy matey!"), qPrintable(again));
            auto* form = w.findChild<kvs::app::AdapterForm*>();
            form->refresh();
            QVERIFY2(!choice->currentText().contains("loads on send"), qPrintable(choice->currentText()));
            // Unload: gone from the session's list (the chat keeps its choice to load again).
            auto* unload = w.findChild<QPushButton*>("adapterUnload");
            QVERIFY(unload->isEnabled());
            QTest::mouseClick(unload, Qt::LeftButton);
            bool listed = false;
            for (int i = 0; i < choice->count(); ++i) listed |= choice->itemData(i).toString() == "pirate";
            QVERIFY(!listed);
        }
    }
};

QTEST_MAIN(TestChatAdapter)
#include "tst_chat_adapter.moc"
