// ctest-labels: unit remote
// The OpenAI-compatible client (app/net/openai_client.h) and its SSE parser
// (app/net/sse_parser.h) against a small misbehaving server written here with cpp-httplib on
// 127.0.0.1 (a free port): well-formed answers (models, chat and text completions, streamed
// and not, tokenize, API key), and each fault the remote-chat issue lists: events split
// across reads at every byte, an event over the size limit (10 MB), a stream that stops
// mid-event, invalid JSON, an HTTP error with an OpenAI error body, a server that accepts
// and never answers (read timeout), cancellation from another thread (of a trickling stream
// and of a silent server), nobody listening; a write on a closed connection fails with EPIPE
// instead of ending the process with SIGPIPE. Every wait is bounded in time.
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QtTest>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/net/openai_client.h"
#include "app/net/sse_parser.h"
#include "tests/support/loopback_port.h"

using namespace kvs::net;
using kvs::Status;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string chunk(const std::string& text, const char* finish = nullptr) {
    json c = {{"id", "c1"},
              {"object", "chat.completion.chunk"},
              {"choices", json::array({{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}}})}};
    if (finish) c["choices"][0]["finish_reason"] = finish;
    return "data: " + c.dump() + "\n\n";
}

// A server whose routes each misbehave in one way. Runs until destroyed.
class FakeServer {
public:
    FakeServer() {
        m_svr.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
            if (!authorized(req, res)) return;
            res.set_content(R"({"object":"list","data":[{"id":"smol","object":"model"},{"id":"other"}]})",
                            "application/json");
        });
        m_svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
            if (!authorized(req, res)) return;
            const json body = json::parse(req.body, nullptr, false);
            m_last_body = req.body;
            const std::string mode = body.value("model", "");
            if (!body.value("stream", false)) {
                res.set_content(
                    R"({"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}})",
                    "application/json");
                return;
            }
            stream(mode, res);
        });
        m_svr.Post("/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
            const json body = json::parse(req.body, nullptr, false);
            if (body.is_discarded() || !body.contains("prompt") || body["prompt"] == "") {
                res.status = 400;
                res.set_content(R"({"error":{"message":"prompt is required","type":"invalid_request_error"}})",
                                "application/json");
                return;
            }
            if (!body.value("stream", false)) {
                res.set_content(
                    R"({"choices":[{"index":0,"text":" world","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}})",
                    "application/json");
                return;
            }
            res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
                const std::string s =
                    "data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\r\n\r\n"
                    "data: {\"choices\":[{\"index\":0,\"text\":\"b\",\"finish_reason\":\"length\"}]}\r\n\r\n"
                    "data: [DONE]\r\n\r\n";
                sink.write(s.data(), s.size());
                sink.done();
                return true;
            });
        });
        m_svr.Post("/tokenize", [](const httplib::Request& req, httplib::Response& res) {
            const json body = json::parse(req.body, nullptr, false);
            const std::string text = body.value("content", "");
            json toks = json::array();
            for (unsigned char c : text) toks.push_back(static_cast<int>(c));
            res.set_content(json{{"tokens", toks}}.dump(), "application/json");
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
    std::string api_key;
    std::string m_last_body;

private:
    bool authorized(const httplib::Request& req, httplib::Response& res) {
        if (api_key.empty() || req.get_header_value("Authorization") == "Bearer " + api_key) return true;
        res.status = 401;
        res.set_content(
            R"({"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})",
            "application/json");
        return false;
    }

    // The model name picks the misbehaviour.
    void stream(const std::string& mode, httplib::Response& res) {
        std::atomic<bool>* quit = &m_quit;
        res.set_chunked_content_provider("text/event-stream", [mode, quit](size_t, httplib::DataSink& sink) {
            auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
            if (mode == "split") {  // every byte its own write, CRLF line ends, a comment, a BOM
                std::string all = "\xEF\xBB\xBF: keep-alive\r\n\r\n";
                for (const char* t : {"Hel", "lo", ", ", "wörld"}) {
                    std::string c = chunk(t);
                    for (size_t i = 0; (i = c.find('\n', i)) != std::string::npos; i += 2) c.replace(i, 1, "\r\n");
                    all += c;
                }
                all += chunk("", "stop");
                all +=
                    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4}}\n\ndata: "
                    "[DONE]\n\n";
                for (char ch : all) {
                    if (!sink.write(&ch, 1)) return false;
                    std::this_thread::sleep_for(std::chrono::microseconds(50));
                }
            } else if (mode == "huge") {  // a 10 MB event
                send("data: {\"choices\":[{\"delta\":{\"content\":\"");
                const std::string mb(1 << 20, 'x');
                for (int i = 0; i < 10 && !*quit; ++i)
                    if (!send(mb)) return false;
                send("\"}}]}\n\n");
            } else if (mode == "cut") {  // stops in the middle of an event
                send(chunk("one"));
                send("data: {\"choices\":[{\"delta\":{\"con");
            } else if (mode == "badjson") {
                send(chunk("one"));
                send("data: {\"choices\": [nope]}\n\n");
            } else if (mode == "nodone") {  // ends cleanly, but with neither [DONE] nor a finish reason
                send(chunk("one"));
            } else if (mode == "trickle") {  // a token every 20 ms, at most 500
                for (int i = 0; i < 500 && !*quit; ++i) {
                    if (!send(chunk("t"))) return false;
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                }
            } else if (mode == "silent") {  // accepts, answers headers, never sends a byte (at most 20 s)
                for (int i = 0; i < 2000 && !*quit; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                return false;
            }
            sink.done();
            return true;
        });
    }

    httplib::Server m_svr;
    std::thread m_thread;
    int m_port = 0;
    std::atomic<bool> m_quit{false};
};

