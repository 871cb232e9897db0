// ctest-labels: kernels
// The CUDA backend's block decoders (kernels/cuda/device_blocks.cuh, __host__ __device__ for
// this purpose) run on the CPU against the CPU's reference decoders (kernels/cpu/
// quant_formats*.cpp, which define every layout): every 32-element item of every row of
// random weights in each quantized type, value for value, and the code books of the
// bitsandbytes formats entry for entry. The GPU's GEMV, dequantize and embedding kernels read
// weights only through these decoders, so the bit layouts they assume are checked on every
// machine that has the CUDA toolkit's headers, GPU or not; without the headers it skips.
// (The kernels around the decoders, the device gather of in_perm and LLM.int8()'s matmul run
// only on a GPU: tst_cuda_backend.) Their index math is checked at sizes a real model has: a
// 151,936-word NF4_DQ table (594 scale groups) and rows whose byte offsets pass 2^31 and 2^32
// (a DevWeight over reserved, mostly untouched address space).
// kernels headers first: Qt defines `slots` as a macro.
#include "kernels/cpu/quant_formats.h"
#include "kernels/dtype.h"

#if __has_include(<cuda_fp16.h>)
#define KVS_HAVE_CUDA_HEADERS 1
#include "kernels/cuda/device_blocks.cuh"
#endif

#include <sys/mman.h>

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
    void offsetsPast4GiB_data();
    void offsetsPast4GiB();
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
    // Qwen2's vocabulary as an NF4_DQ embedding table of one block per row: 594 scale groups,
    // the last partial (151,936 = 593 * 256 + 128)
    QTest::newRow("NF4_DQ 64 x 151936, 594 scale groups") << int(DType::NF4_DQ) << 64 << 151936;
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

void TestCudaDecoders::offsetsPast4GiB_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    // [n_out, n_in] of 4.3-4.5 GB (a 14336- or 16384-wide matrix with 260,000-524,288 rows, the
    // size of a 405B model's embedding table), NF4_DQ with 524,288 scale groups in its tail
    QTest::newRow("Q8_0 16384 x 260000") << int(DType::Q8_0) << 16384 << 260000;
    QTest::newRow("I8_LLM 14336 x 300000") << int(DType::I8_LLM) << 14336 << 300000;
    QTest::newRow("I4_G64 16384 x 480000") << int(DType::I4_G64) << 16384 << 480000;
    QTest::newRow("NF4_DQ 16384 x 524288") << int(DType::NF4_DQ) << 16384 << 524288;
}

