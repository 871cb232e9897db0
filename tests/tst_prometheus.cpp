// ctest-labels: remote net unit
// app/remote's Prometheus text parser and its model of vLLM's metrics:
//  - a page exactly as vLLM writes it (tests/fixtures/vllm_metrics_page.txt, made by
//    tests/tools/make_vllm_metrics.py with prometheus_client and vLLM's names, labels and
//    buckets, on two data-parallel engines): every sample equal to what prometheus_client's
//    own parser reads (when the venv has it), and every derived number (blocks used, hit
//    rate, spec acceptance, quantiles) equal to values worked out by hand from the script's
//    observations and Prometheus's histogram_quantile;
//  - histogram_quantile's edge cases as promql defines them;
//  - garbage: NaN / Inf values, bad escapes, huge lines, NUL bytes, HTML, 100,000 lines,
//    a page over the byte limit;
//  - a live kvscope server (app/server on 127.0.0.1): its /metrics page read back gives the
//    pool size the engine was built with and the token counts the requests' usage reported.
#include <QtTest>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/remote/llama_slots.h"
#include "app/remote/prometheus_text.h"
#include "app/remote/vllm_metrics.h"
#include "tests/support/live_server.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"

using namespace kvs;
using namespace kvs::remote;
using json = nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool near(double a, double b, double tol = 1e-9) { return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b)); }

std::string fmt_value(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return "";
}

