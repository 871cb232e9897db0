// ctest-labels: kernels
// Every op of kernels/backend.h on every available backend (CPU scalar, CPU AVX2, CUDA)
// over a table of shapes and types, like llama.cpp's test-backend-ops. References are
// written here, independently of the kernels: double-precision loops for the
// element-wise ops, a dequantized-weight x float-activation product for matmul with a
// worst-case bound from the activation quantization, and a naive contiguous attention
// (K/V gathered by position) for paged_attention. Inputs travel through alloc /
// copy_to_device / copy_to_host, so the CUDA rows run unchanged where a GPU exists and
// are skipped with the loader's reason where none does.
// kernels headers first: Qt defines `slots` as a macro.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_formats.h"

#include <QtTest>

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

namespace {

const char* const kBackends[] = {"scalar", "avx2", "cuda"};

struct BackendEntry {
    std::unique_ptr<Backend> backend;
    QString why;  // why it is missing
};

// Backends are created once per process; nullptr (and *why) when this machine lacks one.
Backend* backend_for(const QString& name, QString* why) {
    static std::map<QString, BackendEntry> cache;
    auto it = cache.find(name);
    if (it == cache.end()) {
        BackendEntry e;
        if (name == "scalar") {
            e.backend = make_cpu_backend(2, "scalar");
        } else if (name == "avx2") {
            if (cpu::detect_simd() >= cpu::SimdLevel::Avx2) e.backend = make_cpu_backend(2, "avx2");
            else e.why = "this CPU lacks AVX2/FMA/F16C";
        } else {
            std::string w;
            e.backend = make_cuda_backend(&w);
            e.why = QString::fromStdString(w);
        }
        it = cache.emplace(name, std::move(e)).first;
    }
    *why = it->second.why;
    return it->second.backend.get();
}

bool is_cpu(const QString& name) { return name == "scalar" || name == "avx2"; }

using kvs::test::DeviceBuffer;

std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f, float mean = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(mean, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

// max|got - ref| / max(1, max|ref|); infinity when got holds a NaN or Inf.
double normalized_error(const std::vector<float>& got, const std::vector<double>& ref) {
    double max_diff = 0.0, max_ref = 1.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        max_diff = std::max(max_diff, std::fabs(got[i] - ref[i]));
        max_ref = std::max(max_ref, std::fabs(ref[i]));
    }
    return max_diff / max_ref;
}

void check_error(const std::vector<float>& got, const std::vector<double>& ref, double tol) {
    QCOMPARE(got.size(), ref.size());
    const double err = normalized_error(got, ref);
    if (!(err < tol)) {
        size_t worst = 0;
        for (size_t i = 0; i < ref.size(); ++i)
            if (!(std::fabs(got[i] - ref[i]) <= std::fabs(got[worst] - ref[worst]))) worst = i;
        QFAIL(qPrintable(QString("normalized error %1 >= %2 (worst at %3: got %4, reference %5)")
                             .arg(err).arg(tol).arg(worst).arg(got[worst]).arg(ref[worst])));
    }
}

#define FETCH_BACKEND(var)                                   \
    QFETCH(QString, backend);                                \
    QString why_missing;                                     \
    Backend* var = backend_for(backend, &why_missing);       \
    if (!var) QSKIP(qPrintable(backend + ": " + why_missing))

// GPU kernels may round intermediates (float rope angles, fp16 products) differently.
double tol_for(const QString& backend, double cpu_tol, double gpu_tol) { return is_cpu(backend) ? cpu_tol : gpu_tol; }

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,   DType::Q5_0, DType::Q5_1,
                              DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::I8_ROW, DType::I4_G128,
                              DType::I4_G64};

// ---------------------------------------------------------------- paged attention scenario

struct SeqSpec {
    int n_ctx;      // cached positions after this step
    int n_query;    // query tokens: positions n_ctx - n_query .. n_ctx - 1
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
    };
}

