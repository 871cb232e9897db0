// Scalar reference for the K-quants (super-blocks of 256): Q4_K, Q5_K, Q6_K and the
// Q8_K activation format. Dequantization follows ggml-quants.c exactly; the weight
// quantizers are plain round-to-nearest (no make_qkx2 search), which gives valid
// blocks with a somewhat larger error than llama.cpp's.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::cpu {
namespace {

inline int nearest_int(float f) { return static_cast<int>(std::lrintf(f)); }

// ---------------------------------------------------------------- dequantize

// Q4_K and Q5_K share everything but the 5th bit (qh == nullptr for Q4_K).
void dequant_q45_k(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, uint16_t d16, uint16_t dmin16,
                   float* y) {
    const float d = fp16_to_fp32(d16), dmin = fp16_to_fp32(dmin16);
    for (int j = 0; j < 4; ++j) {  // 64 elements per step: low nibbles, then high nibbles
        uint8_t sc0, m0, sc1, m1;
        scale_min_k4(2 * j, scales, &sc0, &m0);
        scale_min_k4(2 * j + 1, scales, &sc1, &m1);
        const float d0 = d * sc0, d1 = d * sc1, n0 = dmin * m0, n1 = dmin * m1;
        const uint8_t* q = qs + 32 * j;
        for (int l = 0; l < 32; ++l) {
            const int h0 = qh ? ((qh[l] >> (2 * j)) & 1) << 4 : 0;
            const int h1 = qh ? ((qh[l] >> (2 * j + 1)) & 1) << 4 : 0;
            y[64 * j + l] = d0 * ((q[l] & 0xF) | h0) - n0;
            y[64 * j + 32 + l] = d1 * ((q[l] >> 4) | h1) - n1;
        }
    }
}

void dequant_q6_k(const BlockQ6_K& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    for (int n = 0; n < 2; ++n) {  // two halves of 128
        const uint8_t* ql = b.ql + 64 * n;
        const uint8_t* qh = b.qh + 32 * n;
        const int8_t* sc = b.scales + 8 * n;
        float* o = y + 128 * n;
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            o[l] = d * sc[is] * q1;
            o[l + 32] = d * sc[is + 2] * q2;
            o[l + 64] = d * sc[is + 4] * q3;
            o[l + 96] = d * sc[is + 6] * q4;
        }
    }
}

// ---------------------------------------------------------------- quantize

// Q4_K (kMax 15) and Q5_K (kMax 31): per sub-block of 32, x ~ scale * q - min with
// min >= 0; scales and mins then quantized to 6 bits against the super-block maxima.
template <int kMax>
void quant_q45_k(const float* x, uint16_t* d16, uint16_t* dmin16, uint8_t* scales, uint8_t* L) {
    float sub_scale[8], sub_min[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const float* xs = x + 32 * j;
        float lo = xs[0], hi = xs[0];
        for (int l = 1; l < 32; ++l) lo = std::min(lo, xs[l]), hi = std::max(hi, xs[l]);
        lo = std::min(lo, 0.0f);
        sub_scale[j] = (hi - lo) / kMax;
        sub_min[j] = -lo;
        max_scale = std::max(max_scale, sub_scale[j]);
        max_min = std::max(max_min, sub_min[j]);
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        ls[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * sub_scale[j])));
        lm[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * sub_min[j])));
    }
    pack_scale_min_k4(ls, lm, scales);
    *d16 = fp32_to_fp16(max_scale / 63.0f);
    *dmin16 = fp32_to_fp16(max_min / 63.0f);
    const float d = fp16_to_fp32(*d16), dmin = fp16_to_fp32(*dmin16);
    for (int j = 0; j < 8; ++j) {
        const float ds = d * ls[j], dm = dmin * lm[j];
        for (int l = 0; l < 32; ++l) {
            const int q = ds != 0.0f ? nearest_int((x[32 * j + l] + dm) / ds) : 0;
            L[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, kMax));
        }
    }
}

void quant_q4_k(const float* x, BlockQ4_K* b) {
    uint8_t L[256];
    quant_q45_k<15>(x, &b->d, &b->dmin, b->scales, L);
    for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l)
            b->qs[32 * j + l] = static_cast<uint8_t>(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
}

void quant_q5_k(const float* x, BlockQ5_K* b) {
    uint8_t L[256];
    quant_q45_k<31>(x, &b->d, &b->dmin, b->scales, L);
    std::memset(b->qh, 0, sizeof b->qh);
    for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
            const int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
            b->qs[32 * j + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
            b->qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
        }
}

