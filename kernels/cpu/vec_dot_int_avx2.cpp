// AVX2 kernels for KV Scope's integer weight formats: I4_G128 / I4_G64 (against Q8_1
// activations in the nibble-ordered panel of vec_dot.h; one template over the group size
// G) and I8_ROW (against the Q8_0 panel).
//
// I4_G<G>: one 32-byte load of a group's nibbles covers two sub-blocks (a pair: G / 64 per
// group); masked, it gives
// elements 0..15 of both, shifted, elements 16..31 of both, each meeting 32 panel bytes.
// The two maddubs results add in int16 (|sum| <= 4 * 15 * 127 < 32767), one madd makes
// int32 lanes 0..3 (sub-block 2p) and 4..7 (2p+1), scaled by d * [d_a(2p) x4, d_a(2p+1) x4].
// The zero-point term -d * z * sum(s_a) is one FMA per group. The panel's quants and d's
// are laid out per 64 inputs whatever G is; only the group sums sg depend on G.
// I8_ROW: the weight signs move onto |a| (shared by the rows of a tile), one FMA with d_a
// per block, and the row's float scale multiplies the sum at the end.
//
// As in vec_dot_avx2.cpp, every (row, token) pair goes through the same operations in
// the same order whatever the tile, so results do not depend on batching or threads.
#include <cstring>

#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/simd_avx2.h"

namespace kvs::cpu::avx2 {
namespace {

inline size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

// How far ahead to prefetch weights: two tiles, for few tokens (which stream the weights)
// and short rows (the hardware prefetcher does not lock on to R interleaved streams in
// time); 0 otherwise. As Tile32 in vec_dot_avx2.cpp.
inline size_t gemv_prefetch_ahead(int rows, size_t stride, int n_tok) {
    return n_tok <= 16 && 2 * rows * stride <= 16384 ? 2 * rows * stride : 0;
}

template <int G>
struct TileI4 {
    template <int R, int C>
    struct T {
        // acc[r][c] += cvt(int dot of pair p) * (d_r * da8), accm[r][c] += m_r * sg, y = hsum + accm
        static void run(const TileArgs& t) {
            using Block = BlockI4<G>;
            constexpr int n_pairs = G / 64;
            const ActPanel& a = *t.a;
            const int64_t n_groups = a.n_in / G;
            const int n_tok = a.n_tokens;
            const int8_t* aq = a.qs + static_cast<int64_t>(t.t0) * a.n_in;
            const __m256i low4 = _mm256_set1_epi8(0x0F);
            const __m256i ones = _mm256_set1_epi16(1);
            __m256 acc[R][C];
            __m128 accm[R];  // lane c: zero-point term of token t0 + c
            for (int r = 0; r < R; ++r) {
                accm[r] = _mm_setzero_ps();
                for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
            }
            const size_t ahead = gemv_prefetch_ahead(R, t.stride, n_tok);
            for (int64_t g = 0; g < n_groups; ++g) {
                const Block* blk[R];
                __m256 dv[R];
                const __m128 sg = C == 1 ? _mm_load_ss(a.sg + g * n_tok + t.t0) : _mm_loadu_ps(a.sg + g * n_tok + t.t0);
                for (int r = 0; r < R; ++r) {
                    blk[r] = reinterpret_cast<const Block*>(t.w + r * t.stride) + g;
                    const char* pf = reinterpret_cast<const char*>(blk[r]) + ahead;
                    _mm_prefetch(pf, _MM_HINT_T0);
                    _mm_prefetch(pf + sizeof(Block) - 1, _MM_HINT_T0);
                    const float d = h2f(blk[r]->d);
                    dv[r] = _mm256_set1_ps(d);
                    const float m = -d * static_cast<float>(blk[r]->z);  // exact: 11-bit d times 4-bit z
                    accm[r] = _mm_fmadd_ps(_mm_set1_ps(m), sg, accm[r]);
                }
                for (int p = 0; p < n_pairs; ++p) {
                    __m256i lo[R], hi[R];
                    for (int r = 0; r < R; ++r) {
                        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qs + 32 * p));
                        lo[r] = _mm256_and_si256(x, low4);
                        hi[r] = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
                    }
                    const float* da8 = a.da8 + ((n_pairs * g + p) * n_tok + t.t0) * 8;
                    for (int c = 0; c < C; ++c) {
                        const int8_t* ap = aq + c * a.n_in + G * g + 64 * p;
                        const __m256i alo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ap));
                        const __m256i ahi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ap + 32));
                        const __m256 da = _mm256_loadu_ps(da8 + 8 * c);
                        for (int r = 0; r < R; ++r) {
                            const __m256i p16 =
                                _mm256_add_epi16(_mm256_maddubs_epi16(lo[r], alo), _mm256_maddubs_epi16(hi[r], ahi));
                            const __m256 sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                            acc[r][c] = _mm256_fmadd_ps(sum, _mm256_mul_ps(dv[r], da), acc[r][c]);
                        }
                    }
                }
            }
            for (int r = 0; r < R; ++r) {
                alignas(16) float m[4];
                _mm_store_ps(m, accm[r]);
                for (int c = 0; c < C; ++c) t.y[(t.t0 + c) * t.ldy + r] = hsum(acc[r][c]) + m[c];
            }
        }
    };
};

