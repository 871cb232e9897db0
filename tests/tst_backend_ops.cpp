// ctest-labels: kernels
// Every element-wise op and the matmul of kernels/backend.h on every available backend
// (CPU scalar, CPU AVX2, CUDA) over a table of shapes and types, like llama.cpp's
// test-backend-ops (the KV store and paged attention ops: tst_attention_ops). References
// are written here, independently of the kernels: double-precision loops for the
// element-wise ops, a dequantized-weight x float-activation product for matmul with a
// worst-case bound from the activation quantization. Inputs travel through alloc /
// copy_to_device / copy_to_host, so the CUDA rows run unchanged where a GPU exists and
// are skipped with the loader's reason where none does.
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
    void matmul_data();
    void matmul();
    void matmul_bnb_data();
    void matmul_bnb();
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
    const struct {
        int n_rows, n;
        bool in_place;
    } shapes[] = {{1, 576, false}, {1, 576, true}, {3, 64, false}, {7, 1001, false}, {64, 576, true}, {2, 4096, false}};
    for (const char* b : kBackends)
        for (const auto& s : shapes)
            QTest::addRow("%s/%dx%d%s", b, s.n_rows, s.n, s.in_place ? "/inplace" : "")
                << QString(b) << s.n_rows << s.n << s.in_place;
}

void TestBackendOps::rms_norm() {
    FETCH_BACKEND(be);
    QFETCH(int, n_rows);
    QFETCH(int, n);
    QFETCH(bool, in_place);
    const float eps = 1e-5f;
    const auto x = gaussian(static_cast<size_t>(n_rows) * n, 11, 3.0f, 0.5f);  // [n_rows, n]
    const auto w = gaussian(static_cast<size_t>(n), 12);                       // [n]
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
    const struct {
        int n_tokens, n_head, head_dim, n_rot;
        float base;
    } shapes[] = {{1, 9, 64, 64, 10000.0f},  {5, 3, 64, 64, 100000.0f}, {33, 4, 128, 128, 500000.0f},
                  {7, 2, 128, 64, 10000.0f}, {3, 2, 80, 40, 10000.0f},  {40, 9, 64, 64, 10000.0f}};
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
    std::vector<int32_t> pos(static_cast<size_t>(n_tokens));                         // [n_tokens]
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
    const struct {
        int n_rows, n_cols;
        float scale;
    } shapes[] = {{1, 10, 1.0f}, {3, 7, 2.0f}, {17, 100, 5.0f}, {2, 1000, 40.0f}, {4, 49152, 3.0f}};
    for (const char* b : kBackends)
        for (const auto& s : shapes)
            QTest::addRow("%s/%dx%d/x%g", b, s.n_rows, s.n_cols, double(s.scale))
                << QString(b) << s.n_rows << s.n_cols << s.scale;
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
                        DType::I8_ROW, DType::I4_G128, DType::I4_G64, DType::NF4, DType::FP4, DType::NF4_DQ})
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
    // [n_vocab, rb]; NF4_DQ whole (its absmax groups of 256 blocks run across rows, then its tail)
    std::vector<uint8_t> table(tensor_bytes(t, n_in, n_vocab));
    std::vector<float> whole;  // NF4_DQ decoded whole: [n_vocab, n_in]
    if (t == DType::NF4_DQ) {
        cpu::quantize_nf4_dq(src.data(), n_in, n_vocab, table.data());
        whole.resize(src.size());
        cpu::dequantize_nf4_dq(table.data(), n_in, n_vocab, whole.data());
    } else {
        for (int r = 0; r < n_vocab; ++r)
            cpu::quantize_row(t, &src[static_cast<size_t>(r) * n_in], &table[r * rb], n_in);
    }
    std::vector<int32_t> ids(static_cast<size_t>(n_tokens));  // [n_tokens]
    for (int i = 0; i < n_tokens; ++i) ids[i] = (i * 37 + 5) % n_vocab;
    ids[0] = n_vocab - 1;
    ids[n_tokens - 1] = 0;
    std::vector<double> ref(static_cast<size_t>(n_tokens) * n_in);
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int i = 0; i < n_tokens; ++i) {
        if (t == DType::F32) std::copy_n(&src[static_cast<size_t>(ids[i]) * n_in], n_in, row.begin());
        else if (t == DType::NF4_DQ)
            std::copy_n(&whole[static_cast<size_t>(ids[i]) * n_in], n_in, row.begin());
        else
            cpu::dequantize_row(t, &table[ids[i] * rb], row.data(), n_in);
        std::copy(row.begin(), row.end(), ref.begin() + static_cast<ptrdiff_t>(i) * n_in);
    }
    DeviceBuffer dt(be, table), dids(be, ids), dout(be, nullptr, ref.size() * sizeof(float));
    be->embedding(WeightView{t, dt.as<void>(), n_in, n_vocab}, dids.as<int32_t>(), n_tokens, dout.as<float>());
    check_error(dout.read<float>(), ref, tol_for(backend, 1e-7, 1e-6));
}

