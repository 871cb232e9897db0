#pragma once
// GGML's quantized block layouts on the device, byte for byte as GGUF stores them
// (ggml/src/ggml-common.h), KV Scope's own formats (I4_G128 / I4_G64, NF4 / FP4, NF4_DQ,
// I8_ROW / I8_LLM, byte for byte as kernels/cpu/quant_blocks.h lays them out), and the
// dequantization of one "item": 32 consecutive elements of a row. Every quantized type
// splits a row into items of 32 elements (one block of the 32-element family, one eighth
// of a K-quant super-block, a quarter / half of an I4 group, half of a bitsandbytes block
// of 64, a run of 32 int8 of an I8 row), so a GEMV lane, a dequantize thread and an
// embedding thread all work item by item.
//
// The CPU mirror of these structs is kernels/cpu/quant_blocks.h; this file does not
// include it so the CUDA library stays independent of the CPU kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "kernels/cuda/device_code_books.cuh"
#include "kernels/dtype.h"

namespace kvs::cuda {

constexpr int kItem = 32;  // elements per item

struct DevBlockQ4_0 {
    uint16_t d;
    uint8_t qs[16];
};
struct DevBlockQ4_1 {
    uint16_t d, m;
    uint8_t qs[16];
};
struct DevBlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct DevBlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct DevBlockQ8_0 {
    uint16_t d;
    int8_t qs[32];
};
struct DevBlockQ4_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
struct DevBlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
struct DevBlockQ6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// I4_G<G>: w = d * (q - z); the G / 2 nibble bytes are G / 32 Q4-style sub-blocks of 32
// (sub-block b: low nibble of qs[16b + j] is element 32b + j, high nibble element 32b + j + 16).
template <int G>
struct DevBlockI4 {
    uint16_t d;  // fp16 scale
    uint8_t z;   // zero point 0..15
    uint8_t pad;
    uint8_t qs[G / 2];
};
// NF4 / FP4: w = absmax * code[q]; byte k holds element 2k in its high nibble, 2k + 1 in its low.
struct DevBlockBnb4 {
    float absmax;
    uint8_t qs[32];
};
// NF4_DQ: BlockBnb4's nibbles with an 8-bit code of the absmax (the tensor's tail decodes it).
struct DevBlockNf4Dq {
    uint8_t qabsmax;
    uint8_t qs[32];
};
static_assert(sizeof(DevBlockQ4_0) == 18);
static_assert(sizeof(DevBlockQ4_1) == 20);
static_assert(sizeof(DevBlockQ5_0) == 22);
static_assert(sizeof(DevBlockQ5_1) == 24);
static_assert(sizeof(DevBlockQ8_0) == 34);
static_assert(sizeof(DevBlockQ4_K) == 144);
static_assert(sizeof(DevBlockQ5_K) == 176);
static_assert(sizeof(DevBlockQ6_K) == 210);
static_assert(sizeof(DevBlockI4<128>) == 68);
static_assert(sizeof(DevBlockI4<64>) == 36);
static_assert(sizeof(DevBlockBnb4) == 36);
static_assert(sizeof(DevBlockNf4Dq) == 33);
constexpr int kNf4DqGroup = 256;  // NF4_DQ: blocks of 64 per second-level scale (over the flattened tensor)

// Dequantization is __host__ __device__ so it can also be checked on a machine without a GPU.
#define KVS_HD __host__ __device__
#ifdef __CUDA_ARCH__
#define KVS_UNROLL _Pragma("unroll")
#else
#define KVS_UNROLL
#endif

KVS_HD __forceinline__ float half_bits_to_float(uint16_t h) {
    __half_raw raw;
    raw.x = h;
    return __half2float(__half(raw));
}
KVS_HD __forceinline__ float bf16_bits_to_float(uint16_t h) {
    __nv_bfloat16_raw raw;
    raw.x = h;
    return __bfloat162float(__nv_bfloat16(raw));
}

// Little-endian uint32 from 4 bytes that may be only 2-byte aligned.
KVS_HD __forceinline__ uint32_t load_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}

// A little-endian float32 from 4 bytes of any alignment.
KVS_HD __forceinline__ float load_f32(const uint8_t* p) {
    float f;
    memcpy(&f, p, sizeof f);
    return f;
}

