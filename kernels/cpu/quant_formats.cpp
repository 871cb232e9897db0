// Scalar reference for GGML's block formats: fp16/bf16 conversion, dequantization
// and round-to-nearest quantization. Layouts in quant_blocks.h; formulas follow
// ggml/src/ggml-quants.c (the *_ref quantizers and dequantize_row_*).
#include "kernels/cpu/quant_formats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"

namespace kvs::cpu {

// ---------------------------------------------------------------- fp16 / bf16

float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    const uint32_t mant = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0) {
        // zero or subnormal: mant * 2^-24, exact in float
        float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
        std::memcpy(&bits, &v, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t fp32_to_fp16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    u &= 0x7FFFFFFFu;
    if (u >= 0x7F800000u)  // inf or nan (nan stays a quiet nan)
        return static_cast<uint16_t>(sign | 0x7C00u | (u > 0x7F800000u ? 0x200u : 0u));
    if (u >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
    if (u < 0x38800000u) {
        // below the smallest normal: round |f| / 2^-24 to nearest even; 1024 becomes 0x400 (normal)
        float a;
        std::memcpy(&a, &u, 4);
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
    }
    uint32_t h = ((((u >> 23) - 127 + 15) << 10) | ((u & 0x7FFFFFu) >> 13));
    const uint32_t rem = u & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

float bf16_to_fp32(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t fp32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 64u);  // quiet nan
    return static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

DType activation_type(DType weight_type) {
    switch (weight_type) {
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q8_0:
        case DType::I8_ROW: return DType::Q8_0;
        case DType::Q4_1:
        case DType::Q5_1:
        case DType::I4_G128:
        case DType::I4_G64: return DType::Q8_1;
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K: return DType::Q8_K;
        default: return DType::F32;
    }
}

namespace {

inline float h2f(uint16_t h) { return fp16_to_fp32(h); }
inline uint16_t f2h(float f) { return fp32_to_fp16(f); }

// ------------------------------------------------------------ 32-element blocks

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * ((b[i].qs[j] & 0xF) - 8);
            y[j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
    }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * (b[i].qs[j] & 0xF) + m;
            y[j + 16] = d * (b[i].qs[j] >> 4) + m;
        }
    }
}

template <class B>
void five_bit_values(const B& b, int* q) {  // [32] values 0..31
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (int j = 0; j < 16; ++j) {
        q[j] = (b.qs[j] & 0xF) | (((qh >> j) & 1u) << 4);
        q[j + 16] = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
    }
}

void dequant_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
    int q[32];
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = h2f(b[i].d);
        five_bit_values(b[i], q);
        for (int j = 0; j < 32; ++j) y[j] = d * (q[j] - 16);
    }
}

void dequant_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
    int q[32];
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        five_bit_values(b[i], q);
        for (int j = 0; j < 32; ++j) y[j] = d * q[j] + m;
    }
}

template <class B>
void dequant_q8(const B* b, float* y, int64_t nb) {  // Q8_0 and Q8_1
    for (int64_t i = 0; i < nb; ++i, y += 32) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < 32; ++j) y[j] = d * b[i].qs[j];
    }
}

// Symmetric blocks (Q4_0, Q5_0): d = max / -half where max is the value of largest |x|.
void quant_q4_0(const float* x, BlockQ4_0* b, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        for (int j = 0; j < 16; ++j) {
            const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
            const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
            b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

void quant_q5_0(const float* x, BlockQ5_0* b, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
            const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
            b[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
        }
        std::memcpy(b[i].qh, &qh, 4);
    }
}

// Asymmetric blocks (Q4_1, Q5_1): d = (max - min) / (2^bits - 1), m = min.
template <class B, int kBits>
void quant_affine(const float* x, B* b, int64_t nb) {
    constexpr int kMax = (1 << kBits) - 1;
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
        const float d = (hi - lo) / kMax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f2h(d);
        b[i].m = f2h(lo);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = std::min(kMax, static_cast<int>((x[j] - lo) * id + 0.5f));
            const int q1 = std::min(kMax, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
            b[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
        }
        if constexpr (kBits == 5) std::memcpy(b[i].qh, &qh, 4);
    }
}

// Q8_0 / Q8_1 as ggml's x86 quantize_row_q8_0/_q8_1 (the activation side of llama.cpp's
// CPU matmuls): q = round-half-even(x * 127 / amax), d = fp16(amax / 127), s = fp16(sum(q) * amax / 127).
void quant_q8_0(const float* x, BlockQ8_0* b, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = f2h(d);
        for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
    }
}

