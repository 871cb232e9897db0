// kvscope bench: llama-bench's two tests on one model — pp (a prompt of n_prompt tokens
// in one batch) and tg (n_gen tokens generated one at a time) — each from a context of
// --depth tokens (filled untimed first; 0: empty) and repeated r times after a warm-up,
// reported as mean ± sd tokens/s. It also
// measures this machine's memory read bandwidth and how close decoding comes to it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "app/cli/commands.h"
#include "engine/kv_cache/kv_tensors.h"

namespace kvs::app {
namespace {

using Clock = std::chrono::steady_clock;

struct Sample {
    double mean = 0, sd = 0;
    std::vector<double> values;
};

Sample summarize(std::vector<double> v) {
    Sample s;
    s.values = v;
    if (v.empty()) return s;
    for (double x : v) s.mean += x;
    s.mean /= double(v.size());
    if (v.size() > 1) {
        double ss = 0;
        for (double x : v) ss += (x - s.mean) * (x - s.mean);
        s.sd = std::sqrt(ss / double(v.size() - 1));
    }
    return s;
}

std::vector<int32_t> bench_tokens(int n, int n_vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (auto& id : t) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        id = static_cast<int32_t>(x % static_cast<uint64_t>(n_vocab));
    }
    return t;
}

// Read bandwidth of n_threads threads streaming a 512 MiB buffer, best of 5, in GB/s.
double measure_read_bandwidth(int n_threads) {
    const size_t n = (512ull << 20) / sizeof(uint64_t);
    std::vector<uint64_t> buf(n, 1);  // [n]
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
        std::vector<uint64_t> sums(static_cast<size_t>(n_threads));
        const auto t0 = Clock::now();
        std::vector<std::thread> th;
        for (int t = 0; t < n_threads; ++t) {
            th.emplace_back([&, t] {
                const size_t a = n * t / n_threads, b = n * (t + 1) / n_threads;
                uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                for (size_t i = a; i + 4 <= b; i += 4) {
                    s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
                }
                sums[static_cast<size_t>(t)] = s0 + s1 + s2 + s3;
            });
        }
        for (auto& x : th) x.join();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        best = std::max(best, double(n * sizeof(uint64_t)) / s / 1e9);
        if (sums[0] == 42) std::printf(" ");  // keep the sums alive
    }
    return best;
}

// Bytes a decode step reads: every weight once (the embedding row aside, unless tied),
// plus the KV cache of the context so far (average over the tg run).
double decode_bytes_per_token(const Model& m, int avg_ctx, DType kv_type) {
    auto wb = [](const WeightView& w) { return double(tensor_bytes(w.dtype, w.n_in, w.n_out)); };
    double b = wb(m.output);
    for (const auto& l : m.layers)
        b += wb(l.wq) + wb(l.wk) + wb(l.wv) + wb(l.wo) + wb(l.w_gate) + wb(l.w_up) + wb(l.w_down);
    b += double(kv_cache_bytes_per_token(m.config, kv_type)) * avg_ctx;
    return b;
}

}  // namespace

