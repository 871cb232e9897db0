// ctest-labels: unit kernels
// bitsandbytes' 4-bit formats NF4 and FP4 (kernels/cpu/quant_formats_bnb.cpp): blocks decode
// to absmax x the code book written out by hand here from the QLoRA paper / bitsandbytes'
// dDequantizeFP4Tree, in bitsandbytes' nibble order (element 2k in the high nibble);
// quantization picks the nearest code value (checked by brute force); the CPU backend's
// matmul over NF4 / FP4 weights equals the float product of the decoded weights; the nf4 /
// fp4 schemes store every linear of a model in those types. LLM.int8() (DType::I8_LLM)
// against a float reference computed here from its definition, with and without activation
// outliers: with outliers above 6.0 it stays as close as without, where plain per-token
// int8 activations (no decomposition) lose the small activations; its threshold travels in
// each row (llm-int8:T), and T = inf is exactly per-token int8. NF4 with double quantization
// (DType::NF4_DQ): bitsandbytes' 8-bit dynamic map re-derived here from its definition, a
// tensor written by hand decodes to (map[code] * scale2[group] + offset) * nf4[q] with groups
// of 256 blocks over the flattened tensor, the encoder's choices match the definition
// (offset = mean absmax, nearest map value, NF4 quants from the exact absmax), 4.127 bits per
// weight against NF4's 4.5, engine/quant/rtn's dequantize_matrix of an encoded tensor (with
// and without an input permutation) equal to the same decode done here byte by byte, and the
// nf4-dq scheme, also as the source of other schemes. The AVX2 kernels of all four formats are
// checked against their scalar references in tst_backend_ops (matmul_bnb).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/quant/quantize.h"
#include "engine/quant/rtn.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

// The code books, typed in from the sources (not read from the kernels).
const double kNf4[16] = {-1.0,
                         -0.6961928009986877,
                         -0.5250730514526367,
                         -0.39491748809814453,
                         -0.28444138169288635,
                         -0.18477343022823334,
                         -0.09105003625154495,
                         0.0,
                         0.07958029955625534,
                         0.16093020141124725,
                         0.24611230194568634,
                         0.33791524171829224,
                         0.44070982933044434,
                         0.5626170039176941,
                         0.7229568362236023,
                         1.0};
// FP4: bit 3 is the sign; bits 0-2 index {0, 0.0052083, 2/3, 1, 1/3, 1/2, 1/6, 1/4}
double fp4_value(int q) {
    const double mag[8] = {0.0, 5.208333333e-03, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25};
    return (q & 8 ? -1.0 : 1.0) * mag[q & 7];
}
double code_value(DType t, int q) { return t == DType::NF4 ? kNf4[q] : fp4_value(q); }

// One block of 64 with the given absmax and quants (element order).
std::vector<uint8_t> block(float absmax, const int* q) {
    std::vector<uint8_t> b(36);
    std::memcpy(b.data(), &absmax, 4);
    for (int k = 0; k < 32; ++k) b[size_t(4 + k)] = uint8_t(q[2 * k] << 4 | q[2 * k + 1]);
    return b;
}

}  // namespace

class TstBnb : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void layout();
    void decode_matches_code_book_data();
    void decode_matches_code_book();
    void quantize_picks_nearest_data();
    void quantize_picks_nearest();
    void matmul_equals_decoded_product_data();
    void matmul_equals_decoded_product();
    void schemes_store_every_linear();
    void llm_int8_vs_float_data();
    void llm_int8_vs_float();
    void llm_int8_threshold_in_rows();
    void dynamic_map_by_hand();
    void nf4_dq_layout_and_bits();
    void nf4_dq_decode_by_hand();
    void nf4_dq_encode_vs_definition();
    void nf4_dq_dequantize_matrix();
    void nf4_dq_scheme();
};

void TstBnb::layout() {
    QCOMPARE(int(row_bytes(DType::NF4, 128)), 72);  // 2 blocks of 4 + 32 bytes: 4.5 bits per weight
    QCOMPARE(int(row_bytes(DType::FP4, 64)), 36);
    QCOMPARE(QString::fromLatin1(dtype_name(DType::NF4).data()), QString("NF4"));
    QVERIFY(!dtype_info(uint32_t(DType::NF4)));  // never a GGML type id
}

void TstBnb::decode_matches_code_book_data() {
    QTest::addColumn<int>("type");
    QTest::newRow("NF4") << int(DType::NF4);
    QTest::newRow("FP4") << int(DType::FP4);
}