void quant_q8_1(const float* x, BlockQ8_1* b, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        b[i].d = f2h(d);
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            b[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
            sum += b[i].qs[j];
        }
        b[i].s = f2h(static_cast<float>(sum) * d);
    }
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
    const int64_t nb = n / 32;
    switch (t) {
        case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
        case DType::F16: {
            const auto* h = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
            return;
        }
        case DType::BF16: {
            const auto* h = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
            return;
        }
        case DType::Q4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
        case DType::Q4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
        case DType::Q5_0: dequant_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb); return;
        case DType::Q5_1: dequant_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb); return;
        case DType::Q8_0: dequant_q8(static_cast<const BlockQ8_0*>(src), dst, nb); return;
        case DType::Q8_1: dequant_q8(static_cast<const BlockQ8_1*>(src), dst, nb); return;
        case DType::I8_ROW:
        case DType::I4_G128:
        case DType::I4_G64: dequantize_row_int(t, src, dst, n); return;
        case DType::NF4:
        case DType::FP4: dequantize_row_bnb(t, src, dst, n); return;
        case DType::I8_LLM:
            dequantize_row_int(DType::I8_ROW, static_cast<const uint8_t*>(src) + sizeof(float), dst, n);
            return;
        case DType::NF4_DQ:  // a row alone cannot decode: its absmax codes need the tensor's tail
            assert(false && "NF4_DQ decodes whole tensors (dequantize_nf4_dq)");
            for (int64_t i = 0; i < n; ++i) dst[i] = NAN;
            return;
        default: dequantize_row_k(t, src, dst, n); return;
    }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
    const int64_t nb = n / 32;
    switch (t) {
        case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
        case DType::F16: {
            auto* h = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
            return;
        }
        case DType::BF16: {
            auto* h = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
            return;
        }
        case DType::Q4_0: quant_q4_0(src, static_cast<BlockQ4_0*>(dst), nb); return;
        case DType::Q4_1: quant_affine<BlockQ4_1, 4>(src, static_cast<BlockQ4_1*>(dst), nb); return;
        case DType::Q5_0: quant_q5_0(src, static_cast<BlockQ5_0*>(dst), nb); return;
        case DType::Q5_1: quant_affine<BlockQ5_1, 5>(src, static_cast<BlockQ5_1*>(dst), nb); return;
        case DType::Q8_0: quant_q8_0(src, static_cast<BlockQ8_0*>(dst), nb); return;
        case DType::Q8_1: quant_q8_1(src, static_cast<BlockQ8_1*>(dst), nb); return;
        case DType::I8_ROW:
        case DType::I4_G128:
        case DType::I4_G64: quantize_row_int(t, src, dst, n); return;
        case DType::NF4:
        case DType::FP4: quantize_row_bnb(t, src, dst, n); return;
        case DType::I8_LLM: quantize_llm_int8_row(src, n, kLlmInt8Threshold, dst); return;
        case DType::NF4_DQ:
            assert(false && "NF4_DQ encodes whole tensors (quantize_nf4_dq)");
            std::memset(dst, 0, row_bytes(t, n));
            return;
        default: quantize_row_k(t, src, dst, n); return;
    }
}

}  // namespace kvs::cpu
