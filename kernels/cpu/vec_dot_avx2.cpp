// AVX2 kernels for the 32-element block types (Q5_0, Q5_1, Q8_0; Q4_0 / Q4_1 are in
// vec_dot_q4_avx2.cpp) and the float weights (F32, F16, BF16), the activation quantizer,
// and the entry points of vec_dot.h. K-quant tiles are in vec_dot_kquants_avx2.cpp, I4_G128 / I4_G64 / I8_ROW
// tiles (and the I4 panel) in vec_dot_int_avx2.cpp.
//
// A register tile multiplies R weight rows by C tokens: each weight block is decoded
// once into 32 unsigned bytes and used for C tokens (maddubs + madd + one FMA per pair).
// Q5_0 is handled like Q5_1 with min = -16d: the min term is
// sum_b m_b * s_b, with s_b = d_a * sum(q_a) precomputed per activation block.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/simd_avx2.h"

namespace kvs::cpu {
namespace avx2 {
namespace {

inline __m256i nibbles32(const uint8_t* qs) {  // 16 bytes -> 32 values 0..15 in element order
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return _mm256_and_si256(_mm256_srlv_epi64(x, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0F));
}

inline __m256i fifth_bits32(const uint8_t* qh4) {  // bit j of a uint32 -> 0x10 in byte j
    uint32_t x32;
    std::memcpy(&x32, qh4, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)), shuf);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

// Two fp16 values stored back to back (d then m) -> [d, m, 0, 0].
inline __m128 half2(const uint16_t* p) {
    uint32_t u;
    std::memcpy(&u, p, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(u)));
}
// [d, zero_point * d, 0, 0] for the symmetric types (exact: the factor is a power of two).
inline __m128 half_d_times(uint16_t d, float factor) {
    const __m128 v = _mm_cvtph_ps(_mm_set1_epi16(static_cast<short>(d)));
    return _mm_mul_ps(v, _mm_setr_ps(1.0f, factor, 0.0f, 0.0f));
}

// Weight decoders: quants as unsigned bytes (signed for Q8_0), and dm = [d, m, 0, 0]
// with w = d * q + m.
struct DecQ5_0 {
    using B = BlockQ5_0;
    static constexpr bool kSigned = false;
    static __m256i quants(const B& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits32(b.qh)); }
    static __m128 dm(const B& b) { return half_d_times(b.d, -16.0f); }
};
struct DecQ5_1 {
    using B = BlockQ5_1;
    static constexpr bool kSigned = false;
    static __m256i quants(const B& b) { return _mm256_or_si256(nibbles32(b.qs), fifth_bits32(b.qh)); }
    static __m128 dm(const B& b) { return half2(&b.d); }
};
struct DecQ8_0 {  // signed quants: |q| with the sign moved onto the activation
    using B = BlockQ8_0;
    static constexpr bool kSigned = true;
    static __m256i quants(const B& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
    static __m128 dm(const B& b) { return half_d_times(b.d, 0.0f); }
};

// Per (row, token) pair the arithmetic is fixed whatever the tile shape, so results do
// not depend on batching: acc += float(int dot) * (d_w * d_a) per block (one FMA), and
// the min term accm = fma(m_w, s_a, accm) per block; y = hsum(acc) + accm.
template <class Dec>
struct Tile32 {
    template <int R, int C>
    struct T {
        static void run(const TileArgs& t) {
            if constexpr (C == 1) run_gemv(t);
            else
                run_gemm(t);
        }