void TstBnb::decode_matches_code_book() {
    QFETCH(int, type);
    const auto t = DType(type);
    int q[64];
    for (int i = 0; i < 64; ++i) q[i] = (i * 7 + 3) % 16;
    const auto b = block(2.5f, q);
    float out[64];
    cpu::dequantize_row(t, b.data(), out, 64);
    for (int i = 0; i < 64; ++i) QVERIFY(std::fabs(double(out[i]) - 2.5 * code_value(t, q[i])) < 1e-6);
    // element 0 sits in byte 0's high nibble
    QCOMPARE(int(b[4] >> 4), q[0]);
    // the ends of the NF4 book are exact: -absmax and +absmax
    if (t == DType::NF4) {
        int ends[64] = {0, 15};
        for (int i = 2; i < 64; ++i) ends[i] = 7;
        const auto e = block(3.0f, ends);
        cpu::dequantize_row(t, e.data(), out, 64);
        QCOMPARE(out[0], -3.0f);
        QCOMPARE(out[1], 3.0f);
        QCOMPARE(out[2], 0.0f);
    }
}

void TstBnb::quantize_picks_nearest_data() { decode_matches_code_book_data(); }

void TstBnb::quantize_picks_nearest() {
    QFETCH(int, type);
    const auto t = DType(type);
    std::mt19937 rng(4);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> w(256);
    for (auto& v : w) v = nd(rng);
    w[70] = 0.9f;  // an outlier block
    std::vector<uint8_t> qb(row_bytes(t, 256));
    cpu::quantize_row(t, w.data(), qb.data(), 256);
    std::vector<float> back(256);
    cpu::dequantize_row(t, qb.data(), back.data(), 256);
    for (int k = 0; k < 4; ++k) {
        float amax = 0.0f;
        for (int i = 0; i < 64; ++i) amax = std::max(amax, std::fabs(w[size_t(64 * k + i)]));
        float stored;
        std::memcpy(&stored, qb.data() + 36 * k, 4);
        QCOMPARE(stored, amax);
        for (int i = 0; i < 64; ++i) {
            const double x = w[size_t(64 * k + i)] / double(amax);
            double best = 1e9;
            for (int c = 0; c < 16; ++c) best = std::min(best, std::fabs(x - code_value(t, c)));
            const double got = std::fabs(back[size_t(64 * k + i)] / double(amax) - x);
            QVERIFY2(got <= best + 1e-6,
                     qPrintable(QString("block %1 element %2: error %3, nearest %4").arg(k).arg(i).arg(got).arg(best)));
        }
    }
}

void TstBnb::matmul_equals_decoded_product_data() { decode_matches_code_book_data(); }

void TstBnb::matmul_equals_decoded_product() {
    QFETCH(int, type);
    const auto t = DType(type);
    const int64_t n_in = 192, n_out = 24;
    const int n_tokens = 5;
    std::mt19937 rng(9);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(size_t(n_in * n_out)), x(size_t(n_in * n_tokens));
    for (auto& v : wf) v = 0.05f * nd(rng);
    for (auto& v : x) v = nd(rng);
    x[7] = 60.0f;  // an outlier activation
    const size_t rb = row_bytes(t, n_in);
    std::vector<uint8_t> wq(rb * size_t(n_out));
    for (int64_t r = 0; r < n_out; ++r) cpu::quantize_row(t, &wf[size_t(r * n_in)], &wq[size_t(r) * rb], n_in);
    for (const char* level : {"scalar", "avx2"}) {
        if (std::string(level) == "avx2" && cpu::detect_simd() < cpu::SimdLevel::Avx2) continue;
        auto be = make_cpu_backend(2, level);
        QVERIFY(be && be->supports(t));
        std::vector<float> y(static_cast<size_t>(n_out * n_tokens));
        be->matmul(WeightView{t, wq.data(), n_in, n_out}, x.data(), y.data(), n_tokens);
        std::vector<float> row(static_cast<size_t>(n_in));
        for (int64_t r = 0; r < n_out; ++r) {
            cpu::dequantize_row(t, &wq[size_t(r) * rb], row.data(), n_in);
            for (int tk = 0; tk < n_tokens; ++tk) {
                // scalar: float activations, exact up to accumulation; AVX2: int16 activations per
                // block of 64 (amax / 65534 each) and the code book as int16 (2^-15 of the absmax)
                double ref = 0.0, mag = 0.0, bound = 0.0;
                for (int64_t b0 = 0; b0 < n_in; b0 += 64) {
                    double xmax = 0.0, wmax = 0.0;
                    for (int64_t i = b0; i < b0 + 64; ++i) {
                        xmax = std::max(xmax, double(std::fabs(x[size_t(tk * n_in + i)])));
                        wmax = std::max(wmax, double(std::fabs(row[size_t(i)])));
                    }
                    for (int64_t i = b0; i < b0 + 64; ++i) {
                        const double wi = row[size_t(i)], xi = x[size_t(tk * n_in + i)];
                        ref += wi * xi;
                        mag += std::fabs(wi * xi);
                        if (std::string(level) == "avx2")
                            bound += std::fabs(wi) * xmax / 65534.0 + wmax * 0x1p-15 * (std::fabs(xi) + xmax / 65534.0);
                    }
                }
                const double got = y[size_t(tk * n_out + r)];
                QVERIFY2(
                    std::fabs(got - ref) <= 1e-5 * mag + bound,
                    qPrintable(QString("%1 row %2 token %3: %4 vs %5").arg(level).arg(r).arg(tk).arg(got).arg(ref)));
            }
        }
    }
}

