// Scalar reference of the CPU ops: plain loops, sums in double, written to be read.
// The AVX2 kernels (ops_avx2.cpp) and the CUDA kernels are tested against these.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::cpu {
namespace {

void rms_norm_row(const float* x, const float* weight, float* y, int n, float eps) {
    double sum_sq = 0.0;
    for (int i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(sum_sq / n + eps);
    for (int i = 0; i < n; ++i) y[i] = static_cast<float>(x[i] * inv * weight[i]);
}

void rope_token(float* x, const float* cos_sin, int n_head, int head_dim, int n_rot, RopeStyle style) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_head; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;  // [head_dim]
        for (int i = 0; i < half; ++i) {
            const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
            // Normal rotates (x[2i], x[2i+1]); Neox rotates (x[i], x[i + n_rot/2])
            const int i0 = style == RopeStyle::Normal ? 2 * i : i;
            const int i1 = style == RopeStyle::Normal ? 2 * i + 1 : i + half;
            const float a = v[i0], b = v[i1];
            v[i0] = a * c - b * s;
            v[i1] = a * s + b * c;
        }
    }
}

void softmax_row(float* x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; ++i) mx = std::max(mx, x[i]);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - mx);
        sum += x[i];
    }
    const double inv = 1.0 / sum;
    for (int i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] * inv);
}