int cmd_bench(const BenchOptions& o) {
    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    const Model* model = &session->model();
    RunnerOptions ro = o.runner;
    ro.n_ctx = std::max(ro.n_ctx, o.depth + std::max(o.n_prompt, o.n_gen) + 16);
    ro.n_batch = std::max(ro.n_batch, std::max(o.n_prompt, std::min(o.depth, 2048)));
    auto runner_r = session->make_runner(ro);
    if (!runner_r) {
        std::fprintf(stderr, "error: %s\n", runner_r.message().c_str());
        return 1;
    }
    SequenceRunner& runner = **runner_r;
    std::fprintf(stderr, "%s\n", runner.backend_note().c_str());
    std::vector<float> logits;
    const int n_vocab = model->config.n_vocab;

    // Empties the sequence and fills --depth context tokens (untimed).
    const auto depth_toks = bench_tokens(o.depth, n_vocab);
    auto reset = [&]() -> bool {
        runner.clear();
        if (o.depth == 0) return true;
        if (auto s = runner.eval(depth_toks, false, &logits); !s) {
            std::fprintf(stderr, "error: filling the context to depth %d: %s\n", o.depth, s.message().c_str());
            return false;
        }
        return true;
    };
    auto run_pp = [&]() -> double {
        if (!reset()) return -1;
        const auto toks = bench_tokens(o.n_prompt, n_vocab);
        const auto t0 = Clock::now();
        if (auto s = runner.eval(toks, false, &logits); !s) {
            std::fprintf(stderr, "error: %s\n", s.message().c_str());
            return -1;
        }
        return o.n_prompt / std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto run_tg = [&]() -> double {
        if (!reset()) return -1;
        const auto toks = bench_tokens(o.n_gen, n_vocab);
        const auto t0 = Clock::now();
        for (int i = 0; i < o.n_gen; ++i) {
            if (auto s = runner.eval({toks[static_cast<size_t>(i)]}, false, &logits); !s) {
                std::fprintf(stderr, "error: %s\n", s.message().c_str());
                return -1;
            }
        }
        return o.n_gen / std::chrono::duration<double>(Clock::now() - t0).count();
    };

    std::vector<double> pp, tg;
    if (o.n_prompt > 0) {
        if (run_pp() < 0) return 1;  // warm-up
        for (int r = 0; r < o.repetitions; ++r) pp.push_back(run_pp());
    }
    if (o.n_gen > 0) {
        if (run_tg() < 0) return 1;  // warm-up
        for (int r = 0; r < o.repetitions; ++r) tg.push_back(run_tg());
    }
    if (std::any_of(pp.begin(), pp.end(), [](double x) { return x < 0; }) ||
        std::any_of(tg.begin(), tg.end(), [](double x) { return x < 0; }))
        return 1;
    const Sample spp = summarize(pp), stg = summarize(tg);
    const int threads = runner.backend().n_threads();
    // The host bandwidth probe says nothing about a GPU's memory: only CPU runs compare.
    const bool host = runner.backend().host_visible();
    const double bw = host ? measure_read_bandwidth(threads) : 0.0;
    const double bytes_tok = decode_bytes_per_token(*model, o.depth + o.n_gen / 2, runner.kv_type());
    const double decode_gbs = stg.mean * bytes_tok / 1e9;

    nlohmann::json j;
    j["model"] = model->path;
    j["model_type"] = model->config.name + " " + model->file_type;
    j["weight_bytes"] = model->weight_bytes;
    j["n_params"] = model->n_params;
    j["backend"] = runner.backend().name();
    j["n_threads"] = threads;
    j["repetitions"] = o.repetitions;
    j["depth"] = o.depth;
    j["kv_type"] = kv_type_name(runner.kv_type());
    j["kv_bytes_per_token"] = session->kv_bytes_per_token(runner.kv_type());
    j["kv_pool_bytes"] = runner.kv_bytes();
    if (!pp.empty())
        j["pp"] = {{"n_prompt", o.n_prompt}, {"avg_ts", spp.mean}, {"stddev_ts", spp.sd}, {"samples_ts", spp.values}};
    if (!tg.empty())
        j["tg"] = {{"n_gen", o.n_gen}, {"avg_ts", stg.mean}, {"stddev_ts", stg.sd}, {"samples_ts", stg.values}};
    if (host) j["memory_read_bandwidth_gbs"] = bw;
    j["decode_bytes_per_token"] = bytes_tok;
    j["decode_effective_gbs"] = decode_gbs;
    if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
        return 0;
    }
    std::printf("| model | size | params | backend | threads | kv | test | t/s |\n");
    std::printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |\n");
    const std::string depth = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
    auto row = [&](const char* test, int n, const Sample& s) {
        std::printf("| %s %s | %.2f MiB | %.2f M | %s | %d | %s | %s%d%s | %.2f ± %.2f |\n", model->config.name.c_str(),
                    model->file_type.c_str(), model->weight_bytes / 1048576.0, model->n_params / 1e6,
                    runner.backend().name().c_str(), threads, kv_type_name(runner.kv_type()).c_str(), test, n,
                    depth.c_str(), s.mean, s.sd);
    };
    if (!pp.empty()) row("pp", o.n_prompt, spp);
    if (!tg.empty()) row("tg", o.n_gen, stg);
    if (!tg.empty() && !host)
        std::printf("\ndecode reads %.1f MB/token -> %.1f GB/s effective (device memory)\n", bytes_tok / 1e6,
                    decode_gbs);
    else if (!tg.empty())
        std::printf(
            "\ndecode reads %.1f MB/token -> %.1f GB/s effective; machine read bandwidth (%d threads) %.1f GB/s "
            "(%.0f%%)\n",
            bytes_tok / 1e6, decode_gbs, threads, bw, 100.0 * decode_gbs / bw);
    return 0;
}

}  // namespace kvs::app
