// ctest-labels: unit
// The quantization lab's own schemes: RTN INT8 per channel and INT4 g128 (error bounds
// checked against bounds computed here), AWQ's pseudo-quantizer against the stored
// I4_G128 format, AWQ's loss against a naive computation, the calibration collector
// against a hand-computed layer-0 input, AWQ's block forward (the block-output loss)
// against a naive attention / MLP, duo scaling's weight term and the grid search against
// hand-computed values, AWQ's folding (exact without quantization),
// AWQ beating RTN on a tiny model with outlier activation channels, and bad input.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/model.h"
#include "engine/quant/awq.h"
#include "engine/quant/awq_block.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quantize.h"
#include "engine/quant/rtn.h"
#include "engine/runtime/sequence_runner.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

// Random matrix [n_out, n_in]: N(0, 1) plus, with outliers, a few entries 20x larger.
std::vector<float> random_matrix(int64_t n_out, int64_t n_in, uint32_t seed, bool outliers) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(n_out * n_in));
    for (auto& x : w) x = nd(rng);
    if (outliers)
        for (size_t i = 0; i < w.size(); i += 97) w[i] *= 20.0f;
    return w;
}

std::vector<float> dequant(DType t, const std::vector<uint8_t>& q, int64_t n_out, int64_t n_in) {
    std::vector<float> out(static_cast<size_t>(n_out * n_in));
    const size_t rb = row_bytes(t, n_in);
    for (int64_t r = 0; r < n_out; ++r) cpu::dequantize_row(t, q.data() + r * rb, out.data() + r * n_in, n_in);
    return out;
}

// Sum over the rows of x [n_rows, n_in] of (x_g . (w - q)_g)^2 for row o of w and q [n_out, n_in]
// and the group of 128 inputs starting at g: the clipping search's error, naive.
double group_output_error(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& q,
                          int n_rows, int n_in, int o, int g) {
    double e = 0.0;
    for (int t = 0; t < n_rows; ++t) {
        double d = 0.0;
        for (int i = g; i < g + 128; ++i) d += double(x[t * n_in + i]) * (w[o * n_in + i] - q[o * n_in + i]);
        e += d * d;
    }
    return e;
}

// A tiny F32 llama model written and loaded by the test.
std::shared_ptr<const Model> tiny_model(const char* name, int n_embd, int n_head, int n_kv_head, int n_ff) {
    test::TinyModelSpec spec;
    spec.n_embd = n_embd;
    spec.n_head = n_head;
    spec.n_kv_head = n_kv_head;
    spec.n_ff = n_ff;
    spec.n_layer = 2;
    spec.seed = 7;
    const std::string path = test::output_path(name);
    auto m = test::write_and_load_tiny_gguf(path, spec);
    return m ? std::shared_ptr<const Model>(m.value()) : nullptr;
}

// The model with channels `hot` of every attn_norm / ffn_norm multiplied by `factor`: the
// linears then see activation outliers in those channels.
struct OutlierModel {
    std::vector<std::vector<float>> norms;
    std::shared_ptr<Model> model;
};
OutlierModel with_outliers(const Model& src, const std::vector<int>& hot, float factor) {
    OutlierModel o;
    o.model = std::make_shared<Model>(src);
    const int n = src.config.n_embd;
    o.norms.reserve(src.layers.size() * 2);
    for (auto& L : o.model->layers)
        for (const float** p : {&L.attn_norm, &L.ffn_norm}) {
            o.norms.emplace_back(*p, *p + n);
            for (int c : hot) o.norms.back()[static_cast<size_t>(c)] *= factor;
            *p = o.norms.back().data();
        }
    return o;
}

// Logits of every token. Quantized linears are first dequantized to F32, so the
// comparison sees the weights' error alone (not the kernels' activation rounding).
std::vector<float> all_logits(std::shared_ptr<const Model> m, const std::vector<int32_t>& tokens) {
    if (m->layers[0].wq.dtype != DType::F32) {
        auto f = quantize_model(m, QuantScheme::parse("ref").value());
        if (!f) return {};
        m = f.value();
    }
    RunnerOptions ro;
    ro.backend = "cpu";
    ro.n_threads = 2;
    ro.n_ctx = 1024;
    auto r = SequenceRunner::create(std::move(m), ro);
    std::vector<float> logits;
    if (!r || !(*r)->eval(tokens, true, &logits)) return {};
    return logits;
}

