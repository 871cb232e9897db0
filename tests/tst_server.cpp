// ctest-labels: net
// app/server (kvscope serve's OpenAI-compatible API) over real HTTP on 127.0.0.1, driven by
// cpp-httplib's client: the routes and their JSON, streaming (SSE) against non-streaming,
// greedy tokens against an independent single-sequence decode (greedy_alone), stop strings,
// n, every kind of bad input the server must answer with an OpenAI-style 4xx error (and keep
// serving), the API key, CORS, a full queue (429 + Retry-After), a client that hangs up
// mid-stream or before a non-streamed reply (its request cancelled, its blocks free), /metrics in vLLM's names, /tokenize.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/greedy_alone.h"
#include "tests/support/live_server.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

std::unique_ptr<test::LiveServer> start(server::ServerOptions so = {}, EngineOptions eo = {}) {
    const std::string model = test::tiny_server_model();
    if (model.empty()) qFatal("cannot write the tiny model");
    auto ls = test::start_live_server(model, so, eo);
    if (!ls) qFatal("server: %s", ls.message().c_str());
    return std::move(ls.value());
}

httplib::Result post(const test::LiveServer& ls, const std::string& path, const json& body,
                     const httplib::Headers& h = {}) {
    return ls.client()->Post(path.c_str(), h, body.dump(), "application/json");
}

std::vector<int32_t> ids_of(const json& a) {
    std::vector<int32_t> v;
    for (const auto& x : a) v.push_back(x.get<int32_t>());
    return v;
}

std::string metrics_text(const test::LiveServer& ls) {
    auto r = ls.client()->Get("/metrics");
    return r && r->status == 200 ? r->body : std::string();
}

}  // namespace

class TestServer : public QObject {
    Q_OBJECT
private:
    std::unique_ptr<test::LiveServer> m_ls;

private Q_SLOTS:
    void initTestCase() { m_ls = start(); }
    void cleanupTestCase() { m_ls.reset(); }

    void modelsAndHealth() {
        auto c = m_ls->client();
        auto h = c->Get("/health");
        QVERIFY(h);
        QCOMPARE(h->status, 200);
        auto r = c->Get("/v1/models");
        QVERIFY(r);
        QCOMPARE(r->status, 200);
        const json j = test::body_json(r->body);
        QCOMPARE(j["object"], json("list"));
        QCOMPARE(j["data"].size(), size_t(1));
        QCOMPARE(j["data"][0]["id"], json("tiny"));
        QCOMPARE(j["data"][0]["object"], json("model"));
        QCOMPARE(j["data"][0]["max_model_len"].get<int>(), m_ls->server->max_model_len());
    }

