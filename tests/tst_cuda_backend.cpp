// ctest-labels: kernels
// The CUDA backend loader and, where a GPU exists, a quick check of the CUDA kernels.
// Without a GPU (or driver, or library) make_cuda_backend() must return nullptr with a
// specific reason, make_backend() must fall back to the CPU and say why, and the
// library's entry point must report a missing driver instead of crashing. With a GPU,
// matmul (GEMV and cuBLAS paths, every weight type: GGML's, KV Scope's I4_G128 / I4_G64 /
// I8_ROW, bitsandbytes' NF4 / FP4 / NF4_DQ with its tail, GPTQ act-order input permutations),
// rms_norm and paged_attention are compared with references computed here in double from the
// CPU's reference decoders (matmul, rms_norm) or with the CPU scalar backend (paged_attention,
// LLM.int8()'s matmul, whose activations are quantized: cpu::llm_int8_dot); the full per-op
// tables are tst_backend_ops and tst_attention_ops. The block decoders themselves are also
// checked without a GPU: tst_cuda_decoders.
// kernels headers first: Qt defines `slots` as a macro.
#include "engine/quant/quantize.h"
#include "engine/runtime/weight_support.h"
#include "kernels/backend.h"
#include "kernels/cpu/quant_formats.h"

#include <dlfcn.h>

#include <QtTest>

#include "tests/support/device_buffer.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace kvs;

namespace {

// The CUDA backend, created once per process; nullptr and *why where there is none.
Backend* gpu_backend(QString* why) {
    static std::string reason;
    static std::unique_ptr<Backend> backend = make_cuda_backend(&reason);
    *why = QString::fromStdString(reason);
    return backend.get();
}

// Device copy of a host vector, read back with read().
using kvs::test::DeviceBuffer;

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// ||got - want|| / ||want||
double normalized_error(const std::vector<float>& got, const std::vector<double>& want) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

bool driver_present() { return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr; }

QString built_library_path() { return QCoreApplication::applicationDirPath() + "/../lib/libkvscope_cuda.so"; }

}  // namespace

class TestCudaBackend : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void loaderExplainsWhy();
    void makeBackendNotes_data();
    void makeBackendNotes();
    void unknownBackendIsAnError();
    void entryPointReportsMissingDriver();
    void matmul_data();
    void matmul();
    void llmInt8_data();
    void llmInt8();
    void embedding_data();
    void embedding();
    void modelLogits_data();
    void modelLogits();
    void rmsNorm_data();
    void rmsNorm();
    void pagedAttention_data();
    void pagedAttention();
};

void TestCudaBackend::loaderExplainsWhy() {
    std::string why = "unchanged";
    auto b = make_cuda_backend(&why);
    if (b) {
        QVERIFY2(b->name().rfind("cuda:", 0) == 0, b->name().c_str());
        QVERIFY(!b->host_visible());
        return;
    }
    QVERIFY(!why.empty());
    QVERIFY(why != "unchanged");
    // One of the specific reasons: not built/installed, no driver, driver too old, no GPU,
    // GPU too old, a dependency (cuBLAS) that did not load.
    const QString w = QString::fromStdString(why);
    const bool specific = w.contains("libkvscope_cuda.so") || w.contains("libcuda.so.1") || w.contains("driver") ||
                          w.contains("GPU") || w.contains("cannot load") || w.contains("cuBLAS");
    QVERIFY2(specific, qPrintable(w));
    if (QFileInfo::exists(built_library_path()) && !driver_present())
        QCOMPARE(why, std::string("no NVIDIA driver (libcuda.so.1 not found)"));
    // Asking again gives the same answer (the library is loaded once).
    std::string again;
    QVERIFY(!make_cuda_backend(&again));
    QCOMPARE(again, why);
}

void TestCudaBackend::makeBackendNotes_data() {
    QTest::addColumn<QString>("requested");
    QTest::addColumn<int>("n_threads");
    QTest::newRow("auto, 1 thread") << "auto" << 1;
    QTest::newRow("cpu, 2 threads") << "cpu" << 2;
    QTest::newRow("cuda, 2 threads") << "cuda" << 2;
}

