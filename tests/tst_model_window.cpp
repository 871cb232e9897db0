// ctest-labels: ui net remote
// Models in the main window and each chat's target, offscreen: a file dropped on the window
// that is not a model (a text file, a truncated GGUF) gets a clear message and changes
// nothing (the model that runs, the saved chats); a load can be cancelled and the model before
// keeps running; a load whose KV cannot fit in RAM, or whose context passes the trained one,
// is refused with its numbers (never a smaller context behind the user's back); a chat bound
// to a remote connection (a live kvscope server on 127.0.0.1) streams its reply in the main
// window, and with the server stopped shows the error inline, keeps the message and the
// partial reply, and Regenerate works once the server is back.
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSemaphore>
#include <QSettings>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include "app/chat_controller.h"
#include "app/chat_store.h"
#include "app/chat_target_bar.h"
#include "app/engine_bridge.h"
#include "app/main_window.h"
#include "app/model_catalog.h"
#include "app/model_load_status.h"
#include "app/model_manager.h"
#include "app/sampling_form.h"
#include "app/remote/connection_store.h"
#include "app/remote/secret_store.h"
#include "tests/support/live_server.h"
#include "ui/chat_view.h"

using kvs::app::MainWindow;

class TestModelWindow : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_modelA, m_modelB;

    QString chats(const char* name) const { return m_dir.filePath(QString("chats-%1.json").arg(name)); }
    static bool canSend(MainWindow& w) { return w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(); }
    static void send(MainWindow& w, const QString& text) {
        auto* prompt = w.chatView()->findChild<QPlainTextEdit*>("chatPrompt");
        auto* button = w.chatView()->findChild<QPushButton*>("sendButton");
        QVERIFY(prompt && button);
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled(), 20000);
        prompt->setPlainText(text);
        QTest::mouseClick(button, Qt::LeftButton);
    }
    static QString fileBytes(const QString& path) {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
    }
    static void dropOn(QWidget* w, const QString& path) {
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(path)});
        QDragEnterEvent enter(QPoint(50, 50), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent ev(QPointF(50, 50), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w, &ev);
    }
    // A window with model A loaded and one saved exchange in its chat.
    static void waitLoaded(MainWindow& w, const QString& model) {
        QTRY_VERIFY_WITH_TIMEOUT(kvs::app::ModelCatalog::key(w.bridge()->modelPath()) == kvs::app::ModelCatalog::key(model) &&
                                     !w.loadStatus()->loading(),
                                 20000);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
        qputenv("KVSCOPE_MODELS_DIR", m_dir.filePath("models").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        QSettings().remove("models/added");
        m_modelA = m_dir.filePath("a.gguf");
        m_modelB = m_dir.filePath("b.gguf");
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 2;
        QVERIFY(kvs::test::write_tiny_gguf(m_modelA.toStdString(), spec).is_ok());
        spec.n_layer = 3;
        QVERIFY(kvs::test::write_tiny_gguf(m_modelB.toStdString(), spec).is_ok());
    }

    void dropBadFilesKeepsModelAndChats() {
        const QString store = chats(QTest::currentTestFunction());
        MainWindow w(m_modelA, nullptr, store);
        w.show();
        waitLoaded(w, m_modelA);
        send(w, "Hello");
        QTRY_VERIFY_WITH_TIMEOUT(w.store().conversations()[0].turns.size() == 2 && canSend(w), 60000);
        const QString before = fileBytes(store);
        QVERIFY(!before.isEmpty());

        const QString text = m_dir.filePath("readme.txt");
        QFile t(text);
        QVERIFY(t.open(QIODevice::WriteOnly));
        t.write("hello\n");
        t.close();
        dropOn(&w, text);
        auto* models = w.findChild<kvs::app::ModelManagerDialog*>();
        QVERIFY(models);
        QVERIFY(models->isVisible());
        QVERIFY2(models->errorText().contains("readme.txt is not a model"), qPrintable(models->errorText()));

        // A GGUF cut in the middle: its header passes the quick look, the full check refuses it.
        QFile whole(m_modelB);
        QVERIFY(whole.open(QIODevice::ReadOnly));
        const QByteArray bytes = whole.readAll();
        const QString cut = m_dir.filePath("cut.gguf");
        QFile c(cut);
        QVERIFY(c.open(QIODevice::WriteOnly));
        c.write(bytes.left(bytes.size() / 2));
        c.close();
        QSignalSpy failed(models, &kvs::app::ModelManagerDialog::addFailed);
        dropOn(&w, cut);
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, 10000);
        QVERIFY2(models->errorText().contains("cut.gguf was not added"), qPrintable(models->errorText()));
        QVERIFY(!kvs::app::ModelCatalog().contains(cut));
        QVERIFY(!w.loadStatus()->loading());
        // The model that ran still runs, the chats are as they were, Send works.
        QCOMPARE(kvs::app::ModelCatalog::key(w.bridge()->modelPath()), kvs::app::ModelCatalog::key(m_modelA));
        QCOMPARE(fileBytes(store), before);
        QVERIFY(canSend(w));
        QVERIFY(models->grab().save(QString::fromStdString(kvs::test::output_path("models_bad_drop.png"))));
    }

    void cancelKeepsTheOldModel() {
        MainWindow w(m_modelA, nullptr, chats(QTest::currentTestFunction()));
        w.show();
        waitLoaded(w, m_modelA);
        QSignalSpy ended(w.loadStatus(), &kvs::app::ModelLoadStatus::loadEnded);
        // Hold the bridge's thread so Cancel surely comes before the load's first stage.
        QSemaphore hold;
        QMetaObject::invokeMethod(w.bridge(), [&hold] { hold.acquire(); }, Qt::QueuedConnection);
        w.loadModelPath(m_modelB);
        QVERIFY(w.loadStatus()->loading());
        QVERIFY(w.loadStatus()->isVisible());
        QVERIFY(!canSend(w));  // while it loads
        QTest::mouseClick(w.loadStatus()->findChild<QAbstractButton*>("cancelLoadButton"), Qt::LeftButton);
        hold.release();
        QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 20000);
        QCOMPARE(ended.last().at(1).toBool(), false);  // not loaded
        QCOMPARE(ended.last().at(2).toBool(), true);   // cancelled
        QCOMPARE(kvs::app::ModelCatalog::key(w.bridge()->modelPath()), kvs::app::ModelCatalog::key(m_modelA));
        QVERIFY(canSend(w));
        send(w, "Still there?");
        QTRY_VERIFY_WITH_TIMEOUT(w.store().conversations()[0].turns.size() == 2 && canSend(w), 60000);
        QVERIFY(!w.store().conversations()[0].turns[1].content.isEmpty());

        // A load that goes ahead switches; the progress named its stages.
        QSignalSpy progress(w.bridge(), &kvs::app::EngineBridge::loadProgress);
        w.loadModelPath(m_modelB, 256, 2);
        QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 2, 20000);
        QCOMPARE(ended.last().at(1).toBool(), true);
        QCOMPARE(progress.count(), 3);
        QCOMPARE(w.bridge()->contextTokens(), 256);
        QCOMPARE(kvs::app::ModelCatalog::key(w.bridge()->modelPath()), kvs::app::ModelCatalog::key(m_modelB));
    }

    // Weights + KV past this machine's RAM, or a context past the trained one: refused with
    // the numbers; the model before keeps running.
    void refusesWhatCannotFit() {
        MainWindow w(m_modelA, nullptr, chats(QTest::currentTestFunction()));
        w.show();
        waitLoaded(w, m_modelA);
        QSignalSpy ended(w.loadStatus(), &kvs::app::ModelLoadStatus::loadEnded);
        w.loadModelPath(m_modelB, 1024, 1);
        QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 20000);
        QCOMPARE(ended.last().at(1).toBool(), false);
        QVERIFY2(ended.last().at(3).toString().contains("a context of 1024 tokens is more than the 512"),
                 qPrintable(ended.last().at(3).toString()));
        const qint64 ram = kvs::Session::machine_ram_bytes();
        if (ram <= 0) QSKIP("this machine's RAM is unknown");
        const qint64 perToken = kvs::Session::kv_bytes_per_token(3, 2, 16, kvs::DType::F16);
        const int batch = int(ram / (512 * perToken) + 1);
        w.loadModelPath(m_modelB, 512, batch);
        QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 2, 20000);
        QCOMPARE(ended.last().at(1).toBool(), false);
        QVERIFY2(ended.last().at(3).toString().contains("of RAM"), qPrintable(ended.last().at(3).toString()));
        QCOMPARE(kvs::app::ModelCatalog::key(w.bridge()->modelPath()), kvs::app::ModelCatalog::key(m_modelA));
        QVERIFY(canSend(w));
        QVERIFY2(w.statusBar()->currentMessage().contains("still using"), qPrintable(w.statusBar()->currentMessage()));
    }

    // Switching chats switches what they talk to: a chat on model B loads B, going back loads A.
    void chatTargetsSwitchLocalModels() {
        MainWindow w(m_modelA, nullptr, chats(QTest::currentTestFunction()));
        w.show();
        waitLoaded(w, m_modelA);
        const QString first = w.chats()->currentId();
        w.chats()->setTarget(first, {"local", m_modelA, {}});
        w.newChat();
        const QString second = w.chats()->currentId();
        w.chats()->setTarget(second, {"local", m_modelB, {}});
        waitLoaded(w, m_modelB);
        w.chats()->select(first);
        waitLoaded(w, m_modelA);
        QCOMPARE(w.targetBar()->target().model, m_modelA);
        w.chats()->select(second);
        waitLoaded(w, m_modelB);
        // Saved with the chat.
        kvs::app::ChatStore saved(w.store().path());
        QString err;
        QVERIFY(saved.load(&err));
        QCOMPARE(saved.conversations()[saved.indexOf(second)].target.model, m_modelB);
        QCOMPARE(saved.conversations()[saved.indexOf(second)].target.kind, QString("local"));
    }

    void remoteChatStreamsAndRetries() {
        // The server: a tiny model of its own on a loopback port.
        auto live = kvs::test::start_live_server(kvs::test::tiny_server_model());
        QVERIFY2(live.is_ok(), live.message().c_str());
        const int port = (*live)->server->port();
        const QString ini = m_dir.filePath("remote-test.ini");
        auto secrets = std::make_shared<kvs::remote::SecretStore>(m_dir.filePath("keys.json"), false);
        QString connId, err;
        {
            kvs::remote::ConnectionStore cs(ini, secrets);
            kvs::remote::RemoteConnection c;
            c.name = "loopback kvscope";
            c.baseUrl = QString("http://127.0.0.1:%1").arg(port);
            c.model = "tiny";
            QVERIFY2(cs.save(c, {}, &err, &connId), qPrintable(err));
        }
        MainWindow w(m_modelA, nullptr, chats(QTest::currentTestFunction()));
        w.resize(1280, 800);
        w.show();
        waitLoaded(w, m_modelA);
        w.chats()->setConnections(ini, [secrets] { return secrets; });
        // Picked in the chat's header.
        w.targetBar()->refresh();
        auto* box = w.targetBar()->box();
        const int row = box->findText("Remote · loopback kvscope · tiny");
        QVERIFY2(row >= 0, qPrintable(box->itemText(box->count() - 1)));
        box->setCurrentIndex(row);
        Q_EMIT box->activated(row);
        const QString conv = w.chats()->currentId();
        QVERIFY(w.chats()->target(conv).isRemote());
        QCOMPARE(w.chats()->target(conv).connection, connId);
        QVERIFY(!w.loadStatus()->loading());  // a remote target loads nothing
        auto settingsOf = [&] { return w.store().conversations()[w.store().indexOf(conv)]; };

        // The server's context is 512 tokens: replies of at most 48 (the chat's sampling settings
        // go with the request; the server refuses max_tokens past its context).
        kvs::app::ChatSettings cs;
        cs.maxTokens = 48;
        w.findChild<kvs::app::SamplingForm*>()->load(cs);
        send(w, "Hello remote");
        QTRY_VERIFY2_WITH_TIMEOUT(settingsOf().turns.size() == 2 &&
                                      settingsOf().turns[1].state == kvs::app::SavedTurn::State::Complete && canSend(w),
                                  qPrintable(w.chatView()->transcriptText()), 60000);
        QVERIFY(!settingsOf().turns[1].content.isEmpty());
        QVERIFY2(settingsOf().turns[1].summary.contains("tokens"), qPrintable(settingsOf().turns[1].summary));
        QVERIFY(w.chatView()->transcriptText().contains("Hello remote"));

        // The server goes away: the error is inline, the message stays, the window answers.
        live.value().reset();  // stops the server and its engine
        send(w, "Are you there?");
        QTRY_VERIFY_WITH_TIMEOUT(canSend(w) && w.chatView()->transcriptText().contains("press Regenerate"), 30000);
        const auto turns = settingsOf().turns;
        QCOMPARE(turns.size(), 3);
        QCOMPARE(turns[2].role, QString("user"));
        QCOMPARE(turns[2].content, QString("Are you there?"));
        QVERIFY(w.chatView()->transcriptText().contains("Are you there?"));
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("chat_remote_target_failed.png"))));

        // Back on the same port: Regenerate answers the kept message.
        kvs::server::ServerOptions so;
        so.host = "127.0.0.1";
        so.port = port;
        so.served_model_name = "tiny";
        auto session = kvs::Session::open(kvs::test::tiny_server_model());
        QVERIFY(session.is_ok());
        kvs::EngineOptions eo;
        eo.n_threads = 2;
        eo.snapshot_every = 0;
        auto loop = (*session)->start_loop(eo);
        QVERIFY(loop.is_ok());
        auto server = std::make_unique<kvs::server::OpenAiServer>(session.value(), *loop.value(), so);
        QVERIFY2(server->start().is_ok(), "could not listen on the same port again");
        auto* regenerate = w.chatView()->findChild<QPushButton*>("regenerateButton");
        QVERIFY(regenerate && regenerate->isEnabled());
        QTest::mouseClick(regenerate, Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(settingsOf().turns.size() == 4 &&
                                     settingsOf().turns[3].state == kvs::app::SavedTurn::State::Complete && canSend(w),
                                 60000);
        QCOMPARE(settingsOf().turns[2].content, QString("Are you there?"));
        QVERIFY(!settingsOf().turns[3].content.isEmpty());
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("chat_remote_target.png"))));
        server->stop();
    }
};

QTEST_MAIN(TestModelWindow)
#include "tst_model_window.moc"
