// AVX2 kernels for bitsandbytes' formats: NF4 / FP4 / NF4_DQ (4-bit code books, blocks of 64)
// and LLM.int8() (I8_LLM).
//
// NF4 / FP4: the code book is a 16-entry table of int16 values, code * S (S = 16384 for NF4:
// within 2^-15 of each value; S = 16320 = 85 * 192 for FP4, whose values are multiples of
// 1/192: exact), split into a low-byte and a high-byte table; two pshufb per 32 nibbles
// look both bytes up and unpack interleaves them into int16 weights. Activations are int16
// with one scale per block of 64 (amax / 32767), stored in the order the unpack produces
// (kOrder), so madd_epi16 multiplies matching pairs: |code * S| <= 16384 and |q_a| <= 32767
// keep the sum of four products inside int32. Per block: float(sum) * (absmax / S) * d_a.
// NF4_DQ runs the same tiles; each tile decodes its rows' 8-bit absmax codes first.
//
// LLM.int8(): each token's activations above the weight's threshold are taken out (kept in
// float with their indices), the rest quantized to int8 with one scale per token (amax / 127
// over them) into the Q8 panel; the I8_ROW tile of vec_dot_int_avx2.cpp multiplies the int8
// part, and the outliers add x * q_w * scale_w per row.
//
// As in the other kernels, every (row, token) pair goes through the same operations whatever
// the tile, so results do not depend on batching or threads.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/simd_avx2.h"

namespace kvs::cpu::avx2 {
namespace {

inline size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

// kOrder[p]: the element of a block of 64 whose weight lands at position p of the four
// int16 registers [W0 | W1 | W2 | W3] (16 each). Byte k of the block holds element 2k (high
// nibble) and 2k + 1 (low nibble); unpacklo/hi_epi8 take bytes 0-7 / 8-15 of each 128-bit lane.
struct Order {
    int e[64];
    Order() {
        for (int j = 0; j < 16; ++j) {
            const int k0 = j < 8 ? j : j + 8, k1 = j < 8 ? j + 8 : j + 16;
            e[j] = 2 * k0;
            e[16 + j] = 2 * k1;
            e[32 + j] = 2 * k0 + 1;
            e[48 + j] = 2 * k1 + 1;
        }
    }
};
const Order kOrder;

// The code book as int16 (code * scale) in a low-byte and a high-byte table.
struct CodeTables {
    __m256i lo, hi;
    float inv_scale;
};
CodeTables code_tables(DType t) {
    const float* code = bnb_code_book(t == DType::NF4_DQ ? DType::NF4 : t);
    const float scale = t == DType::FP4 ? 16320.0f : 16384.0f;
    alignas(16) uint8_t lo[16], hi[16];
    for (int i = 0; i < 16; ++i) {
        const auto v = static_cast<int16_t>(std::lrint(code[i] * scale));
        lo[i] = static_cast<uint8_t>(v & 0xFF);
        hi[i] = static_cast<uint8_t>((static_cast<uint16_t>(v) >> 8) & 0xFF);
    }
    return {_mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(lo))),
            _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(hi))), 1.0f / scale};
}

// One block's 32 nibble bytes -> its 64 weights (code * S) as four int16 registers in kOrder.
inline void decode_block(const uint8_t* qs, const CodeTables& ct, __m256i w[4]) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i ev = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);  // byte k: element 2k
    const __m256i od = _mm256_and_si256(x, m);                        // byte k: element 2k + 1
    const __m256i el = _mm256_shuffle_epi8(ct.lo, ev), eh = _mm256_shuffle_epi8(ct.hi, ev);
    const __m256i ol = _mm256_shuffle_epi8(ct.lo, od), oh = _mm256_shuffle_epi8(ct.hi, od);
    w[0] = _mm256_unpacklo_epi8(el, eh);
    w[1] = _mm256_unpackhi_epi8(el, eh);
    w[2] = _mm256_unpacklo_epi8(ol, oh);
    w[3] = _mm256_unpackhi_epi8(ol, oh);
}

// sum over the block of w * a as float: two int32 partial sums of four products each
inline __m256 block_dot(const __m256i w[4], const int16_t* a) {
    const auto* ap = reinterpret_cast<const __m256i*>(a);
    const __m256i p0 = _mm256_add_epi32(_mm256_madd_epi16(w[0], _mm256_loadu_si256(ap)),
                                        _mm256_madd_epi16(w[1], _mm256_loadu_si256(ap + 1)));
    const __m256i p1 = _mm256_add_epi32(_mm256_madd_epi16(w[2], _mm256_loadu_si256(ap + 2)),
                                        _mm256_madd_epi16(w[3], _mm256_loadu_si256(ap + 3)));
    return _mm256_add_ps(_mm256_cvtepi32_ps(p0), _mm256_cvtepi32_ps(p1));
}

