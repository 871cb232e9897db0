// AVX2 matmul for Q4_0 / Q4_1 weights (the default model's matrices), every token count.
//
// Rows in lanes: a tile is 8 weight rows x C tokens. Block b of the 8 rows is transposed
// into 8 registers W_k (k = 0..7) whose lane j holds the 4 quants of row j that meet
// activation bytes 4k..4k+3; each token broadcasts those 4 bytes, so one maddubs does 32
// products for 8 rows and the 8 maddubs of a block sum in int16 (|Σ| <= 8 * 2 * 15 * 127
// = 30480, no saturation) before one madd widens them: about 9 integer multiplies per 256
// products, where a row-at-a-time dot needs 16. The transpose is the other big cost: few
// tokens (decode) transpose each block as they go and share it between the tile's C <= 4
// tokens; calls with kPreDecodeMin tokens or more (prompts, batched decode) transpose the
// call's rows once into a per-thread buffer and run 8 tokens at a time from it
// (1.4-1.5x the throughput of transposing per 4 tokens, measured on 576x576 .. 1536x576).
// A weight that carries WeightView::cpu_tiles (pack_q4_tiles: the transposed nibbles and
// the 8 rows' scales, stored once when a forward pass is built) skips the transpose
// altogether; the one-token GEMV gains most (1.6-1.7x in cache).
//
// Every (row, token) output is the same float sequence whatever the tile, token count or
// thread count (batched results equal single-request results):
//   acc = 0; for each block b: acc = fma(float(isum_b), d_w * d_a, acc); acc = fma(m_w, s_a, acc)
// with isum_b the exact integer dot of the quants, m_w the block's minimum (-8 d_w for
// Q4_0) and s_a = d_a * sum(q_a).
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/simd_avx2.h"

namespace kvs::cpu::avx2 {
namespace {

// Transposed quants of block b of 8 rows (row j at rows[j]) and their [d], [m] as floats.
struct Block8 {
    __m256i w[8];
    __m256 d, m;
};

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// 16 bytes of nibbles per row at rows[j] + qs_off -> W_k (see the file comment).
inline void transpose_nibbles(const uint8_t* const* rows, size_t qs_off, __m256i* w) {
    auto pair = [&](int j) {
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + qs_off));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + 4] + qs_off));
        return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    };
    const __m256i y0 = pair(0), y1 = pair(1), y2 = pair(2), y3 = pair(3);
    const __m256i u0 = _mm256_unpacklo_epi32(y0, y1), u1 = _mm256_unpackhi_epi32(y0, y1);
    const __m256i u2 = _mm256_unpacklo_epi32(y2, y3), u3 = _mm256_unpackhi_epi32(y2, y3);
    const __m256i t[4] = {_mm256_unpacklo_epi64(u0, u2), _mm256_unpackhi_epi64(u0, u2), _mm256_unpacklo_epi64(u1, u3),
                          _mm256_unpackhi_epi64(u1, u3)};
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    for (int k = 0; k < 4; ++k) {
        w[k] = _mm256_and_si256(t[k], lo4);                            // elements 4k..4k+3
        w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(t[k], 4), lo4);  // elements 16+4k..
    }
}

