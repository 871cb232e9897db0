// ctest-labels: unit kernels
// bitsandbytes' 4-bit formats NF4 and FP4 (kernels/cpu/quant_formats_bnb.cpp): blocks decode
// to absmax x the code book written out by hand here from the QLoRA paper / bitsandbytes'
// dDequantizeFP4Tree, in bitsandbytes' nibble order (element 2k in the high nibble);
// quantization picks the nearest code value (checked by brute force); the CPU backend's
// matmul over NF4 / FP4 weights equals the float product of the decoded weights; the nf4 /
// fp4 schemes store every linear of a model in those types. LLM.int8() (DType::I8_LLM)
// against a float reference computed here from its definition, with and without activation
// outliers: with outliers above 6.0 it stays as close as without, where plain per-token
// int8 activations (no decomposition) lose the small activations.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/quant/quantize.h"
#include "kernels/backend.h"
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
    auto be = make_cpu_backend(2);
    QVERIFY(be->supports(t));
    std::vector<float> y(size_t(n_out * n_tokens));
    be->matmul(WeightView{t, wq.data(), n_in, n_out}, x.data(), y.data(), n_tokens);
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_out; ++r) {
        cpu::dequantize_row(t, &wq[size_t(r) * rb], row.data(), n_in);
        for (int tk = 0; tk < n_tokens; ++tk) {
            double ref = 0.0, mag = 0.0;
            for (int64_t i = 0; i < n_in; ++i) {
                ref += double(row[size_t(i)]) * x[size_t(tk * n_in + i)];
                mag += std::fabs(double(row[size_t(i)]) * x[size_t(tk * n_in + i)]);
            }
            QVERIFY2(std::fabs(y[size_t(tk * n_out + r)] - ref) <= 1e-5 * mag,
                     qPrintable(
                         QString("row %1 token %2: %3 vs %4").arg(r).arg(tk).arg(y[size_t(tk * n_out + r)]).arg(ref)));
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
            float sw;
            std::memcpy(&sw, &wq[size_t(r) * rb], 4);
            const auto* q = reinterpret_cast<const int8_t*>(&wq[size_t(r) * rb + 4]);
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

QTEST_GUILESS_MAIN(TstBnb)
#include "tst_bnb.moc"
