// AVX2/FMA/F16C versions of the CPU ops. Compiled with -mavx2 -mfma -mf16c; called only
// when detect_simd() >= Avx2. Shapes the vector loops do not cover (a head_dim that is
// not a multiple of 8, ...) go to the scalar reference.
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_blocks.h"

namespace kvs::cpu {
namespace {

float hsum(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

float hmax(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

// e^x, relative error ~2e-7 (Cephes polynomial on [-ln2/2, ln2/2] times 2^n).
// Inputs are clamped to [-87, 88], so very negative x gives ~1e-38 instead of 0.
__m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

__m256 load_h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

void rms_norm_row(const float* x, const float* weight, float* y, int n, float eps) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i), s0);
    double sum_sq = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / n + eps));
    const __m256 vinv = _mm256_set1_ps(inv);
    i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _mm256_loadu_ps(weight + i)));
    for (; i < n; ++i) y[i] = x[i] * inv * weight[i];
}

void rope_pair(float* v, int i0, int i1, float c, float s) {
    const float a = v[i0], b = v[i1];
    v[i0] = a * c - b * s;
    v[i1] = a * s + b * c;
}

void rope_token(float* x, const float* cos_sin, int n_head, int head_dim, int n_rot, RopeStyle style) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_head; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;  // [head_dim]
        int i = 0;                                          // pair index
        if (style == RopeStyle::Normal) {
            // 4 pairs per vector: (a0 b0 a1 b1 ..) * (c0 c0 c1 c1 ..) -/+ (b0 a0 b1 a1 ..) * (s0 s0 s1 s1 ..)
            for (; i + 4 <= half; i += 4) {
                const __m256 cs = _mm256_loadu_ps(cos_sin + 2 * i);
                const __m256 xv = _mm256_loadu_ps(v + 2 * i);
                const __m256 sw = _mm256_permute_ps(xv, 0xB1);
                const __m256 r =
                    _mm256_fmaddsub_ps(xv, _mm256_moveldup_ps(cs), _mm256_mul_ps(sw, _mm256_movehdup_ps(cs)));
                _mm256_storeu_ps(v + 2 * i, r);
            }
            for (; i < half; ++i) rope_pair(v, 2 * i, 2 * i + 1, cos_sin[2 * i], cos_sin[2 * i + 1]);
        } else {
            for (; i + 8 <= half; i += 8) {
                const __m256 cs0 = _mm256_loadu_ps(cos_sin + 2 * i), cs1 = _mm256_loadu_ps(cos_sin + 2 * i + 8);
                const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(
                    _mm256_castps_pd(_mm256_shuffle_ps(cs0, cs1, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
                const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
                    _mm256_castps_pd(_mm256_shuffle_ps(cs0, cs1, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
                const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
                _mm256_storeu_ps(v + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
                _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
            }
            for (; i < half; ++i) rope_pair(v, i, i + half, cos_sin[2 * i], cos_sin[2 * i + 1]);
        }
    }
}

// x[i] = e^(x[i] - max x) in place; returns that sum and stores the max in *max_out.
double exp_minus_max(float* x, int n, float* max_out) {
    __m256 vm = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    float mx = hmax(vm);
    for (; i < n; ++i) mx = std::max(mx, x[i]);
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
        _mm256_storeu_ps(x + i, e);
        vs = _mm256_add_ps(vs, e);
    }
    double sum = hsum(vs);
    for (; i < n; ++i) {
        x[i] = std::exp(x[i] - mx);
        sum += x[i];
    }
    *max_out = mx;
    return sum;
}

void softmax_row(float* x, int n) {
    float mx;
    const float inv = static_cast<float>(1.0 / exp_minus_max(x, n, &mx));
    const __m256 vinv = _mm256_set1_ps(inv);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
    for (; i < n; ++i) x[i] *= inv;
}

void swiglu_range(const float* gate, const float* up, float* y, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
        const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add_range(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) y[i] = a[i] + b[i];
}

void to_fp16_row(const float* x, uint16_t* dst, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) dst[i] = static_cast<uint16_t>(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

// Q8_0 blocks of 32 as ggml's x86 quantize_row_q8_0 rounds them and the scalar reference
// (quantize_row) does: d = fp16(amax / 127), q = round-half-even(x * (127 / amax)).
void to_q8_0_row(const float* x, void* dst, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    auto* b = static_cast<BlockQ8_0*>(dst);
    for (int i = 0; i < n / kQK32; ++i, x += kQK32) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int c = 0; c < 4; ++c) {
            v[c] = _mm256_loadu_ps(x + 8 * c);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[c]));
        }
        const float mx = hmax(amax);
        const float id = mx != 0.0f ? 127.0f / mx : 0.0f;
        b[i].d = static_cast<uint16_t>(_cvtss_sh(mx / 127.0f, _MM_FROUND_TO_NEAREST_INT));
        __m256i q[4];
        for (int c = 0; c < 4; ++c)
            q[c] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[c], _mm256_set1_ps(id)),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        // int32 -> int8 in order: the packs interleave 128-bit lanes, the permute undoes it
        const __m256i q01 = _mm256_packs_epi32(q[0], q[1]), q23 = _mm256_packs_epi32(q[2], q[3]);
        const __m256i q8 =
            _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), q8);
    }
}

