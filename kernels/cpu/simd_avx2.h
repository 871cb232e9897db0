#pragma once
// Small AVX2 helpers shared by the *_avx2.cpp kernel files. Include only from files
// compiled with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/vec_dot.h"

namespace kvs::cpu::avx2 {

inline float hsum(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

inline int hsum_i32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(x);
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// sum of adjacent pairs of u8 * s8 products, widened to int32 (8 lanes of 4 products each)
inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// One 32-block, exactly as ggml's x86 quantize_row_q8_0 / quantize_row_q8_1 (AVX2):
// q = round-half-even(x * (127 / amax)); *d_out = amax / 127 (unrounded; the caller
// rounds it to fp16 as the block's scale). Returns sum(q).
inline int quantize_block32(const float* x, int8_t* q, float* d_out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
    __m256 amax = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax_s = _mm_cvtss_f32(m);
    const float d = amax_s / 127.0f;
    const float id = amax_s != 0.0f ? 127.0f / amax_s : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i i32[4];
    for (int k = 0; k < 4; ++k)
        i32[k] = _mm256_cvtps_epi32(
            _mm256_round_ps(_mm256_mul_ps(v[k], idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3])));
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i32[0], i32[1]), _mm256_packs_epi32(i32[2], i32[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p);
    *d_out = d;
    return sum;
}

// x rounded to fp16 and back (the precision of a block_q8_0/q8_1 d or s field).
inline float round_fp16(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }

// Arguments of one register tile: weight rows w, w + stride, ... against tokens t0.. of
// the panel; results go to y[(t0 + c) * ldy + r].
struct TileArgs {
    const uint8_t* w = nullptr;
    size_t stride = 0;  // bytes between weight rows
    const ActPanel* a = nullptr;
    int t0 = 0;
    float* y = nullptr;  // already offset to the tile's first row
    int64_t ldy = 0;
};

template <template <int, int> class Tile, int R, int C>
inline void run_fixed(const TileArgs& t) {
    Tile<R, C>::run(t);
}

// Tile<R, c> for a run-time token count c <= kC.
template <template <int, int> class Tile, int R, int kC>
inline void run_c(int c, const TileArgs& t) {
    switch (c) {
        case 1: run_fixed<Tile, R, 1>(t); break;
        case 2:
            if constexpr (kC >= 2) run_fixed<Tile, R, 2>(t);
            break;
        case 3:
            if constexpr (kC >= 3) run_fixed<Tile, R, 3>(t);
            break;
        default:
            if constexpr (kC >= 4) run_fixed<Tile, R, 4>(t);
            break;
    }
}

// Covers rows [0, n_rows) x tokens [t0, t1) with Tile<R, C>: for each group of kC tokens
// (the last one narrower), tiles of kR rows, then single rows for the remainder.
template <template <int, int> class Tile, int kR, int kC>
void drive(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y, int64_t ldy) {
    for (int t = t0; t < t1; t += kC) {
        const int c = t1 - t < kC ? t1 - t : kC;
        int64_t r = 0;
        for (; r + kR <= n_rows; r += kR) run_c<Tile, kR, kC>(c, TileArgs{w + r * stride, stride, &a, t, y + r, ldy});
        for (; r < n_rows; ++r) run_c<Tile, 1, kC>(c, TileArgs{w + r * stride, stride, &a, t, y + r, ldy});
    }
}

// ---- Q4_0 / Q4_1, 8 rows in lanes (vec_dot_q4_avx2.cpp); tiles: the rows' WeightView::cpu_tiles
// from their first row on (a multiple of 8), or null
void gemm_q4_0(const uint8_t* w, size_t stride, const void* tiles, const ActPanel& a, int64_t n_rows, int t0, int t1,
               float* y, int64_t ldy);
void gemm_q4_1(const uint8_t* w, size_t stride, const void* tiles, const ActPanel& a, int64_t n_rows, int t0, int t1,
               float* y, int64_t ldy);

// ---- K-quant kernels (vec_dot_kquants_avx2.cpp)
void gemm_q4_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy);
void gemm_q5_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy);
void gemm_q6_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy);

// ---- KV Scope's integer formats (vec_dot_int_avx2.cpp). `group` is the I4 group size
// (i4_group_size: 128 for I4_G128, 64 for I4_G64).
void gemm_i4(int group, const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
             int64_t ldy);
void gemm_i8_row(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
                 int64_t ldy);
// The I4 activation panel (layout in vec_dot.h): its scratch bytes, its layout inside
// scratch, quantizing tokens [t0, t1) of x into it, and filling a one-token panel from
// GGML Q8_1 blocks (vec_dot of one row).
size_t i4_act_bytes(int group, int n_tokens, int64_t n_in);
ActPanel i4_act_layout(int group, void* scratch, int n_tokens, int64_t n_in);
void i4_quantize_act(int group, const ActPanel& p, const float* x, int t0, int t1);
void i4_fill_act(int group, const ActPanel& p, const BlockQ8_1* act_row);

// ---- bitsandbytes' formats (vec_dot_bnb_avx2.cpp). NF4 / FP4 / NF4_DQ: the int16 panel of
// vec_dot.h (q16, d64) and the code-book tiles for rows [r0, r1) of w (y not offset);
// I8_LLM: the Q8 panel with per-token scales and outliers, and its rows (w, y offset to r0).
size_t bnb_act_bytes(int n_tokens, int64_t n_in);
ActPanel bnb_act_layout(void* scratch, int n_tokens, int64_t n_in);
void bnb_quantize_act(const ActPanel& p, const float* x, int t0, int t1);
void gemm_bnb(const WeightView& w, const ActPanel& a, int64_t r0, int64_t r1, int t0, int t1, float* y, int64_t ldy);
size_t llm_act_bytes(int n_tokens, int64_t n_in);
ActPanel llm_act_layout(void* scratch, int n_tokens, int64_t n_in);
void llm_quantize_act(const ActPanel& p, const float* x, int t0, int t1);
void gemm_llm_int8(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
                   int64_t ldy);

}  // namespace kvs::cpu::avx2
