// ctest-labels: kernels
// The KV-cache ops of kernels/backend.h (kv_store into F16 and Q8_0 caches, paged
// attention over block tables) on every available backend (CPU scalar, CPU AVX2, CUDA).
// The reference is a naive contiguous attention written here (K/V gathered by position,
// double precision); the scenarios cover GQA 1/3/4, head dims 64/128, blocks of 8/16/32,
// out-of-order block tables, prefill chunks and long decodes.
// kernels headers first: Qt defines `slots` as a macro.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_formats.h"

#include <QtTest>

#include "tests/support/backend_cases.h"
#include "tests/support/device_buffer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

using namespace kvs;
using namespace kvs::test;

namespace {

// ---------------------------------------------------------------- paged attention scenario

struct SeqSpec {
    int n_ctx;               // cached positions after this step
    int n_query;             // query tokens: positions n_ctx - n_query .. n_ctx - 1
    std::vector<int> table;  // explicit block table, or empty for a shuffled one
};

struct AttnScenario {
    int n_head, n_kv_head, head_dim, block_size;
    float q_scale;  // larger -> sharper softmax
    std::vector<SeqSpec> seqs;
};

std::map<QString, AttnScenario> attention_scenarios() {
    return {
        // GQA 3 (SmolLM2): decode tokens of 4 sequences and a prefill chunk crossing a block boundary
        {"gqa3_d64_mixed", {9, 3, 64, 16, 1.0f, {{1, 1, {}}, {17, 1, {}}, {40, 1, {}}, {37, 17, {}}, {100, 1, {}}}}},
        // the block table [7, 2, 5]: out of order, positions 0..40 over three blocks
        {"gqa3_d64_table_7_2_5", {9, 3, 64, 16, 1.0f, {{41, 3, {7, 2, 5}}, {5, 5, {0}}}}},
        // GQA 1, head_dim 128: a whole prompt from position 0 and a long decode
        {"gqa1_d128_prefill_decode", {4, 4, 128, 16, 1.0f, {{19, 19, {}}, {300, 1, {}}}}},
        // GQA 4, head_dim 128, blocks of 32: chunk in the middle of a sequence, a 1000-token decode
        {"gqa4_d128_bs32", {8, 2, 128, 32, 1.0f, {{65, 1, {}}, {33, 23, {}}, {1000, 1, {}}}}},
        // GQA 4, head_dim 64, small blocks, many sequences, sharp scores (online-softmax rescaling)
        {"gqa4_d64_bs8_sharp", {16, 4, 64, 8, 6.0f, {{9, 2, {}}, {8, 8, {}}, {123, 1, {}}, {64, 4, {}}, {2, 1, {}}}}},
        // a long decode and a chunk whose positions straddle several blocks
        {"gqa3_d64_long", {9, 3, 64, 16, 1.0f, {{2100, 1, {}}, {150, 40, {}}}}},
        // head_dim not a multiple of 8 (SIMD tails), odd block size
        {"gqa2_d40_bs5", {4, 2, 40, 5, 1.0f, {{23, 6, {}}, {3, 1, {}}}}},
        // few decode tokens over long contexts: the CPU backend splits the positions over
        // threads and merges the partial softmaxes (flash-decoding)
        {"gqa3_d64_decode_split", {9, 3, 64, 16, 2.0f, {{1500, 1, {}}, {700, 1, {}}}}},
        {"gqa1_d128_decode_split", {4, 4, 128, 16, 1.0f, {{3000, 1, {}}}}},
        {"gqa2_d40_bs5_decode_split", {4, 2, 40, 5, 1.0f, {{901, 1, {}}}}},
        // GQA 7 (Qwen2-0.5B's 14 heads over 2 kv heads): groups wider than the kernel's 4-head runs
        {"gqa7_d64", {14, 2, 64, 16, 1.0f, {{40, 9, {}}, {33, 1, {}}}}},
        {"gqa7_d64_decode_split", {14, 2, 64, 16, 1.0f, {{1200, 1, {}}, {20, 3, {}}}}},
        // two short decodes: with 3 threads the CPU backend cuts each GQA group of 4 into runs of 2
        {"gqa4_d64_two_decodes", {16, 4, 64, 16, 1.0f, {{40, 1, {}}, {50, 1, {}}}}},
    };
}

// Everything one paged_attention call needs, on the host.
struct AttnProblem {
    AttnScenario sc;
    int n_blocks = 0, max_blocks = 0, n_tokens = 0;
    std::vector<uint16_t> k_cache, v_cache;     // [n_blocks, block_size, n_kv_head, head_dim] fp16 bits
    std::vector<int32_t> tables;                // [n_seqs, max_blocks]
    std::vector<int32_t> token_seq, token_pos;  // [n_tokens]
    std::vector<float> q;                       // [n_tokens, n_head, head_dim]
    std::vector<std::vector<float>> k, v;       // per sequence [n_ctx, n_kv_head, head_dim], fp16-rounded
};

AttnProblem make_attention_problem(const AttnScenario& sc, uint32_t seed) {
    AttnProblem p;
    p.sc = sc;
    const int bs = sc.block_size, kv_dim = sc.n_kv_head * sc.head_dim;
    int n_needed = 0;
    for (const auto& s : sc.seqs) {
        const int nb = (s.n_ctx + bs - 1) / bs;
        n_needed += nb;
        p.max_blocks = std::max(p.max_blocks, nb + 1);
        for (int b : s.table) p.n_blocks = std::max(p.n_blocks, b + 1);
    }
    p.n_blocks = std::max(p.n_blocks, n_needed) + 3;  // spare blocks stay NaN
    std::mt19937 rng(seed);
    std::vector<int> free_ids(static_cast<size_t>(p.n_blocks));
    std::iota(free_ids.begin(), free_ids.end(), 0);
    for (const auto& s : sc.seqs)
        for (int b : s.table) free_ids.erase(std::remove(free_ids.begin(), free_ids.end(), b), free_ids.end());
    std::shuffle(free_ids.begin(), free_ids.end(), rng);
    const int spare = free_ids.back();  // never holds data: fills the unused table entries
    free_ids.pop_back();

    const uint16_t kNaN = 0x7E00;
    p.k_cache.assign(static_cast<size_t>(p.n_blocks) * bs * kv_dim, kNaN);
    p.v_cache = p.k_cache;
    p.tables.assign(sc.seqs.size() * static_cast<size_t>(p.max_blocks), spare);
    for (size_t s = 0; s < sc.seqs.size(); ++s) {
        const SeqSpec& spec = sc.seqs[s];
        const int nb = (spec.n_ctx + bs - 1) / bs;
        for (int b = 0; b < nb; ++b) {
            int id = b < static_cast<int>(spec.table.size()) ? spec.table[b] : free_ids.back();
            if (b >= static_cast<int>(spec.table.size())) free_ids.pop_back();
            p.tables[s * p.max_blocks + b] = id;
        }
        const size_t n = static_cast<size_t>(spec.n_ctx) * kv_dim;
        auto k = gaussian(n, seed + 100 + static_cast<uint32_t>(s));
        auto v = gaussian(n, seed + 200 + static_cast<uint32_t>(s));
        for (int pos = 0; pos < spec.n_ctx; ++pos) {
            const int64_t slot = static_cast<int64_t>(p.tables[s * p.max_blocks + pos / bs]) * bs + pos % bs;
            for (int i = 0; i < kv_dim; ++i) {
                const size_t src = static_cast<size_t>(pos) * kv_dim + i;
                p.k_cache[slot * kv_dim + i] = cpu::fp32_to_fp16(k[src]);
                p.v_cache[slot * kv_dim + i] = cpu::fp32_to_fp16(v[src]);
                k[src] = cpu::fp16_to_fp32(p.k_cache[slot * kv_dim + i]);
                v[src] = cpu::fp16_to_fp32(p.v_cache[slot * kv_dim + i]);
            }
        }
        p.k.push_back(std::move(k));
        p.v.push_back(std::move(v));
        for (int i = 0; i < spec.n_query; ++i) {
            p.token_seq.push_back(static_cast<int32_t>(s));
            p.token_pos.push_back(spec.n_ctx - spec.n_query + i);
        }
    }
    // interleave the sequences' tokens: one call mixes chunks and decodes in any order
    std::vector<size_t> order(p.token_seq.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int32_t> seq2, pos2;
    for (size_t i : order) {
        seq2.push_back(p.token_seq[i]);
        pos2.push_back(p.token_pos[i]);
    }
    p.token_seq = seq2;
    p.token_pos = pos2;
    p.n_tokens = static_cast<int>(p.token_seq.size());
    p.q = gaussian(static_cast<size_t>(p.n_tokens) * sc.n_head * sc.head_dim, seed + 7, sc.q_scale);
    return p;
}

// Naive attention over contiguous per-sequence K/V: scores, softmax, weighted sum, in double.
std::vector<double> naive_attention(const AttnProblem& p) {
    const AttnScenario& sc = p.sc;
    const int hd = sc.head_dim, kv_dim = sc.n_kv_head * hd, group = sc.n_head / sc.n_kv_head;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<double> out(p.q.size());  // [n_tokens, n_head, head_dim]
    for (int t = 0; t < p.n_tokens; ++t) {
        const auto& k = p.k[p.token_seq[t]];
        const auto& v = p.v[p.token_seq[t]];
        const int n = p.token_pos[t] + 1;
        for (int h = 0; h < sc.n_head; ++h) {
            const float* q = &p.q[(static_cast<size_t>(t) * sc.n_head + h) * hd];
            const int kvh = h / group;
            std::vector<double> w(static_cast<size_t>(n));
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j < n; ++j) {
                double dot = 0.0;
                for (int d = 0; d < hd; ++d) dot += double(q[d]) * k[static_cast<size_t>(j) * kv_dim + kvh * hd + d];
                w[j] = dot * scale;
                mx = std::max(mx, w[j]);
            }
            for (double& x : w) sum += (x = std::exp(x - mx));
            double* o = &out[(static_cast<size_t>(t) * sc.n_head + h) * hd];
            for (int j = 0; j < n; ++j)
                for (int d = 0; d < hd; ++d) o[d] += w[j] / sum * v[static_cast<size_t>(j) * kv_dim + kvh * hd + d];
        }
    }
    return out;
}

// The same problem with a Q8_0 cache: every stored row quantized by the reference
// quantizer (cpu::quantize_row); k / v become what the cache now holds (dequantized), the
// fp16-rounded values move to k_f16 / v_f16. Unused blocks hold NaN scales.
struct Q8AttnProblem {
    AttnProblem p;                          // k, v: dequantized Q8_0 values
    std::vector<uint8_t> k_cache, v_cache;  // [n_blocks, block_size, kv_dim / 32] Q8_0 blocks
    std::vector<std::vector<float>> k_f16, v_f16;
};

Q8AttnProblem with_q8_0_cache(const AttnProblem& src) {
    Q8AttnProblem q;
    q.p = src;
    const AttnScenario& sc = src.sc;
    const int bs = sc.block_size, kv_dim = sc.n_kv_head * sc.head_dim;
    const size_t pos_bytes = row_bytes(DType::Q8_0, kv_dim);
    q.k_cache.assign(static_cast<size_t>(src.n_blocks) * bs * pos_bytes, 0);
    for (size_t off = 0; off < q.k_cache.size(); off += 34) {  // d = fp16 NaN in every block
        q.k_cache[off] = 0x00;
        q.k_cache[off + 1] = 0x7E;
    }
    q.v_cache = q.k_cache;
    q.k_f16 = src.k;
    q.v_f16 = src.v;
    for (size_t s = 0; s < sc.seqs.size(); ++s) {
        for (int pos = 0; pos < sc.seqs[s].n_ctx; ++pos) {
            const int64_t slot = static_cast<int64_t>(src.tables[s * src.max_blocks + pos / bs]) * bs + pos % bs;
            for (auto [vals, cache] : {std::pair{&q.p.k[s], &q.k_cache}, {&q.p.v[s], &q.v_cache}}) {
                float* row = vals->data() + static_cast<size_t>(pos) * kv_dim;  // [kv_dim]
                uint8_t* dst = cache->data() + static_cast<size_t>(slot) * pos_bytes;
                cpu::quantize_row(DType::Q8_0, row, dst, kv_dim);
                cpu::dequantize_row(DType::Q8_0, dst, row, kv_dim);
            }
        }
    }
    return q;
}

// k_cache / v_cache: the caches in cache_type, host bytes.
template <class T>
std::vector<float> run_attention(Backend* be, const AttnProblem& p, const std::vector<T>& k_cache,
                                 const std::vector<T>& v_cache, DType cache_type) {
    const AttnScenario& sc = p.sc;
    DeviceBuffer q(be, p.q), kc(be, k_cache), vc(be, v_cache), tables(be, p.tables), seq(be, p.token_seq),
        pos(be, p.token_pos);
    DeviceBuffer out(be, nullptr, p.q.size() * sizeof(float));
    PagedAttentionArgs a;
    a.q = q.as<float>();
    a.out = out.as<float>();
    a.k_cache = kc.as<void>();
    a.v_cache = vc.as<void>();
    a.cache_type = cache_type;
    a.block_tables = tables.as<int32_t>();
    a.token_seq = seq.as<int32_t>();
    a.token_pos = pos.as<int32_t>();
    a.n_tokens = p.n_tokens;
    a.n_seqs = static_cast<int>(sc.seqs.size());
    a.max_blocks_per_seq = p.max_blocks;
    a.n_head = sc.n_head;
    a.n_kv_head = sc.n_kv_head;
    a.head_dim = sc.head_dim;
    a.block_size = sc.block_size;
    a.scale = 1.0f / std::sqrt(static_cast<float>(sc.head_dim));
    be->paged_attention(a);
    return out.read<float>();
}

std::vector<float> run_attention(Backend* be, const AttnProblem& p) {
    return run_attention(be, p, p.k_cache, p.v_cache, DType::F16);
}

std::vector<float> run_attention(Backend* be, const Q8AttnProblem& q) {
    return run_attention(be, q.p, q.k_cache, q.v_cache, DType::Q8_0);
}

}  // namespace