void TstBnb::schemes_store_every_linear() {
    test::TinyModelSpec spec;
    spec.n_embd = 128;
    spec.n_ff = 256;
    auto src = test::write_and_load_tiny_gguf(test::output_path("bnb_tiny.gguf"), spec);
    QVERIFY2(src, src.message().c_str());
    for (const char* name : {"nf4", "fp4"}) {
        auto v = quantize_model(src.value(), QuantScheme::parse(name).value());
        QVERIFY2(v, v.message().c_str());
        const DType want = std::string(name) == "nf4" ? DType::NF4 : DType::FP4;
        for (const LayerWeights& L : v.value()->layers)
            for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
                QCOMPARE(int(w->dtype), int(want));
        QVERIFY(!test::last_logits(v.value()).empty());
    }
}

void TstBnb::llm_int8_vs_float_data() {
    QTest::addColumn<bool>("outliers");
    QTest::newRow("no outliers") << false;
    QTest::newRow("outliers 40-600") << true;
}

void TstBnb::llm_int8_vs_float() {
    QFETCH(bool, outliers);
    const int64_t n_in = 256, n_out = 16;
    const int n_tokens = 3;
    std::mt19937 rng(12);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> w(size_t(n_in * n_out)), x(size_t(n_in * n_tokens));
    for (auto& v : w) v = 0.05f * nd(rng);
    for (auto& v : x) v = nd(rng);
    if (outliers)  // a few feature columns far above the threshold, as transformer residuals have
        for (int t = 0; t < n_tokens; ++t)
            for (int c : {5, 77, 200}) x[size_t(t * n_in + c)] = (t + 1) * (c == 77 ? 600.0f : 40.0f);
    const size_t rb = row_bytes(DType::I8_LLM, n_in);
    std::vector<uint8_t> wq(rb * size_t(n_out));
    for (int64_t r = 0; r < n_out; ++r)
        cpu::quantize_row(DType::I8_LLM, &w[size_t(r * n_in)], &wq[size_t(r) * rb], n_in);
    auto be = make_cpu_backend(2);
    std::vector<float> y(size_t(n_out * n_tokens));
    be->matmul(WeightView{DType::I8_LLM, wq.data(), n_in, n_out}, x.data(), y.data(), n_tokens);
    // Against the float product of the int8 weights (w_q = q * scale_w, exact in double), the
    // error is the activations' alone; it is measured relative to the part of the output the
    // small (non-outlier) activations make, which int8 activations scaled by the outliers lose.
    double err_llm = 0.0, err_naive = 0.0, small_norm = 0.0, err_float = 0.0, norm = 0.0;
    for (int t = 0; t < n_tokens; ++t) {
        const float* xt = &x[size_t(t * n_in)];
        float amax_all = 0.0f;
        for (int64_t i = 0; i < n_in; ++i) amax_all = std::max(amax_all, std::fabs(xt[i]));
        for (int64_t r = 0; r < n_out; ++r) {
            double ref_q = 0.0, small = 0.0, naive = 0.0, ref = 0.0;
            float sw;  // row: threshold, scale, quants
            std::memcpy(&sw, &wq[size_t(r) * rb + 4], 4);
            const auto* q = reinterpret_cast<const int8_t*>(&wq[size_t(r) * rb + 8]);
            for (int64_t i = 0; i < n_in; ++i) {
                const double wqi = double(q[i]) * sw;
                ref_q += wqi * xt[i];
                if (std::fabs(xt[i]) <= 6.0f) small += wqi * xt[i];
                naive += wqi * std::nearbyint(xt[i] * 127.0 / amax_all) * amax_all / 127.0;
                ref += double(w[size_t(r * n_in + i)]) * xt[i];  // the float layer
            }
            const double got = y[size_t(t * n_out + r)];
            err_llm += (got - ref_q) * (got - ref_q);
            err_naive += (naive - ref_q) * (naive - ref_q);
            small_norm += small * small;
            err_float += (got - ref) * (got - ref);
            norm += ref * ref;
        }
    }
    const double rel_llm = std::sqrt(err_llm / small_norm), rel_naive = std::sqrt(err_naive / small_norm);
    const double rel_float = std::sqrt(err_float / norm);
    qInfo(
        "activation error relative to the small activations' output: LLM.int8() %.5f, int8 activations without "
        "decomposition %.5f; vs the float layer %.5f",
        rel_llm, rel_naive, rel_float);
    QVERIFY2(rel_llm < 0.02, "LLM.int8()'s activation error is above 2% of the small activations' output");
    QVERIFY2(rel_float < 0.03, "LLM.int8() is not within 3% of the float layer");
    if (outliers) QVERIFY2(rel_naive > 0.3 && rel_llm < 0.1 * rel_naive, "the outlier decomposition does not help");
}