void TestCudaBackend::makeBackendNotes() {
    QFETCH(QString, requested);
    QFETCH(int, n_threads);
    std::string note;
    auto b = make_backend(requested.toStdString(), n_threads, &note);
    QVERIFY(b);
    QString why;
    Backend* gpu = gpu_backend(&why);
    if (gpu && requested != "cpu") {
        QCOMPARE(note, "backend: " + b->name());
        QVERIFY(b->name().rfind("cuda:", 0) == 0);
        return;
    }
    QVERIFY2(b->name().rfind("cpu-", 0) == 0, b->name().c_str());
    QCOMPARE(b->n_threads(), n_threads);
    std::string want =
        "backend: " + b->name() + " (" + std::to_string(n_threads) + (n_threads == 1 ? " thread)" : " threads)");
    if (requested == "auto") want += "; CUDA not used: " + why.toStdString();
    if (requested == "cuda") want += "; CUDA requested but not available: " + why.toStdString();
    QCOMPARE(note, want);
}

void TestCudaBackend::unknownBackendIsAnError() {
    std::string note;
    auto b = make_backend("gpu", 1, &note);
    QVERIFY(!b);
    QCOMPARE(note, std::string("unknown backend 'gpu': expected auto, cpu or cuda"));
}

// The library itself, called without the loader's driver check: with no driver it must
// return nullptr with a reason instead of crashing, and respect the buffer length.
void TestCudaBackend::entryPointReportsMissingDriver() {
    const QString path = built_library_path();
    if (!QFileInfo::exists(path)) QSKIP("libkvscope_cuda.so is not built in this tree (KVSCOPE_CUDA off)");
    void* lib = dlopen(path.toUtf8().constData(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) QSKIP(qPrintable(QString("libkvscope_cuda.so does not load here: ") + dlerror()));
    using Fn = Backend* (*)(char*, size_t);
    auto create = reinterpret_cast<Fn>(dlsym(lib, "kvscope_create_cuda_backend"));
    QVERIFY(create);
    char err[256] = "";
    std::unique_ptr<Backend> b(create(err, sizeof err));
    if (b) {
        QVERIFY(driver_present());
        QVERIFY(b->name().rfind("cuda:", 0) == 0);
        return;
    }
    QVERIFY2(err[0] != '\0', "nullptr without a reason");
    if (!driver_present()) QVERIFY2(QString(err).contains("driver"), err);
    char small[8];
    std::memset(small, 'x', sizeof small);
    QVERIFY(!std::unique_ptr<Backend>(create(small, sizeof small)));
    QCOMPARE(std::strlen(small), sizeof small - 1);  // cut and NUL-terminated
    QCOMPARE(std::string(small), std::string(err).substr(0, sizeof small - 1));
}

// ---------------------------------------------------------------- GPU rows

namespace {

// The weights of [n_out, n_in] floats w_f in type t as the model file holds them (NF4_DQ: the
// whole tensor with its tail), and their decoding by the CPU reference.
std::vector<uint8_t> encode_weights(DType t, const std::vector<float>& w_f, int n_in, int n_out,
                                    std::vector<float>* w_deq) {
    std::vector<uint8_t> w_q(tensor_bytes(t, n_in, n_out));  // [n_out, rb] (+ tail)
    w_deq->resize(w_f.size());                               // [n_out, n_in]
    if (t == DType::NF4_DQ) {
        cpu::quantize_nf4_dq(w_f.data(), n_in, n_out, w_q.data());
        cpu::dequantize_nf4_dq(w_q.data(), n_in, n_out, w_deq->data());
        return w_q;
    }
    const size_t rb = row_bytes(t, n_in);
    for (int o = 0; o < n_out; ++o) {
        cpu::quantize_row(t, w_f.data() + static_cast<size_t>(o) * n_in, w_q.data() + o * rb, n_in);
        cpu::dequantize_row(t, w_q.data() + o * rb, w_deq->data() + static_cast<size_t>(o) * n_in, n_in);
    }
    return w_q;
}

}  // namespace

void TestCudaBackend::matmul_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<bool>("permuted");
    QTest::addColumn<double>("tolerance");
    QTest::addColumn<float>("x_max");  // activations uniform in [-x_max, x_max]
    const DType types[] = {DType::F32,    DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,  DType::Q5_0,
                           DType::Q5_1,   DType::Q8_0, DType::Q4_K, DType::Q5_K,   DType::Q6_K,  DType::I4_G128,
                           DType::I4_G64, DType::NF4,  DType::FP4,  DType::NF4_DQ, DType::I8_ROW};
    for (DType t : types) {
        const std::string name(dtype_name(t));
        // GEMV: float math on the exactly dequantized weights
        QTest::newRow((name + " gemv").c_str()) << int(t) << 512 << 67 << 1 << false << 1e-5 << 1.0f;
        // cuBLAS: fp16 activations (and fp16 weights), fp32 sums; F32 weights stay fp32
        // 72 items of 32 per row: each lane of the GEMV's warp takes 2 or 3 (n_in past one warp stride, not a multiple)
        QTest::newRow((name + " gemv 2304 x 37").c_str()) << int(t) << 2304 << 37 << 1 << false << 1e-5 << 1.0f;
        QTest::newRow((name + " gemm").c_str())
            << int(t) << 512 << 67 << 7 << false << (t == DType::F32 ? 1e-5 : 3e-3) << 1.0f;
    }
    // More than one 2^24-element chunk of dequantized weights per GEMM.
    QTest::newRow("Q4_0 gemm chunked") << int(DType::Q4_0) << 4096 << 4500 << 3 << false << 3e-3 << 1.0f;
    // Rows of 576 (SmolLM2's n_embd): 9 blocks of 64 per row, so NF4_DQ's groups of 256 blocks
    // (scale2 in the tail) begin inside rows, and I4_G64 is the group size that divides the row.
    QTest::newRow("NF4_DQ gemv 576 x 67, 3 scale groups")
        << int(DType::NF4_DQ) << 576 << 67 << 1 << false << 1e-5 << 1.0f;
    QTest::newRow("NF4_DQ gemm 576 x 67, 3 scale groups")
        << int(DType::NF4_DQ) << 576 << 67 << 9 << false << 3e-3 << 1.0f;
    QTest::newRow("NF4_DQ gemm chunked") << int(DType::NF4_DQ) << 4096 << 4500 << 2 << false << 3e-3 << 1.0f;
    QTest::newRow("I4_G64 gemv 576") << int(DType::I4_G64) << 576 << 67 << 1 << false << 1e-5 << 1.0f;
    // GPTQ act-order (WeightView::in_perm): the activations gathered on the device first.
    QTest::newRow("I4_G128 gemv in_perm") << int(DType::I4_G128) << 512 << 67 << 1 << true << 1e-5 << 1.0f;
    QTest::newRow("I4_G128 gemm in_perm") << int(DType::I4_G128) << 512 << 67 << 7 << true << 3e-3 << 1.0f;
    QTest::newRow("I4_G64 gemv in_perm 576") << int(DType::I4_G64) << 576 << 67 << 1 << true << 1e-5 << 1.0f;
    QTest::newRow("I4_G64 gemm in_perm 576") << int(DType::I4_G64) << 576 << 67 << 9 << true << 3e-3 << 1.0f;
    // 300,001 rows: 75,001 GEMV thread blocks (more than 65,535: the grid's x dimension, not y or z),
    // 1,172 NF4_DQ scale groups; the GEMM dequantizes them in two chunks of 262,144 rows and fewer
    QTest::newRow("NF4_DQ gemv 64 x 300001") << int(DType::NF4_DQ) << 64 << 300001 << 1 << false << 1e-5 << 1.0f;
    QTest::newRow("NF4_DQ gemm 64 x 300001, 2 chunks")
        << int(DType::NF4_DQ) << 64 << 300001 << 3 << false << 3e-3 << 1.0f;
    // The prompt GEMM converts activations to fp16 (largest finite 65504): SmolLM2-135M's largest
    // matmul input measured on the CPU is 3193 (ffn_down, 512 tokens of GPL-3), Gemma 3 270M's 285.
    QTest::newRow("I4_G64 gemm 576, activations up to 3200")
        << int(DType::I4_G64) << 576 << 67 << 9 << false << 3e-3 << 3200.0f;
    QTest::newRow("Q4_1 gemm in_perm (GPTQ g32)") << int(DType::Q4_1) << 512 << 67 << 7 << true << 3e-3 << 1.0f;
}

