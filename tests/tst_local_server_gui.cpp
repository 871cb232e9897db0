// ctest-labels: ui net
// The window's Local server (Server ▸ Local server) on a tiny generated model, offscreen: an
// HTTP client's streamed completion and a chat are requests of one engine - both in the
// bridge's snapshot and the views' frame, the HTTP one named by its `user` field or its
// address - and pause, single step, selection and Cancel request act on the HTTP request as
// on a chat's; the status bar says where the server listens and how many clients it serves;
// a port in use turns the switch back off with a message naming the address; a new model
// restarts the server; switching off closes the port; the switch and its address are
// remembered across launches (on at quit: on again at the next launch, at the saved host and
// port, once the model is loaded; off at quit: stays off). The client is cpp-httplib over
// loopback on a thread of the test; its stream is read as Server-Sent Events.
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QAction>
#include <QComboBox>
#include <QFile>
#include <QLineEdit>
#include <QLabel>
#include <QMessageBox>
#include <QDockWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/engine_bridge.h"
#include "app/engine_panel.h"
#include "app/local_server_control.h"
#include "app/local_server_dialog.h"
#include "app/main_window.h"
#include "app/server/openai_server.h"
#include "tests/support/live_server.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"
#include "ui/kv_block_map.h"
#include "ui/slot_timeline.h"

using json = nlohmann::json;
using kvs::app::MainWindow;

namespace {

// One HTTP call on a thread of its own: a POST whose reply (streamed or not) is collected.
struct HttpCall {
    std::string body;
    int status = 0;
    std::atomic<bool> done{false};
    std::thread thread;

    void post(int port, const std::string& path, const json& request) {
        thread = std::thread([this, port, path, text = request.dump()] {
            httplib::Client c("127.0.0.1", port);
            c.set_read_timeout(120, 0);
            c.set_connection_timeout(5, 0);
            httplib::Request req;
            req.method = "POST";
            req.path = path;
            req.set_header("Content-Type", "application/json");
            req.body = text;
            req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
                body.append(data, n);
                return true;
            };
            auto r = c.send(req);
            status = r ? r->status : -1;
            done = true;
        });
    }
    ~HttpCall() {
        if (thread.joinable()) thread.join();
    }
};

int portOf(const QString& url) { return url.section(':', -1).toInt(); }

// True when something accepts connections on 127.0.0.1:port.
bool portOpen(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    return static_cast<bool>(c.Get("/health"));
}

const kvs::ui::RequestRow* rowLabelled(const kvs::ui::EngineFrame& f, const QString& prefix) {
    for (const auto& r : f.requests)
        if (r.label.startsWith(prefix)) return &r;
    return nullptr;
}

}  // namespace