void quant_q6_k(const float* x, BlockQ6_K* b) {
    float sub_scale[16];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
        float amax = 0.0f, max = 0.0f;
        for (int l = 0; l < 16; ++l)
            if (std::fabs(x[16 * j + l]) > amax) amax = std::fabs(x[16 * j + l]), max = x[16 * j + l];
        sub_scale[j] = max / -32.0f;  // the largest |x| maps to q = -32
        if (std::fabs(sub_scale[j]) > max_abs_scale) max_abs_scale = std::fabs(sub_scale[j]), max_scale = sub_scale[j];
    }
    std::memset(b, 0, sizeof *b);
    if (max_abs_scale == 0.0f) return;
    const float iscale = -128.0f / max_scale;
    b->d = fp32_to_fp16(1.0f / iscale);
    uint8_t L[256];
    for (int j = 0; j < 16; ++j) {
        b->scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * sub_scale[j])));
        const float d = fp16_to_fp32(b->d) * b->scales[j];
        for (int l = 0; l < 16; ++l) {
            const int q = d != 0.0f ? nearest_int(x[16 * j + l] / d) : 0;
            L[16 * j + l] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
        }
    }
    for (int n = 0; n < 2; ++n) {
        uint8_t* ql = b->ql + 64 * n;
        uint8_t* qh = b->qh + 32 * n;
        const uint8_t* Ln = L + 128 * n;
        for (int l = 0; l < 32; ++l) {
            ql[l] = static_cast<uint8_t>((Ln[l] & 0xF) | ((Ln[l + 64] & 0xF) << 4));
            ql[l + 32] = static_cast<uint8_t>((Ln[l + 32] & 0xF) | ((Ln[l + 96] & 0xF) << 4));
            qh[l] = static_cast<uint8_t>((Ln[l] >> 4) | ((Ln[l + 32] >> 4) << 2) | ((Ln[l + 64] >> 4) << 4) |
                                         ((Ln[l + 96] >> 4) << 6));
        }
    }
}

// Exactly ggml's quantize_row_q8_K_ref: d = max / -127 (max = value of largest |x|).
void quant_q8_k(const float* x, BlockQ8_K* b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j)
        if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    if (amax == 0.0f) {
        std::memset(b, 0, sizeof *b);
        return;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) b->qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b->qs[16 * j + l];
        b->bsums[j] = static_cast<int16_t>(sum);
    }
    b->d = 1.0f / iscale;
}

}  // namespace

void dequantize_row_k(DType t, const void* src, float* dst, int64_t n) {
    const int64_t nb = n / kQKK;
    for (int64_t i = 0; i < nb; ++i, dst += kQKK) {
        switch (t) {
            case DType::Q4_K: {
                const auto& b = static_cast<const BlockQ4_K*>(src)[i];
                dequant_q45_k(b.scales, b.qs, nullptr, b.d, b.dmin, dst);
                break;
            }
            case DType::Q5_K: {
                const auto& b = static_cast<const BlockQ5_K*>(src)[i];
                dequant_q45_k(b.scales, b.qs, b.qh, b.d, b.dmin, dst);
                break;
            }
            case DType::Q6_K: dequant_q6_k(static_cast<const BlockQ6_K*>(src)[i], dst); break;
            case DType::Q8_K: {
                const auto& b = static_cast<const BlockQ8_K*>(src)[i];
                for (int j = 0; j < kQKK; ++j) dst[j] = b.d * b.qs[j];
                break;
            }
            default: assert(false && "dequantize_row: unsupported DType"); return;
        }
    }
}

void quantize_row_k(DType t, const float* src, void* dst, int64_t n) {
    const int64_t nb = n / kQKK;
    for (int64_t i = 0; i < nb; ++i, src += kQKK) {
        switch (t) {
            case DType::Q4_K: quant_q4_k(src, static_cast<BlockQ4_K*>(dst) + i); break;
            case DType::Q5_K: quant_q5_k(src, static_cast<BlockQ5_K*>(dst) + i); break;
            case DType::Q6_K: quant_q6_k(src, static_cast<BlockQ6_K*>(dst) + i); break;
            case DType::Q8_K: quant_q8_k(src, static_cast<BlockQ8_K*>(dst) + i); break;
            default: assert(false && "quantize_row: unsupported DType"); return;
        }
    }
}

}  // namespace kvs::cpu