// One layer of a float model in double, naive: x [T, n_embd] in place. RoPE is left out:
// it acts on q and k after their projections, which AWQ's folding does not change.
void naive_layer(const Model& m, int il, std::vector<double>& x, int T) {
    const ModelConfig& c = m.config;
    const LayerWeights& L = m.layers[size_t(il)];
    const int E = c.n_embd, HD = c.head_dim, QD = c.n_head * HD, KD = c.n_kv_head * HD, F = c.n_ff;
    auto W = [](const WeightView& w) { return static_cast<const float*>(w.data); };
    auto norm = [&](const float* g, std::vector<double>& h) {
        h.assign(size_t(T) * E, 0.0);
        for (int t = 0; t < T; ++t) {
            double ss = 0.0;
            for (int i = 0; i < E; ++i) ss += x[size_t(t) * E + i] * x[size_t(t) * E + i];
            const double inv = 1.0 / std::sqrt(ss / E + c.rms_eps);
            for (int i = 0; i < E; ++i) h[size_t(t) * E + i] = x[size_t(t) * E + i] * inv * g[i];
        }
    };
    auto proj = [&](const float* w, const std::vector<double>& in, int n_in, int n_out) {
        std::vector<double> out(size_t(T) * n_out, 0.0);
        for (int t = 0; t < T; ++t)
            for (int o = 0; o < n_out; ++o) {
                double acc = 0.0;
                for (int i = 0; i < n_in; ++i) acc += in[size_t(t) * n_in + i] * w[size_t(o) * n_in + i];
                out[size_t(t) * n_out + o] = acc;
            }
        return out;
    };
    std::vector<double> h;
    norm(L.attn_norm, h);
    auto q = proj(W(L.wq), h, E, QD), k = proj(W(L.wk), h, E, KD), v = proj(W(L.wv), h, E, KD);
    std::vector<double> att(size_t(T) * QD, 0.0);
    for (int hh = 0; hh < c.n_head; ++hh) {
        const int kh = hh / (c.n_head / c.n_kv_head);
        for (int t = 0; t < T; ++t) {
            std::vector<double> p(size_t(t) + 1);
            double mx = -1e300, sum = 0.0;
            for (int u = 0; u <= t; ++u) {
                double d = 0.0;
                for (int i = 0; i < HD; ++i) d += q[size_t(t) * QD + hh * HD + i] * k[size_t(u) * KD + kh * HD + i];
                p[size_t(u)] = d / std::sqrt(double(HD));
                mx = std::max(mx, p[size_t(u)]);
            }
            for (auto& e : p) sum += (e = std::exp(e - mx));
            for (int u = 0; u <= t; ++u)
                for (int i = 0; i < HD; ++i)
                    att[size_t(t) * QD + hh * HD + i] += p[size_t(u)] / sum * v[size_t(u) * KD + kh * HD + i];
        }
    }
    auto o = proj(W(L.wo), att, QD, E);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    norm(L.ffn_norm, h);
    auto g = proj(W(L.w_gate), h, E, F), up = proj(W(L.w_up), h, E, F);
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
    auto d = proj(W(L.w_down), g, F, E);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
}

// The residual stream after every layer, naive, for the first T tokens.
std::vector<double> naive_hidden(const Model& m, const std::vector<int32_t>& tokens) {
    const int E = m.config.n_embd, T = int(tokens.size());
    std::vector<double> x(size_t(T) * E);
    const auto* emb = static_cast<const float*>(m.token_embd.data);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < E; ++i) x[size_t(t) * E + i] = emb[size_t(tokens[size_t(t)]) * E + i];
    for (int il = 0; il < m.config.n_layer; ++il) naive_layer(m, il, x, T);
    return x;
}

double mse(const std::vector<float>& a, const std::vector<float>& b) {
    double acc = 0.0;
    for (size_t i = 0; i < a.size(); ++i) acc += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return acc / double(std::max<size_t>(1, a.size()));
}

std::vector<int32_t> license_tokens(const Model& m, const char* name, int n) {
    auto t = tokenize_text_file(m, std::string("/usr/share/common-licenses/") + name, n);
    return t ? t.value() : std::vector<int32_t>{};
}

}  // namespace