// The threshold lives in each row: llm-int8:T writes T, and the matmul with T = inf (no
// decomposition) is plain per-token int8 activations (computed here), while 6.0 keeps the
// outlier columns in float.
void TstBnb::llm_int8_threshold_in_rows() {
    QCOMPARE(QuantScheme::parse("llm-int8").value().llm_int8_threshold, 6.0f);
    QCOMPARE(QuantScheme::parse("llm-int8:2.5").value().llm_int8_threshold, 2.5f);
    QVERIFY(std::isinf(QuantScheme::parse("llm-int8:inf").value().llm_int8_threshold));
    for (const char* bad : {"llm-int8:", "llm-int8:x", "llm-int8:-1", "llm-int8:0", "llm-int8:4x"}) {
        auto r = QuantScheme::parse(bad);
        QVERIFY2(!r, bad);
        QVERIFY2(r.message().find("threshold") != std::string::npos, r.message().c_str());
    }
    const int64_t n_in = 128, n_out = 8;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(n_in * n_out)), x(static_cast<size_t>(n_in));
    for (auto& v : w) v = 0.05f * nd(rng);
    for (auto& v : x) v = nd(rng);
    x[9] = 500.0f;
    const size_t rb = row_bytes(DType::I8_LLM, n_in);
    QCOMPARE(int(rb), 8 + 128);
    for (float thr : {6.0f, float(INFINITY)}) {
        std::vector<uint8_t> wq(rb * size_t(n_out));
        for (int64_t r = 0; r < n_out; ++r)
            cpu::quantize_llm_int8_row(&w[size_t(r * n_in)], n_in, thr, &wq[size_t(r) * rb]);
        QCOMPARE(cpu::llm_int8_threshold(wq.data()), thr);
        for (const char* level : {"scalar", "avx2"}) {
            if (std::string(level) == "avx2" && cpu::detect_simd() < cpu::SimdLevel::Avx2) continue;
            auto be = make_cpu_backend(1, level);
            QVERIFY(be);
            std::vector<float> y(static_cast<size_t>(n_out));
            be->matmul(WeightView{DType::I8_LLM, wq.data(), n_in, n_out}, x.data(), y.data(), 1);
            float amax = 0.0f;  // per-token int8 of every activation (the outlier included)
            for (float v : x) amax = std::max(amax, std::fabs(v));
            for (int64_t r = 0; r < n_out; ++r) {
                float sw;
                std::memcpy(&sw, &wq[size_t(r) * rb + 4], 4);
                const auto* q = reinterpret_cast<const int8_t*>(&wq[size_t(r) * rb + 8]);
                double naive = 0.0, exact = 0.0;
                for (int64_t i = 0; i < n_in; ++i) {
                    naive += double(q[i]) * sw * std::nearbyint(x[size_t(i)] * 127.0 / amax) * amax / 127.0;
                    exact += double(q[i]) * sw * x[size_t(i)];
                }
                const double got = y[size_t(r)];
                if (std::isinf(thr))
                    QVERIFY2(std::fabs(got - naive) <= 1e-4 * (1.0 + std::fabs(naive)),
                             qPrintable(QString("%1 row %2: %3 vs naive %4").arg(level).arg(r).arg(got).arg(naive)));
                else  // the small activations' rounding only: far closer than the naive product
                    QVERIFY2(std::fabs(got - exact) < 0.2 * std::fabs(naive - exact) + 1e-3,
                             qPrintable(QString("%1 row %2: %3 vs %4 (naive %5)")
                                            .arg(level)
                                            .arg(r)
                                            .arg(got)
                                            .arg(exact)
                                            .arg(naive)));
            }
        }
    }
    // the scheme writes its threshold into every row of every linear
    test::TinyModelSpec spec;
    spec.n_embd = 128;
    spec.n_ff = 256;
    auto src = test::write_and_load_tiny_gguf(test::output_path("bnb_llm_tiny.gguf"), spec);
    QVERIFY2(src, src.message().c_str());
    auto v = quantize_model(src.value(), QuantScheme::parse("llm-int8:3.5").value());
    QVERIFY2(v, v.message().c_str());
    for (const LayerWeights& L : v.value()->layers)
        for (const WeightView* wv : {&L.wq, &L.w_down}) {
            QCOMPARE(int(wv->dtype), int(DType::I8_LLM));
            const size_t wrb = row_bytes(DType::I8_LLM, wv->n_in);
            for (int64_t r = 0; r < wv->n_out; ++r)
                QCOMPARE(cpu::llm_int8_threshold(static_cast<const uint8_t*>(wv->data) + size_t(r) * wrb), 3.5f);
        }
    QCOMPARE(QString::fromStdString(quant_label(*src.value(), QuantScheme::parse("llm-int8:3.5").value())),
             QString("LLM.int8() (int8 rows, activations above 3.5 in float)"));
}