// ---------------------------------------------------------------- matmul

void TestBackendOps::matmul_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    // n_in 576 (SmolLM2-135M's n_embd, 4.5 x 128) for the types whose blocks divide it
    const struct {
        int n_tokens, n_in, n_out;
    } shapes[] = {{1, 256, 64}, {5, 512, 33}, {3, 1024, 96}, {70, 256, 40}, {1, 576, 52}, {9, 576, 41}};
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
    std::vector<uint8_t> w(rb * n_out);                        // [n_out, rb]
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
        QFAIL(qPrintable(
            QString("output %1: got %2, reference %3, bound %4").arg(wi).arg(y[wi]).arg(ref[wi]).arg(bound[wi])));
}

// ---------------------------------------------------------------- bitsandbytes' formats

// NF4 / FP4 / NF4_DQ (code books, blocks of 64; NF4_DQ's absmax double-quantized across the
// tensor) and LLM.int8() (I8_LLM at several outlier thresholds) on every backend, against the
// product of the decoded weights with the float activations in double. Bounds:
//  - NF4 / FP4 / NF4_DQ keep float activations: the scalar kernel is exact up to float
//    accumulation. The AVX2 kernel rounds activations to int16 per block of 64 (off by at most
//    amax / 65534 each) and the code book to int16 (code * 16384, within 2^-15 of each code
//    value, times the block's absmax; FP4's * 16320 are exact).
//  - I8_LLM: activations above the threshold are exact (the bound has no term for them, so a
//    kernel that quantized them fails); the rest are rounded per token to amax / 127 steps
//    (amax over the small ones only): each off by at most amax / 254.
//  - CUDA: NF4 / FP4 / NF4_DQ of more than one token go through cuBLAS with fp16 activations
//    and fp16 weights (each within 2^-11 relative: |x| * 2^-10 covers both, as in matmul).
void TestBackendOps::matmul_bnb_data() {
    QTest::addColumn<QString>("backend");
    QTest::addColumn<int>("type");
    QTest::addColumn<float>("threshold");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    const struct {
        int n_tokens, n_in, n_out;
    } shapes[] = {{1, 256, 64}, {5, 512, 33}, {3, 1024, 96}, {70, 256, 40}, {1, 576, 52}, {9, 576, 41}, {4, 1536, 23}};
    const struct {
        DType t;
        float threshold;
    } types[] = {{DType::NF4, 0.0f},    {DType::FP4, 0.0f},    {DType::NF4_DQ, 0.0f},
                 {DType::I8_LLM, 6.0f}, {DType::I8_LLM, 2.5f}, {DType::I8_LLM, INFINITY}};
    for (const char* b : kBackends)
        for (const auto& ty : types)
            for (const auto& s : shapes)
                QTest::addRow("%s/%s%s/%dx%dx%d", b, dtype_name(ty.t).data(),
                              ty.t == DType::I8_LLM ? qPrintable(QString("@%1").arg(double(ty.threshold))) : "",
                              s.n_tokens, s.n_in, s.n_out)
                    << QString(b) << int(ty.t) << ty.threshold << s.n_tokens << s.n_in << s.n_out;
}

