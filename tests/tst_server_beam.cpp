// ctest-labels: net
// vLLM's beam search and min_tokens fields on the OpenAI routes of a live server (tiny
// model): use_beam_search with n beams (and best_of beams returning the n best) gives as
// choices the engine's beam hypotheses for the same prompt, best first, with their
// token ids, text and finish reason (streamed too); length_penalty reaches the ranking;
// min_tokens holds end-of-generation and stop strings back; every bad field gets a 400
// naming it and the server goes on.
#include <QtTest>

#include "engine/runtime/text_stream.h"
#include "tests/support/live_server.h"
#include "tests/support/run_python.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

httplib::Result post(const test::LiveServer& ls, const std::string& path, const json& body) {
    return ls.client()->Post(path.c_str(), body.dump(), "application/json");
}

std::vector<int32_t> ids_of(const json& a) {
    std::vector<int32_t> v;
    for (const auto& x : a) v.push_back(x.get<int32_t>());
    return v;
}

const std::vector<int32_t> kPrompt = {1, 120, 118, 291, 13, 119, 260, 35, 77, 200};

// What a reply of these tokens says in JSON: the streamed text (engine/runtime/text_stream.h),
// bytes that are not UTF-8 (random tiny-model tokens often are not) as U+FFFD, as every
// reply writes them (server::dump_json).
std::string text_of(const Session& s, const std::vector<int32_t>& ids) {
    TextStream ts(&s.tokenizer(), SamplingParams{});
    std::string out;
    for (int32_t t : ids) out += ts.push(t).text;
    out += ts.flush();
    return json::parse(server::dump_json(json(out))).get<std::string>();
}

}  // namespace

class TestServerBeam : public QObject {
    Q_OBJECT
    std::unique_ptr<test::LiveServer> m_ls;
    std::shared_ptr<Session> m_session;  // the same model, for the engine's own answers

    // The engine's hypotheses for a prompt, run through the Session.
    std::vector<BeamHypothesis> beams(const std::vector<int32_t>& prompt, int width, int max_tokens, float lp,
                                      int min_new = 0) {
        EngineOptions o;
        o.backend = "cpu";
        o.n_threads = 2;
        auto e = m_session->make_engine(o);
        if (!e) qFatal("%s", e.message().c_str());
        GenerationRequest g;
        g.prompt = prompt;
        g.params.max_tokens = max_tokens;
        g.params.length_penalty = lp;
        g.params.min_new_tokens = min_new;
        g.beam_width = width;
        auto id = (*e)->submit(g);
        if (!id || !(*e)->run_until_idle()) qFatal("beam run failed");
        return (*e)->beam_hypotheses(*id);
    }

private Q_SLOTS:
    void initTestCase() {
        const std::string model = test::tiny_server_model("server_beam_tiny.gguf");
        QVERIFY(!model.empty());
        auto ls = test::start_live_server(model);
        QVERIFY2(ls.is_ok(), ls.message().c_str());
        m_ls = std::move(ls.value());
        auto s = Session::open(model);
        QVERIFY2(s.is_ok(), s.message().c_str());
        m_session = *s;
    }

