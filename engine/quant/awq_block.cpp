// Float attention / MLP blocks for AWQ's block-output loss (engine/quant/awq_block.h).
#include "engine/quant/awq_block.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvs {

namespace {

// row[0..n_visible) = softmax(scale * row[0..n_visible)), row[n_visible..n) = 0
void causal_softmax_row(float* row, int n_visible, int n, float scale) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n_visible; ++j) mx = std::max(mx, row[j] * scale);
    double sum = 0.0;
    for (int j = 0; j < n_visible; ++j) {
        row[j] = std::exp(row[j] * scale - mx);
        sum += row[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int j = 0; j < n_visible; ++j) row[j] *= inv;
    for (int j = n_visible; j < n; ++j) row[j] = 0.0f;
}

// attention_block_forward for one sequence of n_rows rows.
void one_sequence(Backend& be, const ModelConfig& c, const AttnBlockWeights& w, const float* x, int n_rows,
                  float* out) {
    const int T = n_rows, D = c.head_dim, H = c.n_head, HK = c.n_kv_head;
    const int64_t E = c.n_embd, QD = int64_t(H) * D, KV = int64_t(HK) * D;
    std::vector<float> q(size_t(T) * QD), k(size_t(T) * KV), v(size_t(T) * KV);  // [T, QD], [T, KV], [T, KV]
    be.matmul(WeightView{DType::F32, w.wq, E, QD}, x, q.data(), T);
    be.matmul(WeightView{DType::F32, w.wk, E, KV}, x, k.data(), T);
    be.matmul(WeightView{DType::F32, w.wv, E, KV}, x, v.data(), T);
    if (w.bq) be.add_bias(q.data(), w.bq, q.data(), T, int(QD));
    if (w.bk) be.add_bias(k.data(), w.bk, k.data(), T, int(KV));
    if (w.bv) be.add_bias(v.data(), w.bv, v.data(), T, int(KV));
    std::vector<int32_t> pos(static_cast<size_t>(T));  // [T]
    for (int t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = t;
    be.rope(q.data(), pos.data(), T, H, D, c.n_rot, c.rope_freq_base, c.rope_style);
    be.rope(k.data(), pos.data(), T, HK, D, c.n_rot, c.rope_freq_base, c.rope_style);

    std::vector<float> qh(size_t(T) * D), kh(size_t(T) * D), vt(size_t(D) * T);  // [T, D], [T, D], [D, T]
    std::vector<float> p(size_t(T) * T), oh(size_t(T) * D);                      // [T, T], [T, D]
    std::vector<float> attn(size_t(T) * QD);                                     // [T, QD]
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (int h = 0; h < H; ++h) {
        const int g = h / (H / HK);
        for (int t = 0; t < T; ++t)
            for (int d = 0; d < D; ++d) {
                qh[size_t(t) * D + d] = q[size_t(t) * QD + size_t(h) * D + d];
                kh[size_t(t) * D + d] = k[size_t(t) * KV + size_t(g) * D + d];
                vt[size_t(d) * T + t] = v[size_t(t) * KV + size_t(g) * D + d];
            }
        be.matmul(WeightView{DType::F32, kh.data(), D, T}, qh.data(), p.data(), T);  // p[i, j] = q_i . k_j
        for (int i = 0; i < T; ++i) causal_softmax_row(p.data() + size_t(i) * T, i + 1, T, scale);
        be.matmul(WeightView{DType::F32, vt.data(), T, D}, p.data(), oh.data(), T);  // oh[i, d] = sum_j p[i, j] v[j, d]
        for (int t = 0; t < T; ++t)
            for (int d = 0; d < D; ++d) attn[size_t(t) * QD + size_t(h) * D + d] = oh[size_t(t) * D + d];
    }
    be.matmul(WeightView{DType::F32, w.wo, QD, E}, attn.data(), out, T);
}

}  // namespace

void attention_block_forward(Backend& be, const ModelConfig& c, const AttnBlockWeights& w, const float* x, int n_rows,
                             float* out, int seq_len) {
    const int L = seq_len > 0 ? seq_len : n_rows;
    for (int r0 = 0; r0 < n_rows; r0 += L)
        one_sequence(be, c, w, x + size_t(r0) * size_t(c.n_embd), std::min(L, n_rows - r0),
                     out + size_t(r0) * size_t(c.n_embd));
}

void mlp_block_forward(Backend& be, const ModelConfig& c, const float* gate, const float* up, const float* down,
                       const float* x, int n_rows, float* out) {
    const int64_t E = c.n_embd, F = c.n_ff;
    std::vector<float> g(size_t(n_rows) * F), u(size_t(n_rows) * F);  // [n_rows, n_ff] each
    be.matmul(WeightView{DType::F32, gate, E, F}, x, g.data(), n_rows);
    be.matmul(WeightView{DType::F32, up, E, F}, x, u.data(), n_rows);
    be.swiglu(g.data(), u.data(), g.data(), int64_t(n_rows) * F);
    be.matmul(WeightView{DType::F32, down, F, E}, g.data(), out, n_rows);
}

Result<std::vector<ResidualMeanSquares>> residual_mean_squares(Backend& be, const Model& m, const CalibrationData& d,
                                                               const std::vector<int32_t>& tokens) {
    using R = Result<std::vector<ResidualMeanSquares>>;
    const ModelConfig& c = m.config;
    const int n = d.n_rows;
    if (n != int(tokens.size()) || int(d.layers.size()) != c.n_layer)
        return R::error("residual weighting needs every calibration token's activations of every layer (got " +
                        std::to_string(n) + " rows for " + std::to_string(tokens.size()) + " tokens, " +
                        std::to_string(d.layers.size()) + " of " + std::to_string(c.n_layer) + " layers)");
    for (const LayerWeights& L : m.layers)
        if (L.attn_post_norm || L.ffn_post_norm)
            return R::error("residual weighting: the model normalises its blocks' outputs (post-norms), not supported");
    const int64_t E = c.n_embd;
    std::vector<float> x(size_t(n) * size_t(E)), add(x.size());  // [n, n_embd] the residual, a block's output
    be.embedding(m.token_embd, tokens.data(), n, x.data());
    if (c.embd_scale != 1.0f)
        for (float& v : x) v *= c.embd_scale;
    auto mean_squares = [&]() {
        std::vector<float> ms(static_cast<size_t>(n));  // [n]
        for (int r = 0; r < n; ++r) {
            double acc = 0.0;
            for (int64_t i = 0; i < E; ++i) acc += double(x[size_t(r) * E + i]) * x[size_t(r) * E + i];
            ms[size_t(r)] = float(acc / double(E));
        }
        return ms;
    };
    std::vector<ResidualMeanSquares> out(size_t(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) {
        const LayerWeights& L = m.layers[size_t(l)];
        const LayerActivations& a = d.layers[size_t(l)];
        be.matmul(L.wo, a.attn_out.data(), add.data(), n);
        for (size_t i = 0; i < x.size(); ++i) x[i] += add[i];
        out[size_t(l)].mid = mean_squares();
        be.matmul(L.w_down, a.down_in.data(), add.data(), n);
        for (size_t i = 0; i < x.size(); ++i) x[i] += add[i];
        out[size_t(l)].out = mean_squares();
    }
    return out;
}

double mean_squared_diff(const float* a, const float* b, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        acc += d * d;
    }
    return n ? acc / static_cast<double>(n) : 0.0;
}

}  // namespace kvs