namespace {
// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), written
// from its definition in double: exponent i = 0..6 contributes the 2^i midpoints of
// linspace(0.1, 1, 2^i + 1) times 10^(i - 6), both signs; then 0 and 1; sorted.
std::vector<double> dynamic_map_reference() {
    std::vector<double> v;
    for (int i = 0; i < 7; ++i) {
        const int n = (1 << i) + 1;
        for (int j = 0; j + 1 < n; ++j) {
            const double mid = (0.1 + 0.9 * j / (n - 1) + 0.1 + 0.9 * (j + 1) / (n - 1)) / 2.0;
            v.push_back(std::pow(10.0, i - 6) * mid);
            v.push_back(-std::pow(10.0, i - 6) * mid);
        }
    }
    v.push_back(0.0);
    v.push_back(1.0);
    std::sort(v.begin(), v.end());
    return v;
}
}  // namespace

void TstBnb::dynamic_map_by_hand() {
    const float* m = cpu::dynamic_map8();
    // typed in: the ends and the middle of the sorted map
    QCOMPARE(m[0], -0.99296875f);  // -(1 - 0.9 / 128), the last midpoint of linspace(0.1, 1, 65)
    QCOMPARE(m[127], 0.0f);
    QCOMPARE(m[128], 5.5e-7f);  // 10^-6 * (0.1 + 1) / 2
    QCOMPARE(m[254], 0.99296875f);
    QCOMPARE(m[255], 1.0f);
    const auto ref = dynamic_map_reference();
    QCOMPARE(int(ref.size()), 256);
    for (int i = 0; i < 256; ++i)
        QVERIFY2(std::fabs(m[i] - ref[size_t(i)]) <= 1e-6 * std::fabs(ref[size_t(i)]) + 1e-12,
                 qPrintable(QString("map[%1] = %2, reference %3").arg(i).arg(m[i]).arg(ref[size_t(i)])));
}

void TstBnb::nf4_dq_layout_and_bits() {
    QCOMPARE(int(row_bytes(DType::NF4_DQ, 576)), 9 * 33);
    // 576 x 576: 5184 blocks, 21 groups of 256 -> 21 scales + the offset after the rows
    QCOMPARE(int(tensor_bytes(DType::NF4_DQ, 576, 576)), 576 * 9 * 33 + (21 + 1) * 4);
    const double bpw = 8.0 * double(tensor_bytes(DType::NF4_DQ, 576, 576)) / (576.0 * 576.0);
    const double bpw_nf4 = 8.0 * double(tensor_bytes(DType::NF4, 576, 576)) / (576.0 * 576.0);
    qInfo("bits per weight on a 576 x 576 linear: NF4 %.4f, NF4 double-quantized %.4f", bpw_nf4, bpw);
    QVERIFY(std::fabs(bpw - (4.0 + 8.0 / 64 + 32.0 / (64 * 256))) < 0.002);  // 4.127
    QCOMPARE(bpw_nf4, 4.5);
}