    void completionsChoicesAreTheHypotheses_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("bestOf");  // 0: not sent (the width is n)
        QTest::addColumn<float>("lp");
        QTest::newRow("n 3") << 3 << 0 << 1.0f;
        QTest::newRow("n 2 of best_of 4, length_penalty 0") << 2 << 4 << 0.0f;
        QTest::newRow("n 4, length_penalty 2") << 4 << 0 << 2.0f;
        QTest::newRow("n 2, length_penalty -1") << 2 << 0 << -1.0f;
    }
    void completionsChoicesAreTheHypotheses() {
        QFETCH(int, n);
        QFETCH(int, bestOf);
        QFETCH(float, lp);
        const int max_tokens = 6;
        json body = {{"prompt", kPrompt},    {"max_tokens", max_tokens}, {"use_beam_search", true}, {"n", n},
                     {"length_penalty", lp}, {"return_token_ids", true}, {"temperature", 0}};
        if (bestOf > 0) body["best_of"] = bestOf;
        auto r = post(*m_ls, "/v1/completions", body);
        QVERIFY(r);
        QVERIFY2(r->status == 200, r->body.c_str());
        const json j = test::body_json(r->body);
        const auto want = beams(kPrompt, std::max(n, bestOf), max_tokens, lp);
        QVERIFY(int(want.size()) >= n);
        QCOMPARE(j["choices"].size(), size_t(n));
        int64_t tokens = 0;
        for (int i = 0; i < n; ++i) {
            const json& c = j["choices"][size_t(i)];
            QCOMPARE(c["index"].get<int>(), i);
            QCOMPARE(ids_of(c["token_ids"]), want[size_t(i)].tokens);
            QCOMPARE(c["text"].get<std::string>(), text_of(*m_session, want[size_t(i)].tokens));
            const bool cut = int(want[size_t(i)].tokens.size()) == max_tokens;
            QCOMPARE(c["finish_reason"].get<std::string>(), std::string(cut ? "length" : "stop"));
            tokens += int64_t(want[size_t(i)].tokens.size());
        }
        QCOMPARE(j["usage"]["completion_tokens"].get<int64_t>(), tokens);

        // Streamed: each choice's text (in one piece at the end) and its finish reason.
        body["stream"] = true;
        auto s = post(*m_ls, "/v1/completions", body);
        QVERIFY(s && s->status == 200);
        const test::SseBody sse = test::parse_sse(s->body);
        QVERIFY(sse.done && sse.bad_lines.empty());
        std::vector<std::string> text(static_cast<size_t>(n));
        std::vector<std::string> reason(static_cast<size_t>(n));
        for (const json& ch : sse.chunks)
            for (const json& c : ch["choices"]) {
                const size_t i = c["index"].get<size_t>();
                QVERIFY(i < size_t(n));
                text[i] += c.value("text", "");
                if (!c["finish_reason"].is_null()) reason[i] = c["finish_reason"].get<std::string>();
            }
        for (int i = 0; i < n; ++i) {
            QCOMPARE(text[size_t(i)], j["choices"][size_t(i)]["text"].get<std::string>());
            QCOMPARE(reason[size_t(i)], j["choices"][size_t(i)]["finish_reason"].get<std::string>());
        }
    }

    // Chat: the hypotheses of the templated conversation.
    void chatChoicesAreTheHypotheses() {
        const json body = {{"messages", {{{"role", "user"}, {"content", "Name a colour"}}}},
                           {"max_tokens", 5},
                           {"use_beam_search", true},
                           {"n", 2},
                           {"length_penalty", 0.5}};
        auto r = post(*m_ls, "/v1/chat/completions", body);
        QVERIFY(r);
        QVERIFY2(r->status == 200, r->body.c_str());
        const json j = test::body_json(r->body);
        const auto want = beams(m_session->encode_chat({{"user", "Name a colour"}}), 2, 5, 0.5f);
        QCOMPARE(j["choices"].size(), size_t(2));
        for (size_t i = 0; i < 2; ++i)
            QCOMPARE(j["choices"][i]["message"]["content"].get<std::string>(), text_of(*m_session, want[i].tokens));
    }

    // min_tokens without beam search: the first token of the greedy reply whose text is plain
    // ASCII becomes a stop string; it ends the reply there, and with min_tokens two past it
    // it is text and the reply goes on.
    void minTokens() {
        json body = {{"prompt", kPrompt}, {"max_tokens", 8}, {"temperature", 0}, {"return_token_ids", true}};
        auto plain = post(*m_ls, "/v1/completions", body);
        QVERIFY(plain && plain->status == 200);
        const std::vector<int32_t> ids = ids_of(test::body_json(plain->body)["choices"][0]["token_ids"]);
        int k = -1;
        std::string stop;
        for (size_t i = 0; i < ids.size() && k < 0; ++i) {
            const std::string piece = m_session->tokenizer().token_to_piece(ids[i]);
            const bool ascii =
                !piece.empty() && std::all_of(piece.begin(), piece.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
            if (ascii) {
                k = int(i);
                stop = piece;
            }
        }
        QVERIFY2(k >= 0 && k + 3 <= 8, "no plain ASCII token early in the tiny model's reply");
        qInfo("  stop string '%s' is token %d of the reply", stop.c_str(), k);
        body["stop"] = {stop};
        auto stopped = post(*m_ls, "/v1/completions", body);
        QVERIFY(stopped && stopped->status == 200);
        const json js = test::body_json(stopped->body)["choices"][0];
        QCOMPARE(int(js["token_ids"].size()), k + 1);
        QCOMPARE(js["finish_reason"].get<std::string>(), std::string("stop"));
        QVERIFY(js["text"].get<std::string>().find(stop) == std::string::npos);
        body["min_tokens"] = k + 3;
        auto held = post(*m_ls, "/v1/completions", body);
        QVERIFY(held && held->status == 200);
        const json jh = test::body_json(held->body)["choices"][0];
        QVERIFY2(int(jh["token_ids"].size()) >= k + 3, held->body.c_str());
        QVERIFY2(jh["text"].get<std::string>().find(stop) != std::string::npos, held->body.c_str());
        const std::vector<int32_t> got = ids_of(jh["token_ids"]);
        QVERIFY(std::equal(got.begin(), got.end(), ids.begin()));  // the same greedy tokens, just more of them
    }

    // The official openai client (extra_body) parses the beams as choices, streamed too, and
    // gets BadRequestError naming the field (tests/tools/openai_beam_check.py).
    void officialClient() {
        const test::PythonRun probe = test::run_python({"-c", "import openai"});
        if (!probe.ok) QSKIP("the openai package is not in the project's venv (installer/requirements.txt)");
        const int n = 3, max_tokens = 6;
        const auto hyps = beams(kPrompt, n, max_tokens, 0.5f);
        json texts = json::array(), finish = json::array();
        for (int i = 0; i < n; ++i) {
            texts.push_back(text_of(*m_session, hyps[size_t(i)].tokens));
            finish.push_back(int(hyps[size_t(i)].tokens.size()) == max_tokens ? "length" : "stop");
        }
        const json want = {{"model", m_ls->server->model_name()},
                           {"prompt", kPrompt},
                           {"max_tokens", max_tokens},
                           {"n", n},
                           {"length_penalty", 0.5},
                           {"texts", texts},
                           {"finish", finish}};
        const test::PythonRun r =
            test::run_python({QString::fromStdString(test::tool_path("openai_beam_check.py")),
                              QString::fromStdString(m_ls->server->url()), QString::fromStdString(want.dump())},
                             300000);
        QVERIFY2(r.ok, qPrintable(r.error));
        qInfo("%s", qPrintable(r.out.trimmed()));
    }

    void badFieldsAreNamed_data() {
        QTest::addColumn<QByteArray>("body");
        QTest::addColumn<QString>("param");
        auto row = [](const char* name, json extra, const char* param) {
            json b = {{"prompt", "Hi"}, {"max_tokens", 5}};
            for (auto it = extra.begin(); it != extra.end(); ++it) b[it.key()] = it.value();
            QTest::newRow(name) << QByteArray::fromStdString(b.dump()) << QString(param);
        };
        row("one beam", {{"use_beam_search", true}}, "n");
        row("nine beams", {{"use_beam_search", true}, {"n", 9}}, "n");
        row("best_of nine", {{"use_beam_search", true}, {"n", 2}, {"best_of", 9}}, "best_of");
        row("best_of below n", {{"use_beam_search", true}, {"n", 3}, {"best_of", 2}}, "best_of");
        row("best_of without beams", {{"best_of", 2}}, "best_of");
        row("use_beam_search string", {{"use_beam_search", "yes"}}, "use_beam_search");
        row("length_penalty without beams", {{"length_penalty", 2.0}}, "length_penalty");
        row("length_penalty string", {{"use_beam_search", true}, {"n", 2}, {"length_penalty", "long"}},
            "length_penalty");
        row("min_tokens negative", {{"min_tokens", -1}}, "min_tokens");
        row("min_tokens over max_tokens", {{"min_tokens", 10}}, "min_tokens");
        row("beams with temperature", {{"use_beam_search", true}, {"n", 2}, {"temperature", 0.7}}, "temperature");
        row("beams with top_p", {{"use_beam_search", true}, {"n", 2}, {"top_p", 0.5}}, "top_p");
        row("beams with stop", {{"use_beam_search", true}, {"n", 2}, {"stop", "x"}}, "stop");
        row("beams with logprobs", {{"use_beam_search", true}, {"n", 2}, {"logprobs", 2}}, "logprobs");
        row("beams with kv_eviction", {{"use_beam_search", true}, {"n", 2}, {"kv_eviction", "streaming:64"}},
            "kv_eviction");
    }
    void badFieldsAreNamed() {
        QFETCH(QByteArray, body);
        QFETCH(QString, param);
        auto r = m_ls->client()->Post("/v1/completions", body.toStdString(), "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, 400);
        const json j = test::body_json(r->body);
        QVERIFY2(test::is_openai_error(j), r->body.c_str());
        QCOMPARE(QString::fromStdString(j["error"]["param"].get<std::string>()), param);
        qInfo("  %s", j["error"]["message"].get<std::string>().c_str());
        auto ok = post(*m_ls, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}});  // still serving
        QVERIFY(ok && ok->status == 200);
    }
};

QTEST_GUILESS_MAIN(TestServerBeam)
#include "tst_server_beam.moc"