void TestCudaBackend::matmul() {
    QFETCH(int, dtype);
    QFETCH(int, n_in);
    QFETCH(int, n_out);
    QFETCH(int, n_tokens);
    QFETCH(bool, permuted);
    QFETCH(double, tolerance);
    QFETCH(float, x_max);
    QString why;
    Backend* gpu = gpu_backend(&why);
    if (!gpu) QSKIP(qPrintable("no CUDA backend: " + why));
    const auto t = static_cast<DType>(dtype);
    QVERIFY(gpu->supports(t));
    if (permuted) QVERIFY(gpu->supports_input_permutation());
    const std::vector<float> w_f = random_floats(static_cast<size_t>(n_out) * n_in, 11);  // [n_out, n_in]
    std::vector<float> w_deq;                                                             // [n_out, n_in]
    const std::vector<uint8_t> w_q = encode_weights(t, w_f, n_in, n_out, &w_deq);
    const std::vector<float> x =
        random_floats(static_cast<size_t>(n_tokens) * n_in, 12, -x_max, x_max);  // [n_tokens, n_in]
    std::vector<int32_t> perm(static_cast<size_t>(n_in));  // [n_in] stored column p is input column perm[p]
    for (int i = 0; i < n_in; ++i) perm[static_cast<size_t>(i)] = i;
    if (permuted) std::shuffle(perm.begin(), perm.end(), std::mt19937(13));
    std::vector<double> want(static_cast<size_t>(n_tokens) * n_out);  // [n_tokens, n_out]
    for (int tk = 0; tk < n_tokens; ++tk)
        for (int o = 0; o < n_out; ++o) {
            double s = 0.0;
            for (int p = 0; p < n_in; ++p)
                s += static_cast<double>(w_deq[static_cast<size_t>(o) * n_in + p]) *
                     x[static_cast<size_t>(tk) * n_in + static_cast<size_t>(perm[static_cast<size_t>(p)])];
            want[static_cast<size_t>(tk) * n_out + o] = s;
        }
    DeviceBuffer d_w(gpu, w_q), d_x(gpu, x), d_y(gpu, nullptr, want.size() * sizeof(float)), d_perm(gpu, perm);
    WeightView view{t, d_w.as<void>(), n_in, n_out};
    if (permuted) view.in_perm = d_perm.as<int32_t>();
    gpu->matmul(view, d_x.as<float>(), d_y.as<float>(), n_tokens);
    const double err = normalized_error(d_y.read<float>(), want);
    QVERIFY2(err < tolerance, qPrintable(QString("normalized error %1 >= %2").arg(err).arg(tolerance)));
    // The input is read as given: a permuted weight multiplied without its permutation differs.
    if (permuted) {
        gpu->matmul(WeightView{t, d_w.as<void>(), n_in, n_out}, d_x.as<float>(), d_y.as<float>(), n_tokens);
        QVERIFY(normalized_error(d_y.read<float>(), want) > 0.1);
    }
}