class TestAttentionOps : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void kv_store_data();
    void kv_store();
    void paged_attention_data();
    void paged_attention();
    void paged_attention_same_bits_in_any_task_data();
    void paged_attention_same_bits_in_any_task();
    void kv_store_q8_0_data();
    void kv_store_q8_0();
    void paged_attention_q8_0_data();
    void paged_attention_q8_0();
};

// ---------------------------------------------------------------- kv_store

void TestAttentionOps::kv_store_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("kv_dim");
    for (const char* b : kBackends)
        for (auto [n, d] : {std::pair{1, 192}, {5, 192}, {40, 1024}, {9, 60}})
            QTest::addRow("%s/%dx%d", b, n, d) << QString(b) << n << d;
}

// Stored halves are the nearest fp16 (within half an ulp, checked by decoding; a few
// hand-encoded values bit for bit); a slot of -1 stores nothing; other slots are untouched.
void TestAttentionOps::kv_store() {
    FETCH_BACKEND(be);
    QFETCH(int, n_tokens);
    QFETCH(int, kv_dim);
    const int block_size = 16, n_blocks = 6;
    auto k = gaussian(static_cast<size_t>(n_tokens) * kv_dim, 81, 2.0f);  // [n_tokens, kv_dim]
    auto v = gaussian(static_cast<size_t>(n_tokens) * kv_dim, 82, 0.5f);  // [n_tokens, kv_dim]
    const std::pair<float, uint16_t> exact[] = {{1.0f, 0x3C00},     {-2.0f, 0xC000},       {0.5f, 0x3800},
                                                {65504.0f, 0x7BFF}, {1.0f / 3.0f, 0x3555}, {0.0f, 0x0000}};
    for (size_t i = 0; i < std::size(exact) && i < k.size(); ++i) k[i] = exact[i].first;
    std::vector<int32_t> slot_ids(static_cast<size_t>(n_tokens));  // [n_tokens]
    std::vector<int> all(n_blocks * block_size);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), std::mt19937(83));
    for (int t = 0; t < n_tokens; ++t) slot_ids[t] = all[t];
    if (n_tokens > 2) slot_ids[1] = -1;  // a padding token
    const size_t cache_n = static_cast<size_t>(n_blocks) * block_size * kv_dim;
    const uint16_t kSentinel = 0xFFFF;
    std::vector<uint16_t> init(cache_n, kSentinel);  // [n_blocks, block_size, kv_dim]
    DeviceBuffer dk(be, k), dv(be, v), kc(be, init), vc(be, init), ds(be, slot_ids);
    KvStoreArgs a;
    a.k = dk.as<float>();
    a.v = dv.as<float>();
    a.k_cache = kc.as<uint16_t>();
    a.v_cache = vc.as<uint16_t>();
    a.slot_mapping = ds.as<int32_t>();
    a.n_tokens = n_tokens;
    a.kv_dim = kv_dim;
    be->kv_store(a);
    const auto kg = kc.read<uint16_t>(), vg = vc.read<uint16_t>();
    for (size_t i = 0; i < std::size(exact) && static_cast<int>(i) < kv_dim; ++i)
        QCOMPARE(kg[static_cast<size_t>(slot_ids[0]) * kv_dim + i], exact[i].second);
    std::vector<bool> written(static_cast<size_t>(n_blocks) * block_size, false);
    for (int t = 0; t < n_tokens; ++t) {
        if (slot_ids[t] < 0) continue;
        written[slot_ids[t]] = true;
        for (int i = 0; i < kv_dim; ++i) {
            const size_t src = static_cast<size_t>(t) * kv_dim + i, dst = static_cast<size_t>(slot_ids[t]) * kv_dim + i;
            for (auto [x, h] : {std::pair{k[src], kg[dst]}, {v[src], vg[dst]}}) {
                const float dec = cpu::fp16_to_fp32(h);
                if (!(std::fabs(dec - x) <= std::fabs(x) * 0x1p-11f + 0x1p-25f))
                    QFAIL(qPrintable(QString("token %1 elem %2: %3 stored as %4").arg(t).arg(i).arg(x).arg(dec)));
            }
        }
    }
    for (size_t s = 0; s < written.size(); ++s)
        if (!written[s])
            for (int i = 0; i < kv_dim; ++i) {
                QCOMPARE(kg[s * kv_dim + i], kSentinel);
                QCOMPARE(vg[s * kv_dim + i], kSentinel);
            }
}