// Eight fp16 values, one per row at rows[j] + off, as floats in lane j.
inline __m256 gather_half8(const uint8_t* const* rows, size_t off) {
    uint16_t h[8];
    for (int j = 0; j < 8; ++j) std::memcpy(&h[j], rows[j] + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}

struct Q4_0 {
    using B = BlockQ4_0;
    static void decode(const uint8_t* const* rows, Block8& o) {
        transpose_nibbles(rows, offsetof(B, qs), o.w);
        o.d = gather_half8(rows, offsetof(B, d));
        o.m = _mm256_mul_ps(o.d, _mm256_set1_ps(-8.0f));  // exact: a power of two
    }
};
struct Q4_1 {
    using B = BlockQ4_1;
    static void decode(const uint8_t* const* rows, Block8& o) {
        transpose_nibbles(rows, offsetof(B, qs), o.w);
        // [d | m] of each row as one u32 -> d in the low 128 bits, m in the high ones
        const __m256i dm = _mm256_setr_epi32(static_cast<int>(load_u32(rows[0])), static_cast<int>(load_u32(rows[1])),
                                             static_cast<int>(load_u32(rows[2])), static_cast<int>(load_u32(rows[3])),
                                             static_cast<int>(load_u32(rows[4])), static_cast<int>(load_u32(rows[5])),
                                             static_cast<int>(load_u32(rows[6])), static_cast<int>(load_u32(rows[7])));
        const __m256i split =
            _mm256_shuffle_epi8(dm, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5,
                                                     8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
        const __m256i ordered = _mm256_permute4x64_epi64(split, _MM_SHUFFLE(3, 1, 2, 0));
        o.d = _mm256_cvtph_ps(_mm256_castsi256_si128(ordered));
        o.m = _mm256_cvtph_ps(_mm256_extracti128_si256(ordered, 1));
    }
};

// The tiled layout (WeightView::cpu_tiles): for 8-row tile t and block b, at index
// t * n_blocks + b, the block's nibbles already transposed (what transpose_nibbles loads)
// and its 8 scales / minimums (Q4_0: minimums unused, -8 d is formed in float as above).
struct Tile {
    uint8_t q[128];  // [4][8 rows][4 bytes]
    uint16_t d[8];
    uint16_t m[8];
};
static_assert(sizeof(Tile) == 160);

template <class Q>
inline void decode_tile(const Tile& t, Block8& o) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.q + 32 * k));
        o.w[k] = _mm256_and_si256(v, lo4);
        o.w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
    }
    o.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.d)));
    if constexpr (std::is_same_v<typename Q::B, BlockQ4_0>) o.m = _mm256_mul_ps(o.d, _mm256_set1_ps(-8.0f));
    else
        o.m = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.m)));
}

inline __m256i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// y[t0 + c, 0 .. n_rows) = lanes of acc[c] (missing rows of a short tile are not stored).
template <int C>
inline void store_rows(const __m256* acc, int n_rows, float* y, int t0, int64_t ldy) {
    for (int c = 0; c < C; ++c) {
        alignas(32) float out[8];
        _mm256_store_ps(out, acc[c]);
        std::copy(out, out + n_rows, y + static_cast<int64_t>(t0 + c) * ldy);
    }
}

// Rows [0, n_rows) (n_rows <= 8: missing lanes repeat the last row and are not stored) x
// tokens t0 .. t0 + C - 1.
template <class Q, int C, bool kTiles>
void tile8(const uint8_t* w, size_t stride, const Tile* tiles, int n_rows, const ActPanel& a, int t0, float* y,
           int64_t ldy, size_t prefetch_ahead) {
    using B = typename Q::B;
    const uint8_t* rows[8] = {};  // kTiles: w is null and rows unused
    if constexpr (!kTiles)
        for (int j = 0; j < 8; ++j) rows[j] = w + static_cast<size_t>(std::min(j, n_rows - 1)) * stride;
    const int64_t nb = a.n_in / kQK32;
    const int n_tok = a.n_tokens;
    const int8_t* aq = a.qs + static_cast<int64_t>(t0) * a.n_in;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        // the tile's rows (or its tiles) are contiguous: walk the same span prefetch_ahead
        // bytes on, 8 * sizeof(B) <= 192 bytes (3 cache lines) per block
        const char* here;
        if constexpr (kTiles) here = reinterpret_cast<const char*>(tiles + b);
        else
            here = reinterpret_cast<const char*>(w) + b * 8 * sizeof(B);
        if (prefetch_ahead)
            for (int i = 0; i < 3; ++i) _mm_prefetch(here + prefetch_ahead + 64 * i, _MM_HINT_T0);
        Block8 blk;
        if constexpr (kTiles) {
            decode_tile<Q>(tiles[b], blk);
        } else {
            Q::decode(rows, blk);
            for (int j = 0; j < 8; ++j) rows[j] += sizeof(B);
        }
        const float* da = a.d + b * n_tok + t0;
        const float* sa = a.s + b * n_tok + t0;
        for (int c = 0; c < C; ++c) {
            const int8_t* ab = aq + c * a.n_in + 32 * b;
            __m256i p = _mm256_maddubs_epi16(blk.w[0], bcast4(ab));
            for (int k = 1; k < 8; ++k) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(blk.w[k], bcast4(ab + 4 * k)));
            const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
            acc[c] = _mm256_fmadd_ps(isum, _mm256_mul_ps(blk.d, _mm256_broadcast_ss(da + c)), acc[c]);
            acc[c] = _mm256_fmadd_ps(blk.m, _mm256_broadcast_ss(sa + c), acc[c]);
        }
    }
    store_rows<C>(acc, n_rows, y, t0, ldy);
}

