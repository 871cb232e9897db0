// ctest-labels: remote net llamacpp
// Remote connections end to end on 127.0.0.1 (every wait bounded in time):
//  - the probe (app/remote/server_probe) against a live kvscope server (kind, models,
//    /metrics, API key missing / wrong / right) and fake vLLM and llama-server answers,
//    and a port nobody listens on;
//  - RemoteChatClient (app/remote/remote_chat_client) against a live kvscope server: a greedy
//    streamed chat equals the server's non-streamed answer, Stop cancels on the server (its
//    /metrics shows 0 running again), the chat's sampling settings reach the body, and a
//    server restarted on the same port is used again after a failure;
//  - against a misbehaving server: invalid JSON, a stream cut mid-event, a 10 MB event, a
//    server that accepts and never answers, 401 / 429 / 500: each a clear message, the text
//    streamed before the fault delivered, and the GUI thread's event loop never blocked;
//  - the connection store: connections saved and read back, the API key in a 0600 file
//    (never in the settings file), bad entries skipped and named;
//  - a real llama-server (label llamacpp; built by tests/tools/bench_llamacpp.sh with
//    LLAMACPP_EXTRA_TARGETS=llama-server into $LLAMACPP_BUILD, default /tmp/llamacpp-build;
//    skipped with the reason when it or the default model is absent): probe, chat, Stop,
//    its /metrics and /slots.
#include <QFileInfo>
#include <QProcess>
#include <QtTest>
#include <atomic>
#include <chrono>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "app/remote/connection_store.h"
#include "app/remote/llama_slots.h"
#include "app/remote/metrics_poller.h"
#include "app/remote/prometheus_text.h"
#include "app/remote/remote_chat_client.h"
#include "app/remote/server_probe.h"
#include "app/remote/vllm_metrics.h"
#include "tests/support/live_server.h"
#include "tests/support/llama_server_process.h"
#include "tests/support/loopback_port.h"

using namespace kvs;
using namespace kvs::remote;
using json = nlohmann::json;

namespace {

std::string chunk(const std::string& text, const char* finish = nullptr) {
    json c = {{"choices", {{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}}}}};
    if (finish) c["choices"][0]["finish_reason"] = finish;
    return "data: " + c.dump() + "\n\n";
}

// A server that misbehaves by the model name asked for; "vllm" / "llamacpp" flavours answer
// the probe like those servers.
class FakeServer {
public:
    explicit FakeServer(std::string flavour = "") : m_flavour(std::move(flavour)) {
        m_svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            json d = {{"object", "list"},
                      {"data", {{{"id", "fake-model"}, {"object", "model"}, {"owned_by", m_flavour}}}}};
            res.set_content(d.dump(), "application/json");
        });
        m_svr.Get("/version", [this](const httplib::Request&, httplib::Response& res) {
            if (m_flavour == "vllm") res.set_content(R"({"version":"0.10.2"})", "application/json");
            else
                res.status = 404;
        });
        m_svr.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
            if (m_flavour == "llamacpp")
                res.set_content(R"({"default_generation_settings":{},"build_info":"b6000-abc"})", "application/json");
            else
                res.status = 404;
        });
        m_svr.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
            if (m_flavour == "llamacpp")
                res.set_content(R"([{"id":0,"n_ctx":4096,"is_processing":false}])", "application/json");
            else
                res.status = 404;
        });
        m_svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            if (m_flavour == "llamacpp") res.set_content("llamacpp:requests_processing 0\n", "text/plain");
            else if (m_flavour == "vllm")
                res.set_content("vllm:num_requests_running{model_name=\"fake-model\"} 1.0\n", "text/plain");
            else
                res.set_content("<html>not here</html>", "text/html");
        });
        m_svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
            const json body = json::parse(req.body, nullptr, false);
            m_last_body = body;
            const std::string mode = body.is_object() ? body.value("model", "") : "";
            if (mode == "401" || mode == "429" || mode == "500") {
                res.status = std::stoi(mode);
                if (mode == "429") res.set_header("Retry-After", "1");
                res.set_content(R"({"error":{"message":"fake )" + mode + R"(","type":"x","param":null,"code":null}})",
                                "application/json");
                return;
            }
            std::atomic<bool>* quit = &m_quit;
            res.set_chunked_content_provider("text/event-stream", [mode, quit](size_t, httplib::DataSink& sink) {
                auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
                if (mode == "invalid-json") {
                    send(chunk("partial "));
                    send("data: {\"choices\": [nope\n\n");
                } else if (mode == "cut") {
                    send(chunk("before the cut"));
                    send("data: {\"choices\":[{\"delta\":{\"con");
                } else if (mode == "huge") {
                    send(chunk("small first"));
                    send("data: {\"choices\":[{\"delta\":{\"content\":\"");
                    const std::string mb(1 << 20, 'x');
                    for (int i = 0; i < 10 && !*quit; ++i)
                        if (!send(mb)) return false;
                    send("\"}}]}\n\n");
                } else if (mode == "silent") {  // headers, then nothing (at most 20 s)
                    for (int i = 0; i < 2000 && !*quit; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                    return false;
                } else {
                    send(chunk("ok"));
                    send(chunk("", "stop"));
                    send("data: [DONE]\n\n");
                }
                sink.done();
                return true;
            });
        });
        m_port = m_svr.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_svr.listen_after_bind(); });
    }
    ~FakeServer() {
        m_quit = true;
        m_svr.stop();
        m_thread.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    json m_last_body;

private:
    std::string m_flavour;
    httplib::Server m_svr;
    std::thread m_thread;
    int m_port = 0;
    std::atomic<bool> m_quit{false};
};