// ---------------------------------------------------------------- paged attention

void TestAttentionOps::paged_attention_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<QString>("scenario");
    for (const char* b : kBackends)
        for (const auto& [name, sc] : attention_scenarios())
            QTest::addRow("%s/%s", b, qPrintable(name)) << QString(b) << name;
}

// Against the naive contiguous attention of this file and against the scalar reference
// kernel (for the scalar row itself only the first check says anything).
void TestAttentionOps::paged_attention() {
    FETCH_BACKEND(be);
    QFETCH(QString, scenario);
    const AttnProblem p = make_attention_problem(attention_scenarios().at(scenario), 1234);
    const std::vector<double> naive = naive_attention(p);
    const std::vector<float> got = run_attention(be, p);
    check_error(got, naive, tol_for(backend, 2e-5, 2e-3));
    if (QTest::currentTestFailed()) return;
    QString why;
    const std::vector<float> scalar = run_attention(backend_for("scalar", &why), p);
    check_error(got, std::vector<double>(scalar.begin(), scalar.end()), tol_for(backend, 2e-5, 2e-3));
}

// A token's output must not depend on how the CPU backend cuts a call into tasks (one
// token at a time, runs of heads, several tokens of one sequence per task, the positions
// of a long context over threads): the engine promises batched output equal to each
// request alone, and speculative verify passes equal to plain decoding. 1, 2 and 3
// threads cut these calls differently (1 thread runs every token whole).
void TestAttentionOps::paged_attention_same_bits_in_any_task_data() {
    QTest::addColumn<QString>("scenario");
    QTest::addColumn<QString>("cache");
    for (const char* name :
         {"gqa3_d64_mixed", "gqa3_d64_long", "gqa4_d64_bs8_sharp", "gqa7_d64", "gqa4_d128_bs32", "gqa4_d64_two_decodes",
          "gqa3_d64_decode_split", "gqa1_d128_decode_split", "gqa7_d64_decode_split"})
        for (const char* cache : {"f16", "q8_0"})
            QTest::addRow("%s/%s", name, cache) << QString(name) << QString(cache);
}