// A tensor written by hand (quants, 8-bit absmax codes, group scales, offset) decodes to
// (map[code] * scale2[group] + offset) * nf4[q], groups counted over the flattened tensor.
void TstBnb::nf4_dq_decode_by_hand() {
    const int64_t n_in = 128, n_out = 300;  // 600 blocks: groups of 256, 256, 88 blocks
    const size_t rb = row_bytes(DType::NF4_DQ, n_in);
    std::vector<uint8_t> t(tensor_bytes(DType::NF4_DQ, n_in, n_out));
    QCOMPARE(t.size(), rb * 300 + 4 * 4);
    const float scale2[3] = {0.5f, 0.25f, 2.0f}, offset = 0.125f;
    std::memcpy(&t[rb * 300], scale2, sizeof scale2);
    std::memcpy(&t[rb * 300 + 12], &offset, 4);
    for (int64_t r = 0; r < n_out; ++r)
        for (int b = 0; b < 2; ++b) {
            uint8_t* blk = &t[size_t(r) * rb + size_t(b) * 33];
            blk[0] = uint8_t((r * 2 + b) * 37 % 256);  // the absmax code
            for (int k = 0; k < 32; ++k) blk[1 + k] = uint8_t(((r + k) % 16) << 4 | (k * 3 + b) % 16);
        }
    std::vector<float> out(size_t(n_in * n_out));
    cpu::dequantize_nf4_dq(t.data(), n_in, n_out, out.data());
    const auto map = dynamic_map_reference();
    for (int64_t r = 0; r < n_out; ++r)
        for (int b = 0; b < 2; ++b) {
            const int64_t k = r * 2 + b;
            const double absmax = map[size_t(k * 37 % 256)] * scale2[k / 256] + offset;
            for (int e = 0; e < 64; ++e) {
                const int byte = e / 2, q = e % 2 == 0 ? (r + byte) % 16 : (byte * 3 + b) % 16;
                const double want = absmax * kNf4[q];
                const double got = out[size_t(r * n_in + b * 64 + e)];
                QVERIFY2(std::fabs(got - want) <= 1e-6 * std::fabs(want) + 1e-7,
                         qPrintable(
                             QString("row %1 block %2 element %3: %4 vs %5").arg(r).arg(b).arg(e).arg(got).arg(want)));
            }
        }
}

// Encoding follows bitsandbytes' quantize_4bit(compress_statistics=True), re-derived here: NF4
// quants from the exact absmax, offset = mean absmax, codes = the map value nearest to
// (absmax - offset) / max|absmax - offset| per group of 256 blocks.
void TstBnb::nf4_dq_encode_vs_definition() {
    const int64_t n_in = 576, n_out = 40;  // 360 blocks: groups of 256 and 104
    std::mt19937 rng(21);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    std::vector<float> w(size_t(n_in * n_out));
    for (auto& v : w) v = nd(rng);
    for (int r = 0; r < 40; r += 7) w[size_t(r * n_in + 100)] = 0.3f;  // a few large blocks
    std::vector<uint8_t> t(tensor_bytes(DType::NF4_DQ, n_in, n_out));
    cpu::quantize_nf4_dq(w.data(), n_in, n_out, t.data());
    const size_t rb = row_bytes(DType::NF4_DQ, n_in);
    const int64_t nb = n_out * n_in / 64;
    std::vector<double> absmax(static_cast<size_t>(nb));
    double mean = 0.0;
    for (int64_t k = 0; k < nb; ++k) {
        double a = 0.0;
        for (int i = 0; i < 64; ++i) a = std::max(a, double(std::fabs(w[size_t(k * 64 + i)])));
        absmax[size_t(k)] = a;
        mean += a / double(nb);
    }
    float stored_offset;
    std::memcpy(&stored_offset, &t[rb * size_t(n_out) + 2 * 4], 4);
    QVERIFY(std::fabs(stored_offset - mean) <= 1e-6 * mean);
    const auto map = dynamic_map_reference();
    std::vector<float> out(w.size());
    cpu::dequantize_nf4_dq(t.data(), n_in, n_out, out.data());
    double worst_rel = 0.0;
    for (int64_t g = 0; g < 2; ++g) {
        const int64_t k0 = g * 256, k1 = std::min<int64_t>(nb, k0 + 256);
        double a2 = 0.0;
        for (int64_t k = k0; k < k1; ++k) a2 = std::max(a2, std::fabs(absmax[size_t(k)] - mean));
        float stored_a2;
        std::memcpy(&stored_a2, &t[rb * size_t(n_out) + size_t(g) * 4], 4);
        QVERIFY(std::fabs(stored_a2 - a2) <= 1e-6 * a2);
        for (int64_t k = k0; k < k1; ++k) {
            const double x = (absmax[size_t(k)] - mean) / a2;
            double best = 1e9;
            for (double m : map) best = std::min(best, std::fabs(m - x));
            const uint8_t code = t[size_t(k / 9) * rb + size_t(k % 9) * 33];
            QVERIFY2(std::fabs(map[code] - x) <= best + 1e-6,
                     qPrintable(QString("block %1: code %2 is %3 from %4, nearest %5")
                                    .arg(k)
                                    .arg(code)
                                    .arg(std::fabs(map[code] - x))
                                    .arg(x)
                                    .arg(best)));
            const double decoded = map[code] * stored_a2 + stored_offset;
            worst_rel = std::max(worst_rel, std::fabs(decoded - absmax[size_t(k)]) / absmax[size_t(k)]);
            // the NF4 quants were picked with the exact absmax: element / absmax is nearest its code
            for (int i = 0; i < 64; ++i) {
                const double xi = w[size_t(k * 64 + i)] / absmax[size_t(k)];
                const uint8_t byte = t[size_t(k / 9) * rb + size_t(k % 9) * 33 + 1 + size_t(i / 2)];
                const int q = i % 2 == 0 ? byte >> 4 : byte & 15;
                double nearest = 1e9;
                for (double c : kNf4) nearest = std::min(nearest, std::fabs(c - xi));
                QVERIFY(std::fabs(kNf4[q] - xi) <= nearest + 1e-6);
                QVERIFY(std::fabs(out[size_t(k * 64 + i)] - decoded * kNf4[q]) <= 1e-6 * decoded);
            }
        }
    }
    qInfo("double-quantized absmax: worst relative error %.4f", worst_rel);
    QVERIFY(worst_rel < 0.05);
}