class TestQuantSchemes : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void rtn_int8_error_bound_data() {
        QTest::addColumn<int>("n_out");
        QTest::addColumn<int>("n_in");
        QTest::addColumn<bool>("outliers");
        QTest::newRow("8x128") << 8 << 128 << false;
        QTest::newRow("16x576 outliers") << 16 << 576 << true;
        QTest::newRow("3x1536") << 3 << 1536 << false;
    }
    void rtn_int8_error_bound() {
        QFETCH(int, n_out);
        QFETCH(int, n_in);
        QFETCH(bool, outliers);
        const auto w = random_matrix(n_out, n_in, 11, outliers);
        const auto q = quantize_matrix(w.data(), n_out, n_in, DType::I8_ROW);
        QCOMPARE(q.size(), size_t(n_out) * (4 + size_t(n_in)));
        const auto back = dequant(DType::I8_ROW, q, n_out, n_in);
        for (int r = 0; r < n_out; ++r) {
            float amax = 0.0f;
            for (int i = 0; i < n_in; ++i) amax = std::max(amax, std::fabs(w[size_t(r) * n_in + i]));
            const double half_step = amax / 127.0 / 2.0;
            for (int i = 0; i < n_in; ++i) {
                const size_t k = size_t(r) * n_in + i;
                QVERIFY2(std::fabs(double(back[k]) - w[k]) <= half_step * (1 + 1e-5),
                         qPrintable(QString("row %1 col %2: %3 vs %4").arg(r).arg(i).arg(back[k]).arg(w[k])));
            }
        }
    }

    void rtn_int4_error_bound_data() {
        QTest::addColumn<int>("n_out");
        QTest::addColumn<int>("n_in");
        QTest::addColumn<bool>("outliers");
        QTest::newRow("4x128") << 4 << 128 << false;
        QTest::newRow("8x576 outliers") << 8 << 640 << true;
        QTest::newRow("2x1536") << 2 << 1536 << false;
    }
    void rtn_int4_error_bound() {
        QFETCH(int, n_out);
        QFETCH(int, n_in);
        QFETCH(bool, outliers);
        const auto w = random_matrix(n_out, n_in, 5, outliers);
        const auto q = quantize_matrix(w.data(), n_out, n_in, DType::I4_G128);
        QCOMPARE(q.size(), size_t(n_out) * size_t(n_in / 128) * 68);
        const auto back = dequant(DType::I4_G128, q, n_out, n_in);
        for (size_t g0 = 0; g0 < w.size(); g0 += 128) {
            float lo = 0.0f, hi = 0.0f;  // the group's range, widened to include 0
            for (size_t i = g0; i < g0 + 128; ++i) lo = std::min(lo, w[i]), hi = std::max(hi, w[i]);
            // d is (hi - lo) / 15 rounded up to fp16: at most 2^-10 relative above
            const double half_step = (hi - lo) / 15.0 * (1.0 + 1.0 / 1024) / 2.0;
            for (size_t i = g0; i < g0 + 128; ++i)
                QVERIFY2(std::fabs(double(back[i]) - w[i]) <= half_step * (1 + 1e-5),
                         qPrintable(QString("element %1: %2 vs %3").arg(i).arg(back[i]).arg(w[i])));
        }
    }

    void rtn_int4_constant_groups_data() {
        QTest::addColumn<float>("value");
        QTest::newRow("zero") << 0.0f;
        QTest::newRow("positive") << 0.37f;
        QTest::newRow("negative") << -2.5f;
    }
    void rtn_int4_constant_groups() {
        QFETCH(float, value);
        std::vector<float> w(256, value);
        const auto q = quantize_matrix(w.data(), 1, 256, DType::I4_G128);
        const auto back = dequant(DType::I4_G128, q, 1, 256);
        // range [min(0, v), max(0, v)], 15 steps: v is an end of the grid, d/2 at most off
        const double half_step = std::fabs(value) / 15.0 * (1.0 + 1.0 / 1024) / 2.0;
        for (float b : back) QVERIFY(std::fabs(double(b) - value) <= half_step);
        if (value == 0.0f)
            for (float b : back) QCOMPARE(b, 0.0f);
    }

    void fake_quant_equals_format_data() {
        QTest::addColumn<uint32_t>("seed");
        QTest::addColumn<bool>("outliers");
        QTest::newRow("normal") << 1u << false;
        QTest::newRow("outliers") << 2u << true;
        QTest::newRow("normal 2") << 3u << false;
    }
    void fake_quant_equals_format() {
        QFETCH(uint32_t, seed);
        QFETCH(bool, outliers);
        auto w = random_matrix(4, 1152, seed, outliers);
        for (size_t i = 0; i < 128; ++i) w[i] = std::fabs(w[i]) + 0.5f;  // one all-positive group
        std::vector<float> fake(w.size());
        fake_quant_int4(w.data(), fake.data(), int64_t(w.size()));
        const auto back = dequant(DType::I4_G128, quantize_matrix(w.data(), 4, 1152, DType::I4_G128), 4, 1152);
        for (size_t i = 0; i < w.size(); ++i)
            QVERIFY2(fake[i] == back[i], qPrintable(QString("element %1: %2 vs %3").arg(i).arg(fake[i]).arg(back[i])));
    }

    void scheme_parsing_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("dtype");
        QTest::newRow("int8") << "int8" << int(QuantScheme::Kind::Int8PerChannel) << int(DType::I8_ROW);
        QTest::newRow("int4-rtn") << "int4-rtn" << int(QuantScheme::Kind::Int4Rtn) << int(DType::I4_G128);
        QTest::newRow("rtn4") << "RTN4" << int(QuantScheme::Kind::Int4Rtn) << int(DType::I4_G128);
        QTest::newRow("int4-awq") << "int4-awq" << int(QuantScheme::Kind::Int4Awq) << int(DType::I4_G128);
        QTest::newRow("awq4") << "awq4" << int(QuantScheme::Kind::Int4Awq) << int(DType::I4_G128);
        QTest::newRow("int4-sym") << "int4-sym" << int(QuantScheme::Kind::Int4Sym) << int(DType::I4_G128);
        QTest::newRow("sym4") << "SYM4" << int(QuantScheme::Kind::Int4Sym) << int(DType::I4_G128);
    }
    void scheme_parsing() {
        QFETCH(QString, text);
        QFETCH(int, kind);
        QFETCH(int, dtype);
        auto s = QuantScheme::parse(text.toStdString());
        QVERIFY2(s.is_ok(), s.message().c_str());
        QCOMPARE(int(s->kind), kind);
        QCOMPARE(int(s->dtype), dtype);
        auto bad = QuantScheme::parse("int3");
        QVERIFY(!bad.is_ok());
        QVERIFY(bad.message().find("int4-awq") != std::string::npos);
    }

    // int4-sym against its definition (AutoGPTQ's sym quantizer, no error feedback): per group d
    // = 2 max|w| / 15 (to fp16), every stored weight d * k with k in -8..7 the nearest to w / d;
    // groups of 128, 64 on 192-wide rows, as int4-rtn.
    void int4_sym_is_symmetric_rtn() {
        auto m = tiny_model("quant_schemes_sym.gguf", 192, 4, 2, 256);
        QVERIFY(m);
        auto q = quantize_model(m, QuantScheme::parse("int4-sym").value());
        QVERIFY2(q, q.message().c_str());
        QVERIFY2((*q)->format == "variant:int4-sym", (*q)->format.c_str());
        int n_groups = 0;
        for (size_t l = 0; l < m->layers.size(); ++l) {
            const LayerWeights &S = m->layers[l], &Q = (*q)->layers[l];
            const WeightView* src[] = {&S.wq, &S.wk, &S.wv, &S.wo, &S.w_gate, &S.w_up, &S.w_down};
            const WeightView* dst[] = {&Q.wq, &Q.wk, &Q.wv, &Q.wo, &Q.w_gate, &Q.w_up, &Q.w_down};
            for (int k = 0; k < 7; ++k) {
                const WeightView &a = *src[k], &b = *dst[k];
                const int group = a.n_in % 128 == 0 ? 128 : 64;
                QCOMPARE(int(b.dtype), int(group == 128 ? DType::I4_G128 : DType::I4_G64));
                const auto* w = static_cast<const float*>(a.data);
                const size_t rb = row_bytes(b.dtype, b.n_in);
                std::vector<float> row(size_t(b.n_in));
                for (int64_t r = 0; r < b.n_out; ++r) {
                    cpu::dequantize_row(b.dtype, static_cast<const uint8_t*>(b.data) + size_t(r) * rb, row.data(),
                                        b.n_in);
                    for (int64_t g0 = 0; g0 < b.n_in; g0 += group, ++n_groups) {
                        double amax = 0.0;
                        for (int i = 0; i < group; ++i)
                            amax = std::max(amax, std::fabs(double(w[r * a.n_in + g0 + i])));
                        const double d = 2.0 * amax / 15.0;
                        for (int i = 0; i < group; ++i) {
                            const double x = w[r * a.n_in + g0 + i], v = row[size_t(g0 + i)];
                            const double kx = std::clamp(std::nearbyint(x / d), -8.0, 7.0);
                            // fp16 d: within 2^-11 relative, so k * d within 8 * 2^-11 d of the exact level;
                            // w / d within that of a half step may round either way
                            const double tol = 8.0 * d / 2048.0 + 1e-12;
                            const double half = std::fabs(std::fabs(x / d - std::trunc(x / d)) - 0.5);
                            const double other = std::clamp(kx + (x / d > kx ? 1.0 : -1.0), -8.0, 7.0);
                            QVERIFY2(std::fabs(v - kx * d) <= tol ||
                                         (half < 8.0 / 2048.0 && std::fabs(v - other * d) <= tol),
                                     qPrintable(QString("layer %1 linear %2 row %3 col %4: w %5 -> %6, expected %7")
                                                    .arg(l)
                                                    .arg(k)
                                                    .arg(r)
                                                    .arg(g0 + i)
                                                    .arg(x)
                                                    .arg(v)
                                                    .arg(kx * d)));
                        }
                    }
                }
            }
        }
        QVERIFY(n_groups > 0);
        // int4-rtn stores the same groups asymmetrically: its weights differ
        auto rtn = quantize_model(m, QuantScheme::parse("int4-rtn").value());
        QVERIFY2(rtn, rtn.message().c_str());
        const WeightView &a = (*q)->layers[0].wq, &b = (*rtn)->layers[0].wq;
        QVERIFY(std::memcmp(a.data, b.data, tensor_bytes(a.dtype, a.n_in, a.n_out)) != 0);
    }

    // awq_group_loss against the definition: mean over (token, output) of the squared
    // difference between x.w and x.(Q(w*s)/s), with Q the stored I4_G128 format.
    void awq_loss_matches_naive() {
        const int n_rows = 8, n_in = 256, n_out = 5;
        const auto w = random_matrix(n_out, n_in, 3, false);
        auto x = random_matrix(n_rows, n_in, 4, false);
        std::vector<float> s(n_in);
        for (int i = 0; i < n_in; ++i) s[i] = 0.5f + float(i % 7) * 0.3f;
        std::vector<float> ws(w.size());
        for (size_t k = 0; k < w.size(); ++k) ws[k] = w[k] * s[k % n_in];
        const auto qs = dequant(DType::I4_G128, quantize_matrix(ws.data(), n_out, n_in, DType::I4_G128), n_out, n_in);
        double naive = 0.0;
        for (int t = 0; t < n_rows; ++t)
            for (int o = 0; o < n_out; ++o) {
                double ref = 0.0, got = 0.0;
                for (int i = 0; i < n_in; ++i) {
                    ref += double(x[t * n_in + i]) * w[o * n_in + i];
                    got += double(x[t * n_in + i]) * qs[o * n_in + i] / s[i];
                }
                naive += (ref - got) * (ref - got);
            }
        naive /= n_rows * n_out;
        auto be = make_cpu_backend(1);
        const double loss = awq_group_loss(*be, {w.data()}, {n_out}, n_in, x.data(), n_rows, s.data());
        QVERIFY2(std::fabs(loss - naive) <= 1e-4 * naive, qPrintable(QString("%1 vs %2").arg(loss).arg(naive)));
    }

    // One input channel 80x larger than the rest: the search must pick alpha > 0 and a
    // loss below RTN's; clipping never raises any group's error.
    void awq_search_prefers_outlier_channel() {
        const int n_rows = 64, n_in = 256, n_out = 32;
        auto w = random_matrix(n_out, n_in, 8, false);
        auto x = random_matrix(n_rows, n_in, 9, false);
        for (int t = 0; t < n_rows; ++t) x[t * n_in + 17] *= 80.0f, x[t * n_in + 200] *= 50.0f;
        auto be = make_cpu_backend(1);
        AwqGroupStats st;
        const auto s = awq_search_scale(*be, {w.data()}, {n_out}, n_in, x.data(), n_rows, 20, &st);
        QVERIFY(st.alpha > 0.0f);
        QVERIFY2(st.loss_best < 0.9 * st.loss_rtn, qPrintable(QString("%1 vs %2").arg(st.loss_best).arg(st.loss_rtn)));
        QVERIFY(s[17] > s[0] && s[200] > s[0]);
        const double rtn = awq_group_loss(*be, {w.data()}, {n_out}, n_in, x.data(), n_rows, nullptr);
        QCOMPARE(rtn, st.loss_rtn);

        auto clipped = w;
        awq_clip(*be, clipped.data(), n_out, n_in, x.data(), n_rows, 20, 0.5f);
        // per (row, group): partial-output error of Q(clipped) <= error of Q(w), naive
        std::vector<float> qw(w.size()), qc(w.size());
        fake_quant_int4(w.data(), qw.data(), int64_t(w.size()));
        fake_quant_int4(clipped.data(), qc.data(), int64_t(w.size()));
        int n_changed = 0;
        for (int o = 0; o < n_out; ++o)
            for (int g = 0; g < n_in; g += 128) {
                const double e_plain = group_output_error(x, w, qw, n_rows, n_in, o, g);
                const double e_clip = group_output_error(x, w, qc, n_rows, n_in, o, g);
                QVERIFY(e_clip <= e_plain * (1 + 1e-4));
                if (e_clip < e_plain * 0.999) ++n_changed;
            }
        QVERIFY(n_changed > 0);
    }

    // Asymmetric clipping starts from the symmetric search's clamp and keeps it unless one end
    // alone does better: no (row, group) error above the symmetric one; on skewed groups (a
    // long positive tail) some strictly below.
    void awq_asymmetric_clip_never_worse() {
        const int n_rows = 48, n_in = 256, n_out = 24;
        auto w = random_matrix(n_out, n_in, 21, false);
        for (int o = 0; o < n_out; ++o) w[o * n_in + (o * 7) % n_in] = 6.0f * std::fabs(w[o * n_in]) + 0.5f;
        auto x = random_matrix(n_rows, n_in, 22, false);
        auto be = make_cpu_backend(1);
        auto sym = w, asym = w;
        awq_clip(*be, sym.data(), n_out, n_in, x.data(), n_rows, 80, 0.5f, 128, false);
        awq_clip(*be, asym.data(), n_out, n_in, x.data(), n_rows, 80, 0.5f, 128, true);
        std::vector<float> qs(w.size()), qa(w.size());
        fake_quant_int4(sym.data(), qs.data(), int64_t(w.size()));
        fake_quant_int4(asym.data(), qa.data(), int64_t(w.size()));
        int n_better = 0;
        for (int o = 0; o < n_out; ++o)
            for (int g = 0; g < n_in; g += 128) {
                const double e_sym = group_output_error(x, w, qs, n_rows, n_in, o, g);
                const double e_asym = group_output_error(x, w, qa, n_rows, n_in, o, g);
                QVERIFY2(e_asym <= e_sym * (1 + 1e-4),
                         qPrintable(QString("row %1 group %2: %3 > %4").arg(o).arg(g).arg(e_asym).arg(e_sym)));
                if (e_asym < e_sym * 0.999) ++n_better;
            }
        QVERIFY2(n_better > 0, "asymmetric clipping found nothing better than the symmetric clamp");
    }

    // Layer 0's q/k/v input is rmsnorm(embedding) * attn_norm: computed here by hand, for
    // the sampled positions skip, skip + stride, ...
    // Calibration sequences are independent: the second sequence of 16 tokens gives, at
    // layer 1 (after attention, so positions matter), the activations of those 16 tokens
    // run alone; the same rows of a single 40-token sequence differ.
    void calibration_sequences_are_independent() {
        auto m = tiny_model("quant_schemes_calib.gguf", 128, 4, 2, 256);
        QVERIFY(m);
        std::vector<int32_t> tokens;
        for (int i = 0; i < 40; ++i) tokens.push_back((i * 37 + 5) % m->config.n_vocab);
        CalibrationOptions co;
        co.chunk = 8;
        co.seq_len = 16;
        auto cut = collect_activations(m, tokens, co);
        QVERIFY2(cut.is_ok(), cut.message().c_str());
        QCOMPARE(cut->n_rows, 40);
        QCOMPARE(cut->seq_len, 16);
        co.seq_len = 0;
        auto whole = collect_activations(m, tokens, co);
        auto alone = collect_activations(m, std::vector<int32_t>(tokens.begin() + 16, tokens.begin() + 32), co);
        QVERIFY(whole.is_ok() && alone.is_ok());
        QCOMPARE(whole->seq_len, 40);
        const int n = m->config.n_embd;
        const auto& a = cut->layers[1].attn_in;
        const auto& b = alone->layers[1].attn_in;
        const auto& w = whole->layers[1].attn_in;
        double diff_alone = 0.0, diff_whole = 0.0;
        for (int i = 0; i < 16 * n; ++i) {
            diff_alone = std::max(diff_alone, std::fabs(double(a[size_t(16 * n + i)]) - b[size_t(i)]));
            diff_whole = std::max(diff_whole, std::fabs(double(a[size_t(16 * n + i)]) - w[size_t(16 * n + i)]));
        }
        QVERIFY2(diff_alone < 1e-5, qPrintable(QString::number(diff_alone)));
        QVERIFY2(diff_whole > 1e-3, qPrintable(QString::number(diff_whole)));
        for (int i = 0; i < 16 * n; ++i) QCOMPARE(a[size_t(i)], w[size_t(i)]);  // the first sequence is the same
    }

    void calibration_layer0_input_data() {
        QTest::addColumn<int>("skip");
        QTest::addColumn<int>("n_rows");
        QTest::newRow("every 3rd from 0") << 0 << 14;  // 40 tokens, 16 rows at most: stride 3
        QTest::newRow("every 3rd from 1") << 1 << 13;  // 39 sampled tokens: stride 3
    }
    void calibration_layer0_input() {
        QFETCH(int, skip);
        QFETCH(int, n_rows);
        auto m = tiny_model("quant_schemes_calib.gguf", 128, 4, 2, 256);
        QVERIFY(m);
        std::vector<int32_t> tokens;
        for (int i = 0; i < 40; ++i) tokens.push_back((i * 37 + 5) % m->config.n_vocab);
        CalibrationOptions co;
        co.max_rows = 16;
        co.chunk = 16;
        co.skip_first = skip;
        auto cal = collect_activations(m, tokens, co);
        QVERIFY2(cal.is_ok(), cal.message().c_str());
        QCOMPARE(cal->n_rows, n_rows);
        const int n = m->config.n_embd;
        const auto& L0 = cal->layers[0];
        QCOMPARE(L0.attn_in.size(), size_t(n_rows * n));
        QCOMPARE(L0.down_in.size(), size_t(n_rows * m->config.n_ff));
        const auto* emb = static_cast<const float*>(m->token_embd.data);
        for (int r = 0; r < n_rows; ++r) {
            const float* e = emb + size_t(tokens[size_t(skip + 3 * r)]) * n;
            double ss = 0.0;
            for (int i = 0; i < n; ++i) ss += double(e[i]) * e[i];
            const double inv = 1.0 / std::sqrt(ss / n + m->config.rms_eps);
            for (int i = 0; i < n; ++i) {
                const double want = e[i] * inv * m->layers[0].attn_norm[i];
                QVERIFY(std::fabs(L0.attn_in[size_t(r) * n + i] - want) <= 1e-5 * (1 + std::fabs(want)));
            }
        }
    }

    // AWQ's block-output loss runs the layer's attention (after o) and MLP (after down) in
    // float: against a naive causal attention / SwiGLU MLP in double. RoPE is switched off
    // (n_rot = 0) so the naive side needs none; the backend's RoPE has its own tests.
    void awq_block_forward_matches_naive_data() {
        QTest::addColumn<int>("n_kv_head");
        QTest::newRow("MHA") << 4;
        QTest::newRow("GQA") << 2;
    }
    void awq_block_forward_matches_naive() {
        QFETCH(int, n_kv_head);
        auto m = tiny_model("quant_schemes_block.gguf", 128, 4, n_kv_head, 256);
        QVERIFY(m);
        ModelConfig c = m->config;
        c.n_rot = 0;
        const int T = 19, E = c.n_embd, HD = c.head_dim, QD = c.n_head * HD, KD = c.n_kv_head * HD, F = c.n_ff;
        const auto x = random_matrix(T, E, 21, false);  // [T, n_embd]
        const LayerWeights& L = m->layers[1];
        auto W = [](const WeightView& w) { return static_cast<const float*>(w.data); };
        auto proj = [&](const float* w, const std::vector<double>& in, int n_in, int n_out) {
            std::vector<double> out(size_t(T) * n_out, 0.0);
            for (int t = 0; t < T; ++t)
                for (int o = 0; o < n_out; ++o)
                    for (int i = 0; i < n_in; ++i)
                        out[size_t(t) * n_out + o] += in[size_t(t) * n_in + i] * w[size_t(o) * n_in + i];
            return out;
        };
        const std::vector<double> xd(x.begin(), x.end());
        auto q = proj(W(L.wq), xd, E, QD), k = proj(W(L.wk), xd, E, KD), v = proj(W(L.wv), xd, E, KD);
        std::vector<double> att(size_t(T) * QD, 0.0);
        for (int h = 0; h < c.n_head; ++h) {
            const int kh = h / (c.n_head / c.n_kv_head);
            for (int t = 0; t < T; ++t) {
                std::vector<double> p(size_t(t) + 1);
                double sum = 0.0;
                for (int u = 0; u <= t; ++u) {
                    double d = 0.0;
                    for (int i = 0; i < HD; ++i) d += q[size_t(t) * QD + h * HD + i] * k[size_t(u) * KD + kh * HD + i];
                    sum += (p[size_t(u)] = std::exp(d / std::sqrt(double(HD))));
                }
                for (int u = 0; u <= t; ++u)
                    for (int i = 0; i < HD; ++i)
                        att[size_t(t) * QD + h * HD + i] += p[size_t(u)] / sum * v[size_t(u) * KD + kh * HD + i];
            }
        }
        const auto want_attn = proj(W(L.wo), att, QD, E);
        auto g = proj(W(L.w_gate), xd, E, F), up = proj(W(L.w_up), xd, E, F);
        for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
        const auto want_mlp = proj(W(L.w_down), g, F, E);

        auto be = make_cpu_backend(1);
        std::vector<float> got_attn(size_t(T) * E), got_mlp(size_t(T) * E);
        attention_block_forward(*be, c, AttnBlockWeights{W(L.wq), W(L.wk), W(L.wv), W(L.wo)}, x.data(), T,
                                got_attn.data());
        mlp_block_forward(*be, c, W(L.w_gate), W(L.w_up), W(L.w_down), x.data(), T, got_mlp.data());
        for (auto [want, got] : {std::pair{&want_attn, &got_attn}, std::pair{&want_mlp, &got_mlp}}) {
            double range = 0.0, diff = 0.0;
            for (size_t i = 0; i < want->size(); ++i) {
                range = std::max(range, std::fabs((*want)[i]));
                diff = std::max(diff, std::fabs((*want)[i] - (*got)[i]));
            }
            QVERIFY(range > 0.0);
            QVERIFY2(diff <= 1e-4 * range, qPrintable(QString("max diff %1, range %2").arg(diff).arg(range)));
        }
    }

    // Duo scaling's w_mean by hand: rows {1, -2, 4, 0} and {3, 3, -1, 2} in groups of 2;
    // |w| / group max: {0.5, 1, 1, 0} and {1, 1, 0.5, 1}; mean over rows {0.75, 1, 0.75, 0.5}.
    void awq_weight_mean_by_hand() {
        const std::vector<float> a = {1, -2, 4, 0}, b = {3, 3, -1, 2};
        const auto w = awq_weight_mean({a.data(), b.data()}, {1, 1}, 4, 2);
        const float want[] = {0.75f, 1.0f, 0.75f, 0.5f};
        for (int i = 0; i < 4; ++i)
            QVERIFY2(std::fabs(w[size_t(i)] - want[i]) < 1e-5f, qPrintable(QString::number(w[size_t(i)])));
    }

    // The grid search with a loss that depends only on alpha (read back from the scales):
    // x_mean {1, 4}, equal w_mean, so s1 / s0 = 4^alpha; the loss is least at alpha 0.5,
    // where s = {1, 2} normalised by sqrt(max * min) = {1/sqrt 2, sqrt 2}. With s = 1 the
    // best, the search keeps s = 1 and reports alpha -1.
    void awq_grid_search_by_hand() {
        const std::vector<float> x_mean = {1.0f, 4.0f}, w_mean = {0.5f, 0.5f};
        for (bool rtn_best : {false, true}) {
            auto loss = [&](const float* s) {
                if (!s) return rtn_best ? 0.01 : 1.0;
                const double alpha = std::log(double(s[1]) / s[0]) / std::log(4.0);
                return 0.1 + std::fabs(alpha - 0.5);
            };
            AwqGroupStats st;
            const auto s = awq_search_scale_by(x_mean, w_mean, 20, loss, &st);
            if (rtn_best) {
                QCOMPARE(st.alpha, -1.0f);
                QVERIFY(s[0] == 1.0f && s[1] == 1.0f);
                QCOMPARE(st.loss_best, 0.01);
            } else {
                QVERIFY(std::fabs(st.alpha - 0.5f) < 1e-6f);
                QVERIFY2(std::fabs(s[0] - 1.0f / std::sqrt(2.0f)) < 1e-5f && std::fabs(s[1] - std::sqrt(2.0f)) < 1e-5f,
                         qPrintable(QString("%1 %2").arg(s[0]).arg(s[1])));
                QCOMPARE(st.loss_rtn, 1.0);
                QVERIFY(std::fabs(st.loss_best - 0.1) < 1e-9);
            }
        }
    }

    // Scaling and folding without quantization (F32 output, no clipping) is the same
    // function: every layer's output (naive, in double) equals the source's to 1e-4 of its
    // range; the engine's logits agree to the precision of its F16 KV cache.
    void awq_fold_is_exact_data() {
        QTest::addColumn<int>("n_kv_head");
        QTest::newRow("MHA: o folds into v") << 4;
        QTest::newRow("GQA: o skipped") << 2;
    }
    void awq_fold_is_exact() {
        QFETCH(int, n_kv_head);
        auto base = tiny_model("quant_schemes_fold.gguf", 128, 4, n_kv_head, 256);
        QVERIFY(base);
        auto om = with_outliers(*base, {3, 50, 97}, 60.0f);
        std::shared_ptr<const Model> src = om.model;
        const auto calib = license_tokens(*src, "Apache-2.0", 200);
        if (calib.empty()) QSKIP("no /usr/share/common-licenses/Apache-2.0");
        AwqOptions opt;
        opt.output = AwqOutput::Float;
        opt.clip = false;
        AwqReport rep;
        auto v = awq_quantize(src, calib, opt, &rep);
        QVERIFY2(v.is_ok(), v.message().c_str());
        bool any_scaled = false, o_scaled = false;
        for (const auto& L : rep.layers) {
            any_scaled |= L.qkv.alpha > 0 || L.gate_up.alpha > 0;
            o_scaled |= L.o.alpha >= 0;
        }
        QVERIFY(any_scaled);  // the fold is exercised, not a no-op
        QCOMPARE(o_scaled, n_kv_head == 4);
        std::vector<int32_t> eval(calib.begin(), calib.begin() + 24);
        const auto h_ref = naive_hidden(*src, eval), h_got = naive_hidden(**v, eval);
        double h_range = 0.0, h_diff = 0.0;
        for (size_t i = 0; i < h_ref.size(); ++i) {
            h_range = std::max(h_range, std::fabs(h_ref[i]));
            h_diff = std::max(h_diff, std::fabs(h_ref[i] - h_got[i]));
        }
        QVERIFY2(h_diff <= 1e-4 * h_range,
                 qPrintable(QString("layer output: max diff %1, range %2").arg(h_diff).arg(h_range)));

        const auto ref = all_logits(src, eval);
        const auto got = all_logits(*v, eval);
        QVERIFY(!ref.empty() && ref.size() == got.size());
        float range = 0.0f, diff = 0.0f;
        for (size_t i = 0; i < ref.size(); ++i) {
            range = std::max(range, std::fabs(ref[i]));
            diff = std::max(diff, std::fabs(ref[i] - got[i]));
        }
        QVERIFY2(diff <= 5e-3f * range, qPrintable(QString("logits: max diff %1, range %2").arg(diff).arg(range)));
    }

    // A model whose linears see channels 60x larger than the rest: AWQ's logits are
    // closer to the reference than RTN's on a text it was not calibrated on.
    void awq_beats_rtn_on_outliers_data() {
        QTest::addColumn<int>("n_kv_head");
        QTest::addColumn<float>("factor");
        QTest::newRow("GQA x60") << 2 << 60.0f;
        QTest::newRow("MHA x100") << 4 << 100.0f;
    }
    void awq_beats_rtn_on_outliers() {
        QFETCH(int, n_kv_head);
        QFETCH(float, factor);
        auto base = tiny_model("quant_schemes_outliers.gguf", 128, 4, n_kv_head, 256);
        QVERIFY(base);
        auto om = with_outliers(*base, {3, 50, 97, 120}, factor);
        std::shared_ptr<const Model> src = om.model;
        QuantOptions qo;
        qo.calibration_tokens = license_tokens(*src, "Apache-2.0", 256);
        const auto eval = license_tokens(*src, "GPL-3", 256);
        if (qo.calibration_tokens.empty() || eval.empty()) QSKIP("no license texts in /usr/share/common-licenses");
        auto rtn = quantize_model(src, QuantScheme::parse("int4-rtn").value(), qo);
        auto awq = quantize_model(src, QuantScheme::parse("int4-awq").value(), qo);
        QVERIFY2(rtn.is_ok(), rtn.message().c_str());
        QVERIFY2(awq.is_ok(), awq.message().c_str());
        QCOMPARE((*awq)->layers[0].wq.dtype, DType::I4_G128);
        QVERIFY((*awq)->layers[0].attn_norm != src->layers[0].attn_norm);  // the variant owns its norms
        const auto ref = all_logits(src, eval);
        const auto l_rtn = all_logits(*rtn, eval);
        const auto l_awq = all_logits(*awq, eval);
        QVERIFY(!ref.empty() && ref.size() == l_rtn.size() && ref.size() == l_awq.size());
        const double e_rtn = mse(ref, l_rtn), e_awq = mse(ref, l_awq);
        qInfo("logit MSE vs reference: RTN %.4g, AWQ %.4g (%.1f%% of RTN)", e_rtn, e_awq, 100.0 * e_awq / e_rtn);
        QVERIFY2(e_awq < e_rtn, qPrintable(QString("AWQ %1 vs RTN %2").arg(e_awq).arg(e_rtn)));
    }

    // Rows 128 does not divide (here 192 = 3 x 64; SmolLM2-135M's are 576) take groups of
    // 64 (I4_G64) in int4-rtn and int4-awq; rows it divides stay I4_G128. The RTN rows hold
    // exactly fake_quant_int4 of the reference in groups of 64, and the label says so.
    void int4_g64_where_128_does_not_fit() {
        auto src = tiny_model("quant_schemes_192.gguf", 192, 4, 2, 256);  // q/k/v/o/gate/up rows of 192, down 256
        QVERIFY(src);
        QuantOptions qo;
        qo.calibration_tokens = license_tokens(*src, "Apache-2.0", 64);
        if (qo.calibration_tokens.empty()) QSKIP("no license texts in /usr/share/common-licenses");
        for (const char* name : {"int4-rtn", "int4-awq"}) {
            const QuantScheme scheme = QuantScheme::parse(name).value();
            auto v = quantize_model(src, scheme, qo);
            QVERIFY2(v.is_ok(), v.message().c_str());
            const LayerWeights& L = (*v)->layers[0];
            for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up})
                QCOMPARE(w->dtype, DType::I4_G64);
            QCOMPARE(L.w_down.dtype, DType::I4_G128);
            QCOMPARE((*v)->file_type, std::string("I4_G64+I4_G128"));
            const std::string label = quant_label(*src, scheme);
            QVERIFY2(label.find("g64 on rows of 192") != std::string::npos, label.c_str());
        }
        auto rtn = quantize_model(src, QuantScheme::parse("int4-rtn").value(), qo);
        const WeightView& wq = (*rtn)->layers[1].wq;
        const auto ref = dequantize_matrix(src->layers[1].wq, 1);
        auto expect = ref;
        fake_quant_int4(ref.data(), expect.data(), int64_t(ref.size()), 64);
        const auto got = dequantize_matrix(wq, 1);
        QCOMPARE(got.size(), expect.size());
        for (size_t i = 0; i < got.size(); ++i) QCOMPARE(got[i], expect[i]);
        QCOMPARE(int4_group_for(192), 64);
        QCOMPARE(int4_group_for(256), 128);
        QCOMPARE(int4_group_for(96), 0);
    }

    void bad_input() {
        auto m = tiny_model("quant_schemes_bad.gguf", 128, 4, 2, 256);
        QVERIFY(m);
        auto no_calib = quantize_model(m, QuantScheme::parse("awq4").value(), QuantOptions{});
        QVERIFY(!no_calib.is_ok());
        QVERIFY2(no_calib.message().find("calibration") != std::string::npos, no_calib.message().c_str());

        auto odd = tiny_model("quant_schemes_odd.gguf", 96, 4, 2, 256);  // rows of 96
        QVERIFY(odd);
        QuantOptions qo;
        qo.calibration_tokens = {1, 2, 3, 4};
        for (const char* name : {"int4-awq", "int4-rtn"}) {
            auto r = quantize_model(odd, QuantScheme::parse(name).value(), qo);
            QVERIFY(!r.is_ok());
            QVERIFY2(r.message().find("96") != std::string::npos && r.message().find("128") != std::string::npos,
                     r.message().c_str());
        }
        auto missing = tokenize_text_file(*m, "/nonexistent/calibration.txt", 10);
        QVERIFY(!missing.is_ok());
        QVERIFY(missing.message().find("/nonexistent/calibration.txt") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestQuantSchemes)
#include "tst_quant_schemes.moc"
