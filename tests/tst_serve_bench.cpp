// ctest-labels: unit remote
// The serving benchmark (app/net/serve_metrics, app/net/serve_bench, `kvscope bench
// --serve`): its metrics against vLLM's calculate_metrics transcribed with numpy
// (tests/tools/serve_metrics_reference.py) on random outcomes with failures, 1-token
// requests and goodput SLOs; --goodput parsing; and the load generator against a fake
// streaming server on 127.0.0.1 that counts what it is sent: at most --max-concurrency
// requests in flight, arrival times kept, token-id prompts sent exactly, exact output counts
// from usage, server errors counted as failed requests; the CLI end to end (table + JSON).
#include <httplib.h>

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "app/net/serve_bench.h"
#include "app/net/serve_metrics.h"
#include "tests/support/run_kvscope.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"

using namespace kvs::net;
using json = nlohmann::json;

namespace {

// Streams max_tokens chunks of "x" 2 ms apart, then usage and [DONE]; a prompt that starts
// with id 666 gets a 500. Records the peak number of requests in flight and every body.
class StreamingServer {
public:
    StreamingServer() {
        m_svr.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"data":[{"id":"fake-model"}]})", "application/json");
        });
        m_svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
            const json body = json::parse(req.body, nullptr, false);
            {
                std::lock_guard<std::mutex> lock(m_mu);
                bodies.push_back(body);
            }
            if (body.contains("prompt") && body["prompt"].is_array() && !body["prompt"].empty() &&
                body["prompt"][0] == 666) {
                res.status = 500;
                res.set_content(R"({"error":{"message":"boom","type":"server_error"}})", "application/json");
                return;
            }
            const int n = body.value("max_tokens", 4);
            const int n_prompt = body.contains("prompt") ? static_cast<int>(body["prompt"].size()) : 0;
            const int now = ++m_in_flight;
            int seen = peak.load();
            while (now > seen && !peak.compare_exchange_weak(seen, now)) {
            }
            res.set_chunked_content_provider("text/event-stream", [this, n, n_prompt](size_t, httplib::DataSink& sink) {
                for (int i = 0; i < n; ++i) {
                    const std::string c = "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":" +
                                          std::string(i + 1 == n ? "\"length\"" : "null") + "}]}\n\n";
                    if (!sink.write(c.data(), c.size())) {
                        --m_in_flight;
                        return false;
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(2));
                }
                const std::string tail =
                    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":" + std::to_string(n_prompt) +
                    ",\"completion_tokens\":" + std::to_string(n) + "}}\n\ndata: [DONE]\n\n";
                --m_in_flight;  // before the last bytes: the client may start its next request at once
                sink.write(tail.data(), tail.size());
                sink.done();
                return true;
            });
        });
        m_port = m_svr.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_svr.listen_after_bind(); });
    }
    ~StreamingServer() {
        m_svr.stop();
        m_thread.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    std::atomic<int> peak{0};
    std::vector<json> bodies;

private:
    httplib::Server m_svr;
    std::thread m_thread;
    int m_port = 0;
    std::mutex m_mu;
    std::atomic<int> m_in_flight{0};
};

void compare_stat(const LatencyStat& s, const QJsonObject& ref, const char* what) {
    const std::pair<const char*, double> fields[] = {
        {"mean", s.mean}, {"median", s.median}, {"std", s.std}, {"p90", s.p90}, {"p99", s.p99}};
    for (const auto& [name, ours] : fields) {
        const double want = ref[name].toDouble();
        QVERIFY2(std::abs(ours - want) <= 1e-9 * std::max(1.0, std::abs(want)),
                 qPrintable(QString("%1 %2: ours %3, numpy %4").arg(what, name).arg(ours).arg(want)));
    }
}

}  // namespace