// The decoders address row r at r * row_bytes and NF4_DQ's tail after all n_out rows: a product
// in int would wrap past 2^31 bytes, one in uint32 past 2^32. The tensor is reserved address
// space (MAP_NORESERVE: untouched pages read as zero and cost no memory); the first row past
// 2^31 and the last two rows, past 2^32 (and for NF4_DQ their scale groups in the tail and the
// offset), hold real bytes, decoded on the host by the device decoders and by the CPU reference.
void TestCudaDecoders::offsetsPast4GiB() {
#ifndef KVS_HAVE_CUDA_HEADERS
    QSKIP("built without the CUDA toolkit's headers (cuda_fp16.h): the device decoders cannot be compiled here");
#else
    QFETCH(int, dtype);
    QFETCH(int, n_in);
    QFETCH(int, n_out);
    const auto t = static_cast<DType>(dtype);
    const size_t rb = row_bytes(t, n_in), total = tensor_bytes(t, n_in, n_out);
    const int64_t rows[] = {int64_t((size_t{1} << 31) / rb + 1), n_out - 2, n_out - 1};
    QVERIFY(rb * size_t(n_out - 2) > (size_t{1} << 32));
    void* map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) QSKIP(qPrintable(QString("cannot reserve %1 bytes of address space").arg(total)));
    struct Unmap {
        void* p;
        size_t n;
        ~Unmap() { munmap(p, n); }
    } unmap{map, total};
    auto* base = static_cast<uint8_t*>(map);    // [n_out, rb] (+ NF4_DQ's tail)
    uint8_t* tail = base + size_t(n_out) * rb;  // NF4_DQ: float scale2[n_groups], float offset
    std::mt19937 rng(29 + static_cast<uint32_t>(dtype));
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> src(static_cast<size_t>(n_in));  // [n_in]
    const int64_t nb_row = n_in / 64, n_blocks = nb_row * n_out, n_groups = (n_blocks + 255) / 256;
    for (int64_t r : rows) {
        for (auto& v : src) v = nd(rng);
        uint8_t* row = base + size_t(r) * rb;
        if (t != DType::NF4_DQ) {
            cpu::quantize_row(t, src.data(), row, n_in);
            continue;
        }
        // NF4_DQ: the NF4 nibbles of this row, any absmax codes, its groups' scale2
        std::vector<uint8_t> nf4(row_bytes(DType::NF4, n_in));  // [nb_row] blocks of 36 bytes
        cpu::quantize_row(DType::NF4, src.data(), nf4.data(), n_in);
        for (int64_t b = 0; b < nb_row; ++b) {
            row[b * 33] = static_cast<uint8_t>(rng());                    // qabsmax: any of the 256 codes
            std::memcpy(row + b * 33 + 1, &nf4[size_t(b) * 36 + 4], 32);  // the block's 32 nibble bytes
        }
        for (int64_t g = r * nb_row / 256; g <= ((r + 1) * nb_row - 1) / 256; ++g) {
            const float s2 = 0.01f + 0.001f * float(g % 97);
            std::memcpy(tail + size_t(g) * 4, &s2, 4);
        }
    }
    const float offset = 0.02f;
    if (t == DType::NF4_DQ) std::memcpy(tail + size_t(n_groups) * 4, &offset, 4);
    const cuda::DevWeight w{base, rb, n_in, n_out};
    const float* nf4 = cpu::bnb_code_book(DType::NF4);
    const float* map8 = cpu::dynamic_map8();
    std::vector<float> want(static_cast<size_t>(n_in));  // [n_in]
    std::vector<float> got(static_cast<size_t>(n_in));   // [n_in]
    for (int64_t r : rows) {
        const uint8_t* row = base + size_t(r) * rb;
        if (t == DType::NF4_DQ) {  // quant_formats.h: absmax = dynamic_map8()[code] * scale2[k / 256] + offset
            for (int64_t i = 0; i < n_in; ++i) {
                const int64_t k = r * nb_row + i / 64;  // block of the flattened tensor
                float s2;
                std::memcpy(&s2, tail + size_t(k / 256) * 4, 4);
                float absmax = map8[row[(i / 64) * 33]] * s2;  // two float roundings, as the CPU decodes it
                absmax += offset;
                const uint8_t byte = row[(i / 64) * 33 + 1 + (i % 64) / 2];
                want[size_t(i)] = absmax * nf4[i % 2 == 0 ? byte >> 4 : byte & 0xF];
            }
        } else {
            cpu::dequantize_row(t, row, want.data(), n_in);
        }
        std::fill(got.begin(), got.end(), NAN);
        for (int it = 0; it < n_in / cuda::kItem; ++it) {
            float* v = got.data() + it * cuda::kItem;
            switch (t) {
                case DType::Q8_0: cuda::dequant_item<DType::Q8_0>(w, r, it, v); break;
                case DType::I8_LLM: cuda::dequant_item<DType::I8_LLM>(w, r, it, v); break;
                case DType::I4_G64: cuda::dequant_item<DType::I4_G64>(w, r, it, v); break;
                case DType::NF4_DQ: cuda::dequant_item<DType::NF4_DQ>(w, r, it, v); break;
                default: QFAIL("no case for this type");
            }
        }
        bool nonzero = false;
        for (int64_t i = 0; i < n_in; ++i) {
            nonzero = nonzero || want[size_t(i)] != 0.0f;
            if (!(got[size_t(i)] == want[size_t(i)]))
                QFAIL(qPrintable(QString("row %1 (byte offset %2), element %3: device decoder %4, CPU reference %5")
                                     .arg(r)
                                     .arg(qulonglong(size_t(r) * rb))
                                     .arg(i)
                                     .arg(got[size_t(i)], 0, 'g', 9)
                                     .arg(want[size_t(i)], 0, 'g', 9)));
        }
        QVERIFY2(nonzero, "the reference row is all zero: it would not tell a wrong address from the right one");
    }
#endif
}

QTEST_GUILESS_MAIN(TestCudaDecoders)
#include "tst_cuda_decoders.moc"
