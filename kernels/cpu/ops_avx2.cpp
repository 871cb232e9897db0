// AVX2/FMA/F16C versions of the CPU ops. Compiled with -mavx2 -mfma -mf16c; called only
// when detect_simd() >= Avx2. Shapes the vector loops do not cover (a head_dim that is
// not a multiple of 8, ...) go to the scalar reference.
#include <immintrin.h>

#include <algorithm>
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
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _mm256_loadu_ps(weight + i)));
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
        int i = 0;                                           // pair index
        if (style == RopeStyle::Normal) {
            // 4 pairs per vector: (a0 b0 a1 b1 ..) * (c0 c0 c1 c1 ..) -/+ (b0 a0 b1 a1 ..) * (s0 s0 s1 s1 ..)
            for (; i + 4 <= half; i += 4) {
                const __m256 cs = _mm256_loadu_ps(cos_sin + 2 * i);
                const __m256 xv = _mm256_loadu_ps(v + 2 * i);
                const __m256 sw = _mm256_permute_ps(xv, 0xB1);
                const __m256 r = _mm256_fmaddsub_ps(xv, _mm256_moveldup_ps(cs), _mm256_mul_ps(sw, _mm256_movehdup_ps(cs)));
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

void softmax_row(float* x, int n) {
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
    const float inv = static_cast<float>(1.0 / sum);
    const __m256 vinv = _mm256_set1_ps(inv);
    i = 0;
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
        const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23),
                                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
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
    const BlockQ8_0* block(int r, int d) const { return reinterpret_cast<const BlockQ8_0*>(p + r * stride) + d / kQK32; }
    __m256 scale(int r, int d) const { return _mm256_set1_ps(_cvtsh_ss(block(r, d)->d)); }
    __m256 load(int r, int d, __m256 s) const {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block(r, d)->qs + d % kQK32));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), s);
    }
    Q8Rows skip(int r) const { return {p + r * stride, stride}; }
};

// Per-thread working set of one attention call on kNG heads.
struct AttnScratch {
    float* q;  // [kNG, head_dim], pre-scaled
    float* o;  // [kNG, head_dim], unnormalized output
    float* p;  // [kNG, block_size], scores then weights of the current block
};

// Scores of kP consecutive positions for kNG heads: p[g * ld + i] = q_g . k_i (rows of k).
// kP x kNG independent FMA chains hide the FMA latency. hd is a multiple of Rows::kGroup.
template <int kNG, int kP, class Rows>
void qk_tile(const float* q, const Rows& k, int hd, float* p, int ld) {
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
    for (int i = 0; i < kP; ++i)
        for (int g = 0; g < kNG; ++g) p[g * ld + i] = hsum(acc[i][g]);
}

// o_g[d0 .. d0 + 8 kTD) += sum_j p[g * ld + j] * v_j[d0 ..] over n positions (rows of v);
// o points at element d0 of head 0's output; kNG x kTD chains. 8 kTD divides 32 and d0 is
// a multiple of it, so the columns lie in one Q8_0 block (one scale per row).
template <int kNG, int kTD, class Rows>
void pv_tile(const float* p, int ld, const Rows& v, int d0, int n, int hd, float* o) {
    __m256 acc[kNG][kTD];
    for (int g = 0; g < kNG; ++g)
        for (int c = 0; c < kTD; ++c) acc[g][c] = _mm256_loadu_ps(o + g * hd + 8 * c);
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
        for (int c = 0; c < kTD; ++c) _mm256_storeu_ps(o + g * hd + 8 * c, acc[g][c]);
}