        // One token: d_w*d_a and the min term come from one [d, m] x [d_a, s_a] product.
        static void run_gemv(const TileArgs& t) {
            using B = typename Dec::B;
            const ActPanel& a = *t.a;
            const int64_t nb = a.n_in / kQK32;
            const int8_t* aq = a.qs + static_cast<int64_t>(t.t0) * a.n_in;
            const float* ds = a.ds + 2 * static_cast<int64_t>(t.t0);
            __m256 acc[R];
            __m128 accm[R];  // lane 1: min term
            for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), accm[r] = _mm_setzero_ps();
            // Short rows (a few cache lines) give the hardware prefetcher no time to lock
            // on to R interleaved streams: fetch the tile two tiles ahead ourselves. Long
            // rows stream well on their own (and a far prefetch would evict L1).
            const size_t prefetch_ahead = 2 * R * t.stride <= 16384 ? 2 * R * t.stride : 0;
            for (int64_t b = 0; b < nb; ++b) {
                const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + 32 * b));
                const __m128 dsa = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(ds + 2 * b * a.n_tokens)));
                for (int r = 0; r < R; ++r) {
                    const B& blk = reinterpret_cast<const B*>(t.w + r * t.stride)[b];
                    _mm_prefetch(reinterpret_cast<const char*>(&blk) + prefetch_ahead, _MM_HINT_T0);
                    const __m128 dm = Dec::dm(blk);
                    const __m256 scale = _mm256_broadcastss_ps(_mm_mul_ps(dm, dsa));
                    if constexpr (!Dec::kSigned) accm[r] = _mm_fmadd_ps(dm, dsa, accm[r]);
                    __m256i p;
                    if constexpr (Dec::kSigned) {
                        const __m256i w = Dec::quants(blk);
                        p = dot_u8s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(av, w));
                    } else {
                        p = dot_u8s8(Dec::quants(blk), av);
                    }
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[r]);
                }
            }
            for (int r = 0; r < R; ++r) {
                alignas(16) float m[4];
                _mm_store_ps(m, accm[r]);
                t.y[t.t0 * t.ldy + r] = hsum(acc[r]) + m[1];
            }
        }

        static void run_gemm(const TileArgs& t) {
            using B = typename Dec::B;
            constexpr bool kMin = !Dec::kSigned;
            const ActPanel& a = *t.a;
            const int64_t nb = a.n_in / kQK32;
            const int n_tok = a.n_tokens;
            const int8_t* aq = a.qs + static_cast<int64_t>(t.t0) * a.n_in;
            __m256 acc[R][C];
            __m128 accm[R];  // lane c: min term of token t0 + c
            for (int r = 0; r < R; ++r) {
                accm[r] = _mm_setzero_ps();
                for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
            }
            // few tokens (batched decode) stream the weights like a GEMV: prefetch ahead;
            // many tokens reuse each row chunk from L1, where prefetching only costs slots
            const size_t prefetch_ahead = n_tok <= 16 && 2 * R * t.stride <= 16384 ? 2 * R * t.stride : 0;
            for (int64_t b = 0; b < nb; ++b) {
                __m256i wq[R], wsign[R];
                float dw[R];
                const float* sb = a.s + b * n_tok + t.t0;  // [4] (panel is padded)
                for (int r = 0; r < R; ++r) {
                    const B& blk = reinterpret_cast<const B*>(t.w + r * t.stride)[b];
                    _mm_prefetch(reinterpret_cast<const char*>(&blk) + prefetch_ahead, _MM_HINT_T0);
                    wq[r] = Dec::quants(blk);
                    if constexpr (Dec::kSigned) {
                        wsign[r] = wq[r];
                        wq[r] = _mm256_sign_epi8(wq[r], wq[r]);
                    }
                    const __m128 dm = Dec::dm(blk);
                    dw[r] = _mm_cvtss_f32(dm);
                    if constexpr (kMin) accm[r] = _mm_fmadd_ps(_mm_shuffle_ps(dm, dm, 0x55), _mm_loadu_ps(sb), accm[r]);
                }
                // d_w * d_a for the whole tile: one multiply per row, then each pair
                // broadcasts its scale from memory (a load, not an ALU op)
                alignas(16) float scale[R][4];
                const __m128 da4 = _mm_loadu_ps(a.d + b * n_tok + t.t0);  // [4] (panel is padded)
                for (int r = 0; r < R; ++r) _mm_store_ps(scale[r], _mm_mul_ps(_mm_set1_ps(dw[r]), da4));
                for (int c = 0; c < C; ++c) {
                    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq + c * a.n_in + 32 * b));
                    for (int r = 0; r < R; ++r) {
                        __m256i p;
                        if constexpr (Dec::kSigned) p = dot_u8s8(wq[r], _mm256_sign_epi8(av, wsign[r]));
                        else
                            p = dot_u8s8(wq[r], av);
                        acc[r][c] =
                            _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&scale[r][c]), acc[r][c]);
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