    // Greedy over HTTP = an independent single-sequence greedy decode of the same ids.
    void greedyCompletionMatchesSingleSequence() {
        const std::string prompt = "The quick brown fox";
        const int n = 12;
        auto r = post(*m_ls, "/v1/completions",
                      {{"model", "tiny"},
                       {"prompt", prompt},
                       {"max_tokens", n},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"return_token_ids", true}});
        QVERIFY(r);
        QCOMPARE(r->status, 200);
        const json j = test::body_json(r->body);
        QCOMPARE(j["object"], json("text_completion"));
        QCOMPARE(j["model"], json("tiny"));
        QVERIFY(j["id"].get<std::string>().rfind("cmpl-", 0) == 0);
        const auto& ch = j["choices"][0];
        QCOMPARE(ch["finish_reason"], json("length"));
        const std::vector<int32_t> prompt_ids = m_ls->session->encode_text(prompt);
        QCOMPARE(ids_of(j["prompt_token_ids"]), prompt_ids);
        auto runner = m_ls->session->make_runner(RunnerOptions{});
        QVERIFY(runner);
        const std::vector<int32_t> want =
            test::greedy_alone(**runner, m_ls->session->model().config.n_vocab, prompt_ids, n);
        QCOMPARE(ids_of(ch["token_ids"]), want);
        QCOMPARE(ch["text"].get<std::string>(), m_ls->session->decode(want));
        QCOMPARE(j["usage"]["prompt_tokens"].get<int>(), int(prompt_ids.size()));
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), n);
        QCOMPARE(j["usage"]["total_tokens"].get<int>(), int(prompt_ids.size()) + n);
    }

    void chatCountsTheTemplatedPrompt() {
        const json msgs =
            json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi there"}}});
        auto r = post(*m_ls, "/v1/chat/completions",
                      {{"messages", msgs}, {"max_completion_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}});
        QVERIFY(r);
        QCOMPARE(r->status, 200);
        const json j = test::body_json(r->body);
        QCOMPARE(j["object"], json("chat.completion"));
        QCOMPARE(j["choices"][0]["message"]["role"], json("assistant"));
        QVERIFY(j["choices"][0]["message"]["content"].is_string());
        const auto want = m_ls->session->encode_chat({{"system", "Be brief."}, {"user", "Hi there"}});
        QCOMPARE(j["usage"]["prompt_tokens"].get<int>(), int(want.size()));
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 5);
        // /tokenize with the same messages counts the same ids.
        auto t = post(*m_ls, "/tokenize", {{"messages", msgs}});
        QVERIFY(t);
        QCOMPARE(t->status, 200);
        QCOMPARE(ids_of(test::body_json(t->body)["tokens"]), want);
    }

    // The stream's pieces join to the non-streamed text; chunks are well-formed; usage last.
    void streamingEqualsNonStreaming() {
        for (bool chat : {false, true}) {
            json body = {{"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
            if (chat) body["messages"] = json::array({{{"role", "user"}, {"content", "Tell me"}}});
            else
                body["prompt"] = "Once upon a time";
            const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
            auto plain = post(*m_ls, path, body);
            QVERIFY(plain && plain->status == 200);
            const json pj = test::body_json(plain->body);
            body["stream"] = true;
            body["stream_options"] = {{"include_usage", true}};
            auto r = post(*m_ls, path, body);
            QVERIFY(r);
            QCOMPARE(r->status, 200);
            QVERIFY(r->get_header_value("Content-Type").rfind("text/event-stream", 0) == 0);
            const test::SseBody sse = test::parse_sse(r->body);
            QVERIFY2(sse.bad_lines.empty(), sse.bad_lines.empty() ? "" : sse.bad_lines[0].c_str());
            QVERIFY(sse.done);
            QVERIFY(!sse.data_after_done);
            QVERIFY(sse.chunks.size() >= 2);
            std::string text;
            std::string finish;
            for (size_t i = 0; i + 1 < sse.chunks.size(); ++i) {
                const json& c = sse.chunks[i];
                QCOMPARE(c["object"], json(chat ? "chat.completion.chunk" : "text_completion"));
                QVERIFY(c.contains("usage") && c["usage"].is_null());
                const json& ch = c["choices"][0];
                if (chat && ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
                if (!chat) text += ch["text"].get<std::string>();
                if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"].get<std::string>();
            }
            const json& last = sse.chunks.back();
            QVERIFY(last["choices"].empty());
            QCOMPARE(last["usage"]["completion_tokens"].get<int>(), 10);
            QCOMPARE(last["usage"]["prompt_tokens"], pj["usage"]["prompt_tokens"]);
            QCOMPARE(finish, std::string("length"));
            const json& pc = pj["choices"][0];
            QCOMPARE(text, (chat ? pc["message"]["content"] : pc["text"]).get<std::string>());
        }
    }

    void stopStringEndsBeforeIt() {
        json body = {{"prompt", "Stop here"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
        auto r = post(*m_ls, "/v1/completions", body);
        QVERIFY(r && r->status == 200);
        const std::string full = test::body_json(r->body)["choices"][0]["text"];
        QVERIFY(full.size() >= 6);
        // A stop string from the middle of the greedy text: the reply is what came before it.
        const std::string stop = full.substr(full.size() / 2, 3);
        const size_t at = full.find(stop);
        body["stop"] = json::array({"\x01never", stop});
        r = post(*m_ls, "/v1/completions", body);
        QVERIFY(r && r->status == 200);
        const json j = test::body_json(r->body);
        QCOMPARE(j["choices"][0]["finish_reason"], json("stop"));
        QCOMPARE(j["choices"][0]["text"].get<std::string>(), full.substr(0, at));
    }

    // n choices: indices 0..n-1, a fixed seed reproduces them, greedy n=2 gives two equal ones.
    void nChoices() {
        json body = {{"prompt", "Pick"}, {"max_tokens", 8}, {"n", 3}, {"seed", 7}, {"ignore_eos", true}};
        auto a = post(*m_ls, "/v1/completions", body);
        auto b = post(*m_ls, "/v1/completions", body);
        QVERIFY(a && b && a->status == 200 && b->status == 200);
        const json ja = test::body_json(a->body), jb = test::body_json(b->body);
        QCOMPARE(ja["choices"].size(), size_t(3));
        for (int i = 0; i < 3; ++i) {
            QCOMPARE(ja["choices"][i]["index"].get<int>(), i);
            QCOMPARE(ja["choices"][i]["text"], jb["choices"][i]["text"]);
        }
        QCOMPARE(ja["usage"]["completion_tokens"].get<int>(), 24);
        body["temperature"] = 0;
        body["n"] = 2;
        auto g = post(*m_ls, "/v1/completions", body);
        QVERIFY(g && g->status == 200);
        const json jg = test::body_json(g->body);
        QCOMPARE(jg["choices"][0]["text"], jg["choices"][1]["text"]);
    }

    // The speculative extension: prompt-lookup drafts verified by the target give the same
    // greedy tokens as plain decoding, and /metrics counts the drafts.
    void speculativeExtension() {
        auto ls = start();
        const json base = {{"prompt", "one two three one two three one two three one two"},
                           {"max_tokens", 16},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"return_token_ids", true}};
        auto plain = post(*ls, "/v1/completions", base);
        json spec = base;
        spec["speculative"] = {{"method", "ngram"}, {"k", 4}};
        auto drafted = post(*ls, "/v1/completions", spec);
        QVERIFY(plain && drafted && plain->status == 200 && drafted->status == 200);
        QCOMPARE(ids_of(test::body_json(drafted->body)["choices"][0]["token_ids"]),
                 ids_of(test::body_json(plain->body)["choices"][0]["token_ids"]));
        const std::string m = metrics_text(*ls);
        QVERIFY2(test::metric_value(m, "vllm:spec_decode_num_drafts_total{") > 0, m.c_str());
        QVERIFY(test::metric_value(m, "vllm:spec_decode_num_draft_tokens_total{") >=
                test::metric_value(m, "vllm:spec_decode_num_accepted_tokens_total{"));
    }

    void badInput_data() {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QByteArray>("body");
        QTest::addColumn<int>("status");
        QTest::addColumn<QString>("param");
        const int ctx = 512;
        auto js = [](const json& j) { return QByteArray::fromStdString(j.dump()); };
        const QString C = "/v1/completions", H = "/v1/chat/completions";
        QTest::newRow("invalid json") << C << QByteArray("{\"prompt\": ") << 400 << "";
        QTest::newRow("not an object") << C << QByteArray("[1,2]") << 400 << "";
        QTest::newRow("invalid utf-8") << C << QByteArray("{\"prompt\": \"a\xff\xfe b\"}") << 400 << "";
        QTest::newRow("temperature string")
            << C << js({{"prompt", "x"}, {"temperature", "hot"}}) << 400 << "temperature";
        QTest::newRow("max_tokens string") << C << js({{"prompt", "x"}, {"max_tokens", "9"}}) << 400 << "max_tokens";
        QTest::newRow("stream number") << C << js({{"prompt", "x"}, {"stream", 1}}) << 400 << "stream";
        QTest::newRow("unknown model") << C << js({{"prompt", "x"}, {"model", "gpt-9"}}) << 404 << "model";
        QTest::newRow("empty prompt") << C << js({{"prompt", ""}}) << 400 << "prompt";
        QTest::newRow("prompt missing") << C << js({{"max_tokens", 3}}) << 400 << "prompt";
        QTest::newRow("empty prompt list") << C << js({{"prompt", json::array()}}) << 400 << "prompt";
        QTest::newRow("bad token id") << C << js({{"prompt", json::array({1, 999999})}}) << 400 << "prompt";
        QTest::newRow("empty messages") << H << js({{"messages", json::array()}}) << 400 << "messages";
        QTest::newRow("message without content")
            << H << js({{"messages", json::array({{{"role", "user"}}})}}) << 400 << "messages[0].content";
        QTest::newRow("tool role") << H << js({{"messages", json::array({{{"role", "tool"}, {"content", "x"}}})}})
                                   << 400 << "messages[0].role";
        QTest::newRow("image part")
            << H
            << js({{"messages",
                    json::array({{{"role", "user"}, {"content", json::array({{{"type", "image_url"}}})}}})}})
            << 400 << "messages[0].content[0]";
        std::vector<int> long_prompt(ctx + 10, 5);
        QTest::newRow("prompt over context") << C << js({{"prompt", long_prompt}}) << 400 << "prompt";
        QTest::newRow("max_tokens negative") << C << js({{"prompt", "x"}, {"max_tokens", -5}}) << 400 << "max_tokens";
        QTest::newRow("max_tokens zero") << C << js({{"prompt", "x"}, {"max_tokens", 0}}) << 400 << "max_tokens";
        QTest::newRow("max_tokens huge") << C << js({{"prompt", "x"}, {"max_tokens", 1e15}}) << 400 << "max_tokens";
        QTest::newRow("max_tokens over context")
            << C << js({{"prompt", "x"}, {"max_tokens", ctx}}) << 400 << "max_tokens";
        QTest::newRow("max_completion_tokens over context")
            << H
            << js({{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}, {"max_completion_tokens", ctx}})
            << 400 << "max_completion_tokens";
        QTest::newRow("n over limit") << C << js({{"prompt", "x"}, {"n", 1000}}) << 400 << "n";
        QTest::newRow("top_p zero") << C << js({{"prompt", "x"}, {"top_p", 0}}) << 400 << "top_p";
        QTest::newRow("top_p over one") << C << js({{"prompt", "x"}, {"top_p", 1.5}}) << 400 << "top_p";
        QTest::newRow("temperature negative")
            << C << js({{"prompt", "x"}, {"temperature", -1}}) << 400 << "temperature";
        QTest::newRow("min_p over one") << C << js({{"prompt", "x"}, {"min_p", 2}}) << 400 << "min_p";
        QTest::newRow("presence_penalty range")
            << C << js({{"prompt", "x"}, {"presence_penalty", 3}}) << 400 << "presence_penalty";
        QTest::newRow("repetition_penalty zero")
            << C << js({{"prompt", "x"}, {"repetition_penalty", 0}}) << 400 << "repetition_penalty";
        QTest::newRow("seed float") << C << js({{"prompt", "x"}, {"seed", 1.5}}) << 400 << "seed";
        json stops = json::array();
        for (int i = 0; i < 10000; ++i) stops.push_back("s" + std::to_string(i));
        QTest::newRow("10000 stop strings") << C << js({{"prompt", "x"}, {"stop", stops}}) << 400 << "stop";
        QTest::newRow("stop not strings") << C << js({{"prompt", "x"}, {"stop", json::array({1})}}) << 400 << "stop";
        QTest::newRow("empty stop string") << C << js({{"prompt", "x"}, {"stop", ""}}) << 400 << "stop";
        const json user_x = json::array({{{"role", "user"}, {"content", "x"}}});
        QTest::newRow("logprobs over 20") << C << js({{"prompt", "x"}, {"logprobs", 21}}) << 400 << "logprobs";
        QTest::newRow("logprobs boolean on completions")
            << C << js({{"prompt", "x"}, {"logprobs", true}}) << 400 << "logprobs";
        QTest::newRow("top_logprobs on completions")
            << C << js({{"prompt", "x"}, {"top_logprobs", 2}}) << 400 << "top_logprobs";
        QTest::newRow("chat logprobs not a boolean")
            << H << js({{"messages", user_x}, {"logprobs", 3}}) << 400 << "logprobs";
        QTest::newRow("chat top_logprobs over 20")
            << H << js({{"messages", user_x}, {"logprobs", true}, {"top_logprobs", 21}}) << 400 << "top_logprobs";
        QTest::newRow("chat top_logprobs without logprobs")
            << H << js({{"messages", user_x}, {"top_logprobs", 2}}) << 400 << "top_logprobs";
        QTest::newRow("stream_options without stream")
            << C << js({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}) << 400 << "stream_options";
        QTest::newRow("unknown speculative method")
            << C << js({{"prompt", "x"}, {"speculative", "int4"}}) << 400 << "speculative";
        QTest::newRow("unknown route") << "/v1/embeddings" << js({{"input", "x"}}) << 404 << "";
        QTest::newRow("tokenize without prompt") << "/tokenize" << js({{"x", 1}}) << 400 << "prompt";
        QTest::newRow("detokenize bad id") << "/detokenize" << js({{"tokens", json::array({-1})}}) << 400 << "tokens";
    }

    // Each bad input: the right status, a well-formed OpenAI error naming the field, and the
    // server still answers the next request.
    void badInput() {
        QFETCH(QString, path);
        QFETCH(QByteArray, body);
        QFETCH(int, status);
        QFETCH(QString, param);
        auto r = m_ls->client()->Post(path.toStdString().c_str(), body.toStdString(), "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, status);
        const json j = test::body_json(r->body);
        QVERIFY2(test::is_openai_error(j), r->body.c_str());
        if (!param.isEmpty()) QCOMPARE(QString::fromStdString(j["error"]["param"].get<std::string>()), param);
        auto ok = m_ls->client()->Get("/health");
        QVERIFY(ok && ok->status == 200);
    }

    // A prompt that fits the context but not the whole KV pool: the engine refuses it and the
    // client gets a 400 saying why (stream: an error event, then [DONE]).
    void promptOverPoolIs400() {
        EngineOptions eo;
        eo.kv_blocks = 4;  // 64 tokens of KV
        auto ls = start({}, eo);
        std::vector<int> ids(100, 7);
        auto r = post(*ls, "/v1/completions", {{"prompt", ids}, {"max_tokens", 4}});
        QVERIFY(r);
        QCOMPARE(r->status, 400);
        QVERIFY2(test::is_openai_error(test::body_json(r->body)), r->body.c_str());
        auto s = post(*ls, "/v1/completions", {{"prompt", ids}, {"max_tokens", 4}, {"stream", true}});
        QVERIFY(s && s->status == 200);
        const test::SseBody sse = test::parse_sse(s->body);
        QVERIFY(sse.done && sse.bad_lines.empty() && !sse.chunks.empty());
        QVERIFY2(test::is_openai_error(sse.chunks.front()), s->body.c_str());
        QCOMPARE(ls->server->requests_in_flight(), 0);
    }

    void bodyOverLimitIs413() {
        server::ServerOptions so;
        so.max_body_bytes = 4096;
        auto ls = start(so);
        const std::string big = json{{"prompt", std::string(10000, 'a')}}.dump();
        auto r = ls->client()->Post("/v1/completions", big, "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, 413);
        QVERIFY2(test::is_openai_error(test::body_json(r->body)), r->body.c_str());
    }

    void apiKey() {
        server::ServerOptions so;
        so.api_key = "sk-test-123";
        auto ls = start(so);
        auto c = ls->client();
        auto none = c->Get("/v1/models");
        QVERIFY(none);
        QCOMPARE(none->status, 401);
        QVERIFY(test::is_openai_error(test::body_json(none->body)));
        auto wrong = c->Get("/v1/models", {{"Authorization", "Bearer sk-test-124"}});
        QVERIFY(wrong);
        QCOMPARE(wrong->status, 401);
        auto shorter = c->Get("/v1/models", {{"Authorization", "Bearer sk-test-12"}});
        QVERIFY(shorter && shorter->status == 401);
        auto right = c->Get("/v1/models", {{"Authorization", "Bearer sk-test-123"}});
        QVERIFY(right);
        QCOMPARE(right->status, 200);
        auto health = c->Get("/health");  // outside /v1: open, like vLLM's
        QVERIFY(health && health->status == 200);
    }

    void cors() {
        server::ServerOptions so;
        so.allowed_origins = {"http://good.example"};
        auto ls = start(so);
        auto c = ls->client();
        auto good = c->Get("/v1/models", {{"Origin", "http://good.example"}});
        QVERIFY(good && good->status == 200);
        QCOMPARE(good->get_header_value("Access-Control-Allow-Origin"), std::string("http://good.example"));
        auto bad = c->Get("/v1/models", {{"Origin", "http://evil.example"}});
        QVERIFY(bad && bad->status == 200);
        QVERIFY(!bad->has_header("Access-Control-Allow-Origin"));
        auto pre =
            c->Options("/v1/chat/completions", {{"Origin", "http://good.example"},
                                                {"Access-Control-Request-Method", "POST"},
                                                {"Access-Control-Request-Headers", "authorization,content-type"}});
        QVERIFY(pre);
        QCOMPARE(pre->status, 204);
        QCOMPARE(pre->get_header_value("Access-Control-Allow-Origin"), std::string("http://good.example"));
        QVERIFY(pre->get_header_value("Access-Control-Allow-Methods").find("POST") != std::string::npos);
        auto pre_bad = c->Options("/v1/chat/completions",
                                  {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
        QVERIFY(pre_bad);
        QCOMPARE(pre_bad->status, 403);
        QVERIFY(!pre_bad->has_header("Access-Control-Allow-Origin"));
    }

    // A full queue answers 429 with Retry-After at once; the queued requests still finish.
    void fullQueueIs429() {
        server::ServerOptions so;
        so.max_pending = 2;
        auto ls = start(so);
        ls->loop->pause();
        std::atomic<int> ok{0};
        std::vector<std::thread> held;
        for (int i = 0; i < 2; ++i)
            held.emplace_back([&] {
                auto r = ls->client()->Post("/v1/completions", json{{"prompt", "hold"}, {"max_tokens", 2}}.dump(),
                                            "application/json");
                if (r && r->status == 200) ++ok;
            });
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (ls->server->requests_in_flight() < 2 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        QCOMPARE(ls->server->requests_in_flight(), 2);
        auto r = ls->client()->Post("/v1/completions", json{{"prompt", "third"}, {"max_tokens", 2}}.dump(),
                                    "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, 429);
        QCOMPARE(r->get_header_value("Retry-After"), std::string("1"));
        QVERIFY(test::is_openai_error(test::body_json(r->body)));
        ls->loop->resume();
        for (auto& t : held) t.join();
        QCOMPARE(ok.load(), 2);
        QCOMPARE(ls->server->requests_in_flight(), 0);
    }

    // A client that hangs up mid-stream: its request is cancelled (finish reason abort in
    // /metrics), nothing runs or waits and no KV block is held afterwards.
    void disconnectCancels() {
        auto ls = start();
        const std::string before = metrics_text(*ls);
        const double aborts0 = test::metric_value(
            before, "vllm:request_success_total{engine=\"0\",model_name=\"tiny\",finished_reason=\"abort\"}");
        QVERIFY2(aborts0 == 0.0, before.c_str());
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.set_header("Content-Type", "application/json");
        req.body = json{{"prompt", "go on"}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}}.dump();
        int chunks = 0;
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
        auto c = ls->client();
        auto r = c->send(req);  // returns once the receiver said stop (the connection is closed)
        QVERIFY(chunks >= 3);
        // Wait until nothing runs or waits; then every request of this stream ended as an abort
        // (none ran to its 400 tokens) and no block is held.
        const std::string abort_key =
            "vllm:request_success_total{engine=\"0\",model_name=\"tiny\",finished_reason=\"abort\"}";
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        std::string m;
        while (std::chrono::steady_clock::now() < deadline) {
            m = metrics_text(*ls);
            if (test::metric_value(m, abort_key) >= 1.0 && test::metric_value(m, "vllm:num_requests_running{") == 0.0 &&
                test::metric_value(m, "vllm:num_requests_waiting{") == 0.0)
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        const double ended = test::metric_value(m, "vllm:e2e_request_latency_seconds_count{");
        qInfo("engine requests ended: %.0f, aborted: %.0f", ended, test::metric_value(m, abort_key));
        QVERIFY2(test::metric_value(m, abort_key) >= 1.0, m.c_str());
        QVERIFY2(test::metric_value(m, abort_key) == ended, m.c_str());  // none finished by length
        QVERIFY2(test::metric_value(m, "vllm:num_requests_running{") == 0.0, m.c_str());
        QVERIFY2(test::metric_value(m, "vllm:num_requests_waiting{") == 0.0, m.c_str());
        QVERIFY2(test::metric_value(m, "vllm:kv_cache_usage_perc{") == 0.0, m.c_str());
        QVERIFY2(test::metric_value(m, "vllm:request_generation_tokens_sum{") < 400.0 * ended, m.c_str());  // cut short
        QCOMPARE(ls->server->requests_in_flight(), 0);
    }

    // A non-streaming client that sends its request and closes the socket at once: the
    // server looks at the connection after every step (cpp-httplib 0.11 tells a handler
    // nothing; app/server/client_socket.h), so both choices (n = 2, a fork) end as aborts
    // long before their 400 tokens and nothing stays queued, running or holding a block.
    void nonStreamingDisconnectCancels() {
        auto ls = start();
        const std::string body =
            json{{"prompt", "go on"}, {"max_tokens", 400}, {"ignore_eos", true}, {"n", 2}, {"seed", 5}}.dump();
        const std::string http = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                 "application/json\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\n\r\n" + body;
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        QVERIFY(fd >= 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(ls->server->port()));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        QVERIFY(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
        QCOMPARE(::send(fd, http.data(), http.size(), 0), ssize_t(http.size()));
        ::close(fd);
        const std::string abort_key =
            "vllm:request_success_total{engine=\"0\",model_name=\"tiny\",finished_reason=\"abort\"}";
        std::string m;
        for (int i = 0; i < 400; ++i) {  // at most 20 s
            m = metrics_text(*ls);
            if (test::metric_value(m, "vllm:e2e_request_latency_seconds_count{") >= 2.0) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        QVERIFY2(test::metric_value(m, abort_key) == 2.0, m.c_str());  // both choices, none by length
        QVERIFY2(test::metric_value(m, "vllm:request_generation_tokens_sum{") < 800.0, m.c_str());
        QVERIFY2(test::metric_value(m, "vllm:num_requests_running{") == 0.0, m.c_str());
        QVERIFY2(test::metric_value(m, "vllm:kv_cache_usage_perc{") == 0.0, m.c_str());
        for (int i = 0; i < 100 && ls->server->clients_connected() > 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        QCOMPARE(ls->server->requests_in_flight(), 0);
        qInfo("after the hang-up: %.0f tokens generated of 2 x 400",
              test::metric_value(m, "vllm:request_generation_tokens_sum{"));
    }

    // A stream still waiting in the queue (engine paused) gets SSE comments, which both keep it
    // well-formed and find a client that has gone: that request is cancelled while still queued.
    void queuedStreamKeepAliveAndDisconnect() {
        auto ls = start();
        ls->loop->pause();
        std::string body;
        std::thread waiting([&] {
            auto r = post(*ls, "/v1/completions", {{"prompt", "wait"}, {"max_tokens", 3}, {"stream", true}});
            if (r) body = r->body;
        });
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.set_header("Content-Type", "application/json");
        req.body = json{{"prompt", "leave"}, {"max_tokens", 3}, {"stream", true}}.dump();
        req.content_receiver = [](const char*, size_t, uint64_t, uint64_t) { return false; };  // hang up at once
        auto c = ls->client();
        (void)c->send(req);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
        while (ls->server->requests_in_flight() > 1 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        QCOMPARE(ls->server->requests_in_flight(), 1);  // the one that left is gone, though nothing ran
        ls->loop->resume();
        waiting.join();
        const test::SseBody sse = test::parse_sse(body);
        QVERIFY(body.find(": keep-alive") != std::string::npos);
        QVERIFY(sse.done && sse.bad_lines.empty());
        QCOMPARE(sse.chunks.back()["choices"][0]["finish_reason"], json("length"));
    }

    // /metrics: every name vLLM's Grafana dashboard and the issue list, labelled model_name,
    // valid exposition lines, and counts that follow the requests served.
    void metricsNamesAndCounts() {
        auto ls = start();
        for (int i = 0; i < 3; ++i) {
            auto r = post(*ls, "/v1/completions", {{"prompt", "count"}, {"max_tokens", 4 + i}, {"ignore_eos", true}});
            QVERIFY(r && r->status == 200);
        }
        const std::string m = metrics_text(*ls);
        QVERIFY(!m.empty());
        const char* names[] = {"vllm:num_requests_running{",
                               "vllm:num_requests_waiting{",
                               "vllm:num_requests_swapped{",
                               "vllm:kv_cache_usage_perc{",
                               "vllm:gpu_cache_usage_perc{",
                               "vllm:cpu_cache_usage_perc{",
                               "vllm:prefix_cache_queries_total{",
                               "vllm:prefix_cache_hits_total{",
                               "vllm:num_preemptions_total{",
                               "vllm:prompt_tokens_total{",
                               "vllm:generation_tokens_total{",
                               "vllm:request_success_total{",
                               "vllm:time_to_first_token_seconds_bucket{",
                               "vllm:time_per_output_token_seconds_bucket{",
                               "vllm:inter_token_latency_seconds_bucket{",
                               "vllm:e2e_request_latency_seconds_bucket{",
                               "vllm:request_queue_time_seconds_sum{",
                               "vllm:request_prefill_time_seconds_sum{",
                               "vllm:request_decode_time_seconds_sum{",
                               "vllm:request_prompt_tokens_bucket{",
                               "vllm:request_generation_tokens_bucket{",
                               "vllm:request_max_num_generation_tokens_sum{",
                               "vllm:iteration_tokens_total_bucket{",
                               "vllm:spec_decode_num_drafts_total{",
                               "vllm:spec_decode_num_draft_tokens_total{",
                               "vllm:spec_decode_num_accepted_tokens_total{",
                               "vllm:cache_config_info{"};
        for (const char* n : names) QVERIFY2(m.find(std::string("\n") + n) != std::string::npos, n);
        // Exposition: comments, or `name{labels} number` with model_name in the labels.
        size_t pos = 0;
        int samples = 0;
        while (pos < m.size()) {
            const size_t eol = m.find('\n', pos);
            const std::string line = m.substr(pos, eol - pos);
            pos = eol + 1;
            if (line.empty() || line[0] == '#') continue;
            ++samples;
            const size_t lb = line.find('{'), rb = line.find("} ");
            QVERIFY2(lb != std::string::npos && rb != std::string::npos && lb < rb, line.c_str());
            QVERIFY2(line.substr(lb, rb - lb).find("model_name=\"tiny\"") != std::string::npos, line.c_str());
            size_t used = 0;
            (void)std::stod(line.substr(rb + 2), &used);
            QCOMPARE(used, line.size() - rb - 2);
        }
        QVERIFY(samples > 100);
        QCOMPARE(test::metric_value(m, "vllm:e2e_request_latency_seconds_count{"), 3.0);
        QCOMPARE(test::metric_value(
                     m, "vllm:request_success_total{engine=\"0\",model_name=\"tiny\",finished_reason=\"length\"}"),
                 3.0);
        QCOMPARE(test::metric_value(m, "vllm:request_generation_tokens_sum{"), 4.0 + 5.0 + 6.0);
        QCOMPARE(test::metric_value(m, "vllm:generation_tokens_total{"), 15.0);
        QCOMPARE(test::metric_value(m, "vllm:inter_token_latency_seconds_count{"), 3.0 + 4.0 + 5.0);
        QCOMPARE(test::metric_value(m, "vllm:request_params_n_count{"), 3.0);
        QCOMPARE(test::metric_value(m, "vllm:num_requests_running{"), 0.0);
        QVERIFY(test::metric_value(m, "vllm:iteration_tokens_total_count{") >= 15.0);
        // +Inf bucket = count
        QCOMPARE(test::metric_value(
                     m, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",model_name=\"tiny\",le=\"+Inf\"}"),
                 3.0);
    }

    void tokenizeRoundTrip() {
        const std::string text = "Hello, tokenizer world";
        auto r = post(*m_ls, "/tokenize", {{"prompt", text}});
        QVERIFY(r && r->status == 200);
        const json j = test::body_json(r->body);
        const auto want = m_ls->session->encode_text(text);
        QCOMPARE(ids_of(j["tokens"]), want);
        QCOMPARE(j["count"].get<int>(), int(want.size()));
        QCOMPARE(j["max_model_len"].get<int>(), 512);
        auto d = post(*m_ls, "/detokenize", {{"tokens", j["tokens"]}});
        QVERIFY(d && d->status == 200);
        QCOMPARE(test::body_json(d->body)["prompt"].get<std::string>(), m_ls->session->decode(want));
    }
};

QTEST_GUILESS_MAIN(TestServer)
#include "tst_server.moc"