// One pass over positions [p0, p1) of the sequence's blocks for kNG query heads
// [h0, h0 + kNG) sharing kv head kvh (flash-attention style online softmax: running max m
// and sum l per head; each block's scores rescale the accumulated output once). K/V rows
// are converted (from fp16 or Q8_0, by Rows) once and used by all kNG heads. part == nullptr:
// writes the normalized output to a.out; else the partial result (see
// OpKernels::attention_partial).
template <int kNG, class Rows>
void attend_group(const PagedAttentionArgs& a, int t, int h0, int kvh, int p0, int p1, float* part, AttnScratch& s) {
    const int hd = a.head_dim, bs = a.block_size;
    const int seq = a.token_seq[t];
    const int64_t pos_bytes = static_cast<int64_t>(row_bytes(a.cache_type, static_cast<int64_t>(a.n_kv_head) * hd));
    const int64_t head_bytes = pos_bytes / a.n_kv_head;  // one kv head's slice of a position
    float m[kNG], l[kNG];
    for (int g = 0; g < kNG; ++g) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
        const float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h0 + g) * hd;  // [head_dim]
        for (int d = 0; d < hd; ++d) s.q[g * hd + d] = q[d] * a.scale;
    }
    for (int i = 0; i < kNG * hd; ++i) s.o[i] = 0.0f;
    const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
    for (int b = p0 / bs; b * bs < p1; ++b) {
        const int j0 = std::max(0, p0 - b * bs);               // first position of the block in range
        const int n_valid = std::min(bs, p1 - b * bs) - j0;    // positions of the block in range
        const int64_t base = (static_cast<int64_t>(table[b]) * bs + j0) * pos_bytes + kvh * head_bytes;
        const Rows kb{static_cast<const uint8_t*>(a.k_cache) + base, pos_bytes};  // [n_valid, (n_kv_head,) head_dim]
        const Rows vb{static_cast<const uint8_t*>(a.v_cache) + base, pos_bytes};
        constexpr int kP = kNG <= 2 ? 4 : 2;  // positions per score tile
        int jp = 0;
        for (; jp + kP <= n_valid; jp += kP) qk_tile<kNG, kP>(s.q, kb.skip(jp), hd, s.p + jp, bs);
        for (; jp < n_valid; ++jp) qk_tile<kNG, 1>(s.q, kb.skip(jp), hd, s.p + jp, bs);
        for (int g = 0; g < kNG; ++g) {
            float* p = &s.p[g * bs];  // [n_valid]
            float bmax = p[0];
            for (int j = 1; j < n_valid; ++j) bmax = std::max(bmax, p[j]);
            const float m_new = std::max(m[g], bmax);
            const float corr = std::exp(m[g] - m_new);
            const __m256 vm = _mm256_set1_ps(m_new);
            __m256 vsum = _mm256_setzero_ps();
            int j = 0;
            for (; j + 8 <= n_valid; j += 8) {
                const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm));
                _mm256_storeu_ps(p + j, e);
                vsum = _mm256_add_ps(vsum, e);
            }
            float sum = hsum(vsum);
            for (; j < n_valid; ++j) {
                p[j] = std::exp(p[j] - m_new);
                sum += p[j];
            }
            l[g] = l[g] * corr + sum;
            m[g] = m_new;
            if (corr != 1.0f) {
                const __m256 vc = _mm256_set1_ps(corr);
                float* o = &s.o[g * hd];
                for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), vc));
            }
        }
        constexpr int kTD = kNG <= 2 ? 4 : 2;  // 8-float column chunks per value tile
        int d = 0;
        for (; d + 8 * kTD <= hd; d += 8 * kTD) pv_tile<kNG, kTD>(s.p, bs, vb, d, n_valid, hd, s.o + d);
        for (; d < hd; d += 8) pv_tile<kNG, 1>(s.p, bs, vb, d, n_valid, hd, s.o + d);
    }
    if (part) {
        for (int g = 0; g < kNG; ++g) {
            float* pg = part + g * (hd + 2);  // [head_dim + 2]
            for (int d = 0; d < hd; ++d) pg[d] = s.o[g * hd + d];
            pg[hd] = m[g];
            pg[hd + 1] = l[g];
        }
        return;
    }
    for (int g = 0; g < kNG; ++g) {
        float* out = a.out + (static_cast<int64_t>(t) * a.n_head + h0 + g) * hd;  // [head_dim]
        const __m256 inv = _mm256_set1_ps(1.0f / l[g]);
        for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(&s.o[g * hd + d]), inv));
    }
}

// Heads [h0, h1) over positions [p0, p1), in runs of at most 4 heads of one GQA group.
template <class Rows>
void attend(const PagedAttentionArgs& a, int t, int h0, int h1, int p0, int p1, float* part) {
    constexpr int kMaxNG = 4;
    const size_t n_hd = static_cast<size_t>(kMaxNG) * a.head_dim;
    AttnScratch s{thread_scratch(0, n_hd), thread_scratch(1, n_hd),
                  thread_scratch(2, static_cast<size_t>(kMaxNG) * a.block_size)};
    const int group = a.n_head / a.n_kv_head;
    for (int h = h0; h < h1;) {
        const int kvh = h / group;
        const int ng = std::min(std::min(kMaxNG, h1 - h), (kvh + 1) * group - h);  // never past the group
        float* ph = part ? part + static_cast<int64_t>(h - h0) * (a.head_dim + 2) : nullptr;
        switch (ng) {
            case 1: attend_group<1, Rows>(a, t, h, kvh, p0, p1, ph, s); break;
            case 2: attend_group<2, Rows>(a, t, h, kvh, p0, p1, ph, s); break;
            case 3: attend_group<3, Rows>(a, t, h, kvh, p0, p1, ph, s); break;
            default: attend_group<4, Rows>(a, t, h, kvh, p0, p1, ph, s); break;
        }
        h += ng;
    }
}

void attention_heads(const PagedAttentionArgs& a, int t, int h0, int h1) {
    if (a.head_dim % 8 != 0) {
        scalar_op_kernels().attention_heads(a, t, h0, h1);
        return;
    }
    if (a.cache_type == DType::Q8_0) attend<Q8Rows>(a, t, h0, h1, 0, a.token_pos[t] + 1, nullptr);
    else attend<F16Rows>(a, t, h0, h1, 0, a.token_pos[t] + 1, nullptr);
}

void attention_partial(const PagedAttentionArgs& a, int t, int h0, int h1, int p0, int p1, float* part) {
    if (a.head_dim % 8 != 0) {
        scalar_op_kernels().attention_partial(a, t, h0, h1, p0, p1, part);
        return;
    }
    if (a.cache_type == DType::Q8_0) attend<Q8Rows>(a, t, h0, h1, p0, p1, part);
    else attend<F16Rows>(a, t, h0, h1, p0, p1, part);
}

}  // namespace

const OpKernels& avx2_op_kernels() {
    static const OpKernels k{rms_norm_row, rope_token,  softmax_row, swiglu_range,    add_range,
                             to_fp16_row,  to_q8_0_row, attention_heads, attention_partial};
    return k;
}

}  // namespace kvs::cpu