void swiglu_range(const float* gate, const float* up, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        y[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void add_range(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void to_fp16_row(const float* x, uint16_t* dst, int n) {
    for (int i = 0; i < n; ++i) dst[i] = fp32_to_fp16(x[i]);
}

void to_q8_0_row(const float* x, void* dst, int n) { quantize_row(DType::Q8_0, x, dst, n); }

// dst [head_dim] = one cached K or V row (see paged_row) as floats.
void load_kv_row(const PagedAttentionArgs& a, const uint8_t* row, float* dst) {
    if (a.cache_type == DType::F16) {
        const auto* h = reinterpret_cast<const uint16_t*>(row);
        for (int d = 0; d < a.head_dim; ++d) dst[d] = fp16_to_fp32(h[d]);
    } else {
        dequantize_row(a.cache_type, row, dst, a.head_dim);
    }
}

// Two passes per head: scores of every visible position, softmax, weighted sum of values.
void attention_heads(const PagedAttentionArgs& a, int t, int h0, int h1) {
    const int group = a.n_head / a.n_kv_head;
    const int seq = a.token_seq[t];
    const int n_ctx = a.token_pos[t] + 1;
    const size_t pos_bytes = row_bytes(a.cache_type, static_cast<int64_t>(a.n_kv_head) * a.head_dim);
    thread_local std::vector<double> scores;  // [n_ctx]
    thread_local std::vector<double> acc;     // [head_dim]
    thread_local std::vector<float> row;      // [head_dim] one dequantized K or V row
    scores.resize(static_cast<size_t>(n_ctx));
    acc.resize(static_cast<size_t>(a.head_dim));
    row.resize(static_cast<size_t>(a.head_dim));
    for (int h = h0; h < h1; ++h) {
        const int kvh = h / group;
        const float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim;  // [head_dim]
        double mx = -INFINITY;
        for (int p = 0; p < n_ctx; ++p) {
            load_kv_row(a, paged_row(a.k_cache, a, pos_bytes, seq, p, kvh), row.data());
            double dot = 0.0;
            for (int d = 0; d < a.head_dim; ++d) dot += static_cast<double>(q[d]) * row[d];
            scores[p] = dot * a.scale;
            mx = std::max(mx, scores[p]);
        }
        double sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int p = 0; p < n_ctx; ++p) {
            const double w = std::exp(scores[p] - mx);
            sum += w;
            load_kv_row(a, paged_row(a.v_cache, a, pos_bytes, seq, p, kvh), row.data());
            for (int d = 0; d < a.head_dim; ++d) acc[d] += w * row[d];
        }
        float* out = a.out + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim;  // [head_dim]
        for (int d = 0; d < a.head_dim; ++d) out[d] = static_cast<float>(acc[d] / sum);
    }
}

void attention(const PagedAttentionArgs& a, int t0, int t1, int h0, int h1) {
    for (int t = t0; t < t1; ++t) attention_heads(a, t, h0, h1);
}

// Scores of positions [p0, p1), their max m and sum l of e^(s - m), and the unnormalized
// weighted sum of values.
void attention_partial(const PagedAttentionArgs& a, int t, int h0, int h1, int p0, int p1, float* part) {
    const int group = a.n_head / a.n_kv_head;
    const int seq = a.token_seq[t];
    const size_t pos_bytes = row_bytes(a.cache_type, static_cast<int64_t>(a.n_kv_head) * a.head_dim);
    thread_local std::vector<double> scores;  // [p1 - p0]
    thread_local std::vector<float> row;      // [head_dim] one dequantized K or V row
    scores.resize(static_cast<size_t>(p1 - p0));
    row.resize(static_cast<size_t>(a.head_dim));
    for (int h = h0; h < h1; ++h) {
        const int kvh = h / group;
        const float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim;  // [head_dim]
        float* rec = part + static_cast<int64_t>(h - h0) * (a.head_dim + 2);           // [head_dim + 2]
        double mx = -INFINITY;
        for (int p = p0; p < p1; ++p) {
            load_kv_row(a, paged_row(a.k_cache, a, pos_bytes, seq, p, kvh), row.data());
            double dot = 0.0;
            for (int d = 0; d < a.head_dim; ++d) dot += static_cast<double>(q[d]) * row[d];
            scores[p - p0] = dot * a.scale;
            mx = std::max(mx, scores[p - p0]);
        }
        double sum = 0.0;
        std::fill(rec, rec + a.head_dim, 0.0f);
        for (int p = p0; p < p1; ++p) {
            const double w = std::exp(scores[p - p0] - mx);
            sum += w;
            load_kv_row(a, paged_row(a.v_cache, a, pos_bytes, seq, p, kvh), row.data());
            for (int d = 0; d < a.head_dim; ++d) rec[d] += static_cast<float>(w * row[d]);
        }
        rec[a.head_dim] = static_cast<float>(mx);
        rec[a.head_dim + 1] = static_cast<float>(sum);
    }
}

}  // namespace

void attention_mass_token(const PagedAttentionArgs& a, int t, float* probs) {
    const int group = a.n_head / a.n_kv_head;
    const int seq = a.token_seq[t];
    const int n_ctx = a.token_pos[t] + 1;
    const int first = a.window > 0 ? std::max(0, n_ctx - a.window) : 0;
    const size_t pos_bytes = row_bytes(a.cache_type, static_cast<int64_t>(a.n_kv_head) * a.head_dim);
    thread_local std::vector<double> scores;  // [n_ctx]
    thread_local std::vector<double> sum_p;   // [n_ctx] probabilities summed over heads
    thread_local std::vector<float> row;      // [head_dim] one dequantized K row
    scores.assign(static_cast<size_t>(n_ctx), 0.0);
    sum_p.assign(static_cast<size_t>(n_ctx), 0.0);
    row.resize(static_cast<size_t>(a.head_dim));
    for (int h = 0; h < a.n_head; ++h) {
        const int kvh = h / group;
        const float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim;  // [head_dim]
        double mx = -INFINITY;
        for (int p = first; p < n_ctx; ++p) {
            load_kv_row(a, paged_row(a.k_cache, a, pos_bytes, seq, p, kvh), row.data());
            double dot = 0.0;
            for (int d = 0; d < a.head_dim; ++d) dot += static_cast<double>(q[d]) * row[d];
            scores[p] = dot * a.scale;
            mx = std::max(mx, scores[p]);
        }
        double sum = 0.0;
        for (int p = first; p < n_ctx; ++p) sum += std::exp(scores[p] - mx);
        for (int p = first; p < n_ctx; ++p) sum_p[p] += std::exp(scores[p] - mx) / sum;
    }
    for (int p = 0; p < n_ctx; ++p) probs[p] = static_cast<float>(sum_p[p]);
}

void merge_attention_partials(const float* const* parts, int n_parts, int head_dim, float* out) {
    float mx = -INFINITY;
    for (int c = 0; c < n_parts; ++c) mx = std::max(mx, parts[c][head_dim]);
    double l = 0.0;
    std::fill(out, out + head_dim, 0.0f);
    for (int c = 0; c < n_parts; ++c) {
        const float w = std::exp(parts[c][head_dim] - mx);
        l += static_cast<double>(w) * parts[c][head_dim + 1];
        for (int d = 0; d < head_dim; ++d) out[d] += w * parts[c][d];
    }
    const float inv = static_cast<float>(1.0 / l);
    for (int d = 0; d < head_dim; ++d) out[d] *= inv;
}

float* thread_scratch(int slot, size_t n_floats) {
    thread_local std::vector<float> bufs[kScratchSlots];
    std::vector<float>& b = bufs[slot];
    if (b.size() < n_floats) b.resize(n_floats);
    return b.data();
}

void rope_angles(int32_t pos, int n_rot, float freq_base, float* cos_sin) {
    for (int i = 0; i < n_rot / 2; ++i) {
        const double theta = pos * std::pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
        cos_sin[2 * i] = static_cast<float>(std::cos(theta));
        cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
    }
}

const OpKernels& scalar_op_kernels() {
    static const OpKernels k{rms_norm_row, rope_token,  softmax_row, swiglu_range,     add_range,
                             to_fp16_row,  to_q8_0_row, attention,   attention_partial, attention_mass_token};
    return k;
}

const OpKernels& op_kernels(SimdLevel level) {
    return level >= SimdLevel::Avx2 ? avx2_op_kernels() : scalar_op_kernels();
}

}  // namespace kvs::cpu
