#pragma once
// GGML's quantized block layouts, byte for byte as GGUF files store them
// (ggml/src/ggml-common.h), and KV Scope's own integer formats (I4_G128, I4_G64, I8_ROW,
// at the end). Private to kernels/cpu: the rest of the program sees only DType and row_bytes().
#include <cstdint>

#include "kernels/dtype.h"

namespace kvs::cpu {

constexpr int kQK32 = 32;  // elements per block of the Q4_0 ... Q8_1 family
constexpr int kQKK = 256;  // elements per super-block of the K-quants
constexpr int kKScaleBytes = 12;

struct BlockQ4_0 {
    uint16_t d;      // fp16 scale; x = d * (q - 8)
    uint8_t qs[16];  // element j in the low nibble of qs[j], element j+16 in the high nibble
};
struct BlockQ4_1 {
    uint16_t d;  // fp16 scale
    uint16_t m;  // fp16 minimum; x = d * q + m
    uint8_t qs[16];
};
struct BlockQ5_0 {
    uint16_t d;     // x = d * (q - 16), q = nibble | (bit j of qh) << 4
    uint8_t qh[4];  // 5th bits, little-endian uint32: bit j for element j
    uint8_t qs[16];
};
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;  // x = d * q + m
    uint8_t qh[4];
    uint8_t qs[16];
};
struct BlockQ8_0 {
    uint16_t d;  // x = d * q
    int8_t qs[32];
};
struct BlockQ8_1 {
    uint16_t d;  // x = d * q
    uint16_t s;  // fp16 of d * sum(qs)
    int8_t qs[32];
};
// K-quants: 256 elements in 8 sub-blocks of 32 (Q4_K/Q5_K) or 16 of 16 (Q6_K).
struct BlockQ4_K {
    uint16_t d;                    // fp16 scale of the 6-bit sub-block scales
    uint16_t dmin;                 // fp16 scale of the 6-bit sub-block mins
    uint8_t scales[kKScaleBytes];  // 8 scales + 8 mins, 6 bits each (see scale_min_k4)
    uint8_t qs[128];               // per 64 elements: 32 bytes, low nibbles first 32, high nibbles next 32
};
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kKScaleBytes];
    uint8_t qh[32];  // 5th bit: element 64*j + l uses bit 2j of qh[l], 64*j + 32 + l bit 2j+1
    uint8_t qs[128];
};
struct BlockQ6_K {
    uint8_t ql[128];    // low 4 bits
    uint8_t qh[64];     // high 2 bits
    int8_t scales[16];  // one per 16 elements
    uint16_t d;         // x = d * scales[e / 16] * (q - 32)
};
struct BlockQ8_K {
    float d;  // x = d * q (float, not fp16)
    int8_t qs[256];
    int16_t bsums[16];  // sums of qs in groups of 16
};

// ---- KV Scope's own formats (ids outside GGML's range: never in a GGUF file)

constexpr int kQKG128 = 128;  // elements per I4_G128 group
constexpr int kQKG64 = 64;    // elements per I4_G64 group

// I4_G<G>: groups of G = 128 or 64 weights with one scale and one zero point (the format
// AWQ and GPTQ checkpoints carry; 4.25 bits per weight for G = 128, 4.5 for G = 64):
// w = d * (q - z), q in 0..15, z in 0..15. The G / 2 nibble bytes are G / 32 GGML-style
// 32-element sub-blocks, so the Q4_0/Q4_1 unpacking applies: sub-block b (elements
// 32b .. 32b+31) uses qs[16b .. 16b+15]; the low nibble of qs[16b + j] is element
// 32b + j, the high nibble element 32b + j + 16.
template <int G>
struct BlockI4 {
    static_assert(G == 64 || G == 128, "I4 groups are 64 or 128 weights");
    static constexpr int kGroup = G;
    static constexpr int kSubBlocks = G / 32;
    uint16_t d;   // fp16 scale
    uint8_t z;    // zero point 0..15
    uint8_t pad;  // 0
    uint8_t qs[G / 2];
};
using BlockI4G128 = BlockI4<128>;
using BlockI4G64 = BlockI4<64>;

