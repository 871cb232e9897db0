// kvscope bench --serve URL: requests of a generated workload (engine/runtime/workload.h:
// random = uniform lengths, mixed, shared-prefix, poisson) sent to an OpenAI-compatible
// server at Poisson arrivals (--request-rate) or all at once (inf), at most
// --max-concurrency in flight, streamed; the metrics of `vllm bench serve`
// (app/net/serve_metrics.h) as a table, and as JSON with --json-out.
//
// Prompts are token-exact: by default each prompt is its token ids, sent as a list of ids to
// /v1/completions (vLLM, llama-server and kvscope serve take them), and every request
// generates exactly its drawn output length (ignore_eos, greedy). With --prompt-text or
// --endpoint chat, the ids are decoded to text by --tokenizer (a model name or path, the
// default model when empty); the prompt tokens counted are then the server's own
// (usage.prompt_tokens), which may differ from the ids drawn.
#include "app/cli/cmd_bench_http.h"

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>

#include "app/cli/commands.h"
#include "app/net/serve_bench.h"
#include "engine/runtime/workload.h"

namespace kvs::app {
namespace {

using json = nlohmann::json;

Result<double> parse_rate(const std::string& s) {
    if (s == "inf" || s == "INF") return std::numeric_limits<double>::infinity();
    char* end = nullptr;
    const double r = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(r > 0) || std::isnan(r))
        return Status::error("--request-rate: '" + s + "' is not a rate in requests/s > 0 or inf");
    return r;
}

Result<WorkloadSpec> dataset_spec(const HttpBenchOptions& o, double rate) {
    std::string text = o.dataset;
    if (text.rfind("random", 0) == 0) text = "uniform" + text.substr(6);  // vLLM's name for uniform random lengths
    auto spec = parse_workload_spec(text);
    if (!spec) return Status::error("--dataset: " + spec.message());
    if (o.num_prompts > 0) spec->n_requests = o.num_prompts;
    spec->rate_rps = std::isinf(rate) ? 0 : rate;
    spec->seed = o.seed;
    if (Status s = validate_workload_spec(*spec); !s) return Status::error("--dataset: " + s.message());
    return spec;
}

void progress_bar(int done, int total, double elapsed_s) {
    const int width = 40;
    const int fill = total > 0 ? done * width / total : width;
    std::fprintf(stderr, "\r%5d/%d [%s%s] %.1f s", done, total, std::string(static_cast<size_t>(fill), '#').c_str(),
                 std::string(static_cast<size_t>(width - fill), '.').c_str(), elapsed_s);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
}

}  // namespace

void add_bench_http_options(CLI::App* b, HttpBenchOptions& o) {
    b->add_option("--serve", o.url,
                  "benchmark an OpenAI-compatible server at this URL (e.g. http://127.0.0.1:8000) "
                  "like vllm bench serve, instead of the local engine");
    b->add_option("--dataset", o.dataset,
                  "with --serve: random, mixed, shared-prefix or poisson, optionally with :key=value,... "
                  "(e.g. random:prompt=128..256,output=64 ; see --workload)");
    b->add_option("--num-prompts", o.num_prompts, "with --serve: requests (default: the dataset's n)")
        ->check(CLI::Range(1, 100000));
    b->add_option("--request-rate", o.request_rate, "with --serve: Poisson arrivals per second, or inf (all at once)");
    b->add_option("--max-concurrency", o.max_concurrency, "with --serve: most requests in flight (0: no limit)")
        ->check(CLI::Range(0, 4096));
    b->add_option("--served-model", o.model, "with --serve: the model name to request (default: the server's first)");
    b->add_option("--api-key", o.api_key, "with --serve: sent as Authorization: Bearer KEY");
    b->add_option("--goodput", o.goodput, "with --serve: SLOs in ms for goodput, e.g. \"ttft:500 tpot:50\"");
    b->add_option("--endpoint", o.endpoint, "with --serve: completions (token-id prompts) or chat")
        ->check(CLI::IsMember({"completions", "chat"}));
    b->add_flag("--prompt-text", o.text_prompts, "with --serve: send prompts as text decoded by --tokenizer");
    b->add_option("--tokenizer", o.tokenizer, "with --serve: model whose tokenizer makes text prompts");
    b->add_option("--bench-seed", o.seed, "with --serve: seed of the dataset");
    b->add_option("--vocab", o.vocab, "with --serve: token ids are drawn below this (default: the tokenizer's)")
        ->check(CLI::Range(64, 1 << 24));
    b->add_option("--request-timeout", o.timeout_s, "with --serve: seconds one request may take")
        ->check(CLI::Range(1.0, 86400.0));
    b->add_flag("--no-progress", o.no_progress, "with --serve: no progress bar");
    b->add_option("--label", o.label, "with --serve: a name for this run in the table and the JSON");
}