// ---------------------------------------------------------------- paged attention

// Cached K or V rows of one kv head, `stride` bytes apart (one cache position each), as
// 8-float vectors: load(r, d, s) is row r, elements [d, d + 8), where s = scale(r, d0) of
// the kGroup-aligned group d0 holding d (fetched once per group by the tiles).
struct F16Rows {
    static constexpr int kGroup = 8;
    const uint8_t* p;
    int64_t stride;
    __m256 scale(int, int) const { return _mm256_setzero_ps(); }  // unused
    __m256 load(int r, int d, __m256) const { return load_h(reinterpret_cast<const uint16_t*>(p + r * stride) + d); }
    F16Rows skip(int r) const { return {p + r * stride, stride}; }
};
// Q8_0 rows: a group is one block of 32 values sharing one fp16 scale.
struct Q8Rows {
    static constexpr int kGroup = kQK32;
    const uint8_t* p;
    int64_t stride;
    const BlockQ8_0* block(int r, int d) const {
        return reinterpret_cast<const BlockQ8_0*>(p + r * stride) + d / kQK32;
    }
    __m256 scale(int r, int d) const { return _mm256_set1_ps(_cvtsh_ss(block(r, d)->d)); }
    __m256 load(int r, int d, __m256 s) const {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block(r, d)->qs + d % kQK32));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), s);
    }
    Q8Rows skip(int r) const { return {p + r * stride, stride}; }
};

// [sum(a0), sum(a1), sum(a2), sum(a3)]: four horizontal sums in 5 instructions.
__m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Scores of kP consecutive positions (1, 2 or 4) for kNG heads: p[g * ld + i] = q_g . k_i
// (rows of k). kP x kNG independent FMA chains hide the FMA latency; four positions reduce
// together. hd is a multiple of Rows::kGroup.
template <int kNG, int kP, class Rows>
void qk_tile(const float* q, const Rows& k, int hd, float* p, int ld) {
    static_assert(kP == 1 || kP == 2 || kP == 4);
    __m256 acc[kP][kNG];
    for (int i = 0; i < kP; ++i)
        for (int g = 0; g < kNG; ++g) acc[i][g] = _mm256_setzero_ps();
    for (int d0 = 0; d0 < hd; d0 += Rows::kGroup) {
        __m256 sc[kP];
        for (int i = 0; i < kP; ++i) sc[i] = k.scale(i, d0);
        for (int d = d0; d < d0 + Rows::kGroup; d += 8) {
            __m256 qv[kNG];
            for (int g = 0; g < kNG; ++g) qv[g] = _mm256_loadu_ps(q + g * hd + d);
            for (int i = 0; i < kP; ++i) {
                const __m256 kv = k.load(i, d, sc[i]);
                for (int g = 0; g < kNG; ++g) acc[i][g] = _mm256_fmadd_ps(qv[g], kv, acc[i][g]);
            }
        }
    }
    // hsum4 reduces each vector on its own, in one fixed order: a score has the same bits
    // whatever the tile shape (kNG, kP), so any split of heads or tokens over tasks agrees
    for (int g = 0; g < kNG; ++g) {
        if constexpr (kP == 4) {
            _mm_storeu_ps(p + g * ld, hsum4(acc[0][g], acc[1][g], acc[2][g], acc[3][g]));
        } else {
            alignas(16) float r[4];
            _mm_store_ps(r, hsum4(acc[0][g], acc[kP > 1 ? 1 : 0][g], acc[0][g], acc[0][g]));
            for (int i = 0; i < kP; ++i) p[g * ld + i] = r[i];
        }
    }
}