void TestBackendOps::matmul_bnb() {
    FETCH_BACKEND(be);
    QFETCH(int, type);
    QFETCH(float, threshold);
    QFETCH(int, n_tokens);
    QFETCH(int, n_in);
    QFETCH(int, n_out);
    const auto t = static_cast<DType>(type);
    if (!be->supports(t)) QSKIP("weight type not supported by this backend");
    const auto src = gaussian(static_cast<size_t>(n_out) * n_in, 191 + type, 0.05f, 0.002f);  // [n_out, n_in]
    std::vector<uint8_t> w(tensor_bytes(t, n_in, n_out));  // the whole tensor (NF4_DQ: rows + tail)
    std::vector<float> wd(src.size());                     // [n_out, n_in] decoded
    const size_t rb = row_bytes(t, n_in);
    if (t == DType::NF4_DQ) {
        cpu::quantize_nf4_dq(src.data(), n_in, n_out, w.data());
        cpu::dequantize_nf4_dq(w.data(), n_in, n_out, wd.data());
    } else {
        for (int o = 0; o < n_out; ++o) {
            const float* so = &src[static_cast<size_t>(o) * n_in];
            if (t == DType::I8_LLM) cpu::quantize_llm_int8_row(so, n_in, threshold, &w[o * rb]);
            else
                cpu::quantize_row(t, so, &w[o * rb], n_in);
            cpu::dequantize_row(t, &w[o * rb], &wd[static_cast<size_t>(o) * n_in], n_in);
        }
    }
    auto x = gaussian(static_cast<size_t>(n_tokens) * n_in, 192, 1.5f);  // [n_tokens, n_in]
    for (int tk = 0; tk < n_tokens; ++tk)  // outlier features, as a residual stream has them
        for (int c : {3, 70, n_in - 5}) x[static_cast<size_t>(tk) * n_in + c] = (c == 70 ? -300.0f : 40.0f) * (tk + 1);
    const bool avx2 = backend == "avx2";
    // per-element activation error e[t, i], and per-element weight error ew[o, i] (AVX2 code rounding)
    std::vector<double> e(x.size(), 0.0), ew(wd.size(), 0.0);
    for (int tk = 0; tk < n_tokens; ++tk) {
        const float* xt = &x[static_cast<size_t>(tk) * n_in];
        if (t == DType::I8_LLM) {
            double amax = 0;
            for (int i = 0; i < n_in; ++i)
                if (std::fabs(xt[i]) <= threshold) amax = std::max(amax, double(std::fabs(xt[i])));
            for (int i = 0; i < n_in; ++i)
                if (std::fabs(xt[i]) <= threshold) e[static_cast<size_t>(tk) * n_in + i] = amax / 254.0;
        } else if (!is_cpu(backend)) {
            for (int i = 0; i < n_in; ++i) e[static_cast<size_t>(tk) * n_in + i] = std::fabs(xt[i]) * 0x1p-10;
        } else if (avx2) {
            for (int b0 = 0; b0 < n_in; b0 += 64) {
                double amax = 0;
                for (int i = b0; i < b0 + 64; ++i) amax = std::max(amax, double(std::fabs(xt[i])));
                for (int i = b0; i < b0 + 64; ++i) e[static_cast<size_t>(tk) * n_in + i] = amax / 65534.0;
            }
        }
    }
    if (avx2 && t != DType::I8_LLM)
        for (int o = 0; o < n_out; ++o)
            for (int b0 = 0; b0 < n_in; b0 += 64) {
                double amax = 0;  // the block's decoded absmax
                for (int i = b0; i < b0 + 64; ++i) amax = std::max(amax, double(std::fabs(wd[size_t(o) * n_in + i])));
                for (int i = b0; i < b0 + 64; ++i) ew[size_t(o) * n_in + i] = amax * 0x1p-15;
            }
    std::vector<double> ref(static_cast<size_t>(n_tokens) * n_out), bound(ref.size());
    for (int tk = 0; tk < n_tokens; ++tk)
        for (int o = 0; o < n_out; ++o) {
            double s = 0, sabs = 0, eb = 0;
            for (int i = 0; i < n_in; ++i) {
                const size_t wi = static_cast<size_t>(o) * n_in + i, xi = static_cast<size_t>(tk) * n_in + i;
                s += wd[wi] * double(x[xi]);
                sabs += std::fabs(wd[wi] * double(x[xi]));
                eb += std::fabs(wd[wi]) * e[xi] + ew[wi] * std::fabs(x[xi]) + ew[wi] * e[xi];
            }
            ref[static_cast<size_t>(tk) * n_out + o] = s;
            bound[static_cast<size_t>(tk) * n_out + o] = eb + sabs * 1e-5 + 1e-6;
        }
    DeviceBuffer dw(be, w), dx(be, x), dy(be, nullptr, ref.size() * sizeof(float));
    be->matmul(WeightView{t, dw.as<void>(), n_in, n_out}, dx.as<float>(), dy.as<float>(), n_tokens);
    const auto y = dy.read<float>();
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < y.size(); ++i) {
        const double r = std::isfinite(y[i]) ? std::fabs(y[i] - ref[i]) / bound[i] : INFINITY;
        if (!(r <= worst)) worst = r, wi = i;
    }
    if (!(worst <= 1.0))
        QFAIL(qPrintable(
            QString("output %1: got %2, reference %3, bound %4").arg(wi).arg(y[wi]).arg(ref[wi]).arg(bound[wi])));
}

QTEST_GUILESS_MAIN(TestBackendOps)
#include "tst_backend_ops.moc"