class TestLocalServerGui : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;
    QString m_defaultModel;  // the installed SmolLM2, or ""
    QString m_python;        // the venv's, for the openai package

    QString chats(const char* name) const { return m_dir.filePath(QString("chats-%1.json").arg(name)); }

    static void useServerSettings(int port) {
        QSettings st;
        st.setValue("server/host", "127.0.0.1");
        st.setValue("server/port", port);
        st.setValue("server/hasKey", false);
        st.setValue("server/enabled", false);  // each test starts with the switch off
    }

    // A port nothing listens on now (bound, read, closed).
    static int freePort() {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        socklen_t len = sizeof(a);
        int port = 0;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
            port = ntohs(a.sin_port);
        ::close(fd);
        return port;
    }

    static bool switchOn(MainWindow& w) {
        auto* ctl = w.localServer();
        ctl->switchAction()->trigger();
        if (!ctl->switchAction()->isChecked()) return false;
        return QTest::qWaitFor([&] { return ctl->state().running && !ctl->busy(); }, 20000);
    }

    static void waitReady(MainWindow& w) {
        auto* button = w.chatView()->findChild<QPushButton*>("sendButton");
        QVERIFY(button);
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled(), 30000);
    }

    static void sendChat(MainWindow& w, const QString& text) {
        auto* prompt = w.chatView()->findChild<QPlainTextEdit*>("chatPrompt");
        auto* button = w.chatView()->findChild<QPushButton*>("sendButton");
        QVERIFY(prompt && button && button->isEnabled());
        prompt->setPlainText(text);
        QTest::mouseClick(button, Qt::LeftButton);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_defaultModel = QString::fromStdString(kvs::test::default_model_path());  // before XDG_DATA_HOME moves
        m_python = QString::fromStdString(kvs::test::find_python());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());
        qunsetenv("DBUS_SESSION_BUS_ADDRESS");  // API keys go to the test's own key file, never a keyring
        QStandardPaths::setTestModeEnabled(true);  // settings stay out of the user's config
        m_model = m_dir.filePath("tiny.gguf");
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 2;
        spec.n_embd = 64;
        spec.n_ctx_train = 1024;
        spec.weight_type = kvs::DType::Q8_0;
        const auto st = kvs::test::write_tiny_gguf(m_model.toStdString(), spec);
        QVERIFY2(st.is_ok(), st.message().c_str());
    }

    // How the server names its clients for the views.
    void clientLabels() {
        using kvs::server::OpenAiServer;
        QCOMPARE(OpenAiServer::client_label("127.0.0.1", ""), std::string("HTTP 127.0.0.1"));
        QCOMPARE(OpenAiServer::client_label("::1", "alice"), std::string("alice"));
        QCOMPARE(OpenAiServer::client_label("127.0.0.1", "a\nb\tc"), std::string("a b c"));
        // cut to 48 bytes, never inside a character: 47 ASCII bytes then a 2-byte "é"
        const std::string cut = OpenAiServer::client_label("x", std::string(47, 'a') + "\xc3\xa9" + "zz");
        QCOMPARE(cut, std::string(47, 'a'));
    }

    // Server settings…: loopback unless chosen, a warning naming who can reach another
    // address, an empty address refused; the API key kept out of the settings file.
    void settingsDialogAndKey() {
        QVERIFY(kvs::app::isLoopbackHost("127.0.0.1") && kvs::app::isLoopbackHost("127.4.5.6") &&
                kvs::app::isLoopbackHost("::1") && kvs::app::isLoopbackHost("localhost"));
        QVERIFY(!kvs::app::isLoopbackHost("0.0.0.0") && !kvs::app::isLoopbackHost("192.168.1.20") &&
                !kvs::app::isLoopbackHost("::") && !kvs::app::isLoopbackHost("example.org"));
        kvs::app::LocalServerDialog d(kvs::app::LocalServerSettings{});
        d.show();
        auto* host = d.findChild<QComboBox*>("serverHost");
        auto* key = d.findChild<QLineEdit*>("serverApiKey");
        auto* warning = d.findChild<QLabel*>("serverExposureWarning");
        QVERIFY(host && key && warning);
        QCOMPARE(host->currentText(), QString("127.0.0.1"));
        QCOMPARE(d.settings().port, 8000);
        QVERIFY2(warning->text().contains("Only programs on this computer"), qPrintable(warning->text()));
        host->setCurrentText("0.0.0.0");
        QVERIFY2(warning->text().contains("can be reached from other machines") &&
                     warning->text().contains("Set an API key"),
                 qPrintable(warning->text()));
        QVERIFY(d.grab().save(QString::fromStdString(kvs::test::output_path("local_server_dialog.png"))));
        key->setText("sk-local-test");
        QVERIFY(!warning->text().contains("Set an API key"));
        host->setCurrentText("");
        d.accept();  // refused: the dialog stays, saying why
        QVERIFY(d.isVisible());
        QVERIFY(d.findChild<QLabel*>("serverSettingsError")->text().contains("address is empty"));

        kvs::app::LocalServerSettings s;
        s.host = "127.0.0.1";
        s.port = 8123;
        s.apiKey = "sk-local-test";
        QString err;
        QVERIFY2(s.save(&err), qPrintable(err));
        const kvs::app::LocalServerSettings back = kvs::app::LocalServerSettings::load(&err);
        QVERIFY2(err.isEmpty(), qPrintable(err));
        QCOMPARE(back.port, 8123);
        QCOMPARE(back.apiKey, QString("sk-local-test"));
        QSettings st;
        st.sync();
        QFile f(st.fileName());
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY2(!f.readAll().contains("sk-local-test"), qPrintable(st.fileName()));
        s.apiKey.clear();  // no key: removed from the key store
        QVERIFY2(s.save(&err), qPrintable(err));
        QCOMPARE(kvs::app::LocalServerSettings::load(&err).apiKey, QString());
    }

    void httpAndChatShareTheEngine() {
        useServerSettings(0);  // any free port
        MainWindow w(m_model, nullptr, chats("share"));
        w.resize(1400, 900);
        w.show();
        waitReady(w);
        auto* ctl = w.localServer();
        QVERIFY(switchOn(w));
        const QString url = ctl->state().url;
        const int port = portOf(url);
        QVERIFY2(url.startsWith("http://127.0.0.1:") && port > 0, qPrintable(url));

        // Pause the engine, then queue a chat reply and two HTTP requests.
        auto* pause = w.findChild<QPushButton*>("pauseButton");
        auto* step = w.findChild<QPushButton*>("stepButton");
        QTest::mouseClick(pause, Qt::LeftButton);
        QVERIFY(pause->isChecked());
        sendChat(w, "Hello from the window");
        HttpCall alice, anon;
        alice.post(port, "/v1/completions",
                   {{"prompt", "Once upon a time"},
                    {"max_tokens", 300},
                    {"ignore_eos", true},
                    {"stream", true},
                    {"user", "alice"}});
        anon.post(port, "/v1/chat/completions",
                  {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}, {"ignore_eos", true}, {"n", 2}});
        // Both HTTP requests wait in the engine: two clients in the status bar.
        QTRY_COMPARE_WITH_TIMEOUT(ctl->state().clients, 2, 20000);
        auto* indicator = w.findChild<QLabel*>("serverIndicator");
        QVERIFY(indicator);
        QTRY_COMPARE_WITH_TIMEOUT(indicator->text(), QString("Serving %1 · 2 clients").arg(url), 5000);
        QVERIFY(indicator->isVisible());

        // Steps (one per click) until the three requests are in the snapshot and the views' frame.
        QTRY_COMPARE_WITH_TIMEOUT(ctl->state().inFlight, 3, 20000);  // alice, and anon's two choices
        for (int i = 0; i < 50; ++i) {
            QTest::mouseClick(step, Qt::LeftButton);
            QTest::qWait(100);
            if (rowLabelled(w.lastFrame(), "alice #") && rowLabelled(w.lastFrame(), "HTTP 127.0.0.1 #")) break;
        }
        QVERIFY(rowLabelled(w.lastFrame(), "alice #") && rowLabelled(w.lastFrame(), "HTTP 127.0.0.1 #"));
        const kvs::ui::EngineFrame& f = w.lastFrame();
        const qint64 aliceId = rowLabelled(f, "alice #")->id;
        qint64 chatId = -1;
        for (const auto& r : f.requests)
            if (!r.label.startsWith("alice #") && !r.label.startsWith("HTTP 127.0.0.1 #")) chatId = r.id;
        QVERIFY2(chatId > 0, "the chat's request is in the frame beside the HTTP ones");
        auto snap = w.bridge()->latestSnapshot();
        QVERIFY(snap);
        int seen = 0;
        for (const auto& r : snap->requests) {
            const std::string want = r.id == aliceId ? "alice" : r.id == chatId ? "" : "HTTP 127.0.0.1";
            QCOMPARE(r.client, want);
            ++seen;
        }
        QVERIFY(seen >= 3);

        // Steps until alice decodes; the slot timeline and the block map show every request.
        for (int i = 0; i < 40; ++i) {
            const auto* a = rowLabelled(w.lastFrame(), "alice #");
            if (a && a->outputTokens >= 2) break;
            QTest::mouseClick(step, Qt::LeftButton);
            QTest::qWait(50);
        }
        auto* timeline = w.findChild<kvs::ui::SlotTimelineView*>();
        auto* blockMap = w.findChild<kvs::ui::KvBlockMapView*>();
        QVERIFY(timeline && blockMap);
        QTRY_VERIFY_WITH_TIMEOUT(timeline->rowRequestIds().contains(aliceId) &&
                                     timeline->rowRequestIds().contains(chatId),
                                 5000);
        bool aliceBlock = false, chatBlock = false;
        for (const auto& b : blockMap->frame().blocks) {
            aliceBlock |= b.owners.contains(aliceId);
            chatBlock |= b.owners.contains(chatId);
        }
        QVERIFY2(aliceBlock && chatBlock, "the HTTP request and the chat hold blocks of one pool");
        int anonRows = 0;  // n = 2: the second choice forks from the first, named by the same client
        for (const auto& r : w.lastFrame().requests) anonRows += r.label.startsWith("HTTP 127.0.0.1 #");
        QCOMPARE(anonRows, 2);

        // Paused: once the clicked steps have run, alice does not move; each Step moves her by one token.
        for (int i = 0; i < 50; ++i) {
            const qint64 s0 = w.lastFrame().step.step;
            QTest::qWait(300);
            if (w.lastFrame().step.step == s0) break;
        }
        const int before = rowLabelled(w.lastFrame(), "alice #")->outputTokens;
        QVERIFY2(before >= 2, qPrintable(QString::number(before)));
        QTest::qWait(300);
        QCOMPARE(rowLabelled(w.lastFrame(), "alice #")->outputTokens, before);
        QTest::mouseClick(step, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(rowLabelled(w.lastFrame(), "alice #")->outputTokens, before + 1, 10000);

        // Select alice in the Engine dock's table (a click on her row): the block map and the
        // timeline follow; Cancel request stops her stream with finish_reason "abort".
        auto* table = w.findChild<QTableWidget*>("requestTable");
        QVERIFY(table);
        QTableWidgetItem* item = nullptr;
        auto findAlice = [&] {
            for (int i = 0; i < table->rowCount(); ++i)
                if (table->item(i, 0) && table->item(i, 0)->text().startsWith("alice #")) item = table->item(i, 0);
            return item != nullptr;
        };
        QTRY_VERIFY_WITH_TIMEOUT(findAlice(), 5000);
        table->scrollToItem(item);
        QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualItemRect(item).center());
        QCOMPARE(blockMap->selectedRequest(), aliceId);
        QCOMPARE(timeline->selectedRequest(), aliceId);
        auto* cancel = w.findChild<QPushButton*>("cancelRequestButton");
        QVERIFY(cancel && cancel->isEnabled());
        QTest::mouseClick(cancel, Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(alice.done.load(), 20000);  // ends while the engine is still paused
        alice.thread.join();
        QCOMPARE(alice.status, 200);
        const kvs::test::SseBody sse = kvs::test::parse_sse(alice.body);
        QVERIFY2(sse.done && sse.bad_lines.empty() && !sse.chunks.empty(), alice.body.c_str());
        QCOMPARE(sse.chunks.back()["choices"][0]["finish_reason"], json("abort"));
        std::string text;
        for (const auto& c : sse.chunks) text += c["choices"][0]["text"].get<std::string>();
        QVERIFY2(!text.empty(), "alice got her tokens before the cancel");

        // The others go on once the engine runs again.
        QTest::mouseClick(pause, Qt::LeftButton);
        QVERIFY(!pause->isChecked());
        QTRY_VERIFY_WITH_TIMEOUT(anon.done.load(), 60000);
        anon.thread.join();
        QCOMPARE(anon.status, 200);
        const json reply = json::parse(anon.body);
        QCOMPARE(reply["choices"].size(), size_t{2});
        for (const auto& c : reply["choices"]) QCOMPARE(c["finish_reason"], json("length"));
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 60000);
        QTRY_COMPARE_WITH_TIMEOUT(indicator->text(), QString("Serving %1 · 0 clients").arg(url), 5000);
        // The metrics view's latencies count the three HTTP engine requests with the chat's reply.
        QTRY_COMPARE_WITH_TIMEOUT(w.bridge()->recentLatency().n_requests, 4, 5000);
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("local_server_gui.png"))));

        // Off: the indicator goes and the port is closed.
        ctl->switchAction()->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(!ctl->state().running && !ctl->busy(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(!indicator->isVisible(), 5000);
        QVERIFY(!portOpen(port));
    }

    // A port something else listens on: the switch goes back off and the message names the address.
    void portInUse() {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        QVERIFY(fd >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        QVERIFY(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
        QVERIFY(::listen(fd, 4) == 0);
        socklen_t len = sizeof(a);
        QVERIFY(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        const int port = ntohs(a.sin_port);
        useServerSettings(port);
        {
            MainWindow w(m_model, nullptr, chats("inuse"));
            w.show();
            waitReady(w);
            auto* ctl = w.localServer();
            QSignalSpy failed(ctl, &kvs::app::LocalServerControl::failed);
            ctl->switchAction()->trigger();
            QTRY_COMPARE_WITH_TIMEOUT(failed.size(), 1, 20000);
            const QString msg = failed.at(0).at(0).toString();
            QVERIFY2(msg.contains(QString("127.0.0.1:%1").arg(port)), qPrintable(msg));
            QVERIFY(!ctl->switchAction()->isChecked());
            QVERIFY(!ctl->state().running);
            auto* box = w.findChild<QMessageBox*>("localServerError");
            QVERIFY(box && box->text() == msg);
            box->close();
            QVERIFY(!w.findChild<QLabel*>("serverIndicator")->isVisible());
            // The window goes on: the chat still works.
            sendChat(w, "still here");
            QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 60000);
        }
        ::close(fd);
    }

    // Loading a model again restarts the server on the new engine; closing the window with a
    // stream in flight ends it with "abort" and closes the port.
    // The switch survives a restart of the program: on at quit -> on at the next launch, at the
    // saved address and port, once the model is loaded (the status bar says so); switched off ->
    // the launch after that serves nothing. The settings file holds host, port and the switch,
    // never the key.
    void switchRememberedAcrossLaunches() {
        const int port = freePort();
        QVERIFY(port > 0);
        useServerSettings(port);
        QVERIFY(!kvs::app::LocalServerControl::rememberedOn());
        {
            MainWindow w(m_model, nullptr, chats("remember"));
            w.show();
            waitReady(w);
            QVERIFY(!w.localServer()->state().running);  // off: nothing starts by itself
            QVERIFY(switchOn(w));
            QCOMPARE(portOf(w.localServer()->state().url), port);
        }  // quit with the switch on
        QVERIFY(kvs::app::LocalServerControl::rememberedOn());
        QTRY_VERIFY_WITH_TIMEOUT(!portOpen(port), 10000);
        {
            MainWindow w(m_model, nullptr, chats("remember"));
            w.show();
            auto* ctl = w.localServer();
            QTRY_VERIFY_WITH_TIMEOUT(ctl->state().running && !ctl->busy(), 30000);  // on again, by itself
            QVERIFY(ctl->switchAction()->isChecked());
            QCOMPARE(ctl->state().url, QString("http://127.0.0.1:%1").arg(port));
            QVERIFY(portOpen(port));
            QTRY_VERIFY_WITH_TIMEOUT(ctl->indicator()->text().contains(QString(":%1").arg(port)), 5000);
            ctl->switchAction()->trigger();  // off
            QTRY_VERIFY_WITH_TIMEOUT(!ctl->state().running && !ctl->busy(), 20000);
            QVERIFY(!kvs::app::LocalServerControl::rememberedOn());
        }
        {
            MainWindow w(m_model, nullptr, chats("remember"));
            w.show();
            waitReady(w);
            QTest::qWait(500);  // a start would be queued by now (it follows the model's load)
            QVERIFY(!w.localServer()->switchAction()->isChecked());
            QVERIFY(!w.localServer()->state().running);
            QVERIFY(!portOpen(port));
        }
        const QSettings st;
        QCOMPARE(st.value("server/port").toInt(), port);
        QCOMPARE(st.value("server/host").toString(), QString("127.0.0.1"));
        for (const QString& k : st.allKeys()) QVERIFY2(!k.contains("apiKey", Qt::CaseInsensitive), qPrintable(k));
    }

    void modelSwitchAndQuit() {
        useServerSettings(0);
        HttpCall stream;
        int port = 0;
        {
            MainWindow w(m_model, nullptr, chats("switch"));
            w.show();
            waitReady(w);
            auto* ctl = w.localServer();
            QVERIFY(switchOn(w));
            QSignalSpy loaded(w.bridge(), &kvs::app::EngineBridge::modelLoaded);
            auto* b = w.bridge();
            const QString model = m_model;
            QMetaObject::invokeMethod(b, [b, model] { b->loadModel(model); });
            QTRY_COMPARE_WITH_TIMEOUT(loaded.size(), 1, 30000);
            QTRY_VERIFY_WITH_TIMEOUT(ctl->state().running, 10000);
            QVERIFY(ctl->switchAction()->isChecked());
            port = portOf(ctl->state().url);
            QVERIFY(portOpen(port));
            w.findChild<QPushButton*>("pauseButton")->click();  // the stream stays in flight
            stream.post(port, "/v1/completions",
                        {{"prompt", "forever"}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}});
            QTRY_COMPARE_WITH_TIMEOUT(ctl->state().inFlight, 1, 20000);
        }  // the window closes with the server on
        QTRY_VERIFY_WITH_TIMEOUT(stream.done.load(), 20000);
        stream.thread.join();
        const kvs::test::SseBody sse = kvs::test::parse_sse(stream.body);
        QVERIFY2(sse.done && !sse.chunks.empty(), stream.body.c_str());
        QCOMPARE(sse.chunks.back()["choices"][0]["finish_reason"], json("abort"));
        QVERIFY(!portOpen(port));
    }

    // The picture of the issue, on the installed default model: a chat generating beside three
    // streamed completions sent by the openai package (users alice, bob and carol), sharing
    // the KV block map and the slot timeline. Each client's stream must end by length with
    // text; tests/output/local_server_http_and_chat.png is what docs/screenshots shows.
    void defaultModelClientsAndChat() {
        if (m_defaultModel.isEmpty()) QSKIP("the default model is not installed");
        QProcess probe;
        probe.start(m_python, {"-c", "import openai"});
        if (!probe.waitForFinished(60000) || probe.exitCode() != 0) QSKIP("the openai package is not installed");
        useServerSettings(0);
        MainWindow w(m_defaultModel, nullptr, chats("default"));
        w.resize(1600, 1000);
        w.show();
        waitReady(w);
        auto* ctl = w.localServer();
        QVERIFY(switchOn(w));
        // A pool of 128 blocks (large cells in the block map): a new engine, which the server
        // follows (stopped on the old one, started again on the new).
        kvs::app::EngineSettings es = w.bridge()->engineSettings();
        es.kvBlocks = 128;
        QSignalSpy configured(w.bridge(), &kvs::app::EngineBridge::engineConfigured);
        auto* b = w.bridge();
        QMetaObject::invokeMethod(b, [b, es] { b->configureEngine(es); });
        QTRY_COMPARE_WITH_TIMEOUT(configured.size(), 1, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(ctl->state().running, 10000);
        QVERIFY(ctl->switchAction()->isChecked());
        const QString url = ctl->state().url;
        auto* pause = w.findChild<QPushButton*>("pauseButton");
        QTest::mouseClick(pause, Qt::LeftButton);  // everyone starts together
        sendChat(w, "Tell me a story about a lighthouse keeper and a storm.");
        const char* script = R"(
import json, sys, openai
url, model, prompt, user = sys.argv[1:5]
c = openai.OpenAI(base_url=url + "/v1", api_key="none")
text, why = "", None
for ch in c.completions.create(model=model, prompt=prompt, max_tokens=160, stream=True, user=user,
                               temperature=0.8, seed=1, extra_body={"ignore_eos": True}):
    text += ch.choices[0].text
    why = ch.choices[0].finish_reason or why
print(json.dumps({"text": text, "finish_reason": why}))
)";
        const QStringList users = {"alice", "bob", "carol"};
        const QStringList prompts = {"The history of the printing press", "A recipe for bread:",
                                     "def fibonacci(n):"};
        std::vector<std::unique_ptr<QProcess>> clients;
        for (int i = 0; i < users.size(); ++i) {
            auto p = std::make_unique<QProcess>();
            p->start(m_python, {"-c", QString::fromLatin1(script), url, ctl->state().model, prompts[i], users[i]});
            QVERIFY(p->waitForStarted());
            clients.push_back(std::move(p));
        }
        QTRY_COMPARE_WITH_TIMEOUT(ctl->state().inFlight, 3, 60000);
        QTest::mouseClick(pause, Qt::LeftButton);  // go
        auto* timelineDock = w.findChild<QDockWidget*>("slotTimelineDock");
        timelineDock->raise();
        w.findChild<kvs::ui::SlotTimelineView*>()->setCellWidth(6);
        auto allDecoding = [&] {
            const auto& f = w.lastFrame();
            int n = 0;
            for (const auto& r : f.requests)
                if (r.outputTokens >= 48 && r.slot == kvs::ui::SlotState::Decode) ++n;
            return n >= 4;
        };
        QTRY_VERIFY_WITH_TIMEOUT(allDecoding(), 120000);
        for (const QString& u : users) QVERIFY2(rowLabelled(w.lastFrame(), u + " #"), qPrintable(u));
        w.findChild<kvs::ui::KvBlockMapView*>()->setSelectedRequest(rowLabelled(w.lastFrame(), "alice #")->id);
        QTest::qWait(200);  // the block map's labels follow at most every 150 ms
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("local_server_http_and_chat.png"))));
        for (int i = 0; i < users.size(); ++i) {
            QProcess& p = *clients[i];
            QVERIFY2(p.waitForFinished(180000), qPrintable(users[i]));
            QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
            const json out = json::parse(p.readAllStandardOutput().toStdString());
            QCOMPARE(out["finish_reason"], json("length"));
            QVERIFY(!out["text"].get<std::string>().empty());
        }
    }
};

QTEST_MAIN(TestLocalServerGui)
#include "tst_local_server_gui.moc"
