// bitsandbytes' 4-bit weight formats NF4 and FP4 (blocks of 64, float absmax, a 16-value code
// book), scalar: dequantize, round-to-nearest quantize, and the dot product against F32
// activations (the code book's values are not integers, so there is no int8 path).
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/bnb_code_books.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::cpu {
namespace {

// The code books as arrays (kernels/bnb_code_books.h, which the CUDA decoders read too).
std::array<float, 16> code_table(float (*code)(int)) {
    std::array<float, 16> t{};
    for (int q = 0; q < 16; ++q) t[size_t(q)] = code(q);
    return t;
}
const std::array<float, 16> kNf4 = code_table(nf4_code), kFp4 = code_table(fp4_code);

// The index of the code value nearest to x (ties: the lower value).
uint8_t nearest(const float* code, float x) {
    int best = 0;
    float best_d = INFINITY, best_v = INFINITY;
    for (int i = 0; i < 16; ++i) {
        const float d = std::fabs(x - code[i]);
        if (d < best_d || (d == best_d && code[i] < best_v)) best = i, best_d = d, best_v = code[i];
    }
    return static_cast<uint8_t>(best);
}

}  // namespace

const float* bnb_code_book(DType t) { return t == DType::NF4 ? kNf4.data() : t == DType::FP4 ? kFp4.data() : nullptr; }

void dequantize_row_bnb(DType t, const void* src, float* dst, int64_t n) {
    const float* code = bnb_code_book(t);
    const auto* b = static_cast<const BlockBnb4*>(src);
    for (int64_t k = 0; k < n / kQKBnb; ++k, dst += kQKBnb)
        for (int j = 0; j < kQKBnb / 2; ++j) {
            dst[2 * j] = b[k].absmax * code[b[k].qs[j] >> 4];
            dst[2 * j + 1] = b[k].absmax * code[b[k].qs[j] & 0xF];
        }
}

void quantize_row_bnb(DType t, const float* src, void* dst, int64_t n) {
    const float* code = bnb_code_book(t);
    auto* b = static_cast<BlockBnb4*>(dst);
    for (int64_t k = 0; k < n / kQKBnb; ++k, src += kQKBnb) {
        float amax = 0.0f;
        for (int i = 0; i < kQKBnb; ++i) amax = std::fmax(amax, std::fabs(src[i]));
        b[k].absmax = amax;
        const float inv = amax > 0.0f ? 1.0f / amax : 0.0f;
        for (int j = 0; j < kQKBnb / 2; ++j)
            b[k].qs[j] =
                static_cast<uint8_t>(nearest(code, src[2 * j] * inv) << 4 | nearest(code, src[2 * j + 1] * inv));
    }
}

float dot_bnb_f32(DType t, const void* w, const float* a, int64_t n) {
    const float* code = bnb_code_book(t);
    const auto* b = static_cast<const BlockBnb4*>(w);
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQKBnb; ++k, a += kQKBnb) {
        float s = 0.0f;
        for (int j = 0; j < kQKBnb / 2; ++j)
            s += code[b[k].qs[j] >> 4] * a[2 * j] + code[b[k].qs[j] & 0xF] * a[2 * j + 1];
        sum += b[k].absmax * s;
    }
    return sum;
}

}  // namespace kvs::cpu
