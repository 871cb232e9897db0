// Scalar reference dot products: one weight row against one activation row quantized to
// activation_type(t). Integer sums per block, then scaled, as the SIMD kernels do.
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/vec_dot.h"

namespace kvs::cpu {
namespace {

inline float h2f(uint16_t h) { return fp16_to_fp32(h); }

// Weight values of one 32-element block as integers, plus its scale and offset such that
// w = d * q + m (for the symmetric types m = -d * zero_point).
struct Block32 {
    int q[32];
    float d;
    float m;
};

inline void nibbles(const uint8_t* qs, int* q) {
    for (int j = 0; j < 16; ++j) q[j] = qs[j] & 0xF, q[j + 16] = qs[j] >> 4;
}
inline void fifth_bits(const uint8_t* qh4, int* q) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    for (int j = 0; j < 32; ++j) q[j] |= static_cast<int>(((qh >> j) & 1u) << 4);
}

Block32 load_block(DType t, const void* row, int64_t i) {
    Block32 b{};
    switch (t) {
        case DType::Q4_0: {
            const auto& x = static_cast<const BlockQ4_0*>(row)[i];
            nibbles(x.qs, b.q);
            b.d = h2f(x.d), b.m = -8.0f * b.d;
            break;
        }
        case DType::Q4_1: {
            const auto& x = static_cast<const BlockQ4_1*>(row)[i];
            nibbles(x.qs, b.q);
            b.d = h2f(x.d), b.m = h2f(x.m);
            break;
        }
        case DType::Q5_0: {
            const auto& x = static_cast<const BlockQ5_0*>(row)[i];
            nibbles(x.qs, b.q);
            fifth_bits(x.qh, b.q);
            b.d = h2f(x.d), b.m = -16.0f * b.d;
            break;
        }
        case DType::Q5_1: {
            const auto& x = static_cast<const BlockQ5_1*>(row)[i];
            nibbles(x.qs, b.q);
            fifth_bits(x.qh, b.q);
            b.d = h2f(x.d), b.m = h2f(x.m);
            break;
        }
        default: {  // Q8_0
            const auto& x = static_cast<const BlockQ8_0*>(row)[i];
            for (int j = 0; j < 32; ++j) b.q[j] = x.qs[j];
            b.d = h2f(x.d), b.m = 0.0f;
            break;
        }
    }
    return b;
}

// sum over blocks of d_w * d_a * sum(q_w * q_a) + m_w * d_a * sum(q_a)
float dot_32(DType t, const void* w, const void* a, int64_t n) {
    const bool q8_1 = activation_type(t) == DType::Q8_1;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; ++i) {
        const Block32 b = load_block(t, w, i);
        const int8_t* qa;
        float da, sa;
        if (q8_1) {
            const auto& y = static_cast<const BlockQ8_1*>(a)[i];
            qa = y.qs, da = h2f(y.d), sa = h2f(y.s);
        } else {
            const auto& y = static_cast<const BlockQ8_0*>(a)[i];
            qa = y.qs, da = h2f(y.d);
            int qsum = 0;
            for (int j = 0; j < 32; ++j) qsum += qa[j];
            sa = da * static_cast<float>(qsum);
        }
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += b.q[j] * qa[j];
        sum += b.d * da * static_cast<float>(isum) + (b.m != 0.0f ? b.m * sa : 0.0f);
    }
    return sum;
}

// Q4_K / Q5_K against Q8_K.
float dot_q45_k(DType t, const void* w, const BlockQ8_K* a, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const uint8_t *scales, *qs, *qh = nullptr;
        uint16_t d16, dmin16;
        if (t == DType::Q4_K) {
            const auto& x = static_cast<const BlockQ4_K*>(w)[i];
            scales = x.scales, qs = x.qs, d16 = x.d, dmin16 = x.dmin;
        } else {
            const auto& x = static_cast<const BlockQ5_K*>(w)[i];
            scales = x.scales, qs = x.qs, qh = x.qh, d16 = x.d, dmin16 = x.dmin;
        }
        const BlockQ8_K& y = a[i];
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; ++j) {  // sub-block j: elements 32j .. 32j+31
            uint8_t sc, m;
            scale_min_k4(j, scales, &sc, &m);
            const uint8_t* q = qs + 32 * (j / 2);
            int s = 0;
            for (int l = 0; l < 32; ++l) {
                int v = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
                if (qh) v |= ((qh[l] >> j) & 1) << 4;
                s += v * y.qs[32 * j + l];
            }
            sumi += sc * s;
            summ += m * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
        }
        sum += y.d * (h2f(d16) * static_cast<float>(sumi) - h2f(dmin16) * static_cast<float>(summ));
    }
    return sum;
}