void TestAttentionOps::paged_attention_same_bits_in_any_task() {
    if (cpu::detect_simd() < cpu::SimdLevel::Avx2) QSKIP("this CPU lacks AVX2/FMA/F16C");
    QFETCH(QString, scenario);
    QFETCH(QString, cache);
    const AttnScenario sc = attention_scenarios().at(scenario);
    if (cache == "q8_0" && sc.head_dim % 32 != 0) QSKIP("Q8_0 rows need head_dim % 32 == 0");
    const AttnProblem p = make_attention_problem(sc, 77);
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3}) {
        auto be = make_cpu_backend(threads, "avx2");
        outs.push_back(cache == "f16" ? run_attention(be.get(), p) : run_attention(be.get(), with_q8_0_cache(p)));
    }
    for (size_t i = 1; i < outs.size(); ++i) {
        QCOMPARE(outs[i].size(), outs[0].size());
        QVERIFY2(std::memcmp(outs[i].data(), outs[0].data(), outs[0].size() * sizeof(float)) == 0,
                 qPrintable(QString("%1 threads give other bits than 1 thread").arg(i + 1)));
    }
}

// ---------------------------------------------------------------- INT8 (Q8_0) KV cache

#define SKIP_WITHOUT_Q8_KV(be)                                                                                      \
    if (!(be)->supports_kv(DType::Q8_0)) QSKIP(qPrintable(backend + ": no Q8_0 KV cache kernels (supports_kv says " \
                                                                    "no)"))