int cmd_bench_http(const HttpBenchOptions& o) {
    if (Status s = net::OpenAIClient::check_url(o.url); !s) {
        std::fprintf(stderr, "error: --serve: %s\n", s.message().c_str());
        return 1;
    }
    auto rate = parse_rate(o.request_rate);
    if (!rate) {
        std::fprintf(stderr, "error: %s\n", rate.message().c_str());
        return 1;
    }
    net::GoodputSlo slo;
    if (!o.goodput.empty()) {
        auto g = net::parse_goodput(o.goodput);
        if (!g) {
            std::fprintf(stderr, "error: %s\n", g.message().c_str());
            return 1;
        }
        slo = *g;
    }
    auto spec = dataset_spec(o, *rate);
    if (!spec) {
        std::fprintf(stderr, "error: %s\n", spec.message().c_str());
        return 1;
    }
    const bool text = o.text_prompts || o.endpoint == "chat";
    std::shared_ptr<Session> tok;
    if (text) {
        tok = open_session_or_report(o.tokenizer.empty() ? Session::default_model_name() : o.tokenizer);
        if (!tok) return 1;
        spec->n_vocab = tok->model().config.n_vocab;
    }
    if (o.vocab > 0) spec->n_vocab = o.vocab;
    auto workload = make_workload(*spec);
    if (!workload) {
        std::fprintf(stderr, "error: --dataset: %s\n", workload.message().c_str());
        return 1;
    }

    net::ServeBenchConfig cfg;
    cfg.client.base_url = o.url;
    cfg.client.api_key = o.api_key;
    cfg.client.read_timeout_s = o.timeout_s;
    cfg.client.total_timeout_s = o.timeout_s;
    cfg.chat = o.endpoint == "chat";
    cfg.max_concurrency = o.max_concurrency;
    cfg.model = o.model;
    if (cfg.model.empty()) {
        net::OpenAIClient probe(cfg.client);
        auto models = probe.list_models();
        if (!models) {
            std::fprintf(stderr, "error: %s\n", models.message().c_str());
            return 1;
        }
        if (models->empty()) {
            std::fprintf(stderr, "error: %s/v1/models lists no model\n", o.url.c_str());
            return 1;
        }
        cfg.model = models->front();
    }

    std::vector<net::BenchRequest> requests;
    for (const WorkloadRequest& w : *workload) {
        net::BenchRequest r;
        r.arrival_s = w.arrival_s;
        r.max_tokens = w.max_tokens;
        if (text) r.prompt_text = tok->decode(w.prompt);
        else
            r.prompt_ids = w.prompt;
        requests.push_back(std::move(r));
    }
    const std::string dataset = workload_spec_string(*spec);
    std::fprintf(stderr, "bench --serve %s: model %s, dataset %s, %zu requests, rate %s, max concurrency %s\n",
                 o.url.c_str(), cfg.model.c_str(), dataset.c_str(), requests.size(), o.request_rate.c_str(),
                 o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "unlimited");

    // Ready check (vLLM's initial test run): the first request once, not counted.
    {
        net::OpenAIClient probe(cfg.client);
        net::BenchRequest first = requests.front();
        first.max_tokens = std::min(first.max_tokens, 4);
        const net::RequestOutcome t = net::send_timed(probe, first, cfg, 0);
        if (!t.success) {
            std::fprintf(stderr, "error: the test request failed: %s\n", t.error.c_str());
            return 1;
        }
    }

    const bool bar = !o.no_progress && isatty(fileno(stderr));
    const auto t0 = std::chrono::steady_clock::now();
    const net::ServeBenchRun run = net::run_serve_bench(requests, cfg, [&](int done, int total) {
        if (bar)
            progress_bar(done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    });
    const net::ServeMetrics m = net::compute_serve_metrics(run.outcomes, run.duration_s, slo);
    std::vector<std::string> errors;
    for (const auto& r : run.outcomes)
        if (!r.success && errors.size() < 10) errors.push_back(r.error);
    std::printf("%s", net::format_table(m, o.label.empty() ? "Serving Benchmark Result" : o.label).c_str());
    if (!errors.empty()) {
        std::printf("Failed requests (first %zu):\n", errors.size());
        for (const auto& e : errors) std::printf("  %s\n", e.c_str());
    }
    int64_t drawn = 0;
    for (const auto& w : *workload) drawn += static_cast<int64_t>(w.prompt.size());
    if (!text && m.failed == 0 && m.total_input != drawn)
        std::printf("note: the server counted %lld prompt tokens, %lld were sent\n",
                    static_cast<long long>(m.total_input), static_cast<long long>(drawn));

    if (!o.json_out.empty()) {
        json j = net::to_json(m);
        j["label"] = o.label;
        j["url"] = o.url;
        j["model"] = cfg.model;
        j["endpoint"] = o.endpoint;
        j["dataset"] = dataset;
        j["num_prompts"] = requests.size();
        j["request_rate"] = o.request_rate;
        j["max_concurrency"] = o.max_concurrency;
        j["peak_in_flight"] = run.peak_in_flight;
        j["prompt_tokens_drawn"] = drawn;
        j["errors"] = errors;
        std::ofstream f(o.json_out);
        f << j.dump(2) << "\n";
        if (!f) {
            std::fprintf(stderr, "error: cannot write %s\n", o.json_out.c_str());
            return 1;
        }
    }
    return m.completed > 0 ? 0 : 1;
}

}  // namespace kvs::app