void TestCudaBackend::llmInt8_data() {
    QTest::addColumn<float>("threshold");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<bool>("permuted");
    QTest::newRow("threshold 6, gemv") << 6.0f << 576 << 67 << 1 << false;
    QTest::newRow("threshold 6, 9 tokens") << 6.0f << 576 << 67 << 9 << false;
    QTest::newRow("threshold 2.5, 5 tokens") << 2.5f << 1536 << 40 << 5 << false;
    QTest::newRow("no outliers (inf), 3 tokens") << float(INFINITY) << 512 << 33 << 3 << false;
    QTest::newRow("threshold 6, 4 tokens, in_perm") << 6.0f << 576 << 67 << 4 << true;
    // the kernel's tokens run along the grid's y dimension, at most 65,535: a second round
    QTest::newRow("threshold 6, 70000 tokens (past 65,535 grid rows)") << 6.0f << 128 << 5 << 70000 << false;
}

// LLM.int8() quantizes each token's activations around its outliers, so the reference is the
// CPU's scalar definition (cpu::llm_int8_dot) rather than a float product; the integer part is
// the same on both, only the float sums' order differs.
void TestCudaBackend::llmInt8() {
    QFETCH(float, threshold);
    QFETCH(int, n_in);
    QFETCH(int, n_out);
    QFETCH(int, n_tokens);
    QFETCH(bool, permuted);
    QString why;
    Backend* gpu = gpu_backend(&why);
    if (!gpu) QSKIP(qPrintable("no CUDA backend: " + why));
    QVERIFY(gpu->supports(DType::I8_LLM));
    const size_t rb = row_bytes(DType::I8_LLM, n_in);
    const std::vector<float> w_f = random_floats(static_cast<size_t>(n_out) * n_in, 41, -0.1f, 0.1f);  // [n_out, n_in]
    std::vector<uint8_t> w_q(rb * n_out);                                                              // [n_out, rb]
    for (int o = 0; o < n_out; ++o)
        cpu::quantize_llm_int8_row(w_f.data() + static_cast<size_t>(o) * n_in, n_in, threshold, &w_q[o * rb]);
    std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * n_in, 42, -3.0f, 3.0f);  // [n_tokens, n_in]
    for (int tk = 0; tk < n_tokens; ++tk)  // outlier features, as the residual stream has them
        for (int c : {3, 70, n_in - 5}) x[static_cast<size_t>(tk) * n_in + c] = (c == 70 ? -300.0f : 40.0f) * (tk + 1);
    std::vector<int32_t> perm(static_cast<size_t>(n_in));  // [n_in]
    for (int i = 0; i < n_in; ++i) perm[static_cast<size_t>(i)] = i;
    if (permuted) std::shuffle(perm.begin(), perm.end(), std::mt19937(43));
    std::vector<double> want(static_cast<size_t>(n_tokens) * n_out);  // [n_tokens, n_out]
    std::vector<float> xp(static_cast<size_t>(n_in));                 // one token in the stored column order
    for (int tk = 0; tk < n_tokens; ++tk) {
        for (int p = 0; p < n_in; ++p)
            xp[static_cast<size_t>(p)] = x[static_cast<size_t>(tk) * n_in + static_cast<size_t>(perm[size_t(p)])];
        for (int o = 0; o < n_out; ++o)
            want[static_cast<size_t>(tk) * n_out + o] = cpu::llm_int8_dot(&w_q[o * rb], xp.data(), n_in);
    }
    DeviceBuffer d_w(gpu, w_q), d_x(gpu, x), d_y(gpu, nullptr, want.size() * sizeof(float)), d_perm(gpu, perm);
    WeightView view{DType::I8_LLM, d_w.as<void>(), n_in, n_out};
    if (permuted) view.in_perm = d_perm.as<int32_t>();
    gpu->matmul(view, d_x.as<float>(), d_y.as<float>(), n_tokens);
    const double err = normalized_error(d_y.read<float>(), want);
    QVERIFY2(err < 1e-5, qPrintable(QString("normalized error %1 against cpu::llm_int8_dot").arg(err)));
}