class TestServeBench : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void metrics_match_vllm_formulas_in_numpy_data() {
        QTest::addColumn<QString>("goodput");
        QTest::newRow("no SLO") << "";
        QTest::newRow("ttft and tpot") << "ttft:300 tpot:40";
        QTest::newRow("e2el") << "e2el:2500";
    }
    void metrics_match_vllm_formulas_in_numpy() {
        QFETCH(QString, goodput);
        std::mt19937 gen(5);
        std::uniform_real_distribution<double> u(0.0, 1.0);
        std::vector<RequestOutcome> outs;
        json jouts = json::array();
        for (int i = 0; i < 57; ++i) {
            RequestOutcome o;
            o.success = i % 9 != 4;
            o.start_s = u(gen);
            o.ttft_s = 0.05 + 0.5 * u(gen);
            o.output_tokens = i % 11 == 0 ? 1 : 2 + static_cast<int>(100 * u(gen));
            for (int k = 1; k < o.output_tokens; ++k) o.itl_s.push_back(0.01 + 0.05 * u(gen));
            o.latency_s = o.ttft_s;
            for (double g : o.itl_s) o.latency_s += g;
            o.prompt_len = 16 + static_cast<int>(400 * u(gen));
            outs.push_back(o);
            jouts.push_back({{"success", o.success},
                             {"ttft_s", o.ttft_s},
                             {"latency_s", o.latency_s},
                             {"itl_s", o.itl_s},
                             {"prompt_len", o.prompt_len},
                             {"output_tokens", o.output_tokens}});
        }
        GoodputSlo slo;
        json jg = json::object();
        if (!goodput.isEmpty()) {
            auto g = parse_goodput(goodput.toStdString());
            QVERIFY2(g, g.message().c_str());
            slo = *g;
            if (slo.ttft_ms) jg["ttft"] = *slo.ttft_ms;
            if (slo.tpot_ms) jg["tpot"] = *slo.tpot_ms;
            if (slo.e2el_ms) jg["e2el"] = *slo.e2el_ms;
        }
        const double duration = 7.25;
        const ServeMetrics m = compute_serve_metrics(outs, duration, slo);

        QTemporaryDir dir;
        const QString path = dir.filePath("outcomes.json");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray::fromStdString(json{{"duration_s", duration}, {"goodput", jg}, {"outcomes", jouts}}.dump()));
        f.close();
        const kvs::test::PythonRun r =
            kvs::test::run_python({QString::fromStdString(kvs::test::tool_path("serve_metrics_reference.py")), path});
        if (!r.ok && r.error.contains("ModuleNotFoundError")) QSKIP("numpy not installed in the project venv");
        QVERIFY2(r.ok, qPrintable(r.error));
        const QJsonObject ref = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(m.completed, ref["completed"].toInt());
        QCOMPARE(m.failed, ref["failed"].toInt());
        QCOMPARE(m.total_input, static_cast<int64_t>(ref["total_input_tokens"].toInteger()));
        QCOMPARE(m.total_output, static_cast<int64_t>(ref["total_output_tokens"].toInteger()));
        QVERIFY(std::abs(m.request_throughput - ref["request_throughput"].toDouble()) < 1e-9);
        QVERIFY(std::abs(m.output_throughput - ref["output_throughput"].toDouble()) < 1e-9);
        QVERIFY(std::abs(m.total_token_throughput - ref["total_token_throughput"].toDouble()) < 1e-9);
        if (goodput.isEmpty()) QVERIFY(ref["request_goodput"].isNull() && !m.goodput_measured);
        else {
            QVERIFY(std::abs(m.request_goodput - ref["request_goodput"].toDouble()) < 1e-9);
            QVERIFY(m.request_goodput > 0 && m.request_goodput < m.request_throughput);  // the SLO bites
        }
        compare_stat(m.ttft, ref["ttft_ms"].toObject(), "ttft");
        compare_stat(m.tpot, ref["tpot_ms"].toObject(), "tpot");
        compare_stat(m.itl, ref["itl_ms"].toObject(), "itl");
        compare_stat(m.e2el, ref["e2el_ms"].toObject(), "e2el");
    }

    void goodput_parsing() {
        auto ok = parse_goodput("ttft:500,tpot:50 e2el:3000");
        QVERIFY(ok);
        QCOMPARE(*ok->ttft_ms, 500.0);
        QCOMPARE(*ok->tpot_ms, 50.0);
        QCOMPARE(*ok->e2el_ms, 3000.0);
        for (const char* bad : {"ttft", "ttft:abc", "ttft:-1", "itl:5", ""}) {
            auto r = parse_goodput(bad);
            QVERIFY2(!r, bad);
            QVERIFY2(r.message().find("--goodput") != std::string::npos, r.message().c_str());
        }
    }

    void load_generator_keeps_concurrency_and_counts() {
        StreamingServer srv;
        std::vector<BenchRequest> reqs;
        for (int i = 0; i < 10; ++i) {
            BenchRequest r;
            r.prompt_ids = {100 + i, 7, 8, 9};
            r.max_tokens = 5 + i;
            reqs.push_back(r);
        }
        reqs[6].prompt_ids[0] = 666;  // the server fails this one
        ServeBenchConfig cfg;
        cfg.client.base_url = srv.url();
        cfg.client.read_timeout_s = 20;
        cfg.model = "fake-model";
        cfg.max_concurrency = 3;
        int calls = 0;
        const ServeBenchRun run = run_serve_bench(reqs, cfg, [&](int done, int total) {
            ++calls;
            QCOMPARE(total, 10);
            QVERIFY(done <= total);
        });
        QCOMPARE(calls, 10);
        QVERIFY2(srv.peak <= 3, qPrintable(QString::number(srv.peak.load())));
        QVERIFY(run.peak_in_flight <= 3);
        QCOMPARE(srv.bodies.size(), size_t{10});
        for (const json& b : srv.bodies) {
            QCOMPARE(b["model"].get<std::string>(), std::string("fake-model"));
            QCOMPARE(b["ignore_eos"].get<bool>(), true);
            QCOMPARE(b["temperature"].get<double>(), 0.0);
            QCOMPARE(b["stream"].get<bool>(), true);
            QCOMPARE(b["prompt"].size(), size_t{4});
        }
        for (size_t i = 0; i < reqs.size(); ++i) {
            const RequestOutcome& o = run.outcomes[i];
            if (i == 6) {
                QVERIFY(!o.success);
                QVERIFY2(o.error.find("HTTP 500") != std::string::npos && o.error.find("boom") != std::string::npos,
                         o.error.c_str());
                continue;
            }
            QVERIFY2(o.success, o.error.c_str());
            QCOMPARE(o.output_tokens, static_cast<int64_t>(reqs[i].max_tokens));
            QCOMPARE(o.prompt_len, int64_t{4});
            QCOMPARE(o.itl_s.size(), static_cast<size_t>(reqs[i].max_tokens - 1));
            QVERIFY(o.ttft_s > 0 && o.ttft_s <= o.latency_s);
        }
        const ServeMetrics m = compute_serve_metrics(run.outcomes, run.duration_s);
        QCOMPARE(m.completed, 9);
        QCOMPARE(m.failed, 1);
        QCOMPARE(m.total_output, int64_t{5 + 6 + 7 + 8 + 9 + 10 + 12 + 13 + 14});
    }

    void load_generator_keeps_arrival_times() {
        StreamingServer srv;
        std::vector<BenchRequest> reqs(3);
        for (int i = 0; i < 3; ++i) {
            reqs[static_cast<size_t>(i)].arrival_s = 0.25 * i;
            reqs[static_cast<size_t>(i)].prompt_ids = {1, 2};
            reqs[static_cast<size_t>(i)].max_tokens = 2;
        }
        ServeBenchConfig cfg;
        cfg.client.base_url = srv.url();
        cfg.client.read_timeout_s = 20;
        const ServeBenchRun run = run_serve_bench(reqs, cfg);
        for (int i = 0; i < 3; ++i) {
            const RequestOutcome& o = run.outcomes[static_cast<size_t>(i)];
            QVERIFY2(o.success, o.error.c_str());
            QVERIFY2(o.start_s >= 0.25 * i - 1e-3,
                     qPrintable(QString("request %1 sent at %2 s").arg(i).arg(o.start_s)));
        }
        QVERIFY(run.duration_s >= 0.5);
    }

    void cli_end_to_end() {
        StreamingServer srv;
        QTemporaryDir dir;
        const QString out = dir.filePath("bench.json");
        const auto r = kvs::test::run_kvscope({"bench", "--serve", QString::fromStdString(srv.url()), "--dataset",
                                               "random:prompt=8..12,output=3..6", "--num-prompts", "6",
                                               "--max-concurrency", "2", "--goodput", "ttft:10000", "--json-out", out});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err + r.out));
        QVERIFY2(r.out.contains("Serving Benchmark Result") && r.out.contains("Request goodput"), qPrintable(r.out));
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const json j = json::parse(f.readAll().toStdString());
        QCOMPARE(j["completed"].get<int>(), 6);
        QCOMPARE(j["failed"].get<int>(), 0);
        QCOMPARE(j["model"].get<std::string>(), std::string("fake-model"));  // the server's first model
        QCOMPARE(j["total_input_tokens"].get<int64_t>(), j["prompt_tokens_drawn"].get<int64_t>());
        QVERIFY(j["total_output_tokens"].get<int>() >= 18 && j["total_output_tokens"].get<int>() <= 36);
        // a ready check plus the 6 requests; every prompt 8..12 ids in the default vocabulary
        QCOMPARE(srv.bodies.size(), size_t{7});
        for (const json& b : srv.bodies) {
            QVERIFY(b["prompt"].size() >= 8 && b["prompt"].size() <= 12);
            for (const json& id : b["prompt"]) QVERIFY(id.get<int>() >= 32 && id.get<int>() < 49152);
        }
        // bad input: a clear error, exit 1
        const auto bad = kvs::test::run_kvscope({"bench", "--serve", "localhost:80"});
        QCOMPARE(bad.exit_code, 1);
        QVERIFY2(bad.err.contains("no scheme"), qPrintable(bad.err));
        const auto badrate =
            kvs::test::run_kvscope({"bench", "--serve", QString::fromStdString(srv.url()), "--request-rate", "fast"});
        QCOMPARE(badrate.exit_code, 1);
        QVERIFY2(badrate.err.contains("--request-rate"), qPrintable(badrate.err));
    }
};

QTEST_GUILESS_MAIN(TestServeBench)
#include "tst_serve_bench.moc"