void TestAttentionOps::kv_store_q8_0_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("kv_dim");
    for (const char* b : kBackends)
        for (auto [n, d] : {std::pair{1, 192}, {5, 192}, {40, 1024}, {3, 32}})
            QTest::addRow("%s/%dx%d", b, n, d) << QString(b) << n << d;
}

// Each 32 values of a stored row are one Q8_0 block: d = fp16(max|x| / 127), q the nearest
// integer to x / d (ties to even, hand-checked on one block), |q| <= 127, the largest |x|
// at +-127; decoded values within d/2 (+ the fp16 rounding of d) of the input. A slot of
// -1 stores nothing; other slots keep their bytes.
void TestAttentionOps::kv_store_q8_0() {
    FETCH_BACKEND(be);
    SKIP_WITHOUT_Q8_KV(be);
    QFETCH(int, n_tokens);
    QFETCH(int, kv_dim);
    const int block_size = 16, n_blocks = 6;
    const size_t pos_bytes = row_bytes(DType::Q8_0, kv_dim);
    QCOMPARE(pos_bytes, static_cast<size_t>(kv_dim / 32 * 34));
    auto k = gaussian(static_cast<size_t>(n_tokens) * kv_dim, 91, 2.0f);  // [n_tokens, kv_dim]
    auto v = gaussian(static_cast<size_t>(n_tokens) * kv_dim, 92, 0.5f);  // [n_tokens, kv_dim]
    // Block 0 of token 0's K: amax 127 -> d = 1 exactly, so q = x rounded half to even.
    const std::pair<float, int8_t> exact[] = {{127.0f, 127}, {-63.5f, -64}, {0.5f, 0},  {1.5f, 2},
                                              {2.5f, 2},     {-2.5f, -2},   {3.49f, 3}, {-126.6f, -127}};
    for (size_t i = 0; i < std::size(exact); ++i) k[i] = exact[i].first;
    for (size_t i = std::size(exact); i < 32; ++i) k[i] = 0.25f * static_cast<float>(i % 7);
    std::vector<int32_t> slot_ids(static_cast<size_t>(n_tokens));  // [n_tokens]
    std::vector<int> all(n_blocks * block_size);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), std::mt19937(93));
    for (int t = 0; t < n_tokens; ++t) slot_ids[t] = all[t];
    if (n_tokens > 2) slot_ids[1] = -1;  // a padding token
    const uint8_t kSentinel = 0xA5;
    std::vector<uint8_t> init(static_cast<size_t>(n_blocks) * block_size * pos_bytes, kSentinel);
    DeviceBuffer dk(be, k), dv(be, v), kc(be, init), vc(be, init), ds(be, slot_ids);
    KvStoreArgs a;
    a.k = dk.as<float>();
    a.v = dv.as<float>();
    a.k_cache = kc.as<void>();
    a.v_cache = vc.as<void>();
    a.cache_type = DType::Q8_0;
    a.slot_mapping = ds.as<int32_t>();
    a.n_tokens = n_tokens;
    a.kv_dim = kv_dim;
    be->kv_store(a);
    const auto kg = kc.read<uint8_t>(), vg = vc.read<uint8_t>();
    auto scale_of = [](const uint8_t* blk) { return cpu::fp16_to_fp32(uint16_t(blk[0] | blk[1] << 8)); };
    const uint8_t* b0 = &kg[static_cast<size_t>(slot_ids[0]) * pos_bytes];
    QCOMPARE(scale_of(b0), 1.0f);
    for (size_t i = 0; i < std::size(exact); ++i) QCOMPARE(static_cast<int8_t>(b0[2 + i]), exact[i].second);

    std::vector<bool> written(static_cast<size_t>(n_blocks) * block_size, false);
    for (int t = 0; t < n_tokens; ++t) {
        if (slot_ids[t] < 0) continue;
        written[slot_ids[t]] = true;
        for (auto [x, got] : {std::pair{&k[size_t(t) * kv_dim], &kg[size_t(slot_ids[t]) * pos_bytes]},
                              {&v[size_t(t) * kv_dim], &vg[size_t(slot_ids[t]) * pos_bytes]}}) {
            for (int b = 0; b < kv_dim / 32; ++b) {
                const float* xb = x + 32 * b;
                const uint8_t* blk = got + 34 * b;
                double amax = 0;
                for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double(xb[j])));
                const double d_exact = amax / 127.0, d = scale_of(blk);
                QVERIFY2(std::fabs(d - d_exact) <= d_exact * 0x1p-11,
                         qPrintable(QString("scale %1 for %2").arg(d).arg(d_exact)));
                for (int j = 0; j < 32; ++j) {
                    const int q = static_cast<int8_t>(blk[2 + j]);
                    const double ideal = d_exact > 0 ? xb[j] / d_exact : 0.0;  // in [-127, 127]
                    if (!(std::fabs(q - ideal) <= 0.5 + 1e-4) || std::abs(q) > 127)
                        QFAIL(qPrintable(QString("token %1 block %2 elem %3: x %4 -> q %5, ideal %6")
                                             .arg(t)
                                             .arg(b)
                                             .arg(j)
                                             .arg(xb[j])
                                             .arg(q)
                                             .arg(ideal)));
                    if (std::fabs(xb[j]) == amax && amax > 0) QCOMPARE(std::abs(q), 127);
                    QVERIFY(std::fabs(q * d - xb[j]) <= 0.5 * d_exact + 127 * d_exact * 0x1p-11 + 1e-12);
                }
            }
        }
    }
    for (size_t sl = 0; sl < written.size(); ++sl)
        if (!written[sl])
            for (size_t i = 0; i < pos_bytes; ++i) {
                QCOMPARE(kg[sl * pos_bytes + i], kSentinel);
                QCOMPARE(vg[sl * pos_bytes + i], kSentinel);
            }
    // CPU levels: byte for byte what the reference quantizer (quantize_row) writes.
    if (is_cpu(backend)) {
        std::vector<uint8_t> ref(pos_bytes);
        for (int t = 0; t < n_tokens; ++t) {
            if (slot_ids[t] < 0) continue;
            cpu::quantize_row(DType::Q8_0, &k[size_t(t) * kv_dim], ref.data(), kv_dim);
            QVERIFY(std::memcmp(ref.data(), &kg[size_t(slot_ids[t]) * pos_bytes], pos_bytes) == 0);
        }
    }
}

