// ctest-labels: kernels
// The CUDA backend's block decoders (kernels/cuda/device_blocks.cuh, __host__ __device__ for
// this purpose) run on the CPU against the CPU's reference decoders (kernels/cpu/
// quant_formats*.cpp, which define every layout): every 32-element item of every row of
// random weights in each quantized type, value for value, and the code books of the
// bitsandbytes formats entry for entry. The GPU's GEMV, dequantize and embedding kernels read
// weights only through these decoders, so the bit layouts they assume are checked on every
// machine that has the CUDA toolkit's headers, GPU or not; without the headers it skips.
// (The kernels around the decoders, the device gather of in_perm and LLM.int8()'s matmul run
// only on a GPU: tst_cuda_backend.)
// kernels headers first: Qt defines `slots` as a macro.
#include "kernels/cpu/quant_formats.h"
#include "kernels/dtype.h"

#if __has_include(<cuda_fp16.h>)
#define KVS_HAVE_CUDA_HEADERS 1
#include "kernels/cuda/device_blocks.cuh"
#endif

#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace kvs;

#ifdef KVS_HAVE_CUDA_HEADERS
namespace {

// Rows [0, w.n_out) of w decoded item by item as the GPU kernels do; out [n_out, n_in].
template <DType T>
void decode_rows(const cuda::DevWeight& w, float* out) {
    const int n_items = static_cast<int>(w.n_in / cuda::kItem);
    for (int64_t r = 0; r < w.n_out; ++r)
        for (int it = 0; it < n_items; ++it) cuda::dequant_item<T>(w, r, it, out + r * w.n_in + it * cuda::kItem);
}

// false for a type without a device decoder.
bool decode_on_host(DType t, const cuda::DevWeight& w, float* out) {
    switch (t) {
        case DType::Q4_0: decode_rows<DType::Q4_0>(w, out); return true;
        case DType::Q4_1: decode_rows<DType::Q4_1>(w, out); return true;
        case DType::Q5_0: decode_rows<DType::Q5_0>(w, out); return true;
        case DType::Q5_1: decode_rows<DType::Q5_1>(w, out); return true;
        case DType::Q8_0: decode_rows<DType::Q8_0>(w, out); return true;
        case DType::Q4_K: decode_rows<DType::Q4_K>(w, out); return true;
        case DType::Q5_K: decode_rows<DType::Q5_K>(w, out); return true;
        case DType::Q6_K: decode_rows<DType::Q6_K>(w, out); return true;
        case DType::I4_G128: decode_rows<DType::I4_G128>(w, out); return true;
        case DType::I4_G64: decode_rows<DType::I4_G64>(w, out); return true;
        case DType::NF4: decode_rows<DType::NF4>(w, out); return true;
        case DType::FP4: decode_rows<DType::FP4>(w, out); return true;
        case DType::NF4_DQ: decode_rows<DType::NF4_DQ>(w, out); return true;
        case DType::I8_ROW: decode_rows<DType::I8_ROW>(w, out); return true;
        case DType::I8_LLM: decode_rows<DType::I8_LLM>(w, out); return true;
        default: return false;
    }
}

}  // namespace
#endif

class TestCudaDecoders : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void codeBooks();
    void decoders_data();
    void decoders();
};

// Bit for bit: the device tables were typed from the CPU's.
void TestCudaDecoders::codeBooks() {
#ifndef KVS_HAVE_CUDA_HEADERS
    QSKIP("built without the CUDA toolkit's headers (cuda_fp16.h): the device decoders cannot be compiled here");
#else
    const float* nf4 = cpu::bnb_code_book(DType::NF4);
    const float* fp4 = cpu::bnb_code_book(DType::FP4);
    for (int i = 0; i < 16; ++i) {
        const float dn = cuda::nf4_code(i), df = cuda::fp4_code(i);
        QVERIFY2(std::memcmp(&dn, &nf4[i], sizeof(float)) == 0, qPrintable(QString("NF4 code %1").arg(i)));
        QVERIFY2(std::memcmp(&df, &fp4[i], sizeof(float)) == 0, qPrintable(QString("FP4 code %1").arg(i)));
    }
    const float* map = cpu::dynamic_map8();
    for (int i = 0; i < 256; ++i) {
        const float d = cuda::dynamic_map8(i);
        QVERIFY2(
            std::memcmp(&d, &map[i], sizeof(float)) == 0,
            qPrintable(
                QString("dynamic map entry %1: device %2, CPU %3").arg(i).arg(d, 0, 'g', 9).arg(map[i], 0, 'g', 9)));
    }
#endif
}