// dequantize_matrix of an NF4_DQ tensor (its rows need the tensor's tail) equals the decode
// done here from the bytes: block k's absmax = map[code] * scale2[k / 256] + offset (the
// tail after the rows), element = absmax * nf4[nibble] (high nibble first); with in_perm,
// stored column p lands in input column in_perm[p].
void TstBnb::nf4_dq_dequantize_matrix() {
    const int64_t n_in = 576, n_out = 40;  // 9 blocks a row, 360 blocks: group 1 starts inside row 28
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> w(size_t(n_in * n_out));
    for (auto& v : w) v = nd(rng);
    std::vector<uint8_t> t(tensor_bytes(DType::NF4_DQ, n_in, n_out));
    cpu::quantize_nf4_dq(w.data(), n_in, n_out, t.data());

    const size_t rb = row_bytes(DType::NF4_DQ, n_in);
    const auto map = dynamic_map_reference();
    float scale2[2], offset;
    std::memcpy(scale2, &t[rb * size_t(n_out)], sizeof scale2);
    std::memcpy(&offset, &t[rb * size_t(n_out) + 8], 4);
    std::vector<double> want(w.size());  // [n_out, n_in] as stored
    for (int64_t k = 0; k < n_out * n_in / 64; ++k) {
        const uint8_t* blk = &t[size_t(k / 9) * rb + size_t(k % 9) * 33];
        const double absmax = map[blk[0]] * scale2[k / 256] + offset;
        for (int e = 0; e < 64; ++e) {
            const uint8_t byte = blk[1 + e / 2];
            want[size_t(k * 64 + e)] = absmax * kNf4[e % 2 == 0 ? byte >> 4 : byte & 15];
        }
    }
    const WeightView view{DType::NF4_DQ, t.data(), n_in, n_out};
    const std::vector<float> got = dequantize_matrix(view, 2);
    QCOMPARE(got.size(), w.size());
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        QVERIFY2(std::fabs(got[i] - want[i]) <= 1e-6 * std::fabs(want[i]) + 1e-9,
                 qPrintable(QString("element %1: %2 vs %3").arg(i).arg(got[i]).arg(want[i])));
        err += (double(w[i]) - got[i]) * (double(w[i]) - got[i]);
        norm += double(w[i]) * w[i];
    }
    qInfo("nf4-dq through dequantize_matrix: relative error to the source %.4f", std::sqrt(err / norm));
    QVERIFY(std::sqrt(err / norm) < 0.15);  // NF4 of Gaussian weights: ~0.1

    std::vector<int32_t> perm(static_cast<size_t>(n_in));  // stored column p is input column perm[p]
    for (int64_t p = 0; p < n_in; ++p) perm[size_t(p)] = int32_t((p * 7 + 3) % n_in);  // 7 is prime to 576
    WeightView permuted = view;
    permuted.in_perm = perm.data();
    const std::vector<float> un = dequantize_matrix(permuted, 1);
    for (int64_t r = 0; r < n_out; ++r)
        for (int64_t p = 0; p < n_in; ++p) QCOMPARE(un[size_t(r * n_in + perm[size_t(p)])], got[size_t(r * n_in + p)]);
}