// Everything one paged_attention call needs, on the host.
struct AttnProblem {
    AttnScenario sc;
    int n_blocks = 0, max_blocks = 0, n_tokens = 0;
    std::vector<uint16_t> k_cache, v_cache;  // [n_blocks, block_size, n_kv_head, head_dim] fp16 bits
    std::vector<int32_t> tables;             // [n_seqs, max_blocks]
    std::vector<int32_t> token_seq, token_pos;  // [n_tokens]
    std::vector<float> q;                    // [n_tokens, n_head, head_dim]
    std::vector<std::vector<float>> k, v;    // per sequence [n_ctx, n_kv_head, head_dim], fp16-rounded
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
    AttnProblem p;                              // k, v: dequantized Q8_0 values
    std::vector<uint8_t> k_cache, v_cache;      // [n_blocks, block_size, kv_dim / 32] Q8_0 blocks
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

class TestBackendOps : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void rms_norm_data();
    void rms_norm();
    void rope_data();
    void rope();
    void softmax_data();
    void softmax();
    void swiglu_data();
    void swiglu();
    void add_data();
    void add();
    void add_bias_data();
    void add_bias();
    void embedding_data();
    void embedding();
    void kv_store_data();
    void kv_store();
    void matmul_data();
    void matmul();
    void paged_attention_data();
    void paged_attention();
    void kv_store_q8_0_data();
    void kv_store_q8_0();
    void paged_attention_q8_0_data();
    void paged_attention_q8_0();
    void backend_names();
};

void TestBackendOps::backend_names() {
    QString why;
    QCOMPARE(QString::fromStdString(backend_for("scalar", &why)->name()), QString("cpu-scalar"));
    if (Backend* b = backend_for("avx2", &why)) QCOMPARE(QString::fromStdString(b->name()), QString("cpu-avx2"));
    for (DType t : kWeightTypes) QVERIFY(backend_for("scalar", &why)->supports(t));
}

// ---------------------------------------------------------------- rms_norm

void TestBackendOps::rms_norm_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n_rows");
    QTest::addColumn<int>("n");
    QTest::addColumn<bool>("in_place");
    const struct { int n_rows, n; bool in_place; } shapes[] = {
        {1, 576, false}, {1, 576, true}, {3, 64, false}, {7, 1001, false}, {64, 576, true}, {2, 4096, false}};
    for (const char* b : kBackends)
        for (const auto& s : shapes)
            QTest::addRow("%s/%dx%d%s", b, s.n_rows, s.n, s.in_place ? "/inplace" : "") << QString(b) << s.n_rows << s.n
                                                                                      << s.in_place;
}

void TestBackendOps::rms_norm() {
    FETCH_BACKEND(be);
    QFETCH(int, n_rows);
    QFETCH(int, n);
    QFETCH(bool, in_place);
    const float eps = 1e-5f;
    const auto x = gaussian(static_cast<size_t>(n_rows) * n, 11, 3.0f, 0.5f);  // [n_rows, n]
    const auto w = gaussian(static_cast<size_t>(n), 12);                        // [n]
    std::vector<double> ref(x.size());
    for (int r = 0; r < n_rows; ++r) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) ref[r * n + i] = x[r * n + i] * inv * w[i];
    }
    DeviceBuffer dx(be, x), dw(be, w), dy(be, nullptr, x.size() * sizeof(float));
    float* y = in_place ? dx.as<float>() : dy.as<float>();
    be->rms_norm(dx.as<float>(), dw.as<float>(), y, n_rows, n, eps);
    check_error(in_place ? dx.read<float>() : dy.read<float>(), ref, tol_for(backend, 1e-5, 1e-4));
}

// ---------------------------------------------------------------- rope

void TestBackendOps::rope_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("n_head");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("n_rot");
    QTest::addColumn<float>("freq_base");
    QTest::addColumn<int>("style");
    const struct { int n_tokens, n_head, head_dim, n_rot; float base; } shapes[] = {
        {1, 9, 64, 64, 10000.0f}, {5, 3, 64, 64, 100000.0f}, {33, 4, 128, 128, 500000.0f},
        {7, 2, 128, 64, 10000.0f}, {3, 2, 80, 40, 10000.0f}, {40, 9, 64, 64, 10000.0f}};
    for (const char* b : kBackends)
        for (int style : {0, 1})
            for (const auto& s : shapes)
                QTest::addRow("%s/%s/%dx%dx%d/rot%d", b, style ? "neox" : "normal", s.n_tokens, s.n_head, s.head_dim,
                              s.n_rot)
                    << QString(b) << s.n_tokens << s.n_head << s.head_dim << s.n_rot << s.base << style;
}