void TestCudaDecoders::decoders_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0,   DType::Q5_1,    DType::Q8_0,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::I4_G128, DType::I4_G64,
                           DType::NF4,  DType::FP4,  DType::NF4_DQ, DType::I8_ROW,  DType::I8_LLM};
    for (DType t : types) {
        const std::string name(dtype_name(t));
        QTest::newRow((name + " 512 x 19").c_str()) << int(t) << 512 << 19;
        if (576 % dtype_info(t).block_size == 0) QTest::newRow((name + " 576 x 70").c_str()) << int(t) << 576 << 70;
    }
    // 1,000 blocks of 64: the tail's scale groups of 256 blocks begin mid-row, the last is partial
    QTest::newRow("NF4_DQ 3200 x 20, 4 scale groups") << int(DType::NF4_DQ) << 3200 << 20;
}

// Random weights (with a zero row and a zero block) encoded by the CPU, decoded by the CPU and
// by the device decoders on the host: the same floats, element for element.
void TestCudaDecoders::decoders() {
#ifndef KVS_HAVE_CUDA_HEADERS
    QSKIP("built without the CUDA toolkit's headers (cuda_fp16.h): the device decoders cannot be compiled here");
#else
    QFETCH(int, dtype);
    QFETCH(int, n_in);
    QFETCH(int, n_out);
    const auto t = static_cast<DType>(dtype);
    std::mt19937 rng(7 + static_cast<uint32_t>(dtype));
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> w_f(static_cast<size_t>(n_out) * n_in);  // [n_out, n_in]
    for (auto& v : w_f) v = nd(rng);
    for (int i = 0; i < n_in; ++i) w_f[static_cast<size_t>(n_in) + i] = 0.0f;    // row 1: all zero
    for (int i = 0; i < 64; ++i) w_f[static_cast<size_t>(2 * n_in) + i] = 0.0f;  // row 2: a zero block
    w_f[3] = 0.9f;                                                               // an outlier weight
    std::vector<uint8_t> w_q(tensor_bytes(t, n_in, n_out));                      // [n_out, row_bytes] (+ NF4_DQ's tail)
    std::vector<float> want(w_f.size());                                         // [n_out, n_in]
    const size_t rb = row_bytes(t, n_in);
    if (t == DType::NF4_DQ) {
        cpu::quantize_nf4_dq(w_f.data(), n_in, n_out, w_q.data());
        cpu::dequantize_nf4_dq(w_q.data(), n_in, n_out, want.data());
    } else {
        for (int o = 0; o < n_out; ++o) {
            const float* src = w_f.data() + static_cast<size_t>(o) * n_in;
            if (t == DType::I8_LLM) cpu::quantize_llm_int8_row(src, n_in, cpu::kLlmInt8Threshold, &w_q[o * rb]);
            else
                cpu::quantize_row(t, src, &w_q[o * rb], n_in);
            cpu::dequantize_row(t, &w_q[o * rb], want.data() + static_cast<size_t>(o) * n_in, n_in);
        }
    }
    std::vector<float> got(w_f.size(), NAN);  // [n_out, n_in]
    const cuda::DevWeight w{w_q.data(), rb, n_in, n_out};
    QVERIFY2(decode_on_host(t, w, got.data()), "no device decoder for this type");
    for (size_t i = 0; i < want.size(); ++i)
        if (!(got[i] == want[i]))
            QFAIL(qPrintable(QString("row %1, element %2: device decoder %3, CPU reference %4")
                                 .arg(i / static_cast<size_t>(n_in))
                                 .arg(i % static_cast<size_t>(n_in))
                                 .arg(got[i], 0, 'g', 9)
                                 .arg(want[i], 0, 'g', 9)));
#endif
}

QTEST_GUILESS_MAIN(TestCudaDecoders)
#include "tst_cuda_decoders.moc"
