// ctest-labels: unit kernels model
// Sliding-window attention (Gemma 3's local layers) and the freeing of the KV blocks that
// fall out of the window:
//  - the CPU backends' windowed paged attention (scalar and AVX2, F16 and INT8 caches)
//    against a direct softmax over positions [pos - window + 1, pos] computed here, with
//    the block-table entries of blocks wholly before every query's window set to -1 (as if
//    freed: the kernel must never read them) and the same bits as with them present;
//  - a tiny random gemma3 model (tests/support/tiny_model, window 8, local and global
//    layers) run by SequenceRunner with the local layers' own pool, freeing blocks as the
//    window slides, gives token-for-token the same greedy continuation and the same logit
//    bits as a run that frees nothing; freed blocks are counted and the local pool stays
//    at its bound while the global layers keep every block;
//  - the window takes effect (logits past the window differ from a model without it).
#include <QtTest>
#include <cmath>
#include <random>

#include "engine/model/model.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"
#include "kernels/backend.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

namespace {

struct AttnCase {
    int n_head = 4, n_kv_head = 2, head_dim = 32, block_size = 8;
    int window = 5;
    std::vector<int32_t> pos;  // [n_tokens] query positions of sequence 0
};

// Fills a paged K/V cache for positions 0..n_pos-1 of one sequence (block b of the sequence
// is pool block perm[b]), runs the backend's paged attention, returns out [n_tokens, n_head, hd].
struct AttnRun {
    std::vector<float> q, k, v;  // [n_pos or n_tokens, heads, hd]
    std::vector<int32_t> table;  // [n_blocks]
};

std::vector<float> run_attention(kvs::Backend& be, const AttnCase& c, const AttnRun& r, kvs::DType kv_type,
                                 const std::vector<int32_t>& table) {
    const int kv_dim = c.n_kv_head * c.head_dim, n_pos = static_cast<int>(r.k.size()) / kv_dim;
    const int n_blocks = static_cast<int>(r.table.size());
    const size_t pos_bytes = kvs::row_bytes(kv_type, kv_dim);
    std::vector<uint8_t> kc(pos_bytes * size_t(n_blocks) * c.block_size), vc(kc.size());
    std::vector<int32_t> slots(static_cast<size_t>(n_pos));
    for (int p = 0; p < n_pos; ++p) slots[size_t(p)] = r.table[size_t(p / c.block_size)] * c.block_size + p % c.block_size;
    kvs::KvStoreArgs st;
    st.k = r.k.data();
    st.v = r.v.data();
    st.k_cache = kc.data();
    st.v_cache = vc.data();
    st.slot_mapping = slots.data();
    st.n_tokens = n_pos;
    st.kv_dim = kv_dim;
    st.cache_type = kv_type;
    be.kv_store(st);
    const int n_tokens = static_cast<int>(c.pos.size());
    std::vector<float> out(size_t(n_tokens) * c.n_head * c.head_dim);
    std::vector<int32_t> seq(size_t(n_tokens), 0);
    kvs::PagedAttentionArgs pa;
    pa.q = r.q.data();
    pa.out = out.data();
    pa.k_cache = kc.data();
    pa.v_cache = vc.data();
    pa.block_tables = table.data();
    pa.token_seq = seq.data();
    pa.token_pos = c.pos.data();
    pa.n_tokens = n_tokens;
    pa.n_seqs = 1;
    pa.max_blocks_per_seq = n_blocks;
    pa.n_head = c.n_head;
    pa.n_kv_head = c.n_kv_head;
    pa.head_dim = c.head_dim;
    pa.block_size = c.block_size;
    pa.scale = 1.0f / std::sqrt(float(c.head_dim));
    pa.cache_type = kv_type;
    pa.window = c.window;
    be.paged_attention(pa);
    return out;
}

// The cache's stored values back as floats (what the kernel reads), for the reference.
std::vector<float> stored(const std::vector<float>& x, kvs::DType t, int row) {
    std::vector<float> out(x.size());
    std::vector<uint8_t> buf(kvs::row_bytes(t, row));
    for (size_t r = 0; r < x.size() / size_t(row); ++r) {
        kvs::cpu::quantize_row(t, &x[r * size_t(row)], buf.data(), row);
        kvs::cpu::dequantize_row(t, buf.data(), &out[r * size_t(row)], row);
    }
    return out;
}

}  // namespace

