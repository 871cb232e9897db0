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

// Arguments of one register tile: weight rows w, w + stride, ... against tokens t0.. of
// the panel; results go to y[(t0 + c) * ldy + r].
struct TileArgs {
    const uint8_t* w = nullptr;
    size_t stride = 0;   // bytes between weight rows
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
        case 2: if constexpr (kC >= 2) run_fixed<Tile, R, 2>(t); break;
        case 3: if constexpr (kC >= 3) run_fixed<Tile, R, 3>(t); break;
        default: if constexpr (kC >= 4) run_fixed<Tile, R, 4>(t); break;
    }
}

// Covers rows [0, n_rows) x tokens [t0, t1) with Tile<R, C>: for each group of kC tokens
// (the last one narrower), tiles of kR rows, then single rows for the remainder.
template <template <int, int> class Tile, int kR, int kC>
void drive(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
           int64_t ldy) {
    for (int t = t0; t < t1; t += kC) {
        const int c = t1 - t < kC ? t1 - t : kC;
        int64_t r = 0;
        for (; r + kR <= n_rows; r += kR)
            run_c<Tile, kR, kC>(c, TileArgs{w + r * stride, stride, &a, t, y + r, ldy});
        for (; r < n_rows; ++r) run_c<Tile, 1, kC>(c, TileArgs{w + r * stride, stride, &a, t, y + r, ldy});
    }
}

// ---- K-quant kernels (vec_dot_kquants_avx2.cpp)
void gemm_q4_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy);
void gemm_q5_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy);
void gemm_q6_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy);

}  // namespace kvs::cpu::avx2
