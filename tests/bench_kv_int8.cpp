// ctest-labels: bench model
// What the INT8 (Q8_0) KV cache costs in quality on the default model: the first
// KVS_BENCH_TOKENS (default 512) tokens of the GPL-3 text run through SequenceRunner once
// with an F16 cache and once with an int8 cache (one prefill each: every token's keys and
// values are stored, then read back, exactly as in decoding); per position, the
// next-token distributions are compared: mean and max KL(P_f16 || P_int8) in nats, top-1
// agreement, logit differences, and each run's perplexity of the text. Also KV bytes per
// token. Then the attention kernel alone: one decode token of SmolLM2's shape (30 layers
// of 9 heads, 3 kv heads of 64, each layer its own caches) over 1024 and 4096 cached
// positions, F16 vs int8 cache, 1 and 2 threads, best of 20. Prints tables and writes bench_kv_int8.json to the test
// output folder. Never fails on the numbers (only on a run that cannot happen: an error
// or a NaN).
#include "engine/kv_cache/kv_tensors.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/cpu/quant_formats.h"

#include <QtTest>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "tests/support/test_paths.h"

using namespace kvs;

namespace {

// log-softmax of one row, in double; out [n]
void log_softmax(const float* x, int n, std::vector<double>& out) {
    out.resize(static_cast<size_t>(n));
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
    for (int i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
    const double lse = mx + std::log(sum);
    for (int i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lse;
}

// CPU time of the calling thread in microseconds: on a shared machine, time sliced away
// to other processes does not count.
double thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

}  // namespace

class BenchKvInt8 : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void qualityAgainstF16() {
        const std::string model_path = test::default_model_path();
        if (model_path.empty()) QSKIP("the default model is not installed");
        const char* text_path = "/usr/share/common-licenses/GPL-3";
        std::ifstream f(text_path, std::ios::binary);
        if (!f) QSKIP("no /usr/share/common-licenses/GPL-3 on this machine");
        std::stringstream ss;
        ss << f.rdbuf();
        auto model = load_model(model_path);
        QVERIFY2(model.is_ok(), model.message().c_str());
        auto tok = Tokenizer::create((*model)->vocab);
        QVERIFY2(tok.is_ok(), tok.message().c_str());
        const char* env_n = std::getenv("KVS_BENCH_TOKENS");
        const int n_tokens = env_n && std::atoi(env_n) > 1 ? std::atoi(env_n) : 512;
        std::vector<int32_t> ids = tok->encode(ss.str(), true, false);
        QVERIFY(static_cast<int>(ids.size()) >= n_tokens);
        ids.resize(static_cast<size_t>(n_tokens));

        std::vector<float> logits[2];  // [n_tokens, n_vocab] for F16, int8
        const DType types[2] = {DType::F16, DType::Q8_0};
        for (int i = 0; i < 2; ++i) {
            RunnerOptions ro;
            ro.n_ctx = n_tokens;
            ro.n_batch = n_tokens;
            ro.backend = "cpu";
            ro.kv_type = types[i];
            auto r = SequenceRunner::create(*model, ro);
            QVERIFY2(r.is_ok(), r.message().c_str());
            QVERIFY((*r)->eval(ids, true, &logits[i]).is_ok());
        }
        const int n_vocab = (*model)->config.n_vocab;
        double kl_sum = 0, kl_max = 0, nll[2] = {0, 0}, dmax = 0, dsum = 0;
        int agree = 0;
        std::vector<double> lp0, lp1;
        for (int t = 0; t < n_tokens; ++t) {
            const float* a = &logits[0][size_t(t) * n_vocab];
            const float* b = &logits[1][size_t(t) * n_vocab];
            log_softmax(a, n_vocab, lp0);
            log_softmax(b, n_vocab, lp1);
            double kl = 0;
            int arg0 = 0, arg1 = 0;
            for (int i = 0; i < n_vocab; ++i) {
                kl += std::exp(lp0[size_t(i)]) * (lp0[size_t(i)] - lp1[size_t(i)]);
                dmax = std::max(dmax, std::fabs(double(a[i]) - b[i]));
                dsum += std::fabs(double(a[i]) - b[i]);
                if (a[i] > a[arg0]) arg0 = i;
                if (b[i] > b[arg1]) arg1 = i;
            }
            QVERIFY(std::isfinite(kl));
            kl_sum += kl;
            kl_max = std::max(kl_max, kl);
            agree += arg0 == arg1;
            if (t + 1 < n_tokens) {
                nll[0] -= lp0[size_t(ids[size_t(t) + 1])];
                nll[1] -= lp1[size_t(ids[size_t(t) + 1])];
            }
        }
        const double kl_mean = kl_sum / n_tokens, top1 = double(agree) / n_tokens;
        const double ppl_f16 = std::exp(nll[0] / (n_tokens - 1)), ppl_int8 = std::exp(nll[1] / (n_tokens - 1));
        const ModelConfig& c = (*model)->config;
        const int64_t bytes_f16 = kv_cache_bytes_per_token(c, DType::F16),
                      bytes_int8 = kv_cache_bytes_per_token(c, DType::Q8_0);
        std::printf("\nINT8 KV cache vs F16 on %s, %d tokens of %s\n", c.name.c_str(), n_tokens, text_path);
        std::printf(
            "| KV bytes/token f16 | int8 | ratio | mean KL (nats) | max KL | top-1 agreement | max |dlogit| | mean "
            "|dlogit| | PPL f16 | PPL int8 |\n");
        std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        std::printf("| %lld | %lld | %.3f | %.3g | %.3g | %.2f%% | %.3g | %.3g | %.4f | %.4f |\n",
                    static_cast<long long>(bytes_f16), static_cast<long long>(bytes_int8),
                    double(bytes_f16) / bytes_int8, kl_mean, kl_max, 100 * top1, dmax,
                    dsum / (double(n_tokens) * n_vocab), ppl_f16, ppl_int8);
        nlohmann::json j = {{"model", model_path},
                            {"text", text_path},
                            {"n_tokens", n_tokens},
                            {"kv_bytes_per_token_f16", bytes_f16},
                            {"kv_bytes_per_token_int8", bytes_int8},
                            {"kl_mean", kl_mean},
                            {"kl_max", kl_max},
                            {"top1_agreement", top1},
                            {"max_abs_dlogit", dmax},
                            {"ppl_f16", ppl_f16},
                            {"ppl_int8", ppl_int8}};
        std::ofstream(test::output_path("bench_kv_int8.json")) << j.dump(2) << "\n";
    }

    // Decode attention over all 30 layers of SmolLM2's shape, each layer its own K and V
    // cache (so the caches stream from memory as in a real decode step, not from L2). One
    // thread (the backend then runs attention on the caller), timed in thread CPU time.
    void attentionKernelTime() {
        const int n_layer = 30, n_head = 9, n_kv_head = 3, hd = 64, bs = 16, kv_dim = n_kv_head * hd;
        std::printf(
            "\nattention of one decode token over %d layers (9 heads, 3 kv heads of 64), 1 thread, best of 20 "
            "(thread CPU time)\n",
            n_layer);
        std::printf("| context | f16 us | int8 us | int8 / f16 |\n| ---: | ---: | ---: | ---: |\n");
        nlohmann::json rows = nlohmann::json::array();
        for (int ctx : {1024, 4096}) {
            const int n_blocks = ctx / bs;
            std::mt19937 rng(1);
            std::normal_distribution<float> nd(0.0f, 1.0f);
            std::vector<float> q(size_t(n_head) * hd), vals(size_t(ctx) * kv_dim), out(q.size());
            for (auto& x : q) x = nd(rng);
            // per layer, K then V: [2 n_layer][ctx, kv_dim] in each type
            std::vector<std::vector<uint16_t>> c16(2 * n_layer, std::vector<uint16_t>(vals.size()));
            std::vector<std::vector<uint8_t>> c8(2 * n_layer,
                                                 std::vector<uint8_t>(size_t(ctx) * row_bytes(DType::Q8_0, kv_dim)));
            for (int l = 0; l < 2 * n_layer; ++l) {
                for (auto& x : vals) x = nd(rng);
                for (size_t i = 0; i < vals.size(); ++i) c16[size_t(l)][i] = cpu::fp32_to_fp16(vals[i]);
                cpu::quantize_row(DType::Q8_0, vals.data(), c8[size_t(l)].data(), int64_t(vals.size()));
            }
            std::vector<int32_t> table(static_cast<size_t>(n_blocks)), seq = {0}, pos = {ctx - 1};
            for (int b = 0; b < n_blocks; ++b)
                table[size_t(b)] = (b * 7) % n_blocks;  // n_blocks a power of 2: a permutation
            {
                auto be = make_cpu_backend(1, "auto");
                double best[2] = {1e30, 1e30};
                PagedAttentionArgs a;
                a.q = q.data();
                a.out = out.data();
                a.block_tables = table.data();
                a.token_seq = seq.data();
                a.token_pos = pos.data();
                a.n_tokens = 1;
                a.n_seqs = 1;
                a.max_blocks_per_seq = n_blocks;
                a.n_head = n_head;
                a.n_kv_head = n_kv_head;
                a.head_dim = hd;
                a.block_size = bs;
                a.scale = 0.125f;
                for (int rep = 0; rep < 20; ++rep) {
                    for (int i = 0; i < 2; ++i) {  // alternate, so both see the same machine load
                        a.cache_type = i == 0 ? DType::F16 : DType::Q8_0;
                        const double t0 = thread_cpu_us();
                        for (int l = 0; l < n_layer; ++l) {
                            a.k_cache =
                                i == 0 ? static_cast<const void*>(c16[size_t(2 * l)].data()) : c8[size_t(2 * l)].data();
                            a.v_cache = i == 0 ? static_cast<const void*>(c16[size_t(2 * l + 1)].data())
                                               : c8[size_t(2 * l + 1)].data();
                            be->paged_attention(a);
                        }
                        best[i] = std::min(best[i], thread_cpu_us() - t0);
                        QVERIFY(std::isfinite(out[0]));
                    }
                }
                std::printf("| %d | %.0f | %.0f | %.2f |\n", ctx, best[0], best[1], best[1] / best[0]);
                rows.push_back(
                    {{"ctx", ctx}, {"threads", 1}, {"n_layer", n_layer}, {"f16_us", best[0]}, {"int8_us", best[1]}});
            }
        }
        std::ofstream(test::output_path("bench_kv_int8_attention.json")) << rows.dump(2) << "\n";
    }
};

QTEST_GUILESS_MAIN(BenchKvInt8)
#include "bench_kv_int8.moc"