// o_g[d0 .. d0 + 8 kTD) += sum_j p[g * ld + j] * v_j[d0 ..] over n positions (rows of v);
// o points at element d0 of head 0's output, head g's ld_o floats further; kNG x kTD
// chains. 8 kTD divides 32 and d0 is a multiple of it, so the columns lie in one Q8_0
// block (one scale per row).
template <int kNG, int kTD, class Rows>
void pv_tile(const float* p, int ld, const Rows& v, int d0, int n, int ld_o, float* o) {
    __m256 acc[kNG][kTD];
    for (int g = 0; g < kNG; ++g)
        for (int c = 0; c < kTD; ++c) acc[g][c] = _mm256_loadu_ps(o + g * ld_o + 8 * c);
    for (int j = 0; j < n; ++j) {
        __m256 pb[kNG];
        for (int g = 0; g < kNG; ++g) pb[g] = _mm256_broadcast_ss(p + g * ld + j);
        const __m256 sc = v.scale(j, d0);
        for (int c = 0; c < kTD; ++c) {
            const __m256 vv = v.load(j, d0 + 8 * c, sc);
            for (int g = 0; g < kNG; ++g) acc[g][c] = _mm256_fmadd_ps(pb[g], vv, acc[g][c]);
        }
    }
    for (int g = 0; g < kNG; ++g)
        for (int c = 0; c < kTD; ++c) _mm256_storeu_ps(o + g * ld_o + 8 * c, acc[g][c]);
}

// Scores of one block's n rows for kNG heads sharing them: p[g * ld + j] = q_g . k_j.
template <int kNG, class Rows>
void qk_block(const float* q, const Rows& k, int n, int hd, float* p, int ld) {
    constexpr int kP = kNG <= 3 ? 4 : 2;  // positions per score tile
    int j = 0;
    for (; j + kP <= n; j += kP) qk_tile<kNG, kP>(q, k.skip(j), hd, p + j, ld);
    for (; j < n; ++j) qk_tile<kNG, 1>(q, k.skip(j), hd, p + j, ld);
}

// One block's n rows of V into the outputs of kNG heads sharing them (all columns; head
// g's output ld_o floats after head g - 1's).
template <int kNG, class Rows>
void pv_block(const float* p, int ld, const Rows& v, int n, int hd, int ld_o, float* o) {
    constexpr int kTD = kNG <= 3 ? 4 : 2;  // 8-float column chunks per tile
    int d = 0;
    for (; d + 8 * kTD <= hd; d += 8 * kTD) pv_tile<kNG, kTD>(p, ld, v, d, n, ld_o, o + d);
    for (; d < hd; d += 8) pv_tile<kNG, 1>(p, ld, v, d, n, ld_o, o + d);
}

std::vector<const float*>& thread_parts() {
    thread_local std::vector<const float*> parts;
    return parts;
}