ClientOptions opts(const std::string& url, double read_timeout_s = 120, double connect_timeout_s = 10) {
    ClientOptions o;
    o.base_url = url;
    o.read_timeout_s = read_timeout_s;
    o.connect_timeout_s = connect_timeout_s;
    return o;
}

CompletionRequest chat_request(const std::string& model) {
    CompletionRequest r;
    r.model = model;
    r.messages = {{"user", "hi"}};
    r.max_tokens = 8;
    return r;
}

}  // namespace

class TestHttpClient : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void sse_parser_line_ends_and_fields() {
        const std::string stream =
            ": comment\r\nevent: delta\r\ndata: a\r\ndata:b\r\nid: 7\r\nretry: 100\r\n\r\n"
            "data: second\n\n"
            "data\r\r"  // a field with no colon: empty data, CR line ends
            "data: x\n\n";
        // The same events, whatever the pieces it arrives in.
        for (size_t piece : {stream.size(), size_t{1}, size_t{2}, size_t{3}, size_t{7}}) {
            SseParser p;
            std::vector<SseEvent> got;
            for (size_t i = 0; i < stream.size(); i += piece)
                QVERIFY(p.feed(std::string_view(stream).substr(i, piece), [&](const SseEvent& e) {
                    got.push_back(e);
                    return true;
                }));
            QVERIFY(p.finish());
            QCOMPARE(got.size(), size_t{4});
            QCOMPARE(got[0].event, std::string("delta"));
            QCOMPARE(got[0].data, std::string("a\nb"));
            QCOMPARE(got[0].id, std::string("7"));
            QCOMPARE(got[1].data, std::string("second"));
            QCOMPARE(got[2].data, std::string(""));
            QCOMPARE(got[3].data, std::string("x"));
        }
    }

    void sse_parser_faults() {
        SseParser small(64);
        const Status big = small.feed("data: " + std::string(100, 'x'), {});
        QVERIFY(!big);
        QVERIFY2(big.message().find("64-byte limit") != std::string::npos, big.message().c_str());
        QVERIFY(!small.feed("\n\n", {}));  // stays failed
        // data lines accumulating past the limit across lines
        SseParser lines(64);
        Status s;
        for (int i = 0; i < 10 && s; ++i) s = lines.feed("data: 0123456789\n", {});
        QVERIFY(!s);
        SseParser cut;
        QVERIFY(cut.feed("data: {\"a\":", {}));
        const Status mid = cut.finish();
        QVERIFY(!mid);
        QVERIFY2(mid.message().find("middle of an event") != std::string::npos, mid.message().c_str());
        SseParser unclosed;
        QVERIFY(unclosed.feed("data: done\n", {}));  // fields without the blank line
        QVERIFY(!unclosed.finish());
        SseParser nul;
        QVERIFY(!nul.feed(std::string("data: a\0b\n\n", 11), {}));
    }

    void models_and_api_key() {
        FakeServer srv;
        srv.api_key = "sekrit";
        ClientOptions o;
        o.base_url = srv.url() + "/v1/";  // a trailing /v1/ is the same base
        OpenAIClient anon(o);
        auto denied = anon.list_models();
        QVERIFY(!denied);
        QVERIFY2(denied.message().find("HTTP 401") != std::string::npos, denied.message().c_str());
        QVERIFY2(denied.message().find("Incorrect API key provided") != std::string::npos, denied.message().c_str());
        o.api_key = "sekrit";
        OpenAIClient keyed(o);
        auto models = keyed.list_models();
        QVERIFY2(models, models.message().c_str());
        QCOMPARE(models->size(), size_t{2});
        QCOMPARE((*models)[0], std::string("smol"));
    }

    void chat_streamed_split_at_every_byte() {
        FakeServer srv;
        OpenAIClient c(opts(srv.url()));
        std::string seen;
        int calls = 0;
        auto r = c.complete(chat_request("split"), [&](const StreamDelta& d) {
            seen += d.text;
            ++calls;
            return true;
        });
        QVERIFY2(r, r.message().c_str());
        QCOMPARE(r->text, std::string("Hello, wörld"));
        QCOMPARE(seen, r->text);
        QCOMPARE(r->n_chunks, 4);
        QCOMPARE(calls, 5);  // 4 texts and the finish
        QCOMPARE(r->finish_reason, std::string("stop"));
        QCOMPARE(r->usage.prompt_tokens, int64_t{5});
        QCOMPARE(r->usage.completion_tokens, int64_t{4});
        const json sent = json::parse(srv.m_last_body);
        QCOMPARE(sent["stream_options"]["include_usage"].get<bool>(), true);
        QCOMPARE(sent["messages"][0]["content"].get<std::string>(), std::string("hi"));
        QCOMPARE(sent["max_tokens"].get<int>(), 8);
    }

    void chat_and_text_not_streamed() {
        FakeServer srv;
        OpenAIClient c(opts(srv.url()));
        CompletionRequest req = chat_request("plain");
        req.stream = false;
        req.extra = {{"watermark", true}};
        auto r = c.complete(req);
        QVERIFY2(r, r.message().c_str());
        QCOMPARE(r->text, std::string("Hello there"));
        QCOMPARE(r->usage.completion_tokens, int64_t{2});
        QCOMPARE(json::parse(srv.m_last_body)["watermark"].get<bool>(), true);
        CompletionRequest t;
        t.prompt_ids = {1, 2, 3};
        t.stream = false;
        auto tr = c.complete(t);
        QVERIFY2(tr, tr.message().c_str());
        QCOMPARE(tr->text, std::string(" world"));
        QCOMPARE(tr->finish_reason, std::string("length"));
        t.stream = true;
        auto ts = c.complete(t);
        QVERIFY2(ts, ts.message().c_str());
        QCOMPARE(ts->text, std::string("ab"));
        QCOMPARE(ts->finish_reason, std::string("length"));
        // A 400 with the server's message
        CompletionRequest empty;
        empty.stream = false;
        auto bad = c.complete(empty);
        QVERIFY(!bad);
        QVERIFY2(bad.message().find("HTTP 400") != std::string::npos, bad.message().c_str());
        QVERIFY2(bad.message().find("prompt is required") != std::string::npos, bad.message().c_str());
        OpenAIClient raw(opts(srv.url()));
        auto tok = raw.tokenize("", "hé");
        QVERIFY2(tok, tok.message().c_str());
        QCOMPARE(tok->size(), size_t{3});  // the fake server counts bytes
    }

    void faults_give_clear_errors_data() {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<QString>("expect");
        QTest::newRow("10 MB event") << "huge"
                                     << "-byte limit";
        QTest::newRow("stops mid-event") << "cut"
                                         << "middle of an event";
        QTest::newRow("invalid JSON") << "badjson"
                                      << "invalid JSON";
        QTest::newRow("no [DONE]") << "nodone"
                                   << "without \"data: [DONE]\"";
    }
    void faults_give_clear_errors() {
        QFETCH(QString, mode);
        QFETCH(QString, expect);
        FakeServer srv;
        OpenAIClient c(opts(srv.url(), 10));
        const auto t0 = Clock::now();
        auto r = c.complete(chat_request(mode.toStdString()));
        QVERIFY(!r);
        QVERIFY2(r.message().find(expect.toStdString()) != std::string::npos, r.message().c_str());
        QVERIFY2(r.message().find("/v1/chat/completions") != std::string::npos, r.message().c_str());
        QVERIFY(seconds_since(t0) < 10);
        // the client is still usable afterwards
        CompletionRequest ok = chat_request("plain");
        ok.stream = false;
        QVERIFY(c.complete(ok));
    }

    // Debian's cpp-httplib writes with send(..., 0): a write on a connection the server has
    // already closed raises SIGPIPE, which would end the whole program (it did, in
    // tst_remote_llama_window against llama-server). A client makes the process ignore it, so
    // such a write fails with EPIPE instead.
    void client_ignores_sigpipe() {
        OpenAIClient c(opts("http://127.0.0.1:1"));
        struct sigaction sa {};
        QVERIFY(::sigaction(SIGPIPE, nullptr, &sa) == 0);
        QVERIFY(sa.sa_handler == SIG_IGN);
        int sv[2];
        QVERIFY(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        ::close(sv[1]);  // the peer is gone
        errno = 0;
        const ssize_t n = ::send(sv[0], "x", 1, 0);  // as cpp-httplib writes
        const int err = errno;
        ::close(sv[0]);
        QCOMPARE(n, ssize_t(-1));
        QCOMPARE(err, EPIPE);
    }

    void silent_server_times_out() {
        FakeServer srv;
        OpenAIClient c(opts(srv.url(), 0.5));
        const auto t0 = Clock::now();
        auto r = c.complete(chat_request("silent"));
        const double took = seconds_since(t0);
        QVERIFY(!r);
        QVERIFY2(r.message().find("no data came for 0.5 s") != std::string::npos, r.message().c_str());
        QVERIFY2(took < 5.0, qPrintable(QString::number(took)));
    }

    void cancel_from_another_thread_data() {
        QTest::addColumn<QString>("mode");
        QTest::newRow("trickling stream") << "trickle";
        QTest::newRow("silent server") << "silent";
    }
    void cancel_from_another_thread() {
        QFETCH(QString, mode);
        FakeServer srv;
        OpenAIClient c(opts(srv.url(), 30));
        std::atomic<int> deltas{0};
        std::thread killer([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            c.cancel();
        });
        const auto t0 = Clock::now();
        auto r = c.complete(chat_request(mode.toStdString()), [&](const StreamDelta&) {
            ++deltas;
            return true;
        });
        const double took = seconds_since(t0);
        killer.join();
        QVERIFY(!r);
        QVERIFY2(r.message().find("cancelled") != std::string::npos, r.message().c_str());
        QVERIFY2(took < 3.0, qPrintable(QString::number(took)));  // far below the 30 s read timeout
        if (mode == "trickle") QVERIFY(deltas > 0 && deltas < 500);
        QVERIFY(!c.complete(chat_request("plain")));  // cancelled until reset
        c.reset_cancel();
        CompletionRequest ok = chat_request("plain");
        ok.stream = false;
        auto again = c.complete(ok);
        QVERIFY2(again, again.message().c_str());
    }

    void caller_stops_the_stream() {
        FakeServer srv;
        OpenAIClient c(opts(srv.url()));
        int n = 0;
        auto r = c.complete(chat_request("trickle"), [&](const StreamDelta&) { return ++n < 3; });
        QVERIFY(!r);
        QCOMPARE(n, 3);
        QVERIFY2(r.message().find("cancelled by the caller") != std::string::npos, r.message().c_str());
    }

    void nobody_listening_and_bad_urls() {
        // A port that was free a moment ago: bound, never listened on, closed.
        const int port = kvs::test::closed_loopback_port();
        QVERIFY(port > 0);
        OpenAIClient c(opts("http://127.0.0.1:" + std::to_string(port), 120, 2));
        auto r = c.list_models();
        QVERIFY(!r);
        QVERIFY2(r.message().find("is a server listening") != std::string::npos, r.message().c_str());
        QVERIFY(!OpenAIClient::check_url("127.0.0.1:8000"));
        QVERIFY(!OpenAIClient::check_url("ftp://host"));
        QVERIFY(!OpenAIClient::check_url("http://"));
        QVERIFY(OpenAIClient::check_url("https://example.org/v1"));
        OpenAIClient bad(opts("nonsense"));
        auto m = bad.list_models();
        QVERIFY(!m);
        QVERIFY2(m.message().find("no scheme") != std::string::npos, m.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestHttpClient)
#include "tst_http_client.moc"