struct BnbArgs {
    const uint8_t* qs = nullptr;  // nibbles of block 0 of the tile's first row
    size_t stride = 0;            // bytes between rows
    size_t block_bytes = 0;       // bytes between blocks (36 NF4 / FP4, 33 NF4_DQ)
    const float* am = nullptr;    // [rows, nb] absmax / S of the tile's first row on
    int64_t nb = 0;
    const CodeTables* ct = nullptr;
    const ActPanel* a = nullptr;
    int t0 = 0;
    float* y = nullptr;  // the tile's first row
    int64_t ldy = 0;
};

template <int R, int C>
void tile_bnb(const BnbArgs& t) {
    const ActPanel& a = *t.a;
    const int n_tok = a.n_tokens;
    const int16_t* aq = a.q16 + static_cast<int64_t>(t.t0) * a.n_in;
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < t.nb; ++b) {
        const float* da = a.d64 + b * n_tok + t.t0;
        if constexpr (C == 1) {
            for (int r = 0; r < R; ++r) {
                __m256i w[4];
                decode_block(t.qs + r * t.stride + b * t.block_bytes, *t.ct, w);
                const __m256 s = _mm256_set1_ps(t.am[r * t.nb + b] * da[0]);
                acc[r][0] = _mm256_fmadd_ps(block_dot(w, aq + 64 * b), s, acc[r][0]);
            }
        } else {
            __m256i w[R][4];
            for (int r = 0; r < R; ++r) decode_block(t.qs + r * t.stride + b * t.block_bytes, *t.ct, w[r]);
            for (int c = 0; c < C; ++c)
                for (int r = 0; r < R; ++r) {
                    const __m256 s = _mm256_set1_ps(t.am[r * t.nb + b] * da[c]);
                    acc[r][c] = _mm256_fmadd_ps(block_dot(w[r], aq + c * a.n_in + 64 * b), s, acc[r][c]);
                }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) t.y[(t.t0 + c) * t.ldy + r] = hsum(acc[r][c]);
}

template <int R>
void tile_bnb_c(int c, const BnbArgs& t) {
    switch (c) {
        case 1: tile_bnb<R, 1>(t); break;
        case 2: tile_bnb<R, 2>(t); break;
        case 3: tile_bnb<R, 3>(t); break;
        default: tile_bnb<R, 4>(t); break;
    }
}

}  // namespace

// ---- NF4 / FP4 / NF4_DQ

size_t bnb_act_bytes(int n_tokens, int64_t n_in) {
    const size_t nt = static_cast<size_t>(n_tokens);
    return align64(nt * static_cast<size_t>(n_in) * sizeof(int16_t)) +
           align64((static_cast<size_t>(n_in / 64) * nt + 4) * sizeof(float)) + 64;
}

ActPanel bnb_act_layout(void* scratch, int n_tokens, int64_t n_in) {
    ActPanel p;
    p.n_tokens = n_tokens;
    p.n_in = n_in;
    const size_t nt = static_cast<size_t>(n_tokens);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
    p.q16 = reinterpret_cast<int16_t*>(base);
    base += align64(nt * static_cast<size_t>(n_in) * sizeof(int16_t));
    p.d64 = reinterpret_cast<float*>(base);
    return p;
}