void TestBackendOps::rope() {
    FETCH_BACKEND(be);
    QFETCH(int, n_tokens);
    QFETCH(int, n_head);
    QFETCH(int, head_dim);
    QFETCH(int, n_rot);
    QFETCH(float, freq_base);
    QFETCH(int, style);
    const auto x = gaussian(static_cast<size_t>(n_tokens) * n_head * head_dim, 21);  // [n_tokens, n_head, head_dim]
    std::vector<int32_t> pos(static_cast<size_t>(n_tokens));                           // [n_tokens]
    std::mt19937 rng(22);
    for (auto& p : pos) p = static_cast<int32_t>(rng() % 4096);
    pos[0] = 0;
    std::vector<double> ref(x.begin(), x.end());
    for (int t = 0; t < n_tokens; ++t)
        for (int h = 0; h < n_head; ++h) {
            double* v = &ref[(static_cast<size_t>(t) * n_head + h) * head_dim];
            for (int i = 0; i < n_rot / 2; ++i) {
                const double th = pos[t] * std::pow(double(freq_base), -2.0 * i / n_rot);
                const int i0 = style ? i : 2 * i, i1 = style ? i + n_rot / 2 : 2 * i + 1;
                const double a = v[i0], b = v[i1];
                v[i0] = a * std::cos(th) - b * std::sin(th);
                v[i1] = a * std::sin(th) + b * std::cos(th);
            }
        }
    DeviceBuffer dx(be, x), dpos(be, pos);
    be->rope(dx.as<float>(), dpos.as<int32_t>(), n_tokens, n_head, head_dim, n_rot, freq_base,
             style ? RopeStyle::Neox : RopeStyle::Normal);
    // GPU: float angles at positions up to 4096 are off by up to ~4096 * 2^-24 rad
    check_error(dx.read<float>(), ref, tol_for(backend, 2e-6, 1e-3));
}

// ---------------------------------------------------------------- softmax

void TestBackendOps::softmax_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n_rows");
    QTest::addColumn<int>("n_cols");
    QTest::addColumn<float>("scale");
    const struct { int n_rows, n_cols; float scale; } shapes[] = {
        {1, 10, 1.0f}, {3, 7, 2.0f}, {17, 100, 5.0f}, {2, 1000, 40.0f}, {4, 49152, 3.0f}};
    for (const char* b : kBackends)
        for (const auto& s : shapes)
            QTest::addRow("%s/%dx%d/x%g", b, s.n_rows, s.n_cols, double(s.scale)) << QString(b) << s.n_rows << s.n_cols
                                                                                 << s.scale;
}

void TestBackendOps::softmax() {
    FETCH_BACKEND(be);
    QFETCH(int, n_rows);
    QFETCH(int, n_cols);
    QFETCH(float, scale);
    const auto x = gaussian(static_cast<size_t>(n_rows) * n_cols, 31, scale, scale);  // [n_rows, n_cols]
    std::vector<double> ref(x.size());
    for (int r = 0; r < n_rows; ++r) {
        const float* row = &x[static_cast<size_t>(r) * n_cols];
        const double mx = *std::max_element(row, row + n_cols);
        double sum = 0;
        for (int i = 0; i < n_cols; ++i) sum += std::exp(row[i] - mx);
        for (int i = 0; i < n_cols; ++i) ref[static_cast<size_t>(r) * n_cols + i] = std::exp(row[i] - mx) / sum;
    }
    DeviceBuffer dx(be, x);
    be->softmax(dx.as<float>(), n_rows, n_cols);
    const auto got = dx.read<float>();
    check_error(got, ref, tol_for(backend, 3e-6, 1e-5));
    // probabilities relative to the largest one, where the absolute bound says little
    for (int r = 0; r < n_rows; ++r) {
        const size_t i = std::max_element(ref.begin() + r * n_cols, ref.begin() + (r + 1) * n_cols) - ref.begin();
        QVERIFY2(std::fabs(got[i] - ref[i]) <= 1e-5 * ref[i], qPrintable(QString("row %1").arg(r)));
    }
}

// ---------------------------------------------------------------- swiglu, add, add_bias

void TestBackendOps::swiglu_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n");
    QTest::addColumn<bool>("in_place");
    for (const char* b : kBackends)
        for (int n : {7, 1536, 200003})
            for (bool in_place : {false, true})
                QTest::addRow("%s/%d%s", b, n, in_place ? "/inplace" : "") << QString(b) << n << in_place;
}