void TstBnb::nf4_dq_scheme() {
    test::TinyModelSpec spec;
    spec.n_embd = 128;
    spec.n_ff = 256;
    auto src = test::write_and_load_tiny_gguf(test::output_path("bnb_dq_tiny.gguf"), spec);
    QVERIFY2(src, src.message().c_str());
    auto v = quantize_model(src.value(), QuantScheme::parse("nf4-dq").value());
    QVERIFY2(v, v.message().c_str());
    int64_t linear_bytes = 0, n_weights = 0;
    for (const LayerWeights& L : v.value()->layers)
        for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
            QCOMPARE(int(w->dtype), int(DType::NF4_DQ));
            linear_bytes += int64_t(tensor_bytes(w->dtype, w->n_in, w->n_out));
            n_weights += w->n_in * w->n_out;
        }
    qInfo("nf4-dq on the tiny model: %.4f bits per linear weight", 8.0 * double(linear_bytes) / double(n_weights));
    QVERIFY(!test::last_logits(v.value()).empty());
    // close to nf4 (float absmax), not equal (the absmax are 8-bit)
    auto plain = quantize_model(src.value(), QuantScheme::parse("nf4").value());
    QVERIFY(plain);
    const auto a = test::last_logits(v.value()), b = test::last_logits(plain.value());
    QCOMPARE(a.size(), b.size());
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < a.size(); ++i) diff += double(a[i] - b[i]) * (a[i] - b[i]), norm += double(b[i]) * b[i];
    auto r = quantize_model(src.value(), QuantScheme::parse("ref").value());
    QVERIFY(r);
    const auto c = test::last_logits(r.value());
    double diff_ref = 0.0, norm_ref = 0.0;
    for (size_t i = 0; i < c.size(); ++i)
        diff_ref += double(c[i] - b[i]) * (c[i] - b[i]), norm_ref += double(c[i]) * c[i];
    const double dq_vs_nf4 = std::sqrt(diff / norm), nf4_vs_ref = std::sqrt(diff_ref / norm_ref);
    qInfo("last logits, relative difference: nf4-dq vs nf4 %.4f, nf4 vs the reference %.4f", dq_vs_nf4, nf4_vs_ref);
    // the 8-bit absmax adds little to NF4's own error (a forward that mixed up the rows' absmax
    // - e.g. by packing q/k/v into one matrix without the tail - is off by more than NF4 itself)
    QVERIFY(dq_vs_nf4 < 0.25 * nf4_vs_ref);

    // An nf4-dq variant as the source of other schemes (its linears decode whole): "ref" of it
    // holds its decoded weights in float, so its logits are nf4-dq's own up to float rounding;
    // int8 of it stays as close as int8 of anything.
    auto back = quantize_model(v.value(), QuantScheme::parse("ref").value());
    QVERIFY2(back, back.message().c_str());
    QCOMPARE(int(back.value()->layers[0].wq.dtype), int(DType::F32));
    const auto d = test::last_logits(back.value());
    QCOMPARE(d.size(), a.size());
    double diff_back = 0.0;
    for (size_t i = 0; i < d.size(); ++i) diff_back += double(d[i] - a[i]) * (d[i] - a[i]);
    const double back_vs_dq = std::sqrt(diff_back / norm);
    qInfo("last logits, relative difference: ref-of-nf4-dq vs nf4-dq %.2e", back_vs_dq);
    QVERIFY(std::isfinite(back_vs_dq) && back_vs_dq < 1e-4);
    auto i8 = quantize_model(v.value(), QuantScheme::parse("int8").value());
    QVERIFY2(i8, i8.message().c_str());
    const auto e = test::last_logits(i8.value());
    double diff_i8 = 0.0;
    for (size_t i = 0; i < e.size(); ++i) diff_i8 += double(e[i] - a[i]) * (e[i] - a[i]);
    QVERIFY(std::isfinite(diff_i8) && std::sqrt(diff_i8 / norm) < nf4_vs_ref);
}

QTEST_GUILESS_MAIN(TstBnb)
#include "tst_bnb.moc"