PromHistogram hist(std::vector<std::pair<double, double>> b) {
    PromHistogram h;
    h.buckets = std::move(b);
    return h;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

class TestPrometheus : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void vllmPageSamplesMatchPrometheusClient() {
        const std::string path = test::fixture_path("vllm_metrics_page.txt");
        const std::string text = read_file(path);
        QVERIFY(!text.empty());
        auto page = parse_prometheus_text(text);
        QVERIFY2(page, page.message().c_str());
        QCOMPARE(page->n_bad_lines, size_t(0));
        QCOMPARE(page->type_of("vllm:time_to_first_token_seconds"), std::string("histogram"));

        auto py = test::run_python(
            {QString::fromStdString(test::tool_path("prometheus_samples.py")), QString::fromStdString(path)});
        if (!py.ok) QSKIP(qPrintable("prometheus_client's parser not available: " + py.error.left(300)));
        const json ref = json::parse(py.out.toStdString());
        QCOMPARE(page->samples.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
            const PromSample& s = page->samples[i];
            QCOMPARE(s.name, ref[i][0].get<std::string>());
            QCOMPARE(s.labels.size(), ref[i][1].size());
            for (auto it = ref[i][1].begin(); it != ref[i][1].end(); ++it) {
                const std::string* v = s.label(it.key());
                QVERIFY2(v, (s.name + " lacks label " + it.key()).c_str());
                QCOMPARE(*v, it.value().get<std::string>());
            }
            const std::string rv = ref[i][2];
            if (rv == "NaN" || rv == "+Inf" || rv == "-Inf") QCOMPARE(fmt_value(s.value), rv);
            else
                QVERIFY2(near(s.value, std::stod(rv), 1e-15), (s.name + " " + rv).c_str());
        }
    }

    // The derived numbers, from the observations in make_vllm_metrics.py worked out by hand.
    void vllmModel() {
        auto page = parse_prometheus_text(read_file(test::fixture_path("vllm_metrics_page.txt")));
        QVERIFY(page);
        auto m = read_vllm_metrics(*page);
        QVERIFY2(m, m.message().c_str());
        QVERIFY(m->dialect == MetricsDialect::Vllm);
        QCOMPARE(m->model_name, std::string("meta-llama/Llama-3.1-8B-Instruct"));
        QCOMPARE(m->n_engines, 2);
        QCOMPARE(m->num_running, 5.0);  // 3 + 2
        QCOMPARE(m->num_waiting, 1.0);
        QVERIFY(near(m->kv_usage, 0.5));      // mean of 0.25 and 0.75
        QCOMPARE(m->num_gpu_blocks, 2000.0);  // 1000 per engine
        QCOMPARE(m->num_cpu_blocks, 4096.0);
        QCOMPARE(m->block_size, 16.0);
        QCOMPARE(m->cache_dtype, std::string("auto"));
        QVERIFY(near(m->kv_blocks_used(), 1000.0));
        QCOMPARE(m->prefix_queries, 400.0);
        QCOMPARE(m->prefix_hits, 100.0);
        QVERIFY(near(m->prefix_hit_rate(), 0.25));
        QCOMPARE(m->preemptions, 7.0);
        QCOMPARE(m->prompt_tokens, 1200.0);
        QCOMPARE(m->generation_tokens, 345.0);
        QCOMPARE(m->request_success.at("stop"), 5.0);
        QCOMPARE(m->request_success.at("length"), 2.0);
        QCOMPARE(m->request_success.at("abort"), 0.0);
        // Speculative decoding: 10 drafts of 30 tokens, 18 accepted (8, 6, 4 at positions 0..2).
        QVERIFY(near(m->spec_acceptance_rate(), 0.6));
        QVERIFY(near(m->spec_mean_acceptance_length(), 2.8));
        const auto per_pos = m->spec_acceptance_per_pos();
        QCOMPARE(per_pos.size(), size_t(3));
        QVERIFY(near(per_pos[0], 0.8) && near(per_pos[1], 0.6) && near(per_pos[2], 0.4));
        // iteration tokens 1, 8, 100, 300.
        QVERIFY(near(m->mean_tokens_per_iteration(), 102.25));
        // TTFT: 10 x 0.05 s on engine 0 (bucket (0.04, 0.06]) and 10 x 0.3 s on engine 1
        // ((0.25, 0.5]); summed: 20 observations.
        QCOMPARE(m->ttft.count, 20.0);
        QVERIFY(near(m->ttft.sum, 3.5));
        QVERIFY(near(histogram_quantile(0.5, m->ttft), 0.06));    // rank 10: the top of (0.04, 0.06]
        QVERIFY(near(histogram_quantile(0.25, m->ttft), 0.05));   // rank 5 of 10 in (0.04, 0.06]
        QVERIFY(near(histogram_quantile(0.75, m->ttft), 0.375));  // 0.25 + 0.25 x 5/10
        QVERIFY(near(histogram_quantile(0.99, m->ttft), 0.495));  // 0.25 + 0.25 x 9.8/10
        // TPOT: 4 x 0.02 in (0.01, 0.025].
        QVERIFY(near(histogram_quantile(0.5, m->tpot), 0.0175));
        // E2E: 1.2, 1.2, 9000: the p99 rank falls in +Inf, answered with the highest bound.
        QVERIFY(near(histogram_quantile(0.99, m->e2e), 7680.0));
        QVERIFY(near(histogram_quantile(0.5, m->e2e), 1.375));  // rank 1.5 in (1.0, 1.5]: 1.0 + 0.5 x 1.5/2
        QVERIFY(!m->queue.present());                           // not on this page
        QVERIFY(std::isnan(histogram_quantile(0.5, m->queue)));
        // Asking for a model the page does not serve names the ones it does.
        auto other = read_vllm_metrics(*page, "nope");
        QVERIFY(!other);
        QVERIFY(other.message().find("Llama-3.1-8B-Instruct") != std::string::npos);
    }

    void quantileEdgeCases() {
        QVERIFY(std::isnan(histogram_quantile(0.5, hist({}))));
        QVERIFY(std::isnan(histogram_quantile(0.5, hist({{1, 3}, {2, 5}}))));     // no +Inf bucket
        QVERIFY(std::isnan(histogram_quantile(0.5, hist({{kInf, 5}}))));          // fewer than 2 buckets
        QVERIFY(std::isnan(histogram_quantile(0.5, hist({{1, 0}, {kInf, 0}}))));  // no observation
        QCOMPARE(histogram_quantile(-0.1, hist({{1, 1}, {kInf, 1}})), -kInf);
        QCOMPARE(histogram_quantile(1.1, hist({{1, 1}, {kInf, 1}})), kInf);
        QVERIFY(std::isnan(histogram_quantile(std::nan(""), hist({{1, 1}, {kInf, 1}}))));
        // Unsorted buckets are sorted; a count that falls is made monotonic.
        QVERIFY(near(histogram_quantile(0.5, hist({{kInf, 4}, {2, 4}, {1, 2}})), 1.0));
        QVERIFY(near(histogram_quantile(0.75, hist({{1, 2}, {2, 1}, {3, 4}, {kInf, 4}})), 2.5));
        // A first bound <= 0 is its own answer; NaN counts poison the result.
        QCOMPARE(histogram_quantile(0.1, hist({{-1, 5}, {kInf, 10}})), -1.0);
        QVERIFY(std::isnan(histogram_quantile(0.5, hist({{1, std::nan("")}, {kInf, 2}}))));
    }

    void floats() {
        QCOMPARE(parse_prom_float("1.5e-3").value(), 1.5e-3);
        QCOMPARE(parse_prom_float("+Inf").value(), kInf);
        QCOMPARE(parse_prom_float("-Inf").value(), -kInf);
        QCOMPARE(parse_prom_float("inf").value(), kInf);
        QVERIFY(std::isnan(parse_prom_float("NaN").value()));
        QCOMPARE(parse_prom_float("-0.25").value(), -0.25);
        QCOMPARE(parse_prom_float("1e999").value(), kInf);
        QCOMPARE(parse_prom_float("1e-999").value(), 0.0);
        QVERIFY(!parse_prom_float(""));
        QVERIFY(!parse_prom_float("12abc"));
        QVERIFY(!parse_prom_float("--1"));
        QVERIFY(!parse_prom_float("+NaN"));
        QVERIFY(!parse_prom_float("0x10"));
    }

    void garbageLinesAreSkippedAndNamed() {
        std::string text =
            "# TYPE vllm:num_requests_running gauge\n"
            "vllm:num_requests_running{model_name=\"m\"} NaN\n"
            "vllm:num_requests_waiting{model_name=\"m\"} +Inf\n"
            "vllm:kv_cache_usage_perc{model_name=\"a\\\"b\\\\c\\nd\"} 0.5 1700000000000\n"
            "bad_escape{x=\"\\q\"} 1\n"
            "unterminated{x=\"abc} 1\n"
            "9starts_with_digit 1\n"
            "no_value\n"
            "value_not_number{a=\"b\"} twelve\n"
            "dup{a=\"1\",a=\"2\"} 1\n"
            "# TYPE x bogus_type\n"
            "trailing_comma{a=\"1\",} 2\n"
            "  \t  \n"
            "ts_bad 1 notatime\n"
            "crlf_line 3\r\n";
        text += "huge{v=\"" + std::string(200000, 'x') + "\"} 1\n";
        text += std::string("nul\0byte 1\n", 11);
        auto page = parse_prometheus_text(text);
        QVERIFY2(page, page.message().c_str());
        QCOMPARE(page->samples.size(), size_t(5));
        QVERIFY(std::isnan(page->samples[0].value));
        QCOMPARE(page->samples[1].value, kInf);
        QCOMPARE(*page->samples[2].label("model_name"), std::string("a\"b\\c\nd"));
        QCOMPARE(page->samples[2].timestamp_ms.value(), int64_t(1700000000000));
        QCOMPARE(page->samples[3].name, std::string("trailing_comma"));
        QCOMPARE(page->samples[4].name, std::string("crlf_line"));
        QCOMPARE(page->samples[4].value, 3.0);
        QCOMPARE(page->n_bad_lines, size_t(10));
        QCOMPARE(page->bad_examples.size(), size_t(5));
        QVERIFY2(page->bad_examples[0].find("line 5:") == 0, page->bad_examples[0].c_str());
        QVERIFY2(page->bad_examples[0].find("\\q") != std::string::npos, page->bad_examples[0].c_str());
        // NaN gauges give NaN, not a crash or a number; derived values stay NaN.
        auto m = read_vllm_metrics(*page, "m");
        QVERIFY2(m, m.message().c_str());
        QVERIFY(std::isnan(m->num_running));
        QVERIFY(std::isnan(m->kv_blocks_used()));
        QVERIFY(std::isnan(m->prefix_hit_rate()));
    }

    void notPrometheus() {
        auto html = parse_prometheus_text("<!doctype html>\n<html><body>404 Not Found</body></html>\n");
        QVERIFY(!html);
        QVERIFY2(html.message().find("not Prometheus text") != std::string::npos, html.message().c_str());
        QVERIFY2(html.message().find("line 1") != std::string::npos, html.message().c_str());
        auto empty = parse_prometheus_text("");
        QVERIFY(empty);
        QVERIFY(empty->samples.empty());
        auto none = read_vllm_metrics(*empty);
        QVERIFY(!none);
        QVERIFY(none.message().find("no vLLM") != std::string::npos);
        auto other = parse_prometheus_text("process_cpu_seconds_total 12\npython_info{version=\"3\"} 1\n");
        QVERIFY(other);
        auto m = read_vllm_metrics(*other);
        QVERIFY(!m);
        QVERIFY2(m.message().find("process_cpu_seconds_total") != std::string::npos, m.message().c_str());
        PromLimits small;
        small.max_bytes = 100;
        auto big = parse_prometheus_text(std::string(101, 'a'), small);
        QVERIFY(!big);
        QVERIFY(big.message().find("100-byte limit") != std::string::npos);
        small = {};
        small.max_samples = 10;
        std::string many;
        for (int i = 0; i < 11; ++i) many += "x " + std::to_string(i) + "\n";
        auto over = parse_prometheus_text(many, small);
        QVERIFY(!over);
        QVERIFY(over.message().find("more than 10 samples") != std::string::npos);
    }

    void hundredThousandLines() {
        std::string text = "# TYPE vllm:iteration_tokens_total histogram\n";
        for (int i = 0; i < 100000; ++i)
            text += "vllm:request_success_total{engine=\"" + std::to_string(i % 7) + "\",finished_reason=\"r" +
                    std::to_string(i) + "\",model_name=\"m\"} " + std::to_string(i % 3) + "\n";
        auto page = parse_prometheus_text(text);
        QVERIFY2(page, page.message().c_str());
        QCOMPARE(page->samples.size(), size_t(100000));
        auto m = read_vllm_metrics(*page);
        QVERIFY(m);
        QCOMPARE(m->request_success.size(), size_t(100000));
        QCOMPARE(m->n_engines, 7);
    }

    void llamaServerNames() {
        const std::string text =
            "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
            "# TYPE llamacpp:prompt_tokens_total counter\n"
            "llamacpp:prompt_tokens_total 12\n"
            "llamacpp:tokens_predicted_total 34\n"
            "llamacpp:requests_processing 2\n"
            "llamacpp:requests_deferred 1\n";
        auto page = parse_prometheus_text(text);
        QVERIFY(page);
        auto m = read_vllm_metrics(*page);
        QVERIFY2(m, m.message().c_str());
        QVERIFY(m->dialect == MetricsDialect::LlamaCpp);
        QCOMPARE(m->prompt_tokens, 12.0);
        QCOMPARE(m->generation_tokens, 34.0);
        QCOMPARE(m->num_running, 2.0);
        QCOMPARE(m->num_waiting, 1.0);
        QVERIFY(std::isnan(m->num_gpu_blocks));
    }

    // llama-server's /slots, in the shape its current build answers (one idle slot, one busy).
    void llamaSlots() {
        const std::string body =
            R"([{"id":0,"n_ctx":512,"speculative":false,"is_processing":false},)"
            R"({"id":1,"n_ctx":512,"speculative":false,"is_processing":true,"id_task":0,"n_prompt_tokens":21,)"
            R"("n_prompt_tokens_processed":2,"params":{},"next_token":[{"has_next_token":true,"n_remain":181,"n_decoded":19}]}])";
        auto s = parse_llama_slots(body);
        QVERIFY2(s, s.message().c_str());
        QCOMPARE(s->size(), size_t(2));
        QCOMPARE((*s)[0].context_used(), 0);
        QVERIFY((*s)[1].processing);
        QCOMPARE((*s)[1].n_ctx, 512);
        QCOMPARE((*s)[1].context_used(), 40);  // 21 prompt + 19 decoded
        // Garbage: not JSON, not a list, wrong types (read as 0), a non-object entry (skipped).
        QVERIFY(!parse_llama_slots("<html>"));
        QVERIFY(!parse_llama_slots(R"({"slots":[]})"));
        auto odd =
            parse_llama_slots(R"([3, {"id":"x","n_ctx":-5,"is_processing":"yes","next_token":{"n_decoded":1e300}}])");
        QVERIFY(odd);
        QCOMPARE(odd->size(), size_t(1));
        QCOMPARE(odd->front().n_ctx, 0);
        QVERIFY(!odd->front().processing);
        QCOMPARE(odd->front().n_decoded, 0);
    }

    // A live kvscope server's page: the engine's pool size and the counts its requests reported.
    void liveKvscopeServer() {
        const std::string model = test::tiny_server_model("prometheus_tiny.gguf");
        QVERIFY(!model.empty());
        EngineOptions eo;
        eo.kv_blocks = 96;
        auto ls = test::start_live_server(model, {}, eo);
        QVERIFY2(ls, ls.message().c_str());
        auto c = (*ls)->client();
        int64_t prompt = 0, completion = 0;
        for (int i = 0; i < 3; ++i) {
            const json body = {{"model", "tiny"},
                               {"prompt", "hello world " + std::to_string(i)},
                               {"max_tokens", 5 + i},
                               {"temperature", 0},
                               {"ignore_eos", true}};
            auto r = c->Post("/v1/completions", body.dump(), "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 200);
            const json j = json::parse(r->body);
            prompt += j["usage"]["prompt_tokens"].get<int64_t>();
            completion += j["usage"]["completion_tokens"].get<int64_t>();
        }
        auto r = c->Get("/metrics");
        QVERIFY(r);
        QCOMPARE(r->status, 200);
        auto page = parse_prometheus_text(r->body);
        QVERIFY2(page, page.message().c_str());
        QCOMPARE(page->n_bad_lines, size_t(0));
        auto m = read_vllm_metrics(*page);
        QVERIFY2(m, m.message().c_str());
        QCOMPARE(m->model_name, std::string("tiny"));
        QCOMPARE(m->num_gpu_blocks, 96.0);
        QCOMPARE(m->num_running, 0.0);
        QCOMPARE(m->num_waiting, 0.0);
        QCOMPARE(m->prompt_tokens, double(prompt));
        QCOMPARE(m->generation_tokens, double(completion));
        QCOMPARE(m->ttft.count, 3.0);
        QCOMPARE(m->e2e.count, 3.0);
        QCOMPARE(m->request_success.at("length"), 3.0);
        const double p50 = histogram_quantile(0.5, m->ttft);
        QVERIFY(p50 > 0 && p50 < 60);
        const std::string path = test::output_path("prometheus_live_page.txt");
        std::ofstream(path) << r->body;
        auto py = test::run_python(
            {QString::fromStdString(test::tool_path("prometheus_samples.py")), QString::fromStdString(path)});
        if (!py.ok) QSKIP(qPrintable("prometheus_client's parser not available: " + py.error.left(300)));
        QCOMPARE(page->samples.size(), json::parse(py.out.toStdString()).size());
    }
};

QTEST_GUILESS_MAIN(TestPrometheus)
#include "tst_prometheus.moc"