void TestCudaBackend::embedding_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_vocab");
    // Qwen2's 151,936-word vocabulary: NF4_DQ's one block per row puts 594 scale groups in the tail
    for (DType t : {DType::NF4_DQ, DType::I8_LLM, DType::Q8_0, DType::I4_G64})
        QTest::newRow((std::string(dtype_name(t)) + " 64 x 151936").c_str()) << int(t) << 64 << 151936;
    // F16 rows of 8192: the table is 2.49 GB, its last rows start past 2^31 bytes
    QTest::newRow("F16 8192 x 151936, rows past 2 GiB") << int(DType::F16) << 8192 << 151936;
}

// Rows gathered by id through the device decoders against the CPU's decoding of the same rows,
// bit for bit (each decoded value is one float product, or NF4_DQ's two unfused steps, on both).
// The ids reach the last row and both sides of NF4_DQ's scale-group boundaries (rows 255 / 256,
// 131071 / 131072, and 151807 / 151808 where the last, partial group of 128 begins).
void TestCudaBackend::embedding() {
    QFETCH(int, dtype);
    QFETCH(int, n_in);
    QFETCH(int, n_vocab);
    QString why;
    Backend* gpu = gpu_backend(&why);
    if (!gpu) QSKIP(qPrintable("no CUDA backend: " + why));
    const auto t = static_cast<DType>(dtype);
    QVERIFY(gpu->supports(t));
    const size_t rb = row_bytes(t, n_in);
    const std::vector<int32_t> ids = {n_vocab - 1, 0,           255,           256,          131071,
                                      131072,      n_vocab / 2, n_vocab - 129, n_vocab - 128};  // [n_tokens]
    const int n_tokens = static_cast<int>(ids.size());
    std::vector<uint8_t> table(tensor_bytes(t, n_in, n_vocab));     // [n_vocab, rb] (+ NF4_DQ's tail)
    std::vector<float> want(static_cast<size_t>(n_tokens) * n_in);  // [n_tokens, n_in]
    if (t == DType::F16) {  // a pattern of finite halves (below 1.0), distinct from row to row
        auto* h = reinterpret_cast<uint16_t*>(table.data());
        for (size_t i = 0; i < table.size() / 2; ++i) h[i] = static_cast<uint16_t>((i * 40503u + i / n_in) & 0xBBFFu);
        for (int k = 0; k < n_tokens; ++k)
            for (int i = 0; i < n_in; ++i)
                want[size_t(k) * n_in + i] = cpu::fp16_to_fp32(h[size_t(ids[size_t(k)]) * n_in + i]);
    } else {
        const std::vector<float> w_f = random_floats(static_cast<size_t>(n_vocab) * n_in, 51, -0.2f, 0.2f);
        std::vector<float> w_deq;  // [n_vocab, n_in]
        if (t == DType::I8_LLM) {
            w_deq.resize(w_f.size());
            for (int r = 0; r < n_vocab; ++r) {
                cpu::quantize_llm_int8_row(&w_f[size_t(r) * n_in], n_in, cpu::kLlmInt8Threshold, &table[r * rb]);
                cpu::dequantize_row(t, &table[r * rb], &w_deq[size_t(r) * n_in], n_in);
            }
        } else {
            table = encode_weights(t, w_f, n_in, n_vocab, &w_deq);
        }
        for (int k = 0; k < n_tokens; ++k)
            std::copy_n(&w_deq[size_t(ids[size_t(k)]) * n_in], n_in, &want[size_t(k) * n_in]);
    }
    DeviceBuffer d_t(gpu, table), d_ids(gpu, ids), d_out(gpu, nullptr, want.size() * sizeof(float));
    gpu->embedding(WeightView{t, d_t.as<void>(), n_in, n_vocab}, d_ids.as<int32_t>(), n_tokens, d_out.as<float>());
    const std::vector<float> got = d_out.read<float>();
    for (size_t i = 0; i < want.size(); ++i)
        if (!(got[i] == want[i]))
            QFAIL(qPrintable(QString("token %1 (row %2), element %3: GPU %4, CPU %5")
                                 .arg(i / size_t(n_in))
                                 .arg(ids[i / size_t(n_in)])
                                 .arg(i % size_t(n_in))
                                 .arg(got[i], 0, 'g', 9)
                                 .arg(want[i], 0, 'g', 9)));
}