template <int R, int C>
struct TileI8 {
    // acc[r][c] += cvt(int dot of block b) * d_a[b, c]; y = scale_r * hsum(acc)
    static void run(const TileArgs& t) {
        const ActPanel& a = *t.a;
        const int64_t nb = a.n_in / kQK32;
        const int n_tok = a.n_tokens;
        const int8_t* aq = a.qs + static_cast<int64_t>(t.t0) * a.n_in;
        __m256 acc[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
        const size_t ahead = gemv_prefetch_ahead(R, t.stride, n_tok);
        const int8_t* wq[R];
        for (int r = 0; r < R; ++r) wq[r] = reinterpret_cast<const int8_t*>(t.w + r * t.stride + kI8RowHeader);
        for (int64_t b = 0; b < nb; ++b) {
            __m256i w[R];
            for (int r = 0; r < R; ++r) {
                if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(wq[r] + 32 * b) + ahead, _MM_HINT_T0);
                w[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq[r] + 32 * b));
            }
            const float* da = a.d + b * n_tok + t.t0;
            for (int c = 0; c < C; ++c) {
                const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + c * a.n_in + 32 * b));
                const __m256i aabs = _mm256_sign_epi8(av, av);
                const __m256 dac = _mm256_broadcast_ss(da + c);
                for (int r = 0; r < R; ++r) {
                    const __m256i p = dot_u8s8(aabs, _mm256_sign_epi8(w[r], av));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), dac, acc[r][c]);
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            float scale;
            std::memcpy(&scale, t.w + r * t.stride, sizeof(float));
            for (int c = 0; c < C; ++c) t.y[(t.t0 + c) * t.ldy + r] = scale * hsum(acc[r][c]);
        }
    }
};

// Writes the 32 quants q of sub-block k (counted over the whole row) into a token's
// nibble-ordered row: [a0..15 of 2p, a0..15 of 2p+1, a16..31 of 2p, a16..31 of 2p+1] per pair p.
inline void put_sub_block(int8_t* row, int64_t k, const int8_t* q) {
    int8_t* pair = row + 64 * (k / 2);
    std::memcpy(pair + 16 * (k % 2), q, 16);
    std::memcpy(pair + 32 + 16 * (k % 2), q + 16, 16);
}

// Stores the scale d of sub-block k (of the row) for token t, four times.
inline void put_scale(const ActPanel& p, int t, int64_t k, float d) {
    float* da8 = const_cast<float*>(p.da8) + ((k / 2) * p.n_tokens + t) * 8 + 4 * (k % 2);
    for (int l = 0; l < 4; ++l) da8[l] = d;
}

}  // namespace