// NF4 / FP4 (bitsandbytes' 4-bit formats, blocksize 64): w = absmax * code[q], the code book
// NF4's 16 NormalFloat values or FP4's signed e2m1 values, both in [-1, 1]; quants packed
// as bitsandbytes packs them: byte k holds element 2k in its high nibble, 2k + 1 in its low.
// absmax is a float32, as bitsandbytes keeps it without double quantization.
constexpr int kQKBnb = 64;
struct BlockBnb4 {
    float absmax;
    uint8_t qs[kQKBnb / 2];
};
static_assert(sizeof(BlockBnb4) == 36);

// NF4_DQ: NF4 with bitsandbytes' double quantization (compress_statistics=True). Each block of
// 64 keeps its nibbles (BlockBnb4's order) and an 8-bit code of its absmax. The codes are
// bitsandbytes' quantize_blockwise of (absmax - offset) in groups of 256 blocks counted over
// the flattened tensor (block k of row r is block r * n_in / 64 + k): code index i decodes to
// kDynamicMap8[i] * scale2[group], offset added back (offset = the mean absmax of the tensor).
// The tensor's n_out rows are followed by a tail: float scale2[ceil(n_blocks / 256)], then
// float offset (tensor_bytes(NF4_DQ, n_in, n_out)). 4 + 8/64 + 32/(64*256) = 4.127 bits per weight.
struct BlockNf4Dq {
    uint8_t qabsmax;
    uint8_t qs[kQKBnb / 2];
};
static_assert(sizeof(BlockNf4Dq) == 33);
constexpr int kDqGroup = 256;  // blocks per second-level group

// I8_ROW: one row (output channel) of n_in weights is a little-endian float32 scale
// followed by n_in int8 values: w[i] = scale * q[i], q in -127..127 (row_bytes = 4 + n_in).
// There is no block struct: the int8 values form 32-element runs matching the Q8_0
// activation blocks they multiply.
constexpr size_t kI8RowHeader = 4;
// I8_LLM (LLM.int8()): float outlier threshold, then I8_ROW's row (float scale, n_in int8),
// so the row from byte 4 on is an I8_ROW row (row_bytes = 8 + n_in).
constexpr size_t kI8LlmRowHeader = 8;

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockI4G128) == 68);
static_assert(sizeof(BlockI4G64) == 36);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (get_scale_min_k4).
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Inverse of scale_min_k4: pack 8 scales and 8 mins (each < 64) into 12 bytes.
inline void pack_scale_min_k4(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
    for (int j = 0; j < 4; ++j) {
        q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

// The K-quant half of dequantize_row/quantize_row (quant_formats_k.cpp): Q4_K, Q5_K, Q6_K, Q8_K.
void dequantize_row_k(DType t, const void* src, float* dst, int64_t n);
void quantize_row_k(DType t, const float* src, void* dst, int64_t n);
// The I4_G128 / I4_G64 / I8_ROW half (quant_formats_int.cpp).
void dequantize_row_int(DType t, const void* src, float* dst, int64_t n);
void quantize_row_int(DType t, const float* src, void* dst, int64_t n);
// The NF4 / FP4 part (quant_formats_bnb.cpp); their dot product runs against F32 activations.
void dequantize_row_bnb(DType t, const void* src, float* dst, int64_t n);
void quantize_row_bnb(DType t, const float* src, void* dst, int64_t n);
float dot_bnb_f32(DType t, const void* w, const float* a, int64_t n);
// LLM.int8() (quant_formats_llm_int8.cpp): an I8_LLM row against F32 activations.
float dot_llm_int8(const void* w, const float* a, int64_t n);
// NF4_DQ (quant_formats_bnb_dq.cpp): the float absmax of blocks [b0, b1) of the flattened
// tensor w, into out[b1 - b0]; a row's dot product given its decoded absmax [n / 64].
void nf4_dq_absmax(const void* tensor, int64_t n_in, int64_t n_out, int64_t b0, int64_t b1, float* out);
float dot_nf4_dq_f32(const void* w_row, const float* absmax, const float* a, int64_t n);

}  // namespace kvs::cpu
