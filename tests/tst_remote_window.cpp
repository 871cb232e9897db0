// ctest-labels: ui remote net
// The remote chat window and the Connections dialog (app/remote/gui) with real widgets,
// against a live kvscope server and a misbehaving one on 127.0.0.1:
//  - Connections: Test finds the KV Scope server and its model, Save keeps it (the key in a
//    0600 file here: tests never use a keyring), the dialog says where keys are kept;
//  - a chat streams into the transcript; the remote engine view fills from /metrics with the
//    server's block count and says it shows aggregates, not a per-block map;
//  - a server that never answers: the window's event loop keeps turning, Stop ends the reply,
//    the user's message stays and Regenerate is offered; a stream cut mid-event keeps the
//    partial reply with a message saying so;
//  - switching connections keeps the chat.
// Saves a screenshot of the window (tests/output/remote_chat_window.png).
#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
#include <QStandardPaths>
#include <QTextBrowser>
#include <QtTest>
#include <atomic>
#include <thread>

#include "app/model_manager.h"
#include "app/remote/gui/connections_dialog.h"
#include "app/remote/gui/remote_chat_window.h"
#include "app/remote/gui/remote_point.h"
#include "app/remote/prometheus_text.h"
#include "tests/support/live_server.h"
#include "ui/chat_view.h"
#include "ui/remote_metrics_view.h"

using namespace kvs;
using namespace kvs::remote;

namespace {

// A server whose chat completions misbehave by model name: "silent" (headers, then nothing
// for at most 20 s) or "cut" (one piece, then the stream stops mid-event).
class BadServer {
public:
    BadServer() {
        m_svr.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"object":"list","data":[{"id":"silent"},{"id":"cut"}]})", "application/json");
        });
        m_svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
            const auto body = nlohmann::json::parse(req.body, nullptr, false);
            const std::string mode = body.is_object() ? body.value("model", "") : "";
            std::atomic<bool>* quit = &m_quit;
            res.set_chunked_content_provider("text/event-stream", [mode, quit](size_t, httplib::DataSink& sink) {
                if (mode == "cut") {
                    const std::string s =
                        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half a rep\"}}]}\n\n"
                        "data: {\"choices\":[{\"delta\":{\"con";
                    sink.write(s.data(), s.size());
                    sink.done();
                    return true;
                }
                for (int i = 0; i < 2000 && !*quit; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                return false;
            });
        });
        m_port = m_svr.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_svr.listen_after_bind(); });
    }
    ~BadServer() {
        m_quit = true;
        m_svr.stop();
        m_thread.join();
    }
    QString url() const { return QStringLiteral("http://127.0.0.1:%1").arg(m_port); }

private:
    httplib::Server m_svr;
    std::thread m_thread;
    int m_port = 0;
    std::atomic<bool> m_quit{false};
};

QString transcript(RemoteChatWindow& w) { return w.chatView()->transcriptText(); }

}  // namespace