// Query heads [h0, h1) of tokens [t0, t1) (one sequence) over positions [p0, p1) of the
// sequence, each token only up to its own position, in three passes: every score, then
// per head and kAttnChunk-position chunk the max m, e^(s - m) and their sum l, then the
// weighted sums of V rows per chunk. Both passes over the cache walk it block by block
// and, inside a block, through every token and every kv head the heads read: a
// position's rows (all kv heads side by side) are read together, a block's K or V
// streams as one piece and stays in L1 for all the tokens; heads of one GQA group (at
// most 4 at a time) share each converted row. A token's arithmetic does not depend on
// the other tokens or heads of the call, and its chunks are the same fixed ranges as
// attention_partial's, merged by merge_attention_partials: its output has the same bits
// however a call is split over tasks. part == nullptr: writes the normalized output to
// a.out; else ([p0, p1) inside one chunk) the partial records, [nt * nh, head_dim + 2].
template <class Rows>
void attend(const PagedAttentionArgs& a, int t0, int t1, int h0, int h1, int p0, int p1, float* part) {
    const int hd = a.head_dim, bs = a.block_size, n = p1 - p0, nh = h1 - h0, nt = t1 - t0;
    const int group = a.n_head / a.n_kv_head;
    const int64_t nq = static_cast<int64_t>(nt) * nh;  // query rows: (token, head)
    const int c0 = p0 / kAttnChunk, n_chunks = (p1 - 1) / kAttnChunk - c0 + 1;
    assert(!part || n_chunks == 1);
    const int64_t rec = hd + 2;                                  // floats per partial record (o [head_dim], m, l)
    float* q = thread_scratch(0, static_cast<size_t>(nq) * hd);  // [nt, nh, head_dim], pre-scaled
    float* r = part ? part : thread_scratch(1, static_cast<size_t>(nq * n_chunks * rec));  // [nt, nh, n_chunks, rec]
    float* p = thread_scratch(2, static_cast<size_t>(nq) * n);  // [nt, nh, n] scores, then e^(s - m) per chunk
    for (int t = 0; t < nt; ++t)
        for (int i = 0; i < nh * hd; ++i)
            q[t * nh * hd + i] = a.q[(static_cast<int64_t>(t0 + t) * a.n_head + h0) * hd + i] * a.scale;
    std::fill(r, r + nq * n_chunks * rec, 0.0f);
    auto n_of = [&](int t) { return std::min(p1, a.token_pos[t0 + t] + 1) - p0; };  // positions token t sees

    const int64_t pos_bytes = static_cast<int64_t>(row_bytes(a.cache_type, static_cast<int64_t>(a.n_kv_head) * hd));
    const int64_t head_bytes = pos_bytes / a.n_kv_head;  // one kv head's slice of a position
    const int32_t* table = a.block_tables + static_cast<int64_t>(a.token_seq[t0]) * a.max_blocks_per_seq;
    // Runs fn(row, ng, rows, cnt, off) per piece of block b inside one chunk, token and run
    // of at most 4 heads of one GQA group, over the rows the token sees; row = the run's
    // first query row, off = the index of the piece's first row in [p0, p1).
    auto for_runs = [&](const void* cache, int b, auto&& fn) {
        for (int j0 = std::max(0, p0 - b * bs); j0 < bs && b * bs + j0 < p1;) {
            const int off = b * bs + j0 - p0;
            const int piece = std::min(bs - j0, kAttnChunk - (b * bs + j0) % kAttnChunk);  // never past a chunk
            const auto* base =
                static_cast<const uint8_t*>(cache) + (static_cast<int64_t>(table[b]) * bs + j0) * pos_bytes;
            for (int t = 0; t < nt; ++t) {
                const int cnt = std::min(piece, n_of(t) - off);
                if (cnt <= 0) continue;
                for (int h = h0; h < h1;) {
                    const int kvh = h / group;
                    const int ng = std::min(std::min(4, h1 - h), (kvh + 1) * group - h);  // never past the group
                    fn(t * nh + h - h0, ng, Rows{base + kvh * head_bytes, pos_bytes}, cnt, off);
                    h += ng;
                }
            }
            j0 += piece;
        }
    };
    const int b0 = p0 / bs, b1 = (p1 + bs - 1) / bs;
    for (int b = b0; b < b1; ++b)
        for_runs(a.k_cache, b, [&](int64_t i, int ng, const Rows& k, int cnt, int off) {
            float* pi = p + i * n + off;
            switch (ng) {
                case 1: qk_block<1>(q + i * hd, k, cnt, hd, pi, n); break;
                case 2: qk_block<2>(q + i * hd, k, cnt, hd, pi, n); break;
                case 3: qk_block<3>(q + i * hd, k, cnt, hd, pi, n); break;
                default: qk_block<4>(q + i * hd, k, cnt, hd, pi, n); break;
            }
        });
    // chunk c of row i covers [max(p0, (c0 + c) kAttnChunk), min(n_of, (c0 + c + 1) kAttnChunk))
    auto chunk_of = [&](int off) { return (p0 + off) / kAttnChunk - c0; };
    for (int64_t i = 0; i < nq; ++i) {
        const int ni = n_of(static_cast<int>(i / nh));
        for (int c = 0; c < n_chunks; ++c) {
            const int s0 = std::max(0, (c0 + c) * kAttnChunk - p0), s1 = std::min(ni, (c0 + c + 1) * kAttnChunk - p0);
            if (s0 >= s1) break;
            float* rc = r + (i * n_chunks + c) * rec;
            rc[hd + 1] = static_cast<float>(exp_minus_max(p + i * n + s0, s1 - s0, &rc[hd]));
        }
    }
    for (int b = b0; b < b1; ++b)
        for_runs(a.v_cache, b, [&](int64_t i, int ng, const Rows& v, int cnt, int off) {
            const float* pi = p + i * n + off;
            float* o = r + (i * n_chunks + chunk_of(off)) * rec;  // the run's rows are n_chunks records apart
            const int ld_o = static_cast<int>(n_chunks * rec);
            switch (ng) {
                case 1: pv_block<1>(pi, n, v, cnt, hd, ld_o, o); break;
                case 2: pv_block<2>(pi, n, v, cnt, hd, ld_o, o); break;
                case 3: pv_block<3>(pi, n, v, cnt, hd, ld_o, o); break;
                default: pv_block<4>(pi, n, v, cnt, hd, ld_o, o); break;
            }
        });
    if (part) return;
    std::vector<const float*>& parts = thread_parts();
    for (int64_t i = 0; i < nq; ++i) {
        const int ni = n_of(static_cast<int>(i / nh));
        parts.clear();
        for (int c = 0; c < n_chunks && (c0 + c) * kAttnChunk - p0 < ni; ++c)
            parts.push_back(r + (i * n_chunks + c) * rec);
        const int64_t t = t0 + i / nh, h = h0 + i % nh;
        merge_attention_partials(parts.data(), static_cast<int>(parts.size()), hd, a.out + (t * a.n_head + h) * hd);
    }
}

