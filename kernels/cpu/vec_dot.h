#pragma once
// Private interface between matmul.cpp and the per-level dot-product kernels
// (vec_dot_scalar.cpp, vec_dot_avx2.cpp).
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvs::cpu {

// ---- scalar reference: w_row in type t, act_row in activation_type(t) (GGML blocks or F32)
float vec_dot_scalar(DType t, const void* w_row, const void* act_row, int64_t n);

// ---- AVX2 (only call when detect_simd() >= Avx2)
bool avx2_supports(DType t);  // weight types with an AVX2 kernel
float vec_dot_avx2(DType t, const void* w_row, const void* act_row, int64_t n);

// The activations of one matmul call, prepared once for the AVX2 kernels.
//  - 32-element weight types (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0) and I8_ROW: int8 quants
//    contiguous per token plus float scales d and d*sum(q) per block, stored block-major
//    so a tile of tokens reads its scales with one load.
//  - I4_G128 / I4_G64: Q8_1 blocks of 32 as well, but the quants of each 64 elements
//    (sub-blocks 2p, 2p+1 of the row) are stored in nibble order: [a0..15 of 2p, a0..15 of 2p+1,
//    a16..31 of 2p, a16..31 of 2p+1], so one 32-byte load of weight nibbles masked low /
//    shifted high meets its activations; scales as da8 and sg below.
//  - K-quants: GGML Q8_K blocks per token.
//  - float weights: the F32 input itself.
struct ActPanel {
    int n_tokens = 0;
    int64_t n_in = 0;
    const int8_t* qs = nullptr;      // [n_tokens, n_in]
    const float* d = nullptr;        // [n_in / 32, n_tokens]
    const float* s = nullptr;        // [n_in / 32, n_tokens]
    const float* ds = nullptr;       // [n_in / 32, n_tokens, 2] (d, s) pairs for the one-token kernels
    const float* da8 = nullptr;      // [n_in / 64, n_tokens, 8] I4: d of sub-block 2p x4, of 2p+1 x4
    const float* sg = nullptr;       // [n_in / G, n_tokens] I4_G<G>: s summed over the group's G / 32 sub-blocks
    const BlockQ8_K* q8k = nullptr;  // [n_tokens, n_in / 256]
    const float* f32 = nullptr;      // [n_tokens, n_in]
    // NF4 / FP4 / NF4_DQ: int16 activations, one scale per 64 inputs (d64 = amax / 32767), each
    // block's 64 values in the order the code-book lookup produces weights (vec_dot_bnb_avx2.cpp)
    const int16_t* q16 = nullptr;  // [n_tokens, n_in]
    const float* d64 = nullptr;    // [n_in / 64, n_tokens] (+4 padding)
    // I8_LLM: the Q8 panel above with one scale per token (d[b, t] the same for every b), the
    // activations above the threshold left out of it (0 in qs) and kept here in float
    float threshold = 0.0f;             // set by the caller from the weight (llm_int8_threshold)
    const int32_t* ol_count = nullptr;  // [n_tokens]
    const int32_t* ol_idx = nullptr;    // [n_tokens, n_in] the first ol_count[t] used
    const float* ol_val = nullptr;      // [n_tokens, n_in]
};

// Bytes of scratch avx2_prepare_act needs for n_tokens rows of n_in (64-byte aligned parts).
size_t avx2_act_bytes(DType weight_type, int n_tokens, int64_t n_in);
// Lays out the panel inside scratch (no quantization yet).
ActPanel avx2_act_layout(DType weight_type, void* scratch, const float* x, int n_tokens, int64_t n_in);
// Quantizes tokens [t0, t1) of x [n_tokens, n_in] into the panel (separate token ranges may run in parallel).
// I8_LLM: set panel.threshold (llm_int8_threshold of the weight) before quantizing.
void avx2_quantize_act(DType weight_type, const ActPanel& panel, const float* x, int t0, int t1);
// y[t, r] for r in [r0, r1), t in [t0, t1); y row stride ldy. Each output is computed the
// same way whatever the tile it lands in, so results do not depend on n_tokens or threads.
void avx2_gemm(const WeightView& w, const ActPanel& a, int64_t r0, int64_t r1, int t0, int t1, float* y, int64_t ldy);

}  // namespace kvs::cpu