void bnb_quantize_act(const ActPanel& p, const float* x, int t0, int t1) {
    auto* q = const_cast<int16_t*>(p.q16);
    auto* d = const_cast<float*>(p.d64);
    const int64_t nb = p.n_in / 64;
    for (int t = t0; t < t1; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            const float* xb = x + t * p.n_in + 64 * b;
            float amax = 0.0f;
            for (int i = 0; i < 64; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
            const float id = amax > 0.0f ? 32767.0f / amax : 0.0f;
            int16_t* qb = q + t * p.n_in + 64 * b;
            for (int i = 0; i < 64; ++i) {
                const float v = std::nearbyint(xb[kOrder.e[i]] * id);
                qb[i] = static_cast<int16_t>(std::fmax(-32767.0f, std::fmin(32767.0f, v)));
            }
            d[b * p.n_tokens + t] = amax / 32767.0f;
        }
}

void gemm_bnb(const WeightView& w, const ActPanel& a, int64_t r0, int64_t r1, int t0, int t1, float* y, int64_t ldy) {
    const int64_t nb = w.n_in / 64, n = r1 - r0;
    const size_t stride = row_bytes(w.dtype, w.n_in);
    const bool dq = w.dtype == DType::NF4_DQ;
    const CodeTables ct = code_tables(w.dtype);
    // the rows' absmax / S, [n, nb]: read from the blocks, or decoded from NF4_DQ's 8-bit codes
    thread_local std::vector<float> am;
    am.resize(static_cast<size_t>(n * nb));
    const auto* base = static_cast<const uint8_t*>(w.data) + r0 * stride;
    if (dq) nf4_dq_absmax(w.data, w.n_in, w.n_out, r0 * nb, r1 * nb, am.data());
    else
        for (int64_t r = 0; r < n; ++r)
            for (int64_t b = 0; b < nb; ++b)
                am[static_cast<size_t>(r * nb + b)] = reinterpret_cast<const BlockBnb4*>(base + r * stride)[b].absmax;
    for (float& v : am) v *= ct.inv_scale;
    BnbArgs args;
    args.stride = stride;
    args.block_bytes = dq ? sizeof(BlockNf4Dq) : sizeof(BlockBnb4);
    args.nb = nb;
    args.ct = &ct;
    args.a = &a;
    args.ldy = ldy;
    const size_t qs_off = dq ? offsetof(BlockNf4Dq, qs) : offsetof(BlockBnb4, qs);
    constexpr int kC = 4;
    const int kR = t1 - t0 == 1 ? 4 : 2;
    for (int t = t0; t < t1; t += kC) {
        const int c = t1 - t < kC ? t1 - t : kC;
        args.t0 = t;
        int64_t r = 0;
        auto at = [&](int64_t row) {
            args.qs = base + row * stride + qs_off;
            args.am = am.data() + row * nb;
            args.y = y + r0 + row;
        };
        for (; r + kR <= n; r += kR) {
            at(r);
            if (kR == 4) tile_bnb_c<4>(c, args);
            else
                tile_bnb_c<2>(c, args);
        }
        for (; r < n; ++r) {
            at(r);
            tile_bnb_c<1>(c, args);
        }
    }
}

// ---- LLM.int8()

size_t llm_act_bytes(int n_tokens, int64_t n_in) {
    const size_t nt = static_cast<size_t>(n_tokens), ni = static_cast<size_t>(n_in);
    const size_t nb = ni / kQK32;
    return align64(nt * ni) + align64((nb * nt + 4) * sizeof(float)) + align64(nt * sizeof(int32_t)) +
           align64(nt * ni * sizeof(int32_t)) + align64(nt * ni * sizeof(float)) + 64;
}

ActPanel llm_act_layout(void* scratch, int n_tokens, int64_t n_in) {
    ActPanel p;
    p.n_tokens = n_tokens;
    p.n_in = n_in;
    const size_t nt = static_cast<size_t>(n_tokens), ni = static_cast<size_t>(n_in);
    const size_t nb = ni / kQK32;
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
    p.qs = reinterpret_cast<int8_t*>(base);
    base += align64(nt * ni);
    auto* d = reinterpret_cast<float*>(base);
    std::memset(d + nb * nt, 0, 4 * sizeof(float));  // padding read by 4-token tiles
    p.d = d;
    base += align64((nb * nt + 4) * sizeof(float));
    p.ol_count = reinterpret_cast<int32_t*>(base);
    base += align64(nt * sizeof(int32_t));
    p.ol_idx = reinterpret_cast<int32_t*>(base);
    base += align64(nt * ni * sizeof(int32_t));
    p.ol_val = reinterpret_cast<float*>(base);
    return p;
}

void llm_quantize_act(const ActPanel& p, const float* x, int t0, int t1) {
    const int64_t n = p.n_in, nb = n / kQK32;
    const float thr = p.threshold;
    for (int t = t0; t < t1; ++t) {
        const float* xt = x + t * n;
        float amax = 0.0f;
        for (int64_t i = 0; i < n; ++i)
            if (std::fabs(xt[i]) <= thr) amax = std::fmax(amax, std::fabs(xt[i]));
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        auto* q = const_cast<int8_t*>(p.qs) + t * n;
        auto* idx = const_cast<int32_t*>(p.ol_idx) + t * n;
        auto* val = const_cast<float*>(p.ol_val) + t * n;
        int32_t n_ol = 0;
        for (int64_t i = 0; i < n; ++i) {
            if (std::fabs(xt[i]) > thr) {
                q[i] = 0;
                idx[n_ol] = static_cast<int32_t>(i);
                val[n_ol++] = xt[i];
            } else {
                q[i] = static_cast<int8_t>(std::nearbyint(xt[i] * inv));
            }
        }
        const_cast<int32_t*>(p.ol_count)[t] = n_ol;
        auto* d = const_cast<float*>(p.d);
        for (int64_t b = 0; b < nb; ++b) d[b * p.n_tokens + t] = amax / 127.0f;
    }
}

void gemm_llm_int8(const uint8_t* w, size_t stride, const ActPanel& a, int64_t n_rows, int t0, int t1, float* y,
                   int64_t ldy) {
    // from byte 4 on, each row is an I8_ROW row (scale, quants): the int8 part is I8_ROW's tile
    gemm_i8_row(w + sizeof(float), stride, a, n_rows, t0, t1, y, ldy);
    for (int t = t0; t < t1; ++t) {
        const int32_t n_ol = a.ol_count[t];
        if (n_ol == 0) continue;
        const int32_t* idx = a.ol_idx + t * a.n_in;
        const float* val = a.ol_val + t * a.n_in;
        for (int64_t r = 0; r < n_rows; ++r) {
            const uint8_t* row = w + r * stride;
            float scale_w;
            std::memcpy(&scale_w, row + sizeof(float), sizeof(float));
            const auto* q = reinterpret_cast<const int8_t*>(row + kI8LlmRowHeader);
            float s = 0.0f;
            for (int32_t j = 0; j < n_ol; ++j) s += val[j] * (static_cast<float>(q[idx[j]]) * scale_w);
            y[t * ldy + r] += s;
        }
    }
}

}  // namespace kvs::cpu::avx2
