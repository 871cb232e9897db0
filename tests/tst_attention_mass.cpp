// ctest-labels: unit kernels
// PagedAttentionArgs::attn_mass (the scores of KV eviction) on every CPU kernel level against
// a direct computation here: for each query token with a row, softmax(q . k * scale) per
// query head over the positions it attends to, summed over heads, added to its row (two
// tokens of one sequence add into one row); the attention output itself is unchanged by
// asking for the mass; with a window, positions outside it get nothing.
#include <QtTest>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/quant_formats.h"

using namespace kvs;

class TestAttentionMass : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void matchesDirectComputation_data() {
        QTest::addColumn<QString>("simd");
        QTest::addColumn<int>("window");
        for (const char* s : {"scalar", "auto"}) {
            QTest::newRow((std::string(s) + ", full").c_str()) << QString(s) << 0;
            QTest::newRow((std::string(s) + ", window 20").c_str()) << QString(s) << 20;
        }
    }
    void matchesDirectComputation() {
        QFETCH(QString, simd);
        QFETCH(int, window);
        std::string err;
        auto be = make_cpu_backend(2, simd.toStdString(), &err);
        QVERIFY2(be, err.c_str());
        QVERIFY(be->supports_attention_mass());
        const int n_head = 4, n_kv_head = 2, head_dim = 32, bs = 16, n_blocks = 8, kv_dim = n_kv_head * head_dim;
        std::mt19937 rng(7);
        std::normal_distribution<float> nd;
        std::vector<uint16_t> kc(static_cast<size_t>(n_blocks) * bs * kv_dim), vc(kc.size());
        for (auto& x : kc) x = cpu::fp32_to_fp16(nd(rng));
        for (auto& x : vc) x = cpu::fp32_to_fp16(nd(rng));
        const int max_blocks = 5;
        std::vector<int32_t> tables = {3, 1, 6, -1, -1, /* seq 1 */ 0, 2, 4, 5, 7};
        // tokens: seq 0 at 40 and 41 (one row), seq 1 at 70 (another row), seq 1 at 71 (none)
        std::vector<int32_t> seq = {0, 0, 1, 1}, pos = {40, 41, 70, 71}, rows = {0, 0, 1, -1};
        const int n_tokens = 4, stride = 80;
        std::vector<float> q(static_cast<size_t>(n_tokens) * n_head * head_dim);
        for (auto& x : q) x = nd(rng);
        std::vector<float> out_plain(q.size()), out_mass(q.size());
        std::vector<float> mass(2 * stride, 0.5f);  // accumulated: starts from what is there
        PagedAttentionArgs a;
        a.q = q.data();
        a.k_cache = kc.data();
        a.v_cache = vc.data();
        a.block_tables = tables.data();
        a.token_seq = seq.data();
        a.token_pos = pos.data();
        a.n_tokens = n_tokens;
        a.n_seqs = 2;
        a.max_blocks_per_seq = max_blocks;
        a.n_head = n_head;
        a.n_kv_head = n_kv_head;
        a.head_dim = head_dim;
        a.block_size = bs;
        a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        a.window = window;
        a.out = out_plain.data();
        be->paged_attention(a);
        a.out = out_mass.data();
        a.attn_mass = mass.data();
        a.mass_row = rows.data();
        a.mass_stride = stride;
        be->paged_attention(a);
        QCOMPARE(out_mass, out_plain);

        std::vector<double> want(2 * stride, 0.5);
        for (int t = 0; t < n_tokens; ++t) {
            if (rows[t] < 0) continue;
            const int n_ctx = pos[t] + 1, first = window > 0 ? std::max(0, n_ctx - window) : 0;
            for (int h = 0; h < n_head; ++h) {
                const int kvh = h / (n_head / n_kv_head);
                std::vector<double> s(static_cast<size_t>(n_ctx), -INFINITY);
                double mx = -INFINITY;
                for (int p = first; p < n_ctx; ++p) {
                    const int blk = tables[static_cast<size_t>(seq[t] * max_blocks + p / bs)];
                    const uint16_t* k = kc.data() + (static_cast<size_t>(blk) * bs + p % bs) * kv_dim + kvh * head_dim;
                    double dot = 0;
                    for (int d = 0; d < head_dim; ++d)
                        dot += static_cast<double>(q[(static_cast<size_t>(t) * n_head + h) * head_dim + d]) *
                               cpu::fp16_to_fp32(k[d]);
                    s[static_cast<size_t>(p)] = dot * a.scale;
                    mx = std::max(mx, s[static_cast<size_t>(p)]);
                }
                double z = 0;
                for (int p = first; p < n_ctx; ++p) z += std::exp(s[static_cast<size_t>(p)] - mx);
                for (int p = first; p < n_ctx; ++p)
                    want[static_cast<size_t>(rows[t] * stride + p)] += std::exp(s[static_cast<size_t>(p)] - mx) / z;
            }
        }
        double row_sum[2] = {0, 0};
        for (int r = 0; r < 2; ++r)
            for (int p = 0; p < stride; ++p) {
                const size_t i = static_cast<size_t>(r * stride + p);
                QVERIFY2(std::abs(mass[i] - want[i]) < 1e-5,
                         qPrintable(QString("row %1 position %2: %3 vs %4").arg(r).arg(p).arg(mass[i]).arg(want[i])));
                row_sum[r] += mass[i] - 0.5;
            }
        // Probabilities: each head of each token adds 1.
        QVERIFY(std::abs(row_sum[0] - 2 * n_head) < 1e-3);
        QVERIFY(std::abs(row_sum[1] - n_head) < 1e-3);
    }
};

QTEST_GUILESS_MAIN(TestAttentionMass)
#include "tst_attention_mass.moc"