float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* a, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const BlockQ6_K& x = w[i];
        const BlockQ8_K& y = a[i];
        int q[256];
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = x.ql + 64 * h;
            const uint8_t* qh = x.qh + 32 * h;
            int* o = q + 128 * h;
            for (int l = 0; l < 32; ++l) {
                o[l] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                o[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                o[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                o[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            }
        }
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += q[16 * j + l] * y.qs[16 * j + l];
            sumi += x.scales[j] * s;
        }
        sum += h2f(x.d) * y.d * static_cast<float>(sumi);
    }
    return sum;
}

// I4_G128 / I4_G64 against Q8_1: per 32-element sub-block k of a group,
// d * d_a * sum(q * q_a) - d * z * s_a with s_a = d_a * sum(q_a) (the Q8_1 s field).
template <int G>
float dot_i4(const BlockI4<G>* w, const BlockQ8_1* a, int64_t n) {
    constexpr int n_sub = BlockI4<G>::kSubBlocks;
    float sum = 0.0f;
    int q[32];
    for (int64_t g = 0; g < n / G; ++g) {
        const float d = h2f(w[g].d);
        const float m = -d * static_cast<float>(w[g].z);
        for (int k = 0; k < n_sub; ++k) {
            const BlockQ8_1& y = a[n_sub * g + k];
            nibbles(w[g].qs + 16 * k, q);
            int isum = 0;
            for (int j = 0; j < 32; ++j) isum += q[j] * y.qs[j];
            sum += d * h2f(y.d) * static_cast<float>(isum) + m * h2f(y.s);
        }
    }
    return sum;
}

// I8_ROW against Q8_0: scale * sum over blocks of d_a * sum(q * q_a).
float dot_i8_row(const void* w, const BlockQ8_0* a, int64_t n) {
    float scale;
    std::memcpy(&scale, w, sizeof(float));
    const auto* q = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(w) + kI8RowHeader);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQK32; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += q[32 * b + j] * a[b].qs[j];
        sum += h2f(a[b].d) * static_cast<float>(isum);
    }
    return scale * sum;
}

template <class Load>
float dot_float(const float* a, int64_t n, Load load) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += load(i) * a[i];
    return sum;
}

}  // namespace

float vec_dot_scalar(DType t, const void* w, const void* act, int64_t n) {
    switch (t) {
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q8_0: return dot_32(t, w, act, n);
        case DType::Q4_K:
        case DType::Q5_K: return dot_q45_k(t, w, static_cast<const BlockQ8_K*>(act), n);
        case DType::Q6_K: return dot_q6_k(static_cast<const BlockQ6_K*>(w), static_cast<const BlockQ8_K*>(act), n);
        case DType::I4_G128: return dot_i4(static_cast<const BlockI4G128*>(w), static_cast<const BlockQ8_1*>(act), n);
        case DType::I4_G64: return dot_i4(static_cast<const BlockI4G64*>(w), static_cast<const BlockQ8_1*>(act), n);
        case DType::I8_ROW: return dot_i8_row(w, static_cast<const BlockQ8_0*>(act), n);
        case DType::NF4:
        case DType::FP4: return dot_bnb_f32(t, w, static_cast<const float*>(act), n);
        case DType::I8_LLM: return dot_llm_int8(w, static_cast<const float*>(act), n);
        case DType::NF4_DQ:  // needs the tensor's tail: matmul decodes the absmax (dot_nf4_dq_f32)
            assert(false && "vec_dot: NF4_DQ has no one-row form");
            return NAN;
        case DType::F32: {
            const auto* p = static_cast<const float*>(w);
            return dot_float(static_cast<const float*>(act), n, [p](int64_t i) { return p[i]; });
        }
        case DType::F16: {
            const auto* p = static_cast<const uint16_t*>(w);
            return dot_float(static_cast<const float*>(act), n, [p](int64_t i) { return fp16_to_fp32(p[i]); });
        }
        case DType::BF16: {
            const auto* p = static_cast<const uint16_t*>(w);
            return dot_float(static_cast<const float*>(act), n, [p](int64_t i) { return bf16_to_fp32(p[i]); });
        }
        default: assert(false && "vec_dot: not a weight type"); return 0.0f;
    }
}

}  // namespace kvs::cpu