void TestBackendOps::swiglu() {
    FETCH_BACKEND(be);
    QFETCH(int, n);
    QFETCH(bool, in_place);
    const auto g = gaussian(static_cast<size_t>(n), 41, 4.0f), u = gaussian(static_cast<size_t>(n), 42, 2.0f);  // [n]
    std::vector<double> ref(g.size());
    for (size_t i = 0; i < g.size(); ++i) ref[i] = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
    DeviceBuffer dg(be, g), du(be, u), dy(be, nullptr, g.size() * sizeof(float));
    float* y = in_place ? dg.as<float>() : dy.as<float>();
    be->swiglu(dg.as<float>(), du.as<float>(), y, n);
    check_error(in_place ? dg.read<float>() : dy.read<float>(), ref, tol_for(backend, 1e-6, 1e-5));
}

void TestBackendOps::add_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n");
    QTest::addColumn<bool>("in_place");
    for (const char* b : kBackends)
        for (int n : {5, 576, 300001})
            for (bool in_place : {false, true})
                QTest::addRow("%s/%d%s", b, n, in_place ? "/inplace" : "") << QString(b) << n << in_place;
}

void TestBackendOps::add() {
    FETCH_BACKEND(be);
    QFETCH(int, n);
    QFETCH(bool, in_place);
    const auto a = gaussian(static_cast<size_t>(n), 51, 3.0f), b = gaussian(static_cast<size_t>(n), 52);  // [n]
    std::vector<double> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = double(a[i]) + b[i];
    DeviceBuffer da(be, a), db(be, b), dy(be, nullptr, a.size() * sizeof(float));
    float* y = in_place ? da.as<float>() : dy.as<float>();
    be->add(da.as<float>(), db.as<float>(), y, n);
    check_error(in_place ? da.read<float>() : dy.read<float>(), ref, 1e-6);
}

void TestBackendOps::add_bias_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n_rows");
    QTest::addColumn<int>("n");
    for (const char* b : kBackends)
        for (auto [r, n] : {std::pair{1, 576}, {3, 13}, {70, 896}})
            QTest::addRow("%s/%dx%d", b, r, n) << QString(b) << r << n;
}

void TestBackendOps::add_bias() {
    FETCH_BACKEND(be);
    QFETCH(int, n_rows);
    QFETCH(int, n);
    const auto x = gaussian(static_cast<size_t>(n_rows) * n, 61), bias = gaussian(static_cast<size_t>(n), 62);
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = double(x[i]) + bias[i % n];
    DeviceBuffer dx(be, x), db(be, bias);
    be->add_bias(dx.as<float>(), db.as<float>(), dx.as<float>(), n_rows, n);  // in place, as the model uses it
    check_error(dx.read<float>(), ref, 1e-6);
}

// ---------------------------------------------------------------- embedding

void TestBackendOps::embedding_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n_tokens");
    for (const char* b : kBackends)
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_1, DType::Q4_K, DType::Q6_K,
                        DType::I8_ROW, DType::I4_G128, DType::I4_G64})
            for (int n_tokens : {3, 40})
                QTest::addRow("%s/%s/%d", b, dtype_name(t).data(), n_tokens) << QString(b) << int(t) << n_tokens;
}

// Rows gathered by id equal the dequantized rows of the table (dequantize_row is checked
// against the gguf package in tst_quant_formats); F32 rows are copied bit for bit.
void TestBackendOps::embedding() {
    FETCH_BACKEND(be);
    QFETCH(int, type);
    QFETCH(int, n_tokens);
    const auto t = static_cast<DType>(type);
    if (!be->supports(t)) QSKIP("weight type not supported by this backend");
    const int n_vocab = 50, n_in = 512;
    const auto src = gaussian(static_cast<size_t>(n_vocab) * n_in, 71);
    const size_t rb = row_bytes(t, n_in);
    std::vector<uint8_t> table(rb * n_vocab);  // [n_vocab, rb]
    for (int r = 0; r < n_vocab; ++r) cpu::quantize_row(t, &src[static_cast<size_t>(r) * n_in], &table[r * rb], n_in);
    std::vector<int32_t> ids(static_cast<size_t>(n_tokens));  // [n_tokens]
    for (int i = 0; i < n_tokens; ++i) ids[i] = (i * 37 + 5) % n_vocab;
    ids[0] = n_vocab - 1;
    ids[n_tokens - 1] = 0;
    std::vector<double> ref(static_cast<size_t>(n_tokens) * n_in);
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int i = 0; i < n_tokens; ++i) {
        if (t == DType::F32) std::copy_n(&src[static_cast<size_t>(ids[i]) * n_in], n_in, row.begin());
        else cpu::dequantize_row(t, &table[ids[i] * rb], row.data(), n_in);
        std::copy(row.begin(), row.end(), ref.begin() + static_cast<ptrdiff_t>(i) * n_in);
    }
    DeviceBuffer dt(be, table), dids(be, ids), dout(be, nullptr, ref.size() * sizeof(float));
    be->embedding(WeightView{t, dt.as<void>(), n_in, n_vocab}, dids.as<int32_t>(), n_tokens, dout.as<float>());
    check_error(dout.read<float>(), ref, tol_for(backend, 1e-7, 1e-6));
}