void TestCudaBackend::modelLogits_data() {
    QTest::addColumn<QString>("scheme");
    QTest::addColumn<int>("gptq_group");  // 0: the scheme's defaults
    QTest::newRow("int4-rtn (I4_G128)") << "int4-rtn" << 0;
    QTest::newRow("int4-gptq-act g64 (I4_G64, every linear permuted)") << "int4-gptq-act" << 64;
    QTest::newRow("int4-gptq-act g32 (Q4_1, permuted)") << "int4-gptq-act" << 32;
    QTest::newRow("nf4") << "nf4" << 0;
    QTest::newRow("fp4") << "fp4" << 0;
    QTest::newRow("nf4-dq (tail per tensor)") << "nf4-dq" << 0;
    QTest::newRow("int8 (I8_ROW)") << "int8" << 0;
    QTest::newRow("llm-int8") << "llm-int8" << 0;
}

// A tiny model quantized in each scheme runs its 8-token prompt through LlamaForward on the
// GPU: the one upload of the weights (NF4_DQ's tail, act-order's in_perm) and the forward
// pass's matmuls. Reference: the scalar CPU backend's next-token logits of the same variant
// decoded to float ("ref" of it: the CPU's decoders, permutations undone, float activations),
// so only the GPU's fp16 prompt GEMM separates them; LLM.int8(), whose activations are
// quantized by definition, against the CPU running the variant itself. A lost permutation or
// tail is off by about 1 (tst_gptq_checkpoint, tst_bnb).
void TestCudaBackend::modelLogits() {
    QFETCH(QString, scheme);
    QFETCH(int, gptq_group);
    QString why;
    Backend* gpu = gpu_backend(&why);
    if (!gpu) QSKIP(qPrintable("no CUDA backend: " + why));
    test::TinyModelSpec spec;
    spec.n_embd = 128;
    spec.n_ff = 256;
    auto src = test::write_and_load_tiny_gguf(test::output_path("cuda_formats_tiny.gguf"), spec);
    QVERIFY2(src, src.message().c_str());
    const auto parsed = QuantScheme::parse(scheme.toStdString());
    QVERIFY2(parsed, parsed.message().c_str());
    QuantOptions qo;
    for (int i = 0; i < 128; ++i) qo.calibration_tokens.push_back(int32_t((i * 53 + 7) % 280));
    if (gptq_group) {
        qo.gptq = gptq_defaults(parsed.value());
        qo.gptq->group_size = gptq_group;
    }
    auto v = quantize_model(src.value(), parsed.value(), qo);
    QVERIFY2(v, v.message().c_str());
    if (gptq_group) {
        bool permuted = false;
        for (const LayerWeights& L : v.value()->layers) permuted = permuted || L.wq.in_perm || L.w_down.in_perm;
        QVERIFY(permuted);
    }
    const Status supported = check_weight_support(*v.value(), *gpu);  // what an engine on this GPU checks first
    QVERIFY2(supported, supported.message().c_str());
    std::vector<float> cpu;  // [n_vocab]
    if (scheme == "llm-int8") {
        cpu = test::last_logits(v.value());
    } else {
        auto decoded = quantize_model(v.value(), QuantScheme::parse("ref").value());
        QVERIFY2(decoded, decoded.message().c_str());
        cpu = test::last_logits(decoded.value());
    }
    const std::vector<float> got = test::last_logits(v.value(), gpu);
    QVERIFY(!cpu.empty());
    QVERIFY2(!got.empty(), "the forward pass on the GPU failed");
    const double err = normalized_error(got, std::vector<double>(cpu.begin(), cpu.end()));
    qInfo("%s: GPU vs CPU logits, relative L2 difference %.2e", qPrintable(scheme), err);
    QVERIFY2(err < 1e-2, qPrintable(QString("relative difference %1").arg(err)));
}