// Float weights: 8 elements per step, FMA per (row, token); a scalar tail with fma.
struct LoadF32 {
    static constexpr int kBytes = 4;
    static __m256 load8(const uint8_t* w, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i); }
    static float load1(const uint8_t* w, int64_t i) { return reinterpret_cast<const float*>(w)[i]; }
};
struct LoadF16 {
    static constexpr int kBytes = 2;
    static __m256 load8(const uint8_t* w, int64_t i) {
        return _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(w) + i)));
    }
    static float load1(const uint8_t* w, int64_t i) { return h2f(reinterpret_cast<const uint16_t*>(w)[i]); }
};
struct LoadBF16 {
    static constexpr int kBytes = 2;
    static __m256 load8(const uint8_t* w, int64_t i) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(w) + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static float load1(const uint8_t* w, int64_t i) { return bf16_to_fp32(reinterpret_cast<const uint16_t*>(w)[i]); }
};

template <class L>
struct TileF {
    template <int R, int C>
    struct T {
        static void run(const TileArgs& t) {
            const ActPanel& a = *t.a;
            const int64_t n = a.n_in, n8 = n & ~int64_t{7};
            const float* x = a.f32 + static_cast<int64_t>(t.t0) * n;
            __m256 acc[R][C];
            for (int r = 0; r < R; ++r)
                for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
            // few tokens (decode, verify passes) stream short rows: prefetch two tiles ahead (see Tile32)
            const size_t ahead = a.n_tokens <= 16 && 2 * R * t.stride <= 16384 ? 2 * R * t.stride : 0;
            for (int64_t i = 0; i < n8; i += 8) {
                __m256 wv[R];
                for (int r = 0; r < R; ++r) {
                    if (ahead && (i & 15) == 0)
                        _mm_prefetch(reinterpret_cast<const char*>(t.w + r * t.stride) + i * L::kBytes + ahead,
                                     _MM_HINT_T0);
                    wv[r] = L::load8(t.w + r * t.stride, i);
                }
                for (int c = 0; c < C; ++c) {
                    const __m256 av = _mm256_loadu_ps(x + c * n + i);
                    for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv[r], av, acc[r][c]);
                }
            }
            for (int r = 0; r < R; ++r)
                for (int c = 0; c < C; ++c) {
                    float s = hsum(acc[r][c]);
                    for (int64_t i = n8; i < n; ++i) s = std::fma(L::load1(t.w + r * t.stride, i), x[c * n + i], s);
                    t.y[(t.t0 + c) * t.ldy + r] = s;
                }
        }
    };
};

// ---- activation quantization

inline size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

bool is_block32(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0;
}
// weight types whose activations are the plain Q8 panel (contiguous quants, d / s per block)
bool uses_q8_panel(DType t) { return is_block32(t) || t == DType::I8_ROW; }
bool is_kquant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }
bool is_bnb4(DType t) { return t == DType::NF4 || t == DType::FP4 || t == DType::NF4_DQ; }

}  // namespace
}  // namespace avx2

using namespace avx2;