size_t i4_act_bytes(int group, int n_tokens, int64_t n_in) {
    const size_t nt = static_cast<size_t>(n_tokens);
    return align64(nt * static_cast<size_t>(n_in)) + align64(static_cast<size_t>(n_in / 64) * nt * 8 * sizeof(float)) +
           align64((static_cast<size_t>(n_in / group) * nt + 4) * sizeof(float)) + 64;
}

ActPanel i4_act_layout(int group, void* scratch, int n_tokens, int64_t n_in) {
    ActPanel p;
    p.n_tokens = n_tokens;
    p.n_in = n_in;
    const size_t nt = static_cast<size_t>(n_tokens);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
    p.qs = reinterpret_cast<int8_t*>(base);
    base += align64(nt * static_cast<size_t>(n_in));
    p.da8 = reinterpret_cast<float*>(base);
    base += align64(static_cast<size_t>(n_in / 64) * nt * 8 * sizeof(float));
    auto* sg = reinterpret_cast<float*>(base);
    std::memset(sg + static_cast<size_t>(n_in / group) * nt, 0, 4 * sizeof(float));  // read by 4-token tiles
    p.sg = sg;
    return p;
}

void i4_quantize_act(int group, const ActPanel& p, const float* x, int t0, int t1) {
    const int64_t n_sub = p.n_in / 32, sub_per_group = group / 32;
    auto* qs = const_cast<int8_t*>(p.qs);
    auto* sg = const_cast<float*>(p.sg);
    alignas(32) int8_t q[32];
    for (int t = t0; t < t1; ++t)
        for (int64_t k = 0; k < n_sub; ++k) {
            float db;
            const int sum = quantize_block32(x + t * p.n_in + 32 * k, q, &db);
            put_sub_block(qs + t * p.n_in, k, q);
            // as a GGML block_q8_1 stores them: d = fp16(amax / 127), s = fp16(d_unrounded * sum)
            put_scale(p, t, k, round_fp16(db));
            const float s = round_fp16(db * static_cast<float>(sum));
            float& group_s = sg[(k / sub_per_group) * p.n_tokens + t];
            group_s = k % sub_per_group == 0 ? s : group_s + s;
        }
}

void i4_fill_act(int group, const ActPanel& p, const BlockQ8_1* act_row) {
    const int64_t sub_per_group = group / 32;
    auto* sg = const_cast<float*>(p.sg);
    for (int64_t k = 0; k < p.n_in / 32; ++k) {
        const BlockQ8_1& b = act_row[k];
        put_sub_block(const_cast<int8_t*>(p.qs), k, b.qs);
        put_scale(p, 0, k, h2f(b.d));
        float& group_s = sg[k / sub_per_group];
        group_s = k % sub_per_group == 0 ? h2f(b.s) : group_s + h2f(b.s);
    }
}

void gemm_i4(int group, const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
             int64_t ldy) {
    const bool gemv = t1 - t0 == 1;
    if (group == 128) {
        if (gemv) drive<TileI4<128>::T, 4, 1>(w, stride, a, n_rows, t0, t1, y, ldy);
        else
            drive<TileI4<128>::T, 2, 4>(w, stride, a, n_rows, t0, t1, y, ldy);
    } else {
        if (gemv) drive<TileI4<64>::T, 4, 1>(w, stride, a, n_rows, t0, t1, y, ldy);
        else
            drive<TileI4<64>::T, 2, 4>(w, stride, a, n_rows, t0, t1, y, ldy);
    }
}

void gemm_i8_row(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
                 int64_t ldy) {
    if (t1 - t0 == 1) drive<TileI8, 4, 1>(w, stride, a, n_rows, t0, t1, y, ldy);
    else
        drive<TileI8, 2, 4>(w, stride, a, n_rows, t0, t1, y, ldy);
}

}  // namespace kvs::cpu::avx2