// Tokens t0 .. t0 + C - 1 against blocks already transposed: blks[0 .. nb) of rows
// [0, n_rows). The same arithmetic as tile8.
template <int C>
void tile8_decoded(const Block8* blks, int64_t nb, int n_rows, const ActPanel& a, int t0, float* y, int64_t ldy) {
    const int n_tok = a.n_tokens;
    const int8_t* aq = a.qs + static_cast<int64_t>(t0) * a.n_in;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const Block8& blk = blks[b];
        const float* da = a.d + b * n_tok + t0;
        const float* sa = a.s + b * n_tok + t0;
        const int8_t* ab = aq + 32 * b;
        // all C integer sums first, then their float updates: C independent chains
        __m256i p[C];
        for (int c = 0; c < C; ++c) {
            p[c] = _mm256_maddubs_epi16(blk.w[0], bcast4(ab + c * a.n_in));
            for (int k = 1; k < 8; ++k)
                p[c] = _mm256_add_epi16(p[c], _mm256_maddubs_epi16(blk.w[k], bcast4(ab + c * a.n_in + 4 * k)));
        }
        for (int c = 0; c < C; ++c) {
            const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p[c], ones));
            acc[c] = _mm256_fmadd_ps(isum, _mm256_mul_ps(blk.d, _mm256_broadcast_ss(da + c)), acc[c]);
            acc[c] = _mm256_fmadd_ps(blk.m, _mm256_broadcast_ss(sa + c), acc[c]);
        }
    }
    store_rows<C>(acc, n_rows, y, t0, ldy);
}

template <class Q, int C>
void rows_x_tokens(const uint8_t* w, size_t stride, const Tile* tiles, const ActPanel& a, int64_t n_rows, int t0,
                   float* y, int64_t ldy) {
    // few tokens (decode, batched decode) stream short rows like a GEMV: fetch the tile two
    // tiles ahead ourselves (long rows stream well on their own and a far prefetch would
    // evict L1); many tokens reuse each row chunk from L1, where prefetching only costs slots
    const size_t ahead = a.n_tokens <= 16 && 16 * stride <= 16384 ? 16 * stride : 0;
    const int64_t nb = a.n_in / kQK32;
    for (int64_t r = 0; r < n_rows; r += 8) {
        const int nr = static_cast<int>(std::min<int64_t>(8, n_rows - r));
        if (tiles) tile8<Q, C, true>(nullptr, stride, tiles + (r / 8) * nb, nr, a, t0, y + r, ldy, ahead);
        else
            tile8<Q, C, false>(w + r * stride, stride, nullptr, nr, a, t0, y + r, ldy, ahead);
    }
}

constexpr int kPreDecodeMin = 5;  // tokens from which a call transposes its rows once (measured break-even)

template <class Q>
void gemm_q4_decoded(const uint8_t* w, size_t stride, const Tile* tiles, const ActPanel& a, int64_t n_rows, int t0,
                     int t1, float* y, int64_t ldy) {
    using B = typename Q::B;
    const int64_t nb = a.n_in / kQK32;
    const int64_t n_tiles = (n_rows + 7) / 8;
    thread_local std::vector<Block8> buf;  // [n_tiles, nb]: grows, never shrinks
    if (buf.size() < static_cast<size_t>(n_tiles * nb)) buf.resize(static_cast<size_t>(n_tiles * nb));
    // few tokens (batched decode) stream the weights: prefetch as the GEMV does
    const size_t ahead = a.n_tokens <= 16 && 16 * stride <= 16384 ? 16 * stride : 0;
    if (tiles) {
        for (int64_t i = 0; i < n_tiles * nb; ++i) decode_tile<Q>(tiles[i], buf[static_cast<size_t>(i)]);
    } else {
        for (int64_t tile = 0; tile < n_tiles; ++tile) {
            const int nr = static_cast<int>(std::min<int64_t>(8, n_rows - 8 * tile));
            const uint8_t* w8 = w + static_cast<size_t>(8 * tile) * stride;
            const uint8_t* rows[8];
            for (int j = 0; j < 8; ++j) rows[j] = w8 + static_cast<size_t>(std::min(j, nr - 1)) * stride;
            for (int64_t b = 0; b < nb; ++b) {
                if (ahead)
                    for (int i = 0; i < 3; ++i)
                        _mm_prefetch(reinterpret_cast<const char*>(w8) + ahead + b * 8 * sizeof(B) + 64 * i,
                                     _MM_HINT_T0);
                Q::decode(rows, buf[static_cast<size_t>(tile * nb + b)]);
                for (int j = 0; j < 8; ++j) rows[j] += sizeof(B);
            }
        }
    }
    for (int t = t0; t < t1; t += 8) {
        const int c = std::min(8, t1 - t);
        for (int64_t tile = 0; tile < n_tiles; ++tile) {
            const int nr = static_cast<int>(std::min<int64_t>(8, n_rows - 8 * tile));
            const Block8* bl = buf.data() + tile * nb;
            float* yt = y + 8 * tile;
            switch (c) {
                case 1: tile8_decoded<1>(bl, nb, nr, a, t, yt, ldy); break;
                case 2: tile8_decoded<2>(bl, nb, nr, a, t, yt, ldy); break;
                case 3: tile8_decoded<3>(bl, nb, nr, a, t, yt, ldy); break;
                case 4: tile8_decoded<4>(bl, nb, nr, a, t, yt, ldy); break;
                case 5: tile8_decoded<5>(bl, nb, nr, a, t, yt, ldy); break;
                case 6: tile8_decoded<6>(bl, nb, nr, a, t, yt, ldy); break;
                case 7: tile8_decoded<7>(bl, nb, nr, a, t, yt, ldy); break;
                default: tile8_decoded<8>(bl, nb, nr, a, t, yt, ldy); break;
            }
        }
    }
}