class TestRemoteWindow : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    std::shared_ptr<SecretStore> m_secrets;
    std::unique_ptr<ConnectionStore> m_store;
    std::unique_ptr<test::LiveServer> m_live;
    BadServer m_bad;
    QString m_liveId, m_silentId, m_cutId;

    QString add(const QString& name, const QString& url, const QString& model) {
        RemoteConnection c;
        c.name = name;
        c.baseUrl = url;
        c.model = model;
        QString error, id;
        if (!m_store->save(c, {}, &error, &id)) qFatal("save: %s", qPrintable(error));
        return id;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_secrets = std::make_shared<SecretStore>(m_dir.filePath(QStringLiteral("keys.json")), false);
        m_store = std::make_unique<ConnectionStore>(m_dir.filePath(QStringLiteral("remote.ini")), m_secrets);
        EngineOptions eo;
        eo.kv_blocks = 128;
        auto ls = test::start_live_server(test::tiny_server_model("remote_window_tiny.gguf"), {}, eo);
        QVERIFY2(ls, ls.message().c_str());
        m_live = std::move(ls.value());
    }
    void cleanupTestCase() { m_live.reset(); }

    void connectionsDialogTestsAndSaves() {
        ConnectionsDialog d(m_store.get());
        QVERIFY(d.storageText().contains(QStringLiteral("readable only by you")));
        d.nameEdit()->setText(QStringLiteral("local kvscope serve"));
        d.urlEdit()->setText(QStringLiteral("http://127.0.0.1:%1/v1").arg(m_live->server->port()));
        QSignalSpy done(&d, &ConnectionsDialog::testFinished);
        d.test();
        QVERIFY(d.testing());
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 20000);
        QCOMPARE(done.first().first().toBool(), true);
        QVERIFY2(d.resultText().contains(QStringLiteral("KV Scope")), qPrintable(d.resultText()));
        QCOMPARE(d.modelBox()->currentText(), QStringLiteral("tiny"));
        QVERIFY(d.saveForm());
        QCOMPARE(m_store->connections().size(), 1);
        m_liveId = m_store->connections().front().id;
        QCOMPARE(m_store->connections().front().kind, QStringLiteral("KV Scope"));
        // A dead URL: the test answers "not reachable" without freezing the dialog.
        d.urlEdit()->setText(QStringLiteral("http://127.0.0.1:1"));
        d.test();
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 2, 20000);
        QCOMPARE(done.last().first().toBool(), false);
        QVERIFY2(d.resultText().contains(QStringLiteral("not reachable")), qPrintable(d.resultText()));
    }

    void chatAndRemoteViews() {
        QVERIFY(!m_liveId.isEmpty());
        RemoteChatWindow w(m_store.get());
        w.show();
        w.useConnection(m_liveId);
        RemoteSampling s;
        s.temperature = 0;
        s.maxTokens = 24;
        w.setSampling(s);
        w.send(QStringLiteral("Hello there"));
        QVERIFY(w.generating());
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 60000);
        QCOMPARE(w.turns().size(), 2);
        QVERIFY(!w.turns().back().content.isEmpty());
        QVERIFY(transcript(w).contains(QStringLiteral("Hello there")));
        QVERIFY(transcript(w).contains(QStringLiteral("tokens")));  // the summary line
        QTRY_VERIFY_WITH_TIMEOUT(w.metricsView()->pointCount() >= 2, 15000);
        QVERIFY(w.metricsView()->captionText().contains(QStringLiteral("not a per-block map")));
        QVERIFY2(w.metricsView()->tilesText().contains(QStringLiteral("of 128 blocks")),
                 qPrintable(w.metricsView()->tilesText()));
        // A second message while the poller reads: the chat keeps both exchanges.
        w.send(QStringLiteral("And again"));
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 60000);
        QCOMPARE(w.turns().size(), 4);
        QTest::qWait(1200);
        w.resize(1500, 900);
        const QString shot = QString::fromStdString(test::output_path("remote_chat_window.png"));
        QVERIFY(w.grab().save(shot));
    }

    void deadAndCutServersKeepTheChat() {
        if (m_liveId.isEmpty())
            m_liveId = add(QStringLiteral("live"), QStringLiteral("http://127.0.0.1:%1").arg(m_live->server->port()),
                           QStringLiteral("tiny"));
        m_silentId = add(QStringLiteral("silent"), m_bad.url(), QStringLiteral("silent"));
        m_cutId = add(QStringLiteral("cut"), m_bad.url(), QStringLiteral("cut"));
        RemoteChatWindow w(m_store.get());
        w.show();
        w.useConnection(m_silentId);
        RemoteSampling s;
        s.maxTokens = 24;  // the tiny model's context is 512
        w.setSampling(s);
        int beats = 0;
        QTimer hb;
        connect(&hb, &QTimer::timeout, [&beats] { ++beats; });
        hb.start(10);
        w.send(QStringLiteral("Are you there?"));
        QTest::qWait(500);
        QVERIFY(beats >= 20);  // the window kept turning while the server said nothing
        QVERIFY(w.generating());
        w.stop();
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 5000);
        QVERIFY(transcript(w).contains(QStringLiteral("Are you there?")));
        QVERIFY(transcript(w).contains(QStringLiteral("Stopped.")));
        QVERIFY(transcript(w).contains(QStringLiteral("Regenerate")));
        QCOMPARE(w.turns().size(), 1);  // the user's message stays for Retry
        // Switching is instant and keeps the chat; the cut stream's piece stays visible.
        w.useConnection(m_cutId);
        w.retry();
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 10000);
        QVERIFY(transcript(w).contains(QStringLiteral("half a rep")));
        QVERIFY2(transcript(w).contains(QStringLiteral("cut off")), qPrintable(transcript(w)));
        QCOMPARE(w.turns().size(), 1);
        QVERIFY(transcript(w).contains(QStringLiteral("Are you there?")));
        // Back to the live server: Regenerate answers the same message there.
        w.useConnection(m_liveId);
        w.retry();
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 60000);
        QVERIFY2(w.turns().size() == 2, qPrintable(transcript(w)));
    }

    // File ▸ Models… ▸ Remote connections… opens the remote chat window with its Connections
    // dialog (test mode: the connections file goes under the test's config folder).
    void modelsDialogOpensTheRemoteWindow() {
        QStandardPaths::setTestModeEnabled(true);
        QWidget host;
        app::ModelManagerDialog d(&host);
        auto* b = d.findChild<QPushButton*>(QStringLiteral("remoteConnections"));
        QVERIFY(b);
        bool sawDialog = false;
        QTimer::singleShot(300, [&sawDialog] {
            if (auto* m = qobject_cast<ConnectionsDialog*>(QApplication::activeModalWidget())) {
                sawDialog = true;
                m->reject();
            }
        });
        b->click();
        QVERIFY(sawDialog);
        auto* w = host.findChild<RemoteChatWindow*>();
        QVERIFY(w);
        QVERIFY(w->isVisible());
        w->close();
        QStandardPaths::setTestModeEnabled(false);
    }

    // The view's numbers between two readings: bucket differences, counter rates.
    void intervalPoint() {
        auto reading = [](double t, const char* text) {
            auto page = parse_prometheus_text(text);
            if (!page) qFatal("%s", page.message().c_str());
            auto m = read_vllm_metrics(*page);
            if (!m) qFatal("%s", m.message().c_str());
            MetricsReading r;
            r.t_s = t;
            r.m = *m;
            return r;
        };
        // 4 requests with TTFT in (0.04, 0.06] before; then 2 more in (0.25, 0.5].
        const MetricsReading a = reading(1.0,
                                         "vllm:time_to_first_token_seconds_bucket{le=\"0.06\",model_name=\"m\"} 4\n"
                                         "vllm:time_to_first_token_seconds_bucket{le=\"0.5\",model_name=\"m\"} 4\n"
                                         "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 4\n"
                                         "vllm:generation_tokens_total{model_name=\"m\"} 100\n"
                                         "vllm:prefix_cache_queries_total{model_name=\"m\"} 50\n"
                                         "vllm:prefix_cache_hits_total{model_name=\"m\"} 0\n");
        const MetricsReading b = reading(3.0,
                                         "vllm:time_to_first_token_seconds_bucket{le=\"0.06\",model_name=\"m\"} 4\n"
                                         "vllm:time_to_first_token_seconds_bucket{le=\"0.5\",model_name=\"m\"} 6\n"
                                         "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 6\n"
                                         "vllm:generation_tokens_total{model_name=\"m\"} 160\n"
                                         "vllm:prefix_cache_queries_total{model_name=\"m\"} 150\n"
                                         "vllm:prefix_cache_hits_total{model_name=\"m\"} 75\n");
        const ui::RemoteMetricsPoint first = to_view_point(a, nullptr);
        QVERIFY(std::fabs(first.ttftP50 - 0.03) < 1e-12);  // 4 in (0, 0.06]: rank 2 of 4
        const ui::RemoteMetricsPoint p = to_view_point(b, &a);
        QVERIFY(std::fabs(p.ttftP50 - 0.28) < 1e-12);            // only the 2 new ones: 0.06 + 0.44 x 1/2
        QVERIFY(std::fabs(p.ttftP50All - 0.045) < 1e-12);        // all 6: rank 3 = 3 of the 4 in (0, 0.06]
        QVERIFY(std::fabs(p.generationTokPerS - 30.0) < 1e-12);  // 60 tokens in 2 s
        QVERIFY(std::fabs(p.prefixHitRate - 0.75) < 1e-12);      // 75 of 100 queried tokens
        QVERIFY(std::fabs(p.prefixHitRateTotal - 0.5) < 1e-12);
        // Counters that went down (a restarted server): the reading alone, no negative rate.
        const ui::RemoteMetricsPoint back = to_view_point(a, &b);
        QVERIFY(std::isnan(back.generationTokPerS));
        QVERIFY(std::fabs(back.ttftP50 - 0.03) < 1e-12);
    }

    // With the default model installed: a chat through a kvscope server running it while
    // three other clients stream, for a screenshot with busy remote views
    // (tests/output/remote_chat_default_model.png).
    void screenshotWithDefaultModel() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
        EngineOptions eo;
        eo.kv_blocks = 256;
        server::ServerOptions so;
        so.served_model_name = "smollm2-135m";
        auto ls = test::start_live_server(model, so, eo);
        QVERIFY2(ls, ls.message().c_str());
        const auto port = (*ls)->server->port();
        QString id;
        {
            RemoteConnection c;
            c.name = QStringLiteral("kvscope serve");
            c.baseUrl = QStringLiteral("http://127.0.0.1:%1/v1").arg(port);
            c.model = QStringLiteral("smollm2-135m");
            c.kind = QStringLiteral("KV Scope");
            QString error;
            QVERIFY(m_store->save(c, {}, &error, &id));
        }
        RemoteChatWindow w(m_store.get());
        w.resize(1600, 1000);
        w.show();
        w.useConnection(id);
        RemoteSampling s;
        s.temperature = 0;
        s.maxTokens = 120;
        w.setSampling(s);
        // Other clients of the same server, so the aggregates move.
        std::vector<std::thread> others;
        for (int i = 0; i < 3; ++i)
            others.emplace_back([port, i] {
                httplib::Client c("127.0.0.1", port);
                c.set_read_timeout(120, 0);
                const nlohmann::json body = {{"model", "smollm2-135m"},
                                             {"prompt", "Once upon a time, story number " + std::to_string(i)},
                                             {"max_tokens", 160 + 40 * i},
                                             {"ignore_eos", true}};
                (void)c.Post("/v1/completions", body.dump(), "application/json");
            });
        QTest::qWait(1500);
        w.send(QStringLiteral("In two sentences: what does a KV cache store in a transformer?"));
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 180000);
        for (auto& t : others) t.join();
        QTest::qWait(2500);
        QVERIFY2(w.turns().size() == 2, qPrintable(transcript(w)));
        QVERIFY(w.grab().save(QString::fromStdString(test::output_path("remote_chat_default_model.png"))));
        QString error;
        QVERIFY(m_store->remove(id, &error));
    }
};

QTEST_MAIN(TestRemoteWindow)
#include "tst_remote_window.moc"