void attention(const PagedAttentionArgs& a, int t0, int t1, int h0, int h1) {
    if (a.head_dim % 8 != 0) {
        scalar_op_kernels().attention(a, t0, t1, h0, h1);
        return;
    }
    int p1 = 0;
    for (int t = t0; t < t1; ++t) {
        assert(a.token_seq[t] == a.token_seq[t0]);
        p1 = std::max(p1, a.token_pos[t] + 1);
    }
    if (a.cache_type == DType::Q8_0) attend<Q8Rows>(a, t0, t1, h0, h1, 0, p1, nullptr);
    else
        attend<F16Rows>(a, t0, t1, h0, h1, 0, p1, nullptr);
}

void attention_partial(const PagedAttentionArgs& a, int t, int h0, int h1, int p0, int p1, float* part) {
    if (a.head_dim % 8 != 0) {
        scalar_op_kernels().attention_partial(a, t, h0, h1, p0, p1, part);
        return;
    }
    if (a.cache_type == DType::Q8_0) attend<Q8Rows>(a, t, t + 1, h0, h1, p0, p1, part);
    else
        attend<F16Rows>(a, t, t + 1, h0, h1, p0, p1, part);
}

// KV eviction scores: per head, the scores of every visible position (F16 rows, 8 lanes),
// softmax with the vector exp, probabilities added over heads. Q8_0 caches and head sizes
// that are not a multiple of 8 take the reference.
void attention_mass(const PagedAttentionArgs& a, int t, float* probs) {
    if (a.cache_type != DType::F16 || a.head_dim % 8 != 0) {
        attention_mass_token(a, t, probs);
        return;
    }
    const int group = a.n_head / a.n_kv_head;
    const int seq = a.token_seq[t];
    const int n_ctx = a.token_pos[t] + 1;
    const int first = a.window > 0 && n_ctx > a.window ? n_ctx - a.window : 0;
    const size_t pos_bytes = row_bytes(a.cache_type, static_cast<int64_t>(a.n_kv_head) * a.head_dim);
    float* s = thread_scratch(kScratchSlots - 1, static_cast<size_t>(n_ctx));  // [n_ctx] scores, then e^(s - max)
    for (int p = 0; p < n_ctx; ++p) probs[p] = 0.0f;  // plain loops: no std templates in this file
    for (int h = 0; h < a.n_head; ++h) {
        const int kvh = h / group;
        const float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim;  // [head_dim]
        float mx = -INFINITY;
        for (int p = first; p < n_ctx; ++p) {
            const auto* k = reinterpret_cast<const uint16_t*>(paged_row(a.k_cache, a, pos_bytes, seq, p, kvh));
            __m256 acc = _mm256_setzero_ps();
            for (int d = 0; d < a.head_dim; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load_h(k + d), acc);
            s[p] = hsum(acc) * a.scale;
            mx = s[p] > mx ? s[p] : mx;
        }
        const __m256 vmx = _mm256_set1_ps(mx);
        __m256 vsum = _mm256_setzero_ps();
        int p = first;
        for (; p + 8 <= n_ctx; p += 8) {
            const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + p), vmx));
            _mm256_storeu_ps(s + p, e);
            vsum = _mm256_add_ps(vsum, e);
        }
        double sum = hsum(vsum);
        for (; p < n_ctx; ++p) {
            s[p] = std::exp(s[p] - mx);
            sum += s[p];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (p = first; p < n_ctx; ++p) probs[p] += s[p] * inv;
    }
}

}  // namespace

const OpKernels& avx2_op_kernels() {
    static const OpKernels k{rms_norm_row, rope_token,  softmax_row, swiglu_range,     add_range,
                             to_fp16_row,  to_q8_0_row, attention,   attention_partial, attention_mass};
    return k;
}

}  // namespace kvs::cpu