net::ClientOptions opts(const std::string& url, double read_timeout_s = 30) {
    net::ClientOptions o;
    o.base_url = url;
    o.read_timeout_s = read_timeout_s;
    o.connect_timeout_s = 5;
    o.max_event_bytes = size_t{1} << 20;
    return o;
}

// A kvscope server on a given port (0: any), on its own session and loop.
std::unique_ptr<test::LiveServer> start_on(int port, const std::string& api_key = {}) {
    auto ls = std::make_unique<test::LiveServer>();
    auto session = Session::open(test::tiny_server_model("remote_chat_tiny.gguf"));
    if (!session) return nullptr;
    ls->session = std::move(session.value());
    EngineOptions eo;
    eo.n_threads = 2;
    eo.snapshot_every = 0;
    auto loop = ls->session->start_loop(eo);
    if (!loop) return nullptr;
    ls->loop = std::move(loop.value());
    server::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.served_model_name = "tiny";
    so.api_key = api_key;
    ls->server = std::make_unique<server::OpenAiServer>(ls->session, *ls->loop, so);
    if (Status st = ls->server->start(); !st) return nullptr;
    return ls;
}

// Counts event-loop turns of the GUI thread while waiting: a blocked loop would count none.
struct Heartbeat {
    QTimer timer;
    int beats = 0;
    Heartbeat() {
        QObject::connect(&timer, &QTimer::timeout, [this] { ++beats; });
        timer.start(10);
    }
};

struct Reply {
    QString text;
    QString summary;
    QString error;
    bool ended = false;
};

// Collects one reply's signals.
void collect(RemoteChatClient& c, qint64 id, Reply& r) {
    QObject::connect(&c, &RemoteChatClient::token, [&r, id](qint64 i, const QString& p) {
        if (i == id) r.text += p;
    });
    QObject::connect(&c, &RemoteChatClient::finished, [&r, id](qint64 i, const QString& s) {
        if (i != id) return;
        r.summary = s;
        r.ended = true;
    });
    QObject::connect(&c, &RemoteChatClient::failed, [&r, id](qint64 i, const QString& m) {
        if (i != id) return;
        r.error = m;
        r.ended = true;
    });
}

QVector<RemoteTurn> hello() { return {{QStringLiteral("user"), QStringLiteral("Say something")}}; }

}  // namespace