// A weight matrix as the decoders read it: n_out rows of row_bytes(dtype, n_in) bytes back
// to back, then, for NF4_DQ only, the tensor's tail (tensor_bytes in kernels/dtype.h).
struct DevWeight {
    const uint8_t* data;  // [n_out, row_bytes] (+ the NF4_DQ tail)
    size_t row_bytes;
    int64_t n_in;
    int64_t n_out;
    KVS_HD const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block (get_scale_min_k4).
KVS_HD __forceinline__ void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// QType<T>: block geometry of a quantized type and dequantization of item `part` of
// one block into v[32]. part < kItemsPerBlock; element j of the item is element
// kItem * part + j of the block.
template <DType T>
struct QType;

template <>
struct QType<DType::Q4_0> {
    using Block = DevBlockQ4_0;
    static constexpr int kItemsPerBlock = 1;
    KVS_HD static void dequant(const Block* b, int, float* v) {
        const float d = half_bits_to_float(b->d);
        KVS_UNROLL
        for (int j = 0; j < 16; ++j) {
            v[j] = d * (static_cast<int>(b->qs[j] & 0xF) - 8);
            v[j + 16] = d * (static_cast<int>(b->qs[j] >> 4) - 8);
        }
    }
};

template <>
struct QType<DType::Q4_1> {
    using Block = DevBlockQ4_1;
    static constexpr int kItemsPerBlock = 1;
    KVS_HD static void dequant(const Block* b, int, float* v) {
        const float d = half_bits_to_float(b->d), m = half_bits_to_float(b->m);
        KVS_UNROLL
        for (int j = 0; j < 16; ++j) {
            v[j] = d * (b->qs[j] & 0xF) + m;
            v[j + 16] = d * (b->qs[j] >> 4) + m;
        }
    }
};

// Q5_0/Q5_1: the 5th bit of element j is bit j of the little-endian uint32 qh.
template <>
struct QType<DType::Q5_0> {
    using Block = DevBlockQ5_0;
    static constexpr int kItemsPerBlock = 1;
    KVS_HD static void dequant(const Block* b, int, float* v) {
        const float d = half_bits_to_float(b->d);
        const uint32_t qh = load_u32(b->qh);
        KVS_UNROLL
        for (int j = 0; j < 16; ++j) {
            const int lo = (b->qs[j] & 0xF) | (((qh >> j) & 1u) << 4);
            const int hi = (b->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
            v[j] = d * (lo - 16);
            v[j + 16] = d * (hi - 16);
        }
    }
};

template <>
struct QType<DType::Q5_1> {
    using Block = DevBlockQ5_1;
    static constexpr int kItemsPerBlock = 1;
    KVS_HD static void dequant(const Block* b, int, float* v) {
        const float d = half_bits_to_float(b->d), m = half_bits_to_float(b->m);
        const uint32_t qh = load_u32(b->qh);
        KVS_UNROLL
        for (int j = 0; j < 16; ++j) {
            const int lo = (b->qs[j] & 0xF) | (((qh >> j) & 1u) << 4);
            const int hi = (b->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
            v[j] = d * lo + m;
            v[j + 16] = d * hi + m;
        }
    }
};

template <>
struct QType<DType::Q8_0> {
    using Block = DevBlockQ8_0;
    static constexpr int kItemsPerBlock = 1;
    KVS_HD static void dequant(const Block* b, int, float* v) {
        const float d = half_bits_to_float(b->d);
        KVS_UNROLL
        for (int j = 0; j < 32; ++j) v[j] = d * b->qs[j];
    }
};

// Q4_K/Q5_K: sub-block p of 32 elements lives in the low (p even) or high (p odd)
// nibbles of qs[32 * (p / 2) .. + 32]; Q5_K's 5th bit of element l is bit p of qh[l].
template <>
struct QType<DType::Q4_K> {
    using Block = DevBlockQ4_K;
    static constexpr int kItemsPerBlock = 8;
    KVS_HD static void dequant(const Block* b, int p, float* v) {
        int sc, m;
        scale_min_k4(p, b->scales, &sc, &m);
        const float d = half_bits_to_float(b->d) * sc, mn = half_bits_to_float(b->dmin) * m;
        const uint8_t* q = b->qs + 32 * (p >> 1);
        const int shift = (p & 1) * 4;
        KVS_UNROLL
        for (int l = 0; l < 32; ++l) v[l] = d * ((q[l] >> shift) & 0xF) - mn;
    }
};

template <>
struct QType<DType::Q5_K> {
    using Block = DevBlockQ5_K;
    static constexpr int kItemsPerBlock = 8;
    KVS_HD static void dequant(const Block* b, int p, float* v) {
        int sc, m;
        scale_min_k4(p, b->scales, &sc, &m);
        const float d = half_bits_to_float(b->d) * sc, mn = half_bits_to_float(b->dmin) * m;
        const uint8_t* q = b->qs + 32 * (p >> 1);
        const int shift = (p & 1) * 4;
        KVS_UNROLL
        for (int l = 0; l < 32; ++l) {
            const int qv = ((q[l] >> shift) & 0xF) | (((b->qh[l] >> p) & 1) << 4);
            v[l] = d * qv - mn;
        }
    }
};

// Q6_K: half n = p / 4 (128 elements), group g = p % 4 of 32 in that half:
// low 4 bits from ql[64n + l + 32 (g & 1)] (nibble g / 2), high 2 bits from
// qh[32n + l] >> 2g, scale scales[8n + l / 16 + 2g]; x = d * scale * (q - 32).
template <>
struct QType<DType::Q6_K> {
    using Block = DevBlockQ6_K;
    static constexpr int kItemsPerBlock = 8;
    KVS_HD static void dequant(const Block* b, int p, float* v) {
        const int n = p >> 2, g = p & 3;
        const float d = half_bits_to_float(b->d);
        const uint8_t* ql = b->ql + 64 * n + 32 * (g & 1);
        const uint8_t* qh = b->qh + 32 * n;
        const int8_t* sc = b->scales + 8 * n + 2 * g;
        const int lshift = (g >> 1) * 4, hshift = 2 * g;
        const float d0 = d * sc[0], d1 = d * sc[1];
        KVS_UNROLL
        for (int l = 0; l < 32; ++l) {
            const int q = ((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4);
            v[l] = (l < 16 ? d0 : d1) * (q - 32);
        }
    }
};

// I4_G128 / I4_G64: item p of a group is its Q4-style sub-block p; w = d * (q - z), the
// subtraction in int as the CPU reference does it.
template <int G>
struct I4Type {
    using Block = DevBlockI4<G>;
    static constexpr int kItemsPerBlock = G / kItem;
    KVS_HD static void dequant(const Block* b, int p, float* v) {
        const float d = half_bits_to_float(b->d);
        const int z = b->z;
        const uint8_t* q = b->qs + 16 * p;
        KVS_UNROLL
        for (int j = 0; j < 16; ++j) {
            v[j] = d * static_cast<float>((q[j] & 0xF) - z);
            v[j + 16] = d * static_cast<float>((q[j] >> 4) - z);
        }
    }
};
template <>
struct QType<DType::I4_G128> : I4Type<128> {};
template <>
struct QType<DType::I4_G64> : I4Type<64> {};

// Item p (elements 32p .. 32p + 31) of a bitsandbytes 4-bit block: qs[16p .. 16p + 15], high
// nibble first; v = absmax * code(q), the code book of T (NF4 or FP4).
template <DType T>
KVS_HD __forceinline__ void bnb4_item(const uint8_t* qs, int p, float absmax, float* v) {
    static_assert(T == DType::NF4 || T == DType::FP4);
    const uint8_t* q = qs + 16 * p;
    KVS_UNROLL
    for (int k = 0; k < 16; ++k) {
        if constexpr (T == DType::NF4) {
            v[2 * k] = absmax * nf4_code(q[k] >> 4);
            v[2 * k + 1] = absmax * nf4_code(q[k] & 0xF);
        } else {
            v[2 * k] = absmax * fp4_code(q[k] >> 4);
            v[2 * k + 1] = absmax * fp4_code(q[k] & 0xF);
        }
    }
}

template <>
struct QType<DType::NF4> {
    using Block = DevBlockBnb4;
    static constexpr int kItemsPerBlock = 2;
    KVS_HD static void dequant(const Block* b, int p, float* v) { bnb4_item<DType::NF4>(b->qs, p, b->absmax, v); }
};
template <>
struct QType<DType::FP4> {
    using Block = DevBlockBnb4;
    static constexpr int kItemsPerBlock = 2;
    KVS_HD static void dequant(const Block* b, int p, float* v) { bnb4_item<DType::FP4>(b->qs, p, b->absmax, v); }
};

// v[32] = item `item` (counted from the start of the row) of row `row` of w, of type T.
// Types whose rows are blocks and nothing else use QType<T>; the specializations below read
// a row header (I8_ROW, I8_LLM) or the tensor's tail (NF4_DQ).
template <DType T>
KVS_HD __forceinline__ void dequant_item(const DevWeight& w, int64_t row, int item, float* v) {
    using Q = QType<T>;
    const auto* blocks = reinterpret_cast<const typename Q::Block*>(w.row(row));
    Q::dequant(blocks + item / Q::kItemsPerBlock, item % Q::kItemsPerBlock, v);
}

// I8_ROW: float scale, then n_in int8; w = scale * q.
KVS_HD __forceinline__ void i8_row_item(const uint8_t* row, int item, float* v) {
    const float scale = load_f32(row);
    const auto* q = reinterpret_cast<const int8_t*>(row + 4) + kItem * item;
    KVS_UNROLL
    for (int j = 0; j < kItem; ++j) v[j] = scale * static_cast<float>(q[j]);
}
template <>
KVS_HD __forceinline__ void dequant_item<DType::I8_ROW>(const DevWeight& w, int64_t row, int item, float* v) {
    i8_row_item(w.row(row), item, v);
}
// I8_LLM (LLM.int8()): float threshold, then an I8_ROW row. Its weights decode as I8_ROW's
// (embedding lookups); its matmul quantizes the activations too (llm_int8_kernel).
template <>
KVS_HD __forceinline__ void dequant_item<DType::I8_LLM>(const DevWeight& w, int64_t row, int item, float* v) {
    i8_row_item(w.row(row) + 4, item, v);
}

// NF4_DQ: block k of the flattened tensor (k = row * n_in / 64 + block in row) has the absmax
// dynamic_map8(qabsmax) * scale2[k / 256] + offset; the tail after the n_out rows holds
// float scale2[ceil(n_blocks / 256)], then float offset. Two float steps, as the CPU does.
template <>
KVS_HD __forceinline__ void dequant_item<DType::NF4_DQ>(const DevWeight& w, int64_t row, int item, float* v) {
    const int64_t nb_row = w.n_in / 64;
    const int64_t k = row * nb_row + item / 2;
    const int64_t n_groups = (nb_row * w.n_out + kNf4DqGroup - 1) / kNf4DqGroup;
    const uint8_t* tail = w.row(w.n_out);
    const auto* b = reinterpret_cast<const DevBlockNf4Dq*>(w.row(row)) + item / 2;
    const float s2 = load_f32(tail + sizeof(float) * static_cast<size_t>(k / kNf4DqGroup));
    const float offset = load_f32(tail + sizeof(float) * static_cast<size_t>(n_groups));
#ifdef __CUDA_ARCH__
    const float absmax = __fadd_rn(__fmul_rn(dynamic_map8(b->qabsmax), s2), offset);  // no FMA: the CPU's roundings
#else
    const float absmax = dynamic_map8(b->qabsmax) * s2 + offset;
#endif
    bnb4_item<DType::NF4>(b->qs, item % 2, absmax, v);
}

// Element i of a row of a plain float type (F32, F16 or BF16).
template <DType T>
KVS_HD __forceinline__ float load_float_elem(const void* row, int64_t i) {
    if constexpr (T == DType::F32) {
        return static_cast<const float*>(row)[i];
    } else if constexpr (T == DType::F16) {
        return half_bits_to_float(static_cast<const uint16_t*>(row)[i]);
    } else {
        return bf16_bits_to_float(static_cast<const uint16_t*>(row)[i]);
    }
}

}  // namespace kvs::cuda
