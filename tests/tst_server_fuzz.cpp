// ctest-labels: net
// 1,000 mutated request bodies (fixed seed: byte flips, insertions of NUL / 0xFF / quotes,
// cuts, duplicated spans, fields replaced by values of every JSON type and size, fields
// dropped, deep nesting) sent to app/server's routes while two well-behaved clients keep
// asking for greedy completions. Every reply must be well-formed: a 2xx with the route's
// JSON (or an SSE stream ending in [DONE]) or a 4xx with an OpenAI-style error, never a 5xx
// or a dropped connection; the well-behaved clients get exactly the tokens they get alone;
// afterwards nothing runs, waits or holds a KV block.
#include <QtTest>

#include <atomic>
#include <random>
#include <thread>

#include "tests/support/greedy_alone.h"
#include "tests/support/live_server.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

const json& seeds() {
    static const json s = json::array({
        {{"path", "/v1/completions"},
         {"body", {{"model", "tiny"}, {"prompt", "Hello there"}, {"max_tokens", 6}, {"temperature", 0.7}}}},
        {{"path", "/v1/completions"},
         {"body",
          {{"prompt", json::array({"a b", "c d"})},
           {"max_tokens", 4},
           {"n", 2},
           {"stop", json::array({"x", "yz"})},
           {"seed", 3}}}},
        {{"path", "/v1/completions"},
         {"body", {{"prompt", json::array({5, 6, 7, 8})}, {"max_tokens", 5}, {"stream", true}}}},
        {{"path", "/v1/chat/completions"},
         {"body",
          {{"messages", json::array({{{"role", "system"}, {"content", "sys"}}, {{"role", "user"}, {"content", "hi"}}})},
           {"max_tokens", 5},
           {"top_p", 0.9},
           {"top_k", 20},
           {"presence_penalty", 0.5}}}},
        {{"path", "/v1/chat/completions"},
         {"body",
          {{"messages",
            json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "q"}}})}}})},
           {"max_completion_tokens", 4},
           {"stream", true},
           {"stream_options", {{"include_usage", true}}}}}},
        {{"path", "/tokenize"}, {"body", {{"prompt", "some text"}}}},
        {{"path", "/detokenize"}, {"body", {{"tokens", json::array({10, 20, 30})}}}},
    });
    return s;
}

json random_value(std::mt19937& rng) {
    switch (rng() % 14) {
        case 0: return nullptr;
        case 1: return true;
        case 2: return -1;
        case 3: return 0;
        case 4: return 1e300;
        case 5: return -9223372036854775807LL;
        case 6: return 18446744073709551615ULL;
        case 7: return 0.5;
        case 8: return "";
        case 9: return std::string(rng() % 3000, 'x');
        case 10: return json::array({1, "a", nullptr});
        case 11: return json::object({{"k", json::array()}});
        case 12: return std::string("\xC3\xA9\xE2\x82\xAC");
        default: return static_cast<int>(rng() % 1000);
    }
}

// Mutates a parsed body: replace, drop or add a field, or nest the whole thing.
void mutate_json(json& j, std::mt19937& rng) {
    if (!j.is_object() || j.empty()) return;
    auto it = j.begin();
    std::advance(it, static_cast<long>(rng() % j.size()));
    switch (rng() % 5) {
        case 0: *it = random_value(rng); break;
        case 1: j.erase(it); break;
        case 2: j["unknown_" + std::to_string(rng() % 9)] = random_value(rng); break;
        case 3:
            if (it->is_array() && !it->empty()) (*it)[rng() % it->size()] = random_value(rng);
            else if (it->is_object())
                mutate_json(*it, rng);
            else
                *it = random_value(rng);
            break;
        default: *it = json::array({*it, *it}); break;
    }
}

std::string mutate_bytes(std::string s, std::mt19937& rng) {
    const int edits = 1 + static_cast<int>(rng() % 4);
    static const char inserts[] = {'\0', '\xff', '"', '{', '[', ']', '}', ',', ':', '\\', '\xc3', 'e', '9', '-'};
    for (int e = 0; e < edits && !s.empty(); ++e) {
        const size_t pos = rng() % s.size();
        switch (rng() % 5) {
            case 0: s[pos] = static_cast<char>(rng() & 0xff); break;
            case 1: s.insert(pos, 1, inserts[rng() % sizeof(inserts)]); break;
            case 2: s.erase(pos, 1 + rng() % 8); break;
            case 3: s.resize(pos); break;  // truncated
            default: s.insert(pos, s.substr(pos, rng() % 16)); break;
        }
    }
    return s;
}

}  // namespace

class TestServerFuzz : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void mutatedBodies() {
        server::ServerOptions so;
        so.max_body_bytes = 1 << 20;
        auto started = test::start_live_server(test::tiny_server_model(), so);
        QVERIFY2(started, started.message().c_str());
        test::LiveServer& ls = **started;

