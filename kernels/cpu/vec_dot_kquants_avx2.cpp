// AVX2 register tiles for the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K activations:
// one weight row x up to 4 tokens, integer sums per super-block (maddubs, then madd
// with the sub-block scales), one float multiply-add per super-block and token.
#include <cstring>

#include "kernels/cpu/simd_avx2.h"

namespace kvs::cpu::avx2 {
namespace {

// The 8 six-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K block.
inline __m128i unpack_scales_mins(const uint8_t* s12) {
    constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    uint32_t u[4];
    std::memcpy(u, s12, 12);
    u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
    const uint32_t mins_lo = u[1] & kmask1;
    u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
    u[2] = mins_lo;
    u[0] &= kmask1;
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
}

// Q4_K (kFive false) and Q5_K (true); R is always 1 (a row's scales fill the registers).
template <bool kFive>
struct TileQ45K {
    template <int R, int C>
    struct T {
        static void run(const TileArgs& t) {
            static_assert(R == 1);
            const ActPanel& a = *t.a;
            const int64_t nsb = a.n_in / kQKK;
            const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
            const __m128i dup_mins = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
            const BlockQ8_K* act[C];
            for (int c = 0; c < C; ++c) act[c] = a.q8k + static_cast<int64_t>(t.t0 + c) * nsb;
            __m256 acc[C];
            for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
            for (int64_t i = 0; i < nsb; ++i) {
                const uint8_t *scales, *qs, *qh = nullptr;
                uint16_t d16, dmin16;
                if constexpr (kFive) {
                    const auto& b = reinterpret_cast<const BlockQ5_K*>(t.w)[i];
                    scales = b.scales, qs = b.qs, qh = b.qh, d16 = b.d, dmin16 = b.dmin;
                } else {
                    const auto& b = reinterpret_cast<const BlockQ4_K*>(t.w)[i];
                    scales = b.scales, qs = b.qs, d16 = b.d, dmin16 = b.dmin;
                }
                const __m128i sm = unpack_scales_mins(scales);
                alignas(16) uint8_t sc[16];
                _mm_store_si128(reinterpret_cast<__m128i*>(sc), sm);
                const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_mins));  // m0 m0 m1 m1 ...
                __m256i qhv = _mm256_setzero_si256();
                if constexpr (kFive) qhv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
                __m256i isum[C];
                for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
                for (int j = 0; j < 4; ++j) {  // 64 elements: low nibbles, then high nibbles
                    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
                    __m256i lo = _mm256_and_si256(q, m4);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                    if constexpr (kFive) {
                        const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(qhv, 2 * j), one);
                        const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(qhv, 2 * j + 1), one);
                        lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
                        hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
                    }
                    const __m256i sc_lo = _mm256_set1_epi16(sc[2 * j]);
                    const __m256i sc_hi = _mm256_set1_epi16(sc[2 * j + 1]);
                    for (int c = 0; c < C; ++c) {
                        const int8_t* aq = act[c][i].qs + 64 * j;
                        const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq));
                        const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 32));
                        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a_lo), sc_lo);
                        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a_hi), sc_hi);
                        isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(p_lo, p_hi));
                    }
                }
                const float d = h2f(d16), dmin = h2f(dmin16);
                for (int c = 0; c < C; ++c) {
                    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[c][i].bsums));
                    const __m256i msum = _mm256_madd_epi16(bs, mins16);
                    const float da = act[c][i].d;
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(d * da), acc[c]);
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-dmin * da), acc[c]);
                }
            }
            for (int c = 0; c < C; ++c) t.y[(t.t0 + c) * t.ldy] = hsum(acc[c]);
        }
    };
};

template <int R, int C>
struct TileQ6K {
    static void run(const TileArgs& t) {
        static_assert(R == 1);
        const ActPanel& a = *t.a;
        const int64_t nsb = a.n_in / kQKK;
        const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
        const BlockQ8_K* act[C];
        for (int c = 0; c < C; ++c) act[c] = a.q8k + static_cast<int64_t>(t.t0 + c) * nsb;
        __m256 acc[C];
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nsb; ++i) {
            const auto& b = reinterpret_cast<const BlockQ6_K*>(t.w)[i];
            const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
            __m256i isum[C];
            for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
            for (int h = 0; h < 2; ++h) {
                const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
                const __m256i qhv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
                __m256i q[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qhv, m3), 4));
                q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qhv, 2), m3), 4));
                q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qhv, 4), m3), 4));
                q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qhv, 6), m3), 4));
                for (int m = 0; m < 4; ++m) {
                    const int k = 4 * h + m;  // 32-element chunk: scales 2k (first 16) and 2k+1
                    const __m128i sel = _mm_setr_epi8(
                        static_cast<char>(2 * k), static_cast<char>(2 * k), static_cast<char>(2 * k),
                        static_cast<char>(2 * k), static_cast<char>(2 * k), static_cast<char>(2 * k),
                        static_cast<char>(2 * k), static_cast<char>(2 * k), static_cast<char>(2 * k + 1),
                        static_cast<char>(2 * k + 1), static_cast<char>(2 * k + 1), static_cast<char>(2 * k + 1),
                        static_cast<char>(2 * k + 1), static_cast<char>(2 * k + 1), static_cast<char>(2 * k + 1),
                        static_cast<char>(2 * k + 1));
                    const __m256i scv = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, sel));
                    for (int c = 0; c < C; ++c) {
                        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[c][i].qs + 32 * k));
                        isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[m], av), scv));
                    }
                }
            }
            // the stored quants are q + 32: subtract 32 * sum_j scale_j * bsum_j
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            const float d = h2f(b.d);
            for (int c = 0; c < C; ++c) {
                const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[c][i].bsums));
                const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
                const __m256i s = _mm256_sub_epi32(isum[c], corr);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * act[c][i].d), acc[c]);
            }
        }
        for (int c = 0; c < C; ++c) t.y[(t.t0 + c) * t.ldy] = hsum(acc[c]);
    }
};

}  // namespace

void gemm_q4_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy) {
    drive<TileQ45K<false>::T, 1, 4>(w, stride, a, n_rows, t0, t1, y, ldy);
}

void gemm_q5_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy) {
    drive<TileQ45K<true>::T, 1, 4>(w, stride, a, n_rows, t0, t1, y, ldy);
}

void gemm_q6_k(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
               int64_t ldy) {
    drive<TileQ6K, 1, 4>(w, stride, a, n_rows, t0, t1, y, ldy);
}

}  // namespace kvs::cpu::avx2