class TestGemma3SlidingWindow : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void windowedAttentionMatchesDirect_data() {
        QTest::addColumn<QString>("simd");
        QTest::addColumn<int>("kvType");
        QTest::addColumn<int>("window");
        QTest::addColumn<int>("nPos");
        for (const char* simd : {"scalar", "avx2"})
            for (int kv : {int(kvs::DType::F16), int(kvs::DType::Q8_0)})
                for (auto [w, n] : std::vector<std::pair<int, int>>{{1, 20}, {5, 40}, {8, 64}, {37, 300}, {300, 600}})
                    QTest::newRow(qPrintable(QString("%1 %2 window %3 over %4")
                                                 .arg(simd)
                                                 .arg(kv == int(kvs::DType::F16) ? "f16" : "int8")
                                                 .arg(w)
                                                 .arg(n)))
                        << QString(simd) << kv << w << n;
    }
    void windowedAttentionMatchesDirect() {
        QFETCH(QString, simd);
        QFETCH(int, kvType);
        QFETCH(int, window);
        QFETCH(int, nPos);
        std::string err;
        auto be = kvs::make_cpu_backend(2, simd.toStdString(), &err);
        if (!be) QSKIP(qPrintable(QString::fromStdString(err)));
        QVERIFY(be->supports_gemma_ops());
        const auto kv_type = kvs::DType(kvType);
        AttnCase c;
        c.window = window;
        // a prefill chunk at the end plus decode-like tokens spread over the sequence
        for (int p : {nPos - 1, nPos / 2, window, window - 1, 0}) c.pos.push_back(std::max(0, p));
        for (int p = std::max(0, nPos - 6); p < nPos - 1; ++p) c.pos.push_back(p);
        const int kv_dim = c.n_kv_head * c.head_dim, n_blocks = (nPos + c.block_size - 1) / c.block_size;
        std::mt19937 rng(uint32_t(window * 1000 + nPos));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        AttnRun r;
        r.q.resize(c.pos.size() * size_t(c.n_head * c.head_dim));
        r.k.resize(size_t(nPos) * kv_dim);
        r.v.resize(r.k.size());
        for (auto* x : {&r.q, &r.k, &r.v})
            for (float& f : *x) f = nd(rng);
        for (int b = 0; b < n_blocks; ++b) r.table.push_back(n_blocks - 1 - b);  // blocks out of order
        const std::vector<float> out = run_attention(*be, c, r, kv_type, r.table);

        // direct reference in double over the stored (rounded) K/V
        const std::vector<float> ks = stored(r.k, kv_type, kv_dim), vs = stored(r.v, kv_type, kv_dim);
        const int group = c.n_head / c.n_kv_head;
        double worst = 0;
        for (size_t t = 0; t < c.pos.size(); ++t)
            for (int h = 0; h < c.n_head; ++h) {
                const int kvh = h / group, p1 = c.pos[t], p0 = std::max(0, p1 - window + 1);
                std::vector<double> w;
                double mx = -1e300;
                for (int p = p0; p <= p1; ++p) {
                    double d = 0;
                    for (int i = 0; i < c.head_dim; ++i)
                        d += double(r.q[(t * c.n_head + h) * c.head_dim + i]) * ks[size_t(p) * kv_dim + kvh * c.head_dim + i];
                    w.push_back(d / std::sqrt(double(c.head_dim)));
                    mx = std::max(mx, w.back());
                }
                double sum = 0;
                for (double& x : w) sum += (x = std::exp(x - mx));
                for (int i = 0; i < c.head_dim; ++i) {
                    double o = 0;
                    for (int p = p0; p <= p1; ++p) o += w[size_t(p - p0)] * vs[size_t(p) * kv_dim + kvh * c.head_dim + i];
                    worst = std::max(worst, std::abs(o / sum - out[(t * c.n_head + h) * c.head_dim + i]));
                }
            }
        QVERIFY2(worst < 1e-4, qPrintable(QString("max |ours - direct| %1").arg(worst)));

        // blocks wholly before the earliest window start of these queries, "freed" (-1): never read
        int lo = nPos;
        for (int32_t p : c.pos) lo = std::min(lo, std::max(0, p - window + 1));
        std::vector<int32_t> freed = r.table;
        int n_freed = 0;
        for (int b = 0; (b + 1) * c.block_size <= lo; ++b) freed[size_t(b)] = -1, ++n_freed;
        if (n_freed == 0) return;
        const std::vector<float> out2 = run_attention(*be, c, r, kv_type, freed);
        QVERIFY(out2 == out);
    }

    // Window 8 and blocks of 8: layers 0, 1 local, layer 2 global (pattern 3); a prompt of 13,
    // then 43 tokens one at a time: freeing vs not, same bits; the local pool stays bounded.
    void freedRunMatchesUnfreedRun() {
        kvs::test::TinyModelSpec spec;
        spec.arch = "gemma3";
        spec.n_layer = 3;
        spec.n_embd = 64;
        spec.n_head = 4;
        spec.n_kv_head = 2;
        spec.n_ff = 128;
        spec.sliding_window = 8;
        spec.swa_pattern = 3;
        spec.weight_std = 0.2f;
        auto m = kvs::test::write_and_load_tiny_gguf(kvs::test::output_path("tiny_gemma3_swa.gguf"), spec);
        QVERIFY2(m.is_ok(), m.message().c_str());
        const auto& c = m.value()->config;
        QVERIFY(c.gemma);
        QCOMPARE(c.sliding_window, 8);
        QCOMPARE(c.layer_swa, (std::vector<uint8_t>{1, 1, 0}));
        QCOMPARE(c.rope_base(0), 10000.0f);

        kvs::RunnerOptions ro;
        ro.n_ctx = 64;
        ro.n_batch = 8;
        ro.block_size = 8;
        ro.n_threads = 2;
        ro.backend = "cpu";
        std::vector<std::vector<float>> logits[2];
        std::vector<int32_t> ids[2];
        int64_t freed = 0;
        for (int freeing = 0; freeing < 2; ++freeing) {
            ro.free_out_of_window = freeing == 1;
            auto r = kvs::SequenceRunner::create(m.value(), ro);
            QVERIFY2(r.is_ok(), r.message().c_str());
            auto& runner = *r.value();
            std::vector<int32_t> prompt{5, 17, 42, 99, 120, 3, 8, 250, 77, 31, 64, 200, 11};
            std::vector<float> l;
            QVERIFY(runner.eval(prompt, false, &l).is_ok());
            for (int i = 0; i < 43; ++i) {
                logits[freeing].push_back(l);
                const int32_t next = kvs::argmax_lowest_id(l.data(), c.n_vocab);
                ids[freeing].push_back(next);
                QVERIFY(runner.eval({next}, false, &l).is_ok());
                if (freeing) {
                    // local pool: at most the window's blocks plus one batch's, plus two
                    QVERIFY(runner.swa_blocks_in_use() <= runner.swa_pool_blocks());
                    const int held = int(std::count_if(runner.swa_block_table().begin(), runner.swa_block_table().end(),
                                                       [](int32_t b) { return b >= 0; }));
                    QCOMPARE(held, runner.swa_blocks_in_use());
                    QVERIFY(held <= 3);  // positions [n - 8, n) span at most 2 blocks of 8, + the next one
                }
            }
            if (freeing) {
                freed = runner.n_swa_blocks_freed();
                QCOMPARE(int(runner.block_table().size()), (13 + 43 + 7) / 8);  // the global layers keep all
                QVERIFY(runner.swa_pool_blocks() < int(runner.block_table().size()));
                int n_minus = 0;
                for (int32_t b : runner.swa_block_table()) n_minus += b < 0;
                QCOMPARE(int64_t(n_minus), freed);
            } else {
                QVERIFY(runner.swa_block_table().empty());
            }
        }
        QVERIFY2(freed >= 5, qPrintable(QString("only %1 local blocks freed over 56 positions").arg(freed)));
        QCOMPARE(ids[1], ids[0]);
        QVERIFY(logits[1] == logits[0]);  // bit for bit
        qInfo("tiny gemma3: %lld local-layer blocks freed over 56 positions; greedy ids identical to the unfreed run",
              static_cast<long long>(freed));
    }

    // The same weights with and without the window: identical while every position is inside
    // it, different afterwards (the local layers really see fewer positions).
    void windowChangesLogitsOnlyPastIt() {
        kvs::test::TinyModelSpec spec;
        spec.arch = "gemma3";
        spec.n_layer = 2;
        spec.sliding_window = 4;
        spec.swa_pattern = 2;
        spec.weight_std = 0.3f;
        auto windowed = kvs::test::write_and_load_tiny_gguf(kvs::test::output_path("tiny_gemma3_w4.gguf"), spec);
        spec.sliding_window = 0;
        auto full = kvs::test::write_and_load_tiny_gguf(kvs::test::output_path("tiny_gemma3_full.gguf"), spec);
        QVERIFY2(windowed.is_ok() && full.is_ok(), "tiny gemma3 models");
        kvs::RunnerOptions ro;
        ro.n_ctx = 32;
        ro.n_threads = 1;
        ro.backend = "cpu";
        ro.simd = "scalar";
        std::vector<float> a, b;
        const std::vector<int32_t> prompt{5, 17, 42, 99, 120, 3, 8, 250, 77, 31};
        auto ra = kvs::SequenceRunner::create(windowed.value(), ro);
        auto rb = kvs::SequenceRunner::create(full.value(), ro);
        QVERIFY(ra.is_ok() && rb.is_ok());
        QVERIFY(ra.value()->eval(prompt, true, &a).is_ok());
        QVERIFY(rb.value()->eval(prompt, true, &b).is_ok());
        const size_t nv = size_t(windowed.value()->config.n_vocab);
        auto row_diff = [&](size_t t) {
            double d = 0;
            for (size_t i = 0; i < nv; ++i) d = std::max(d, double(std::abs(a[t * nv + i] - b[t * nv + i])));
            return d;
        };
        for (size_t t = 0; t < 4; ++t) QVERIFY2(row_diff(t) < 1e-5, qPrintable(QString("position %1").arg(t)));
        for (size_t t = 5; t < prompt.size(); ++t)
            QVERIFY2(row_diff(t) > 1e-3, qPrintable(QString("position %1 past the window unchanged").arg(t)));
    }
};

QTEST_GUILESS_MAIN(TestGemma3SlidingWindow)
#include "tst_gemma3_sliding_window.moc"