// ---------------------------------------------------------------- kv_store

void TestBackendOps::kv_store_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("kv_dim");
    for (const char* b : kBackends)
        for (auto [n, d] : {std::pair{1, 192}, {5, 192}, {40, 1024}, {9, 60}})
            QTest::addRow("%s/%dx%d", b, n, d) << QString(b) << n << d;
}

// Stored halves are the nearest fp16 (within half an ulp, checked by decoding; a few
// hand-encoded values bit for bit); a slot of -1 stores nothing; other slots are untouched.
void TestBackendOps::kv_store() {
    FETCH_BACKEND(be);
    QFETCH(int, n_tokens);
    QFETCH(int, kv_dim);
    const int block_size = 16, n_blocks = 6;
    auto k = gaussian(static_cast<size_t>(n_tokens) * kv_dim, 81, 2.0f);  // [n_tokens, kv_dim]
    auto v = gaussian(static_cast<size_t>(n_tokens) * kv_dim, 82, 0.5f);  // [n_tokens, kv_dim]
    const std::pair<float, uint16_t> exact[] = {{1.0f, 0x3C00}, {-2.0f, 0xC000}, {0.5f, 0x3800},
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

// ---------------------------------------------------------------- matmul

void TestBackendOps::matmul_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    // n_in 576 (SmolLM2-135M's n_embd, 4.5 x 128) for the types whose blocks divide it
    const struct { int n_tokens, n_in, n_out; } shapes[] = {{1, 256, 64}, {5, 512, 33},  {3, 1024, 96},
                                                            {70, 256, 40}, {1, 576, 52}, {9, 576, 41}};
    for (const char* b : kBackends)
        for (DType t : kWeightTypes)
            for (const auto& s : shapes)
                if (s.n_in % dtype_info(t).block_size == 0)
                    QTest::addRow("%s/%s/%dx%dx%d", b, dtype_name(t).data(), s.n_tokens, s.n_in, s.n_out)
                        << QString(b) << int(t) << s.n_tokens << s.n_in << s.n_out;
}

// y = x . W^T against sum(dequant(W) * x) in double. Quantized weights multiply
// activations rounded to 8 bits per block (Q8_0/Q8_1 blocks of 32, Q8_K of 256): each
// activation may be off by half a step (amax/254) plus the fp16 rounding of the block
// scale and sum, so output o may be off by sum_i |W[o,i]| * (amax(block of i)/254 +
// amax * 2^-9), plus float accumulation error.
void TestBackendOps::matmul() {
    FETCH_BACKEND(be);
    QFETCH(int, type);
    QFETCH(int, n_tokens);
    QFETCH(int, n_in);
    QFETCH(int, n_out);
    const auto t = static_cast<DType>(type);
    if (!be->supports(t)) QSKIP("weight type not supported by this backend");
    const auto src = gaussian(static_cast<size_t>(n_out) * n_in, 91 + type, 1.0f, 0.1f);
    const size_t rb = row_bytes(t, n_in);
    std::vector<uint8_t> w(rb * n_out);                      // [n_out, rb]
    std::vector<float> wd(static_cast<size_t>(n_out) * n_in);  // [n_out, n_in] dequantized
    for (int o = 0; o < n_out; ++o) {
        cpu::quantize_row(t, &src[static_cast<size_t>(o) * n_in], &w[o * rb], n_in);
        cpu::dequantize_row(t, &w[o * rb], &wd[static_cast<size_t>(o) * n_in], n_in);
    }
    const auto x = gaussian(static_cast<size_t>(n_tokens) * n_in, 92, 1.5f);  // [n_tokens, n_in]
    const DType at = cpu::activation_type(t);
    const int qblock = at == DType::F32 ? 1 : dtype_info(at).block_size;
    // per-element activation error bound e[t, i]
    std::vector<double> e(x.size(), 0.0);
    for (int tk = 0; tk < n_tokens; ++tk)
        for (int b0 = 0; b0 < n_in; b0 += qblock) {
            double amax = 0;
            for (int i = b0; i < b0 + qblock; ++i) amax = std::max(amax, double(std::fabs(x[tk * n_in + i])));
            for (int i = b0; i < b0 + qblock; ++i) {
                double& ei = e[tk * n_in + i];
                if (at != DType::F32) ei = amax / 254.0 + amax * 0x1p-9;
                if (!is_cpu(backend)) ei += std::fabs(x[tk * n_in + i]) * 0x1p-10;  // GPU may use fp16 activations
            }
        }
    std::vector<double> ref(static_cast<size_t>(n_tokens) * n_out), bound(ref.size());
    for (int tk = 0; tk < n_tokens; ++tk)
        for (int o = 0; o < n_out; ++o) {
            double s = 0, sabs = 0, eb = 0;
            for (int i = 0; i < n_in; ++i) {
                const double wi = wd[static_cast<size_t>(o) * n_in + i], xi = x[tk * n_in + i];
                s += wi * xi;
                sabs += std::fabs(wi * xi);
                eb += std::fabs(wi) * e[tk * n_in + i];
            }
            ref[tk * n_out + o] = s;
            bound[tk * n_out + o] = eb + sabs * 1e-5 + 1e-6;
        }
    DeviceBuffer dw(be, w), dx(be, x), dy(be, nullptr, ref.size() * sizeof(float));
    be->matmul(WeightView{t, dw.as<void>(), n_in, n_out}, dx.as<float>(), dy.as<float>(), n_tokens);
    const auto y = dy.read<float>();
    double worst = 0;  // largest |y - ref| / bound
    size_t wi = 0;
    for (size_t i = 0; i < y.size(); ++i) {
        const double r = std::isfinite(y[i]) ? std::fabs(y[i] - ref[i]) / bound[i] : INFINITY;
        if (!(r <= worst)) worst = r, wi = i;
    }
    if (!(worst <= 1.0))
        QFAIL(qPrintable(QString("output %1: got %2, reference %3, bound %4").arg(wi).arg(y[wi]).arg(ref[wi]).arg(bound[wi])));
}

// ---------------------------------------------------------------- paged attention

void TestBackendOps::paged_attention_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<QString>("scenario");
    for (const char* b : kBackends)
        for (const auto& [name, sc] : attention_scenarios())
            QTest::addRow("%s/%s", b, qPrintable(name)) << QString(b) << name;
}