void TestCudaBackend::rmsNorm_data() {
    QTest::addColumn<int>("n_rows");
    QTest::addColumn<int>("n");
    QTest::addColumn<bool>("in_place");
    QTest::newRow("576 x 3") << 3 << 576 << false;
    QTest::newRow("4096 x 2 in place") << 2 << 4096 << true;
    QTest::newRow("odd 37 x 5") << 5 << 37 << false;
}

void TestCudaBackend::rmsNorm() {
    QFETCH(int, n_rows);
    QFETCH(int, n);
    QFETCH(bool, in_place);
    QString why;
    Backend* gpu = gpu_backend(&why);
    if (!gpu) QSKIP(qPrintable("no CUDA backend: " + why));
    const float eps = 1e-5f;
    const std::vector<float> x = random_floats(static_cast<size_t>(n_rows) * n, 21, -3.0f, 3.0f);  // [n_rows, n]
    const std::vector<float> w = random_floats(static_cast<size_t>(n), 22, 0.5f, 1.5f);            // [n]
    std::vector<double> want(x.size());
    for (int r = 0; r < n_rows; ++r) {
        double ss = 0.0;
        for (int i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) want[r * n + i] = x[r * n + i] * inv * w[i];
    }
    DeviceBuffer d_x(gpu, x), d_w(gpu, w), d_y(gpu, nullptr, x.size() * sizeof(float));
    float* y = in_place ? d_x.as<float>() : d_y.as<float>();
    gpu->rms_norm(d_x.as<float>(), d_w.as<float>(), y, n_rows, n, eps);
    const double err = normalized_error(in_place ? d_x.read<float>() : d_y.read<float>(), want);
    QVERIFY2(err < 5e-6, qPrintable(QString("normalized error %1").arg(err)));
}

