// ctest-labels: net
// KV Scope's "kv_eviction" extension on the OpenAI routes of a live server (tiny model):
// {"policy", "budget"} and "POLICY:BUDGET" give the tokens the engine gives the same request
// with that eviction (greedy, token ids returned); n > 1 runs as separate requests; every bad
// value gets a 400 naming the field and the value, and the server goes on.
#include <QtTest>

#include <cmath>

#include "tests/support/live_server.h"

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

}  // namespace

class TestServerKvEviction : public QObject {
    Q_OBJECT
    std::unique_ptr<test::LiveServer> m_ls;
    std::shared_ptr<Session> m_session;

    // The engine's greedy tokens for the prompt with that eviction, and each token's log-probability.
    std::vector<int32_t> engine_tokens(const std::vector<int32_t>& prompt, int max_tokens, const std::string& spec,
                                       std::vector<double>* logprobs) {
        EngineOptions o;
        o.backend = "cpu";
        o.n_threads = 2;
        auto e = m_session->make_engine(o);
        if (!e) qFatal("%s", e.message().c_str());
        GenerationRequest g;
        g.prompt = prompt;
        g.params.max_tokens = max_tokens;
        g.params.temperature = 0;
        g.params.ignore_eos = true;
        g.params.logprobs = 0;
        if (!spec.empty()) g.kv_eviction = *parse_kv_eviction(spec);
        g.on_event = [logprobs](const TokenEvent& ev) {
            if (ev.token >= 0 && ev.logprobs) logprobs->push_back(ev.logprobs->logprob);
        };
        auto id = (*e)->submit(g);
        if (!id || !(*e)->run_until_idle()) qFatal("engine run failed");
        return (*e)->output_tokens(*id);
    }

private Q_SLOTS:
    void initTestCase() {
        const std::string model = test::tiny_server_model("server_evict_tiny.gguf");
        QVERIFY(!model.empty());
        auto ls = test::start_live_server(model);
        QVERIFY2(ls.is_ok(), ls.message().c_str());
        m_ls = std::move(ls.value());
        auto s = Session::open(model);
        QVERIFY2(s.is_ok(), s.message().c_str());
        m_session = *s;
    }

    void evictionReachesTheEngine() {
        std::vector<int32_t> prompt;
        for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 250);
        std::vector<double> lp_want, lp_full;
        const auto want = engine_tokens(prompt, 40, "streaming:6", &lp_want);
        engine_tokens(prompt, 40, "", &lp_full);
        // The tiny model's argmax hardly depends on the context; its probabilities do: the
        // setting must move them, or this test could not tell that it was applied.
        double moved = 0;
        for (size_t i = 0; i < lp_want.size() && i < lp_full.size(); ++i)
            moved = std::max(moved, std::abs(lp_want[i] - lp_full[i]));
        QVERIFY2(moved > 1e-3, qPrintable(QString("log-probabilities moved by %1 only").arg(moved)));
        for (const json& ev : {json{{"policy", "streaming"}, {"budget", 6}}, json("streaming:6")}) {
            json body = {{"prompt", prompt},   {"max_tokens", 40},         {"temperature", 0}, {"logprobs", 0},
                         {"ignore_eos", true}, {"return_token_ids", true}, {"kv_eviction", ev}};
            auto r = post(*m_ls, "/v1/completions", body);
            QVERIFY(r);
            QVERIFY2(r->status == 200, r->body.c_str());
            const json j = test::body_json(r->body);
            QCOMPARE(ids_of(j["choices"][0]["token_ids"]), want);
            const json& lps = j["choices"][0]["logprobs"]["token_logprobs"];
            QCOMPARE(lps.size(), lp_want.size());
            for (size_t i = 0; i < lp_want.size(); ++i) QVERIFY(std::abs(lps[i].get<double>() - lp_want[i]) < 1e-5);
            body["n"] = 2;
            auto r2 = post(*m_ls, "/v1/completions", body);
            QVERIFY(r2 && r2->status == 200);
            const json j2 = test::body_json(r2->body);
            QCOMPARE(j2["choices"].size(), size_t(2));
            QCOMPARE(ids_of(j2["choices"][1]["token_ids"]), want);
        }
        // Chat route too.
        json chat = {{"messages", json::array({json{{"role", "user"}, {"content", "hello there"}}})},
                     {"max_tokens", 8},
                     {"kv_eviction", json{{"policy", "streaming"}, {"budget", 0.5}}}};
        auto c = post(*m_ls, "/v1/chat/completions", chat);
        QVERIFY(c);
        QVERIFY2(c->status == 200, c->body.c_str());
    }

    void badValuesNameTheField_data() {
        QTest::addColumn<QString>("evict");
        QTest::addColumn<QString>("param");
        QTest::addColumn<QString>("named");
        QTest::newRow("unknown policy") << R"({"policy": "lru", "budget": 10})"
                                        << "kv_eviction.policy"
                                        << "lru";
        QTest::newRow("no policy") << R"({"budget": 10})"
                                   << "kv_eviction.policy"
                                   << "missing";
        QTest::newRow("budget 0") << R"({"policy": "h2o", "budget": 0})"
                                  << "kv_eviction.budget"
                                  << "budget";
        QTest::newRow("budget text") << R"({"policy": "h2o", "budget": "lots"})"
                                     << "kv_eviction.budget"
                                     << "budget";
        QTest::newRow("budget 2.5") << R"({"policy": "h2o", "budget": 2.5})"
                                    << "kv_eviction.budget"
                                    << "2.5";
        QTest::newRow("string, bad budget") << R"("h2o:abc")"
                                            << "kv_eviction"
                                            << "abc";
        QTest::newRow("not an object") << "[1, 2]"
                                       << "kv_eviction"
                                       << "kv_eviction";
    }
    void badValuesNameTheField() {
        QFETCH(QString, evict);
        QFETCH(QString, param);
        QFETCH(QString, named);
        json body = {{"prompt", "hello"}, {"max_tokens", 4}, {"kv_eviction", json::parse(evict.toStdString())}};
        auto r = post(*m_ls, "/v1/completions", body);
        QVERIFY(r);
        QCOMPARE(r->status, 400);
        const json j = test::body_json(r->body);
        QCOMPARE(QString::fromStdString(j["error"]["param"].get<std::string>()), param);
        QVERIFY2(j["error"]["message"].get<std::string>().find(named.toStdString()) != std::string::npos,
                 r->body.c_str());
        // The server goes on.
        auto ok = post(*m_ls, "/v1/completions", json{{"prompt", "hello"}, {"max_tokens", 2}});
        QVERIFY(ok && ok->status == 200);
    }
};

QTEST_GUILESS_MAIN(TestServerKvEviction)
#include "tst_server_kv_eviction.moc"