bool avx2_supports(DType t) {
    return uses_q8_panel(t) || is_kquant(t) || i4_group_size(t) != 0 || is_bnb4(t) || t == DType::I8_LLM ||
           t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

size_t avx2_act_bytes(DType wt, int n_tokens, int64_t n_in) {
    if (const int g = i4_group_size(wt)) return i4_act_bytes(g, n_tokens, n_in);
    if (is_bnb4(wt)) return bnb_act_bytes(n_tokens, n_in);
    if (wt == DType::I8_LLM) return llm_act_bytes(n_tokens, n_in);
    if (uses_q8_panel(wt)) {
        const size_t nb = static_cast<size_t>(n_in / kQK32);
        return align64(static_cast<size_t>(n_tokens) * static_cast<size_t>(n_in)) +
               4 * align64((nb * static_cast<size_t>(n_tokens) + 4) * sizeof(float)) + 64;
    }
    if (is_kquant(wt)) return static_cast<size_t>(n_tokens) * row_bytes(DType::Q8_K, n_in) + 64;
    return 0;
}

ActPanel avx2_act_layout(DType wt, void* scratch, const float* x, int n_tokens, int64_t n_in) {
    if (const int g = i4_group_size(wt)) return i4_act_layout(g, scratch, n_tokens, n_in);
    if (is_bnb4(wt)) return bnb_act_layout(scratch, n_tokens, n_in);
    if (wt == DType::I8_LLM) return llm_act_layout(scratch, n_tokens, n_in);
    ActPanel p;
    p.n_tokens = n_tokens;
    p.n_in = n_in;
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
    if (uses_q8_panel(wt)) {
        const size_t nb = static_cast<size_t>(n_in / kQK32);
        p.qs = reinterpret_cast<int8_t*>(base);
        base += align64(static_cast<size_t>(n_tokens) * static_cast<size_t>(n_in));
        auto* d = reinterpret_cast<float*>(base);
        base += align64((nb * static_cast<size_t>(n_tokens) + 4) * sizeof(float));
        auto* s = reinterpret_cast<float*>(base);
        base += align64((nb * static_cast<size_t>(n_tokens) + 4) * sizeof(float));
        std::memset(d + nb * n_tokens, 0, 4 * sizeof(float));  // padding read by 4-token tiles
        std::memset(s + nb * n_tokens, 0, 4 * sizeof(float));
        p.d = d, p.s = s, p.ds = reinterpret_cast<float*>(base);
    } else if (is_kquant(wt)) {
        p.q8k = reinterpret_cast<const BlockQ8_K*>(base);
    } else {
        p.f32 = x;
    }
    return p;
}

void avx2_quantize_act(DType wt, const ActPanel& p, const float* x, int t0, int t1) {
    if (const int g = i4_group_size(wt)) {
        i4_quantize_act(g, p, x, t0, t1);
    } else if (is_bnb4(wt)) {
        bnb_quantize_act(p, x, t0, t1);
    } else if (wt == DType::I8_LLM) {
        llm_quantize_act(p, x, t0, t1);
    } else if (uses_q8_panel(wt)) {
        const int64_t nb = p.n_in / kQK32;
        auto* qs = const_cast<int8_t*>(p.qs);
        auto* d = const_cast<float*>(p.d);
        auto* s = const_cast<float*>(p.s);
        auto* ds = const_cast<float*>(p.ds);
        for (int t = t0; t < t1; ++t)
            for (int64_t b = 0; b < nb; ++b) {
                float db;
                const int sum = quantize_block32(x + t * p.n_in + 32 * b, qs + t * p.n_in + 32 * b, &db);
                const int64_t i = b * p.n_tokens + t;
                // as ggml stores them in block_q8_1: d = fp16(amax / 127), s = fp16(d_unrounded * sum)
                d[i] = ds[2 * i] = round_fp16(db);
                s[i] = ds[2 * i + 1] = round_fp16(db * static_cast<float>(sum));
            }
    } else if (is_kquant(wt)) {
        const size_t rb = row_bytes(DType::Q8_K, p.n_in);
        for (int t = t0; t < t1; ++t)
            quantize_row(DType::Q8_K, x + t * p.n_in,
                         reinterpret_cast<uint8_t*>(const_cast<BlockQ8_K*>(p.q8k)) + t * rb, p.n_in);
    }
}

void avx2_gemm(const WeightView& w, const ActPanel& a, int64_t r0, int64_t r1, int t0, int t1, float* y, int64_t ldy) {
    const size_t stride = row_bytes(w.dtype, w.n_in);
    // null when the weight lives only in its cpu_tiles (a forward pass's fused copies)
    const uint8_t* wp = w.data ? static_cast<const uint8_t*>(w.data) + r0 * stride : nullptr;
    const int64_t n = r1 - r0;
    float* yp = y + r0;
    const bool gemv = t1 - t0 == 1;
    switch (w.dtype) {
        case DType::Q4_0:
        case DType::Q4_1: {
            const void* tiles = w.cpu_tiles && r0 % 8 == 0
                                    ? static_cast<const uint8_t*>(w.cpu_tiles) + q4_tiles_bytes(w.n_in, r0)
                                    : nullptr;
            assert(tiles || wp);  // matmul splits rows in multiples of 8: tiled weights always use their tiles
            return w.dtype == DType::Q4_0 ? gemm_q4_0(wp, stride, tiles, a, n, t0, t1, yp, ldy)
                                          : gemm_q4_1(wp, stride, tiles, a, n, t0, t1, yp, ldy);
        }
        case DType::Q5_0:
            return gemv ? drive<Tile32<DecQ5_0>::T, 4, 1>(wp, stride, a, n, t0, t1, yp, ldy)
                        : drive<Tile32<DecQ5_0>::T, 2, 4>(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::Q5_1:
            return gemv ? drive<Tile32<DecQ5_1>::T, 4, 1>(wp, stride, a, n, t0, t1, yp, ldy)
                        : drive<Tile32<DecQ5_1>::T, 2, 4>(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::Q8_0:
            return gemv ? drive<Tile32<DecQ8_0>::T, 4, 1>(wp, stride, a, n, t0, t1, yp, ldy)
                        : drive<Tile32<DecQ8_0>::T, 2, 4>(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::Q4_K: return gemm_q4_k(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::Q5_K: return gemm_q5_k(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::Q6_K: return gemm_q6_k(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::I4_G128:
        case DType::I4_G64: return gemm_i4(i4_group_size(w.dtype), wp, stride, a, n, t0, t1, yp, ldy);
        case DType::I8_ROW: return gemm_i8_row(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::I8_LLM: return gemm_llm_int8(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::NF4:
        case DType::FP4:
        case DType::NF4_DQ: return gemm_bnb(w, a, r0, r1, t0, t1, y, ldy);
        case DType::F32:
            return gemv ? drive<TileF<LoadF32>::T, 4, 1>(wp, stride, a, n, t0, t1, yp, ldy)
                        : drive<TileF<LoadF32>::T, 4, 2>(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::F16:
            return gemv ? drive<TileF<LoadF16>::T, 4, 1>(wp, stride, a, n, t0, t1, yp, ldy)
                        : drive<TileF<LoadF16>::T, 4, 2>(wp, stride, a, n, t0, t1, yp, ldy);
        case DType::BF16:
            return gemv ? drive<TileF<LoadBF16>::T, 4, 1>(wp, stride, a, n, t0, t1, yp, ldy)
                        : drive<TileF<LoadBF16>::T, 4, 2>(wp, stride, a, n, t0, t1, yp, ldy);
        default: return;
    }
}

// One row against GGML-format activations: rebuild a one-token panel and run the tile
// the matmul uses, so tests of vec_dot cover the matmul kernels.
float vec_dot_avx2(DType t, const void* w_row, const void* act_row, int64_t n) {
    thread_local std::vector<uint8_t> scratch;
    const size_t bytes = avx2_act_bytes(t, 1, n);
    if (scratch.size() < bytes) scratch.resize(bytes);
    ActPanel p = avx2_act_layout(t, scratch.data(), static_cast<const float*>(act_row), 1, n);
    if (t == DType::NF4_DQ) {  // its rows decode only with the whole tensor (matmul runs it)
        assert(false && "vec_dot: NF4_DQ has no one-row form");
        return NAN;
    }
    if (is_bnb4(t)) {
        avx2_quantize_act(t, p, static_cast<const float*>(act_row), 0, 1);
    } else if (t == DType::I8_LLM) {
        p.threshold = llm_int8_threshold(w_row);
        avx2_quantize_act(t, p, static_cast<const float*>(act_row), 0, 1);
    } else if (const int g = i4_group_size(t)) {
        i4_fill_act(g, p, static_cast<const BlockQ8_1*>(act_row));
    } else if (uses_q8_panel(t)) {
        const int64_t nb = n / kQK32;
        auto* qs = const_cast<int8_t*>(p.qs);
        auto* d = const_cast<float*>(p.d);
        auto* s = const_cast<float*>(p.s);
        auto* ds = const_cast<float*>(p.ds);
        for (int64_t b = 0; b < nb; ++b) {
            if (activation_type(t) == DType::Q8_1) {
                const auto& y = static_cast<const BlockQ8_1*>(act_row)[b];
                std::memcpy(qs + 32 * b, y.qs, 32);
                d[b] = h2f(y.d), s[b] = h2f(y.s);
            } else {
                const auto& y = static_cast<const BlockQ8_0*>(act_row)[b];
                std::memcpy(qs + 32 * b, y.qs, 32);
                int sum = 0;
                for (int j = 0; j < 32; ++j) sum += y.qs[j];
                d[b] = h2f(y.d), s[b] = d[b] * static_cast<float>(sum);
            }
            ds[2 * b] = d[b], ds[2 * b + 1] = s[b];
        }
    } else if (is_kquant(t)) {
        p.q8k = static_cast<const BlockQ8_K*>(act_row);
    }
    float out = 0.0f;
    const WeightView w{t, w_row, n, 1};
    avx2_gemm(w, p, 0, 1, 0, 1, &out, 1);
    return out;
}

}  // namespace kvs::cpu