void TestCudaBackend::pagedAttention_data() {
    QTest::addColumn<int>("n_head");
    QTest::addColumn<int>("n_kv_head");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("block_size");
    QTest::newRow("smollm2 9/3 x 64, blocks of 16") << 9 << 3 << 64 << 16;
    QTest::newRow("8/8 x 128, blocks of 8") << 8 << 8 << 128 << 8;
    QTest::newRow("4/1 x 80, blocks of 32") << 4 << 1 << 80 << 32;
}

// Two sequences share a shuffled block pool: a prefill chunk of seq 0 (positions
// 30..36) and one decode token of seq 1 (position 70) in one call.
void TestCudaBackend::pagedAttention() {
    QFETCH(int, n_head);
    QFETCH(int, n_kv_head);
    QFETCH(int, head_dim);
    QFETCH(int, block_size);
    QString why;
    Backend* gpu = gpu_backend(&why);
    if (!gpu) QSKIP(qPrintable("no CUDA backend: " + why));
    auto cpu = make_cpu_backend(1, "scalar");
    const int max_blocks = 80 / block_size + 1, n_seqs = 2, n_blocks = n_seqs * max_blocks;
    std::vector<int32_t> tables(static_cast<size_t>(n_seqs) * max_blocks);  // [n_seqs, max_blocks]
    for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>((i * 7 + 3) % n_blocks);
    const std::vector<int32_t> token_seq = {0, 0, 0, 0, 0, 0, 0, 1};          // [n_tokens]
    const std::vector<int32_t> token_pos = {30, 31, 32, 33, 34, 35, 36, 70};  // [n_tokens]
    const int n_tokens = static_cast<int>(token_seq.size());
    const size_t cache_elems = static_cast<size_t>(n_blocks) * block_size * n_kv_head * head_dim;
    std::vector<uint16_t> k_cache(cache_elems), v_cache(cache_elems);  // [n_blocks, block_size, n_kv_head, head_dim]
    const std::vector<float> kf = random_floats(cache_elems, 31), vf = random_floats(cache_elems, 32);
    for (size_t i = 0; i < cache_elems; ++i) {
        k_cache[i] = cpu::fp32_to_fp16(2.0f * kf[i]);
        v_cache[i] = cpu::fp32_to_fp16(vf[i]);
    }
    const std::vector<float> q = random_floats(static_cast<size_t>(n_tokens) * n_head * head_dim, 33);
    std::vector<float> out_cpu(q.size());  // [n_tokens, n_head, head_dim]
    auto run = [&](Backend* b) {
        DeviceBuffer d_q(b, q), d_out(b, nullptr, q.size() * sizeof(float)), d_k(b, k_cache), d_v(b, v_cache),
            d_tab(b, tables), d_seq(b, token_seq), d_pos(b, token_pos);
        PagedAttentionArgs a;
        a.q = d_q.as<float>();
        a.out = d_out.as<float>();
        a.k_cache = d_k.as<uint16_t>();
        a.v_cache = d_v.as<uint16_t>();
        a.block_tables = d_tab.as<int32_t>();
        a.token_seq = d_seq.as<int32_t>();
        a.token_pos = d_pos.as<int32_t>();
        a.n_tokens = n_tokens;
        a.n_seqs = n_seqs;
        a.max_blocks_per_seq = max_blocks;
        a.n_head = n_head;
        a.n_kv_head = n_kv_head;
        a.head_dim = head_dim;
        a.block_size = block_size;
        a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        b->paged_attention(a);
        return d_out.read<float>();
    };
    const std::vector<float> ref = run(cpu.get());
    const std::vector<double> want(ref.begin(), ref.end());
    const double err = normalized_error(run(gpu), want);
    QVERIFY2(err < 1e-5, qPrintable(QString("normalized error %1").arg(err)));
}

QTEST_GUILESS_MAIN(TestCudaBackend)
#include "tst_cuda_backend.moc"