        // Two well-behaved clients, greedy, throughout the run.
        const std::vector<std::string> good_prompts = {"The good client", "Another polite request"};
        std::vector<std::vector<int32_t>> alone;
        for (const auto& p : good_prompts) {
            auto runner = ls.session->make_runner(RunnerOptions{});
            QVERIFY(runner);
            alone.push_back(
                test::greedy_alone(**runner, ls.session->model().config.n_vocab, ls.session->encode_text(p), 12));
        }
        std::atomic<bool> fuzzing{true};
        std::atomic<int> good_ok{0}, good_bad{0};
        std::vector<std::thread> good;
        for (int g = 0; g < 2; ++g)
            good.emplace_back([&, g] {
                auto c = ls.client();
                for (int k = 0; k < 2000 && fuzzing; ++k) {
                    const json body = {{"prompt", good_prompts[g]},
                                       {"max_tokens", 12},
                                       {"temperature", 0},
                                       {"ignore_eos", true},
                                       {"return_token_ids", true}};
                    auto r = c->Post("/v1/completions", body.dump(), "application/json");
                    std::vector<int32_t> got;
                    if (r && r->status == 200) {
                        const json j = test::body_json(r->body);
                        for (const auto& t : j["choices"][0]["token_ids"]) got.push_back(t.get<int32_t>());
                    }
                    if (got == alone[g]) {
                        ++good_ok;
                    } else if (good_bad++ == 0) {
                        std::string want;
                        for (int32_t t : alone[g]) want += std::to_string(t) + " ";
                        qWarning("well-behaved client %d wants %s got %s", g, want.c_str(),
                                 r ? r->body.substr(0, 400).c_str() : httplib::to_string(r.error()).c_str());
                    }
                }
            });

        std::mt19937 rng(20261126);
        int n_2xx = 0, n_4xx = 0, n_stream = 0;
        auto c = ls.client();
        for (int i = 0; i < 1000; ++i) {
            const json& seed = seeds()[rng() % seeds().size()];
            const std::string path = seed["path"];
            std::string body;
            const int kind = static_cast<int>(rng() % 10);
            if (kind < 5) {
                json j = seed["body"];
                for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) mutate_json(j, rng);
                body = j.dump();
            } else if (kind < 9) {
                body = mutate_bytes(seed["body"].dump(), rng);
            } else {  // deep nesting
                const size_t depth = 1000 + rng() % 100000;
                body = "{\"prompt\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
            }
            auto r = c->Post(path.c_str(), body, "application/json");
            QVERIFY2(r, qPrintable(QString("request %1: no reply (%2) to %3")
                                       .arg(i)
                                       .arg(QString::fromStdString(httplib::to_string(r.error())))
                                       .arg(QString::fromStdString(body.substr(0, 200)))));
            QVERIFY2(r->status < 500, qPrintable(QString("request %1: status %2 for %3: %4")
                                                     .arg(i)
                                                     .arg(r->status)
                                                     .arg(QString::fromStdString(body.substr(0, 200)))
                                                     .arg(QString::fromStdString(r->body.substr(0, 300)))));
            if (r->status >= 400) {
                ++n_4xx;
                QVERIFY2(test::is_openai_error(test::body_json(r->body)), r->body.c_str());
                continue;
            }
            QCOMPARE(r->status, 200);
            ++n_2xx;
            if (r->get_header_value("Content-Type").rfind("text/event-stream", 0) == 0) {
                ++n_stream;
                const test::SseBody sse = test::parse_sse(r->body);
                QVERIFY2(sse.bad_lines.empty() && sse.done && !sse.data_after_done, r->body.c_str());
                for (const json& ch : sse.chunks) QVERIFY(ch.contains("choices") || ch.contains("error"));
                continue;
            }
            const json j = test::body_json(r->body);
            QVERIFY2(j.is_object(), r->body.c_str());
            QVERIFY2(j.contains("choices") || j.contains("tokens") || j.contains("prompt"), r->body.c_str());
        }
        fuzzing = false;
        for (auto& t : good) t.join();
        qInfo(
            "1000 mutated bodies: %d answered 2xx (%d streams), %d answered 4xx; well-behaved clients %d right, "
            "%d wrong",
            n_2xx, n_stream, n_4xx, good_ok.load(), good_bad.load());
        QCOMPARE(good_bad.load(), 0);
        QVERIFY(good_ok.load() > 0);
        QVERIFY(n_2xx > 50 && n_4xx > 200);  // the mix exercised both paths

        auto m = ls.client()->Get("/metrics");
        QVERIFY(m && m->status == 200);
        QCOMPARE(test::metric_value(m->body, "vllm:num_requests_running{"), 0.0);
        QCOMPARE(test::metric_value(m->body, "vllm:num_requests_waiting{"), 0.0);
        QCOMPARE(test::metric_value(m->body, "vllm:kv_cache_usage_perc{"), 0.0);
        QCOMPARE(ls.server->requests_in_flight(), 0);
    }
};

QTEST_GUILESS_MAIN(TestServerFuzz)
#include "tst_server_fuzz.moc"