class TestRemoteChat : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void probeKvscope() {
        auto ls = start_on(0, "sekrit");
        QVERIFY(ls);
        const std::string url = "http://127.0.0.1:" + std::to_string(ls->server->port());
        auto o = opts(url);
        ProbeResult none = probe_server(o);
        QVERIFY(none.reachable);
        QVERIFY(none.key_needed);
        QVERIFY(!none.key_accepted);
        QVERIFY2(QString::fromStdString(none.message).contains("wants an API key"), none.message.c_str());
        o.api_key = "wrong";
        ProbeResult wrong = probe_server(o);
        QVERIFY(wrong.key_needed && !wrong.key_accepted);
        QVERIFY2(QString::fromStdString(wrong.message).contains("refused"), wrong.message.c_str());
        o.api_key = "sekrit";
        ProbeResult ok = probe_server(o);
        QVERIFY2(ok.ok(), ok.message.c_str());
        QVERIFY(ok.kind == ServerKind::KvScope);
        QCOMPARE(ok.models, std::vector<std::string>{"tiny"});
        QVERIFY(ok.has_metrics);
        QVERIFY2(QString::fromStdString(ok.message).contains("KV Scope"), ok.message.c_str());
    }

    void probeOtherKinds() {
        FakeServer vllm("vllm"), llama("llamacpp"), plain("");
        ProbeResult v = probe_server(opts(vllm.url()));
        QVERIFY2(v.ok(), v.message.c_str());
        QVERIFY(v.kind == ServerKind::Vllm);
        QCOMPARE(v.version, std::string("0.10.2"));
        QVERIFY(v.has_metrics);
        ProbeResult l = probe_server(opts(llama.url()));
        QVERIFY(l.kind == ServerKind::LlamaServer);
        QVERIFY(l.has_metrics && l.has_slots);
        ProbeResult p = probe_server(opts(plain.url()));
        QVERIFY(p.ok());
        QVERIFY(p.kind == ServerKind::Unknown);
        QVERIFY(!p.has_metrics);  // an HTML page is not metrics
        QVERIFY2(QString::fromStdString(p.message).contains("no /metrics"), p.message.c_str());
        // Nobody listening: a port bound a moment ago and closed.
        const int port = kvs::test::closed_loopback_port();
        QVERIFY(port > 0);
        const auto t0 = std::chrono::steady_clock::now();
        ProbeResult down = probe_server(opts("http://127.0.0.1:" + std::to_string(port)));
        QVERIFY(!down.reachable);
        QVERIFY2(QString::fromStdString(down.message).contains("not reachable"), down.message.c_str());
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
        ProbeResult bad = probe_server(opts("ftp://x"));
        QVERIFY(!bad.reachable && !bad.message.empty());
    }

    void chatStreamsLikeTheServerAnswers() {
        auto ls = start_on(0);
        QVERIFY(ls);
        const std::string url = "http://127.0.0.1:" + std::to_string(ls->server->port());
        RemoteSampling s;
        s.temperature = 0;
        s.maxTokens = 12;
        s.systemPrompt = QStringLiteral("Be brief.");
        // The server's own non-streamed answer for the same messages, sent by plain httplib.
        const json body = {
            {"model", "tiny"},
            {"messages",
             {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Say something"}}}},
            {"max_tokens", 12},
            {"temperature", 0}};
        auto direct = ls->client()->Post("/v1/chat/completions", body.dump(), "application/json");
        QVERIFY(direct && direct->status == 200);
        const std::string want = json::parse(direct->body)["choices"][0]["message"]["content"];

        RemoteChatClient c;
        c.setOptions(opts(url));
        Reply r;
        Heartbeat hb;
        const qint64 id = c.submit(QStringLiteral("tiny"), hello(), s);
        collect(c, id, r);
        QTRY_VERIFY_WITH_TIMEOUT(r.ended, 60000);
        QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
        QCOMPARE(r.text.toStdString(), want);
        QVERIFY2(r.summary.contains(QStringLiteral("tokens")), qPrintable(r.summary));
        QVERIFY(hb.beats > 0);
        QCOMPARE(c.inFlight(), 0);
    }

    void samplingSettingsReachTheBody() {
        RemoteSampling s;
        s.temperature = 0.3;
        s.topK = 7;
        s.topP = 0.5;
        s.minP = 0.1;
        s.repeatPenalty = 1.2;
        s.maxTokens = 33;
        s.seed = 42;
        FakeServer f;
        RemoteChatClient c;
        c.setOptions(opts(f.url()));
        Reply r;
        const qint64 id = c.submit(QStringLiteral("fake-model"), hello(), s);
        collect(c, id, r);
        QTRY_VERIFY_WITH_TIMEOUT(r.ended, 20000);
        QCOMPARE(r.text, QStringLiteral("ok"));
        const json& b = f.m_last_body;
        QCOMPARE(b["temperature"].get<double>(), 0.3);
        QCOMPARE(b["top_k"].get<int>(), 7);
        QCOMPARE(b["top_p"].get<double>(), 0.5);
        QCOMPARE(b["min_p"].get<double>(), 0.1);
        QCOMPARE(b["repetition_penalty"].get<double>(), 1.2);
        QCOMPARE(b["max_tokens"].get<int>(), 33);
        QCOMPARE(b["seed"].get<int>(), 42);
        QCOMPARE(b["stream"].get<bool>(), true);
        QCOMPARE(b["messages"].size(), size_t(1));  // no system prompt set: none sent
    }

    void stopCancelsOnTheServer() {
        auto ls = start_on(0);
        QVERIFY(ls);
        const std::string url = "http://127.0.0.1:" + std::to_string(ls->server->port());
        RemoteChatClient c;
        c.setOptions(opts(url));
        RemoteSampling s;
        s.maxTokens = 400;
        s.temperature = 0;
        s.ignoreEos = true;
        Reply r;
        const qint64 id = c.submit(QStringLiteral("tiny"), hello(), s);
        collect(c, id, r);
        // Stop at the first piece, as a user pressing Stop would.
        connect(&c, &RemoteChatClient::token, &c, [&c, id](qint64 i, const QString&) {
            if (i == id) c.cancel(id);
        });
        QTRY_VERIFY_WITH_TIMEOUT(!r.text.isEmpty(), 60000);
        QTRY_VERIFY_WITH_TIMEOUT(r.ended, 10000);
        QVERIFY2(r.error.startsWith(QStringLiteral("Stopped.")), qPrintable(r.error + " / summary: " + r.summary));
        // The server cancels the request when the stream closes: nothing running, nothing waiting.
        bool idle = false;
        for (int i = 0; i < 100 && !idle; ++i) {
            auto m = ls->client()->Get("/metrics");
            auto page = parse_prometheus_text(m ? m->body : "");
            if (page)
                if (auto v = read_vllm_metrics(*page); v) idle = v->num_running == 0 && v->num_waiting == 0;
            if (!idle) QTest::qWait(50);
        }
        QVERIFY(idle);
    }

    void reconnectAfterRestart() {
        auto ls = start_on(0);
        QVERIFY(ls);
        const int port = ls->server->port();
        const std::string url = "http://127.0.0.1:" + std::to_string(port);
        RemoteChatClient c;
        c.setOptions(opts(url));
        RemoteSampling s;
        s.maxTokens = 4;
        Reply a;
        qint64 id = c.submit(QStringLiteral("tiny"), hello(), s);
        collect(c, id, a);
        QTRY_VERIFY_WITH_TIMEOUT(a.ended, 60000);
        QVERIFY2(a.error.isEmpty(), qPrintable(a.error));
        ls.reset();  // the server goes away
        Reply down;
        id = c.submit(QStringLiteral("tiny"), hello(), s);
        collect(c, id, down);
        QTRY_VERIFY_WITH_TIMEOUT(down.ended, 20000);
        QVERIFY2(down.error.contains(QStringLiteral("cannot be reached")), qPrintable(down.error));
        ls = start_on(port);  // back on the same port
        QVERIFY(ls);
        Reply again;
        id = c.submit(QStringLiteral("tiny"), hello(), s);
        collect(c, id, again);
        QTRY_VERIFY_WITH_TIMEOUT(again.ended, 60000);
        QVERIFY2(again.error.isEmpty(), qPrintable(again.error));
        QVERIFY(!again.text.isEmpty());
    }

    void misbehavingServer_data() {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<QString>("partial");
        QTest::addColumn<QString>("words");
        QTest::newRow("invalid JSON") << "invalid-json"
                                      << "partial "
                                      << "not a valid reply";
        QTest::newRow("cut mid-event") << "cut"
                                       << "before the cut"
                                       << "cut off";
        QTest::newRow("10 MB event") << "huge"
                                     << "small first"
                                     << "more than the client accepts";
        QTest::newRow("401") << "401"
                             << ""
                             << "refused the API key";
        QTest::newRow("429") << "429"
                             << ""
                             << "busy";
        QTest::newRow("500") << "500"
                             << ""
                             << "failed while answering";
    }
    void misbehavingServer() {
        QFETCH(QString, mode);
        QFETCH(QString, partial);
        QFETCH(QString, words);
        FakeServer f;
        RemoteChatClient c;
        c.setOptions(opts(f.url()));
        Heartbeat hb;
        Reply r;
        const auto t0 = std::chrono::steady_clock::now();
        const qint64 id = c.submit(mode, hello(), {});
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200));  // never blocks
        collect(c, id, r);
        QTRY_VERIFY_WITH_TIMEOUT(r.ended, 30000);
        QVERIFY2(r.error.contains(words), qPrintable(r.error));
        QCOMPARE(r.text, partial);  // what streamed before the fault is kept
        QVERIFY(hb.beats > 0);
    }

    void silentServerTimesOutAndStopWorks() {
        FakeServer f;
        RemoteChatClient c;
        c.setOptions(opts(f.url(), 1.0));  // 1 s without a byte is a fault
        Heartbeat hb;
        Reply r;
        qint64 id = c.submit(QStringLiteral("silent"), hello(), {});
        collect(c, id, r);
        QTRY_VERIFY_WITH_TIMEOUT(r.ended, 15000);
        QVERIFY2(r.error.contains(QStringLiteral("stopped answering")), qPrintable(r.error));
        QVERIFY(hb.beats > 20);  // the loop turned all along (about 100 per second)
        // Stop on a silent server ends the reply at once instead of after the timeout.
        c.setOptions(opts(f.url(), 60));
        Reply s;
        id = c.submit(QStringLiteral("silent"), hello(), {});
        collect(c, id, s);
        QTest::qWait(300);
        const auto t0 = std::chrono::steady_clock::now();
        c.cancel(id);
        QTRY_VERIFY_WITH_TIMEOUT(s.ended, 5000);
        QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
        QVERIFY2(s.error.startsWith(QStringLiteral("Stopped.")), qPrintable(s.error));
    }

    void connectionStore() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString ini = dir.filePath(QStringLiteral("kvscope.ini"));
        const QString keys = dir.filePath(QStringLiteral("secrets/remote_keys.json"));
        auto secrets = std::make_shared<SecretStore>(keys, false);
        QVERIFY(secrets->backend() == SecretStore::Backend::File);
        QVERIFY(secrets->describe().contains(keys));
        QString id;
        {
            ConnectionStore store(ini, secrets);
            QString error;
            RemoteConnection bad;
            bad.baseUrl = QStringLiteral("gopher://x");
            QVERIFY(!store.save(bad, {}, &error));
            QVERIFY(!error.isEmpty());
            RemoteConnection c;
            c.name = QStringLiteral("gpu box");
            c.baseUrl = QStringLiteral("http://10.0.0.5:8000/v1");
            c.model = QStringLiteral("meta-llama/Llama-3.1-8B-Instruct");
            c.kind = QStringLiteral("vLLM");
            QVERIFY2(store.save(c, QStringLiteral("sk-very-secret"), &error, &id), qPrintable(error));
            QCOMPARE(store.connections().size(), 1);
        }
        ConnectionStore again(ini, secrets);
        QCOMPARE(again.connections().size(), 1);
        const RemoteConnection& c = again.connections().front();
        QCOMPARE(c.id, id);
        QCOMPARE(c.name, QStringLiteral("gpu box"));
        QCOMPARE(c.model, QStringLiteral("meta-llama/Llama-3.1-8B-Instruct"));
        QVERIFY(c.hasKey);
        QString error;
        QCOMPARE(again.apiKey(id, &error), QStringLiteral("sk-very-secret"));
        // The key is in the 0600 file, never in the settings.
        struct stat st {};
        QCOMPARE(::stat(QFile::encodeName(keys).constData(), &st), 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);
        QFile f(ini);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(!f.readAll().contains("sk-very-secret"));
        // A hand-broken entry is skipped and named.
        {
            QSettings s(ini, QSettings::IniFormat);
            s.beginWriteArray(QStringLiteral("remote/connections"));
            s.setArrayIndex(1);
            s.setValue(QStringLiteral("id"), QStringLiteral("x"));
            s.setValue(QStringLiteral("name"), QStringLiteral("broken"));
            s.setValue(QStringLiteral("baseUrl"), QStringLiteral("not a url"));
            s.endArray();
        }
        ConnectionStore third(ini, secrets);
        QCOMPARE(third.connections().size(), 1);
        QCOMPARE(third.loadErrors().size(), 1);
        QVERIFY(third.loadErrors().front().contains(QStringLiteral("broken")));
        QVERIFY(third.remove(id, &error));
        QCOMPARE(third.connections().size(), 0);
        QCOMPARE(third.apiKey(id, &error), QString());
        QCOMPARE(secrets->read(id, &error), QString());
    }

    void realLlamaServer() {
        const QString exe = test::llama_server_exe();
        if (exe.isEmpty()) QSKIP(test::llama_server_missing());
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
        const int port = test::closed_loopback_port();
        QVERIFY(port > 0);
        QProcess p;
        QString log;
        QVERIFY2(test::start_llama_server(p, exe, model, port, &log), qPrintable(log));
        const std::string url = "http://127.0.0.1:" + std::to_string(port);
        ProbeResult pr = probe_server(opts(url));
        QVERIFY2(pr.ok(), pr.message.c_str());
        QVERIFY2(pr.kind == ServerKind::LlamaServer, pr.message.c_str());
        QVERIFY(pr.has_metrics);
        QVERIFY(pr.has_slots);
        RemoteChatClient c;
        c.setOptions(opts(url));
        RemoteSampling s;
        s.temperature = 0;
        s.maxTokens = 16;
        Reply r;
        qint64 id = c.submit(QString::fromStdString(pr.models.front()), hello(), s);
        collect(c, id, r);
        QTRY_VERIFY_WITH_TIMEOUT(r.ended, 60000);
        QVERIFY2(r.error.isEmpty(), qPrintable(r.error));
        QVERIFY(!r.text.isEmpty());
        // Stop at the first piece of a long reply.
        s.maxTokens = 400;
        s.ignoreEos = true;
        Reply st;
        id = c.submit(QString::fromStdString(pr.models.front()), hello(), s);
        collect(c, id, st);
        connect(&c, &RemoteChatClient::token, &c, [&c, id](qint64 i, const QString&) {
            if (i == id) c.cancel(id);
        });
        QTRY_VERIFY_WITH_TIMEOUT(st.ended, 60000);
        QVERIFY2(st.error.startsWith(QStringLiteral("Stopped.")), qPrintable(st.error + " " + st.summary));
        // Its /metrics in llama.cpp's names: the tokens it generated are counted; /slots lists 2 slots.
        httplib::Client h("127.0.0.1", port);
        bool idle = false;
        double generated = 0;
        for (int i = 0; i < 100 && !idle; ++i) {
            auto m = h.Get("/metrics");
            auto page = parse_prometheus_text(m ? m->body : "");
            if (page)
                if (auto v = read_vllm_metrics(*page); v) {
                    QVERIFY(v->dialect == MetricsDialect::LlamaCpp);
                    idle = v->num_running == 0;
                    generated = v->generation_tokens;
                }
            if (!idle) QTest::qWait(100);
        }
        QVERIFY(idle);
        QVERIFY2(generated >= 1, qPrintable(QString::number(generated)));
        auto slots = h.Get("/slots");
        QVERIFY(slots && slots->status == 200);
        auto parsed = parse_llama_slots(slots->body);
        QVERIFY2(parsed, parsed.message().c_str());
        QCOMPARE(parsed->size(), size_t(2));
        for (const LlamaSlot& sl : *parsed) QVERIFY(sl.n_ctx > 0 && !sl.processing);
        // The poller the remote view uses reads /metrics and /slots together.
        MetricsPoller poller;
        std::vector<MetricsReading> readings;
        connect(&poller, &MetricsPoller::reading, &poller,
                [&readings](const MetricsReading& mr) { readings.push_back(mr); });
        poller.start(opts(url), {}, 200, true);
        QTRY_VERIFY_WITH_TIMEOUT(!readings.empty(), 10000);
        poller.stop();
        QVERIFY(readings.front().has_slots);
        QCOMPARE(readings.front().slots.size(), size_t(2));
        QVERIFY(readings.front().m.dialect == MetricsDialect::LlamaCpp);
        p.terminate();
        if (!p.waitForFinished(10000)) p.kill();
    }
};

QTEST_GUILESS_MAIN(TestRemoteChat)
#include "tst_remote_chat.moc"
