// KV Scope's integer weight formats, scalar reference: I4_G128 / I4_G64 (4-bit asymmetric
// groups of 128 / 64, the AWQ / GPTQ format; one template over the group size) and I8_ROW (int8 with one float scale
// per output channel). Layouts in quant_blocks.h; the AVX2 dot products in vec_dot_int_avx2.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::cpu {
namespace {

// The smallest fp16 value >= x (x >= 0, finite).
uint16_t fp16_round_up(float x) {
    uint16_t h = fp32_to_fp16(x);
    if (fp16_to_fp32(h) < x) ++h;  // positive halves order like their bit patterns
    return h;
}

template <int G>
void dequant_i4(const BlockI4<G>* b, float* y, int64_t n_groups) {
    for (int64_t g = 0; g < n_groups; ++g, y += G) {
        const float d = fp16_to_fp32(b[g].d);
        const int z = b[g].z;
        for (int sb = 0; sb < G / 32; ++sb)
            for (int j = 0; j < 16; ++j) {
                const uint8_t byte = b[g].qs[16 * sb + j];
                y[32 * sb + j] = d * static_cast<float>((byte & 0xF) - z);
                y[32 * sb + j + 16] = d * static_cast<float>((byte >> 4) - z);
            }
    }
}

// q[G] values 0..15 (element order) -> the nibble layout of quant_blocks.h.
template <int G>
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
    for (int sb = 0; sb < G / 32; ++sb)
        for (int j = 0; j < 16; ++j)
            qs[16 * sb + j] = static_cast<uint8_t>(q[32 * sb + j] | (q[32 * sb + j + 16] << 4));
}

template <int G>
void pack_i4(const float* d, const int* z, const uint8_t* q, int64_t n, void* dst) {
    auto* b = static_cast<BlockI4<G>*>(dst);
    for (int64_t g = 0; g < n / G; ++g) {
        b[g].d = fp32_to_fp16(d[g]);
        b[g].z = static_cast<uint8_t>(z[g]);
        b[g].pad = 0;
        pack_nibbles<G>(q + g * G, b[g].qs);
    }
}

template <int G>
void unpack_i4(const void* src, int64_t n, float* d, int* z, uint8_t* q) {
    const auto* b = static_cast<const BlockI4<G>*>(src);
    for (int64_t g = 0; g < n / G; ++g) {
        d[g] = fp16_to_fp32(b[g].d);
        z[g] = b[g].z;
        uint8_t* qg = q + g * G;
        for (int sb = 0; sb < G / 32; ++sb)
            for (int j = 0; j < 16; ++j) {
                qg[32 * sb + j] = b[g].qs[16 * sb + j] & 0xF;
                qg[32 * sb + j + 16] = b[g].qs[16 * sb + j] >> 4;
            }
    }
}

template <int G>
void quantize_i4(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockI4<G>*>(dst);
    uint8_t q[G];
    for (int64_t g = 0; g < n / G; ++g) {
        float d;
        int z;
        quantize_i4_group(src + g * G, G, &d, &z, q);
        b[g].d = fp32_to_fp16(d);  // exact: d is an fp16 value
        b[g].z = static_cast<uint8_t>(z);
        b[g].pad = 0;
        pack_nibbles<G>(q, b[g].qs);
    }
}

}  // namespace

void quantize_i4_group(const float* w, int n, float* d, int* z, uint8_t* q) {
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < n; ++i) lo = std::min(lo, w[i]), hi = std::max(hi, w[i]);
    const float dv = fp16_to_fp32(fp16_round_up((hi - lo) / 15.0f));
    *d = dv;
    if (dv == 0.0f) {
        *z = 0;
        std::fill(q, q + n, uint8_t{0});
        return;
    }
    const int zp = std::clamp(static_cast<int>(std::nearbyint(-lo / dv)), 0, 15);
    *z = zp;
    for (int i = 0; i < n; ++i)
        q[i] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::nearbyint(w[i] / dv)) + zp, 0, 15));
}

bool pack_i4_row(DType t, const float* d, const int* z, const uint8_t* q, int64_t n, void* dst) {
    const int group = i4_group_size(t);
    if (group == 0) return false;
    const int64_t n_groups = n / group;
    for (int64_t g = 0; g < n_groups; ++g)
        if (!std::isfinite(d[g]) || z[g] < 0 || z[g] > 15) return false;
    for (int64_t i = 0; i < n; ++i)
        if (q[i] > 15) return false;
    if (group == kQKG128) pack_i4<kQKG128>(d, z, q, n, dst);
    else
        pack_i4<kQKG64>(d, z, q, n, dst);
    return true;
}

