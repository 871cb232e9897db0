// ctest-labels: net
// 256 concurrent streaming clients (mixed prompts and lengths, greedy) against app/server on
// 127.0.0.1, bounded in time: every stream is well-formed and ends with [DONE], every client
// gets exactly the tokens an independent single-sequence greedy decode gives for its prompt
// (batching changes nothing), and afterwards /metrics shows 0 running / 0 waiting and no KV
// block held by a request (only cached ones). Prints the test process's peak RSS (server and
// clients together).
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/runtime/generate.h"
#include "tests/support/greedy_alone.h"
#include "tests/support/live_server.h"

using namespace kvs;
using json = nlohmann::json;

class TestServerLoad : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void concurrentStreams() {
        constexpr int kClients = 256;
        constexpr int kMaxTokens = 48;
        const std::vector<std::string> prompts = {"Alpha beta",
                                                  "The river runs",
                                                  "Once upon a time there was",
                                                  "Numbers: 1 2 3",
                                                  "Hello",
                                                  "A long time ago in a galaxy",
                                                  "Quick brown fox jumps",
                                                  "To be or not"};
        server::ServerOptions so;
        so.max_pending = 512;
        so.max_http_threads = 600;
        EngineOptions eo;
        eo.scheduler.max_num_seqs = 64;
        eo.kv_blocks = 1024;
        auto started = test::start_live_server(test::tiny_server_model(), so, eo);
        QVERIFY2(started, started.message().c_str());
        test::LiveServer& ls = **started;

        // What each prompt gives alone (independent path: one sequence, no batching, no HTTP).
        std::vector<std::vector<int32_t>> alone;
        for (const auto& p : prompts) {
            auto runner = ls.session->make_runner(RunnerOptions{});
            QVERIFY(runner);
            alone.push_back(test::greedy_alone(**runner, ls.session->model().config.n_vocab, ls.session->encode_text(p),
                                               kMaxTokens));
        }

        std::atomic<int> ok{0};
        std::vector<std::string> failures(kClients);
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> clients;
        for (int i = 0; i < kClients; ++i)
            clients.emplace_back([&, i] {
                const int pi = i % static_cast<int>(prompts.size());
                const int n = 4 + (i * 7) % (kMaxTokens - 3);  // 4 .. kMaxTokens tokens
                httplib::Client c("127.0.0.1", ls.server->port());
                c.set_read_timeout(120, 0);
                c.set_connection_timeout(30, 0);
                const json body = {{"prompt", prompts[pi]}, {"max_tokens", n},          {"temperature", 0},
                                   {"ignore_eos", true},    {"return_token_ids", true}, {"stream", true}};
                auto r = c.Post("/v1/completions", body.dump(), "application/json");
                if (!r) {
                    failures[i] = "no reply: " + httplib::to_string(r.error());
                    return;
                }
                if (r->status != 200) {
                    failures[i] = "status " + std::to_string(r->status) + ": " + r->body;
                    return;
                }
                const test::SseBody sse = test::parse_sse(r->body);
                if (!sse.bad_lines.empty() || !sse.done || sse.data_after_done) {
                    failures[i] = "malformed stream";
                    return;
                }
                std::vector<int32_t> got;
                std::string finish;
                for (const json& ch : sse.chunks) {
                    const json& c0 = ch["choices"][0];
                    if (c0.contains("token_ids"))
                        for (const auto& t : c0["token_ids"]) got.push_back(t.get<int32_t>());
                    if (!c0["finish_reason"].is_null()) finish = c0["finish_reason"].get<std::string>();
                }
                const std::vector<int32_t> want(alone[pi].begin(), alone[pi].begin() + n);
                if (got != want) {
                    failures[i] = "tokens differ from the prompt's greedy decode alone";
                    return;
                }
                if (finish != "length") {
                    failures[i] = "finish_reason " + finish;
                    return;
                }
                ++ok;
            });
        for (auto& t : clients) t.join();
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (int i = 0; i < kClients; ++i)
            if (!failures[i].empty()) qWarning("client %d: %s", i, failures[i].c_str());
        QCOMPARE(ok.load(), kClients);
        QVERIFY2(secs < 300, "256 streams took more than 5 minutes");

        auto m = ls.client()->Get("/metrics");
        QVERIFY(m && m->status == 200);
        QCOMPARE(test::metric_value(m->body, "vllm:num_requests_running{"), 0.0);
        QCOMPARE(test::metric_value(m->body, "vllm:num_requests_waiting{"), 0.0);
        QCOMPARE(test::metric_value(m->body, "vllm:kv_cache_usage_perc{"), 0.0);
        QCOMPARE(test::metric_value(m->body, "vllm:e2e_request_latency_seconds_count{"), double(kClients));
        QVERIFY(test::metric_value(m->body, "vllm:prefix_cache_hits_total{") > 0);  // 8 prompts shared 32 ways
        QCOMPARE(ls.server->requests_in_flight(), 0);
        qInfo("%d streaming clients in %.1f s; peak RSS of the test process (server + clients) %.1f MiB", kClients,
              secs, peak_rss_bytes() / 1048576.0);
    }
};

QTEST_GUILESS_MAIN(TestServerLoad)
#include "tst_server_load.moc"