template <class Q>
void gemm_q4(const uint8_t* w, size_t stride, const Tile* tiles, const ActPanel& a, int64_t n_rows, int t0, int t1,
             float* y, int64_t ldy) {
    if (t1 - t0 >= kPreDecodeMin) return gemm_q4_decoded<Q>(w, stride, tiles, a, n_rows, t0, t1, y, ldy);
    for (int t = t0; t < t1; t += 4) {
        switch (std::min(4, t1 - t)) {
            case 1: rows_x_tokens<Q, 1>(w, stride, tiles, a, n_rows, t, y, ldy); break;
            case 2: rows_x_tokens<Q, 2>(w, stride, tiles, a, n_rows, t, y, ldy); break;
            case 3: rows_x_tokens<Q, 3>(w, stride, tiles, a, n_rows, t, y, ldy); break;
            default: rows_x_tokens<Q, 4>(w, stride, tiles, a, n_rows, t, y, ldy); break;
        }
    }
}

}  // namespace

void gemm_q4_0(const uint8_t* w, size_t stride, const void* tiles, const ActPanel& a, int64_t n_rows, int t0, int t1,
               float* y, int64_t ldy) {
    gemm_q4<Q4_0>(w, stride, static_cast<const Tile*>(tiles), a, n_rows, t0, t1, y, ldy);
}
void gemm_q4_1(const uint8_t* w, size_t stride, const void* tiles, const ActPanel& a, int64_t n_rows, int t0, int t1,
               float* y, int64_t ldy) {
    gemm_q4<Q4_1>(w, stride, static_cast<const Tile*>(tiles), a, n_rows, t0, t1, y, ldy);
}

}  // namespace kvs::cpu::avx2

namespace kvs::cpu {

size_t q4_tiles_bytes(int64_t n_in, int64_t n_out) {
    return static_cast<size_t>((n_out + 7) / 8) * static_cast<size_t>(n_in / kQK32) * sizeof(avx2::Tile);
}

void pack_q4_tiles(DType t, const void* data, int64_t n_in, int64_t n_out, void* out) {
    const size_t stride = row_bytes(t, n_in), blk = t == DType::Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ4_1);
    const size_t qs = t == DType::Q4_0 ? offsetof(BlockQ4_0, qs) : offsetof(BlockQ4_1, qs);
    const int64_t nb = n_in / kQK32;
    auto* tiles = static_cast<avx2::Tile*>(out);
    for (int64_t tile = 0; tile < (n_out + 7) / 8; ++tile)
        for (int64_t b = 0; b < nb; ++b) {
            avx2::Tile& o = tiles[tile * nb + b];
            std::memset(&o, 0, sizeof o);
            for (int j = 0; j < 8; ++j) {
                const int64_t r = std::min(8 * tile + j, n_out - 1);  // missing rows repeat the last one
                const uint8_t* src = static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * stride + b * blk;
                for (int k = 0; k < 4; ++k) std::memcpy(o.q + 32 * k + 4 * j, src + qs + 4 * k, 4);
                std::memcpy(&o.d[j], src, 2);
                if (t == DType::Q4_1) std::memcpy(&o.m[j], src + offsetof(BlockQ4_1, m), 2);
            }
        }
}

}  // namespace kvs::cpu