void unpack_i4_row(DType t, const void* src, int64_t n, float* d, int* z, uint8_t* q) {
    if (t == DType::I4_G128) unpack_i4<kQKG128>(src, n, d, z, q);
    else if (t == DType::I4_G64)
        unpack_i4<kQKG64>(src, n, d, z, q);
}

void quantize_i8_row(const float* w, int64_t n, void* dst) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[i]));
    const float scale = amax / 127.0f;
    auto* out = static_cast<uint8_t*>(dst);
    std::memcpy(out, &scale, sizeof(float));
    auto* q = reinterpret_cast<int8_t*>(out + kI8RowHeader);
    for (int64_t i = 0; i < n; ++i)
        q[i] = scale == 0.0f
                   ? int8_t{0}
                   : static_cast<int8_t>(std::clamp(static_cast<int>(std::nearbyint(w[i] / scale)), -127, 127));
}

bool pack_i8_row(float scale, const int8_t* q, int64_t n, void* dst) {
    if (!std::isfinite(scale)) return false;
    for (int64_t i = 0; i < n; ++i)
        if (q[i] < -127) return false;
    auto* out = static_cast<uint8_t*>(dst);
    std::memcpy(out, &scale, sizeof(float));
    std::memcpy(out + kI8RowHeader, q, static_cast<size_t>(n));
    return true;
}

std::optional<DType> ggml_equivalent(DType t) {
    if (t == DType::I4_G128 || t == DType::I4_G64) return DType::Q4_1;
    if (t == DType::I8_ROW) return DType::Q8_0;
    return std::nullopt;
}

void to_ggml_equivalent_row(DType t, const void* src, void* dst, int64_t n) {
    if (t == DType::I8_ROW) {
        float scale;
        std::memcpy(&scale, src, sizeof(float));
        const auto* q = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(src) + kI8RowHeader);
        auto* out = static_cast<BlockQ8_0*>(dst);
        for (int64_t b = 0; b < n / kQK32; ++b) {
            out[b].d = fp32_to_fp16(scale);
            std::memcpy(out[b].qs, q + kQK32 * b, kQK32);
        }
        return;
    }
    const int group = i4_group_size(t);
    std::vector<float> d(static_cast<size_t>(n / group));  // [n / group]
    std::vector<int> z(d.size());
    std::vector<uint8_t> q(static_cast<size_t>(n));  // [n] element order
    unpack_i4_row(t, src, n, d.data(), z.data(), q.data());
    auto* out = static_cast<BlockQ4_1*>(dst);
    for (int64_t b = 0; b < n / kQK32; ++b) {
        const size_t g = static_cast<size_t>(b * kQK32 / group);
        out[b].d = fp32_to_fp16(d[g]);  // exact: d is an fp16 value
        out[b].m = fp32_to_fp16(-d[g] * static_cast<float>(z[g]));
        const uint8_t* qb = q.data() + kQK32 * b;
        for (int j = 0; j < 16; ++j) out[b].qs[j] = static_cast<uint8_t>(qb[j] | (qb[j + 16] << 4));
    }
}

void dequantize_row_int(DType t, const void* src, float* dst, int64_t n) {
    if (t == DType::I4_G128) {
        dequant_i4(static_cast<const BlockI4G128*>(src), dst, n / kQKG128);
        return;
    }
    if (t == DType::I4_G64) {
        dequant_i4(static_cast<const BlockI4G64*>(src), dst, n / kQKG64);
        return;
    }
    float scale;  // I8_ROW
    std::memcpy(&scale, src, sizeof(float));
    const auto* q = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(src) + kI8RowHeader);
    for (int64_t i = 0; i < n; ++i) dst[i] = scale * static_cast<float>(q[i]);
}

void quantize_row_int(DType t, const float* src, void* dst, int64_t n) {
    if (t == DType::I8_ROW) quantize_i8_row(src, n, dst);
    else if (t == DType::I4_G128)
        quantize_i4<kQKG128>(src, dst, n);
    else if (t == DType::I4_G64)
        quantize_i4<kQKG64>(src, dst, n);
}

}  // namespace kvs::cpu