// Against the naive contiguous attention of this file and against the scalar reference
// kernel (for the scalar row itself only the first check says anything).
void TestBackendOps::paged_attention() {
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

// ---------------------------------------------------------------- INT8 (Q8_0) KV cache

#define SKIP_WITHOUT_Q8_KV(be)                 \
    if (!(be)->supports_kv(DType::Q8_0))       \
    QSKIP(qPrintable(backend + ": no Q8_0 KV cache kernels (supports_kv says no)"))

void TestBackendOps::kv_store_q8_0_data() {
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
void TestBackendOps::kv_store_q8_0() {
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
    const std::pair<float, int8_t> exact[] = {{127.0f, 127}, {-63.5f, -64}, {0.5f, 0}, {1.5f, 2},
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
                QVERIFY2(std::fabs(d - d_exact) <= d_exact * 0x1p-11, qPrintable(QString("scale %1 for %2").arg(d).arg(d_exact)));
                for (int j = 0; j < 32; ++j) {
                    const int q = static_cast<int8_t>(blk[2 + j]);
                    const double ideal = d_exact > 0 ? xb[j] / d_exact : 0.0;  // in [-127, 127]
                    if (!(std::fabs(q - ideal) <= 0.5 + 1e-4) || std::abs(q) > 127)
                        QFAIL(qPrintable(QString("token %1 block %2 elem %3: x %4 -> q %5, ideal %6")
                                             .arg(t).arg(b).arg(j).arg(xb[j]).arg(q).arg(ideal)));
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

void TestBackendOps::paged_attention_q8_0_data() {
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
void TestBackendOps::paged_attention_q8_0() {
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

QTEST_GUILESS_MAIN(TestBackendOps)
#include "tst_backend_ops.moc"