void TestAttentionOps::paged_attention_q8_0_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<QString>("scenario");
    for (const char* b : kBackends)
        for (const auto& [name, sc] : attention_scenarios())
            if (sc.head_dim % 32 == 0) QTest::addRow("%s/%s", b, qPrintable(name)) << QString(b) << name;
}

// Against the naive attention over the values the Q8_0 cache holds (tight: the kernel
// reads every block right), against the scalar reference kernel, and against the naive
// attention over the unquantized (fp16) values: the cost of int8 rounding. Each key is
// off by at most d/2 = max|k|/254 per element; over head_dim 64..128 gaussian values
// that moves scores by ~1e-2 x q_scale and the outputs (convex mixes of values also off
// by d/2) by 7e-4 .. 2.3e-2 in normalized error here (the sharpest softmax worst); the
// bound 0.01 x (1 + q_scale) leaves room while still catching a wrong scale or block
// (errors of order 1).
void TestAttentionOps::paged_attention_q8_0() {
    FETCH_BACKEND(be);
    SKIP_WITHOUT_Q8_KV(be);
    QFETCH(QString, scenario);
    const AttnScenario sc = attention_scenarios().at(scenario);
    const Q8AttnProblem q = with_q8_0_cache(make_attention_problem(sc, 4321));
    const std::vector<float> got = run_attention(be, q);
    check_error(got, naive_attention(q.p), 2e-5);
    if (QTest::currentTestFailed()) return;
    QString why;
    const std::vector<float> scalar = run_attention(backend_for("scalar", &why), q);
    check_error(got, std::vector<double>(scalar.begin(), scalar.end()), 2e-5);
    if (QTest::currentTestFailed()) return;
    AttnProblem unquantized = q.p;
    unquantized.k = q.k_f16;
    unquantized.v = q.v_f16;
    const std::vector<double> exact = naive_attention(unquantized);
    const double err = normalized_error(got, exact);
    qInfo("%s: normalized error of the int8 cache against fp16 values: %.2e", qPrintable(scenario), err);
    check_error(got, exact, 0.01 * (1.0 + sc.q_scale));
}

QTEST_GUILESS_MAIN(TestAttentionOps)
#include "tst_attention_ops.moc"
