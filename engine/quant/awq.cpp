// awq_quantize(): calibration, then per layer scale search, folding, clipping and encoding.
#include "engine/quant/awq.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "engine/quant/awq_block.h"
#include "engine/quant/quantize.h"
#include "engine/quant/rtn.h"

namespace kvs {

namespace {

// What keeps an AWQ variant's weights alive: the source (embedding, head, output norm),
// the re-encoded linears and the variant's own norms / v biases (1/s folded in).
struct AwqStorage {
    std::shared_ptr<const Model> source;
    std::vector<std::vector<uint8_t>> weights;
    std::vector<std::vector<float>> vectors;
};

// One layer in float while it is searched.
struct FloatLayer {
    std::vector<float> wq, wk, wv, wo, gate, up, down;  // [n_out, n_in] each
    std::vector<float> attn_norm, ffn_norm;             // [n_embd]
    std::vector<float> bv;                              // [kv_dim] or empty
    const float* bq = nullptr;                          // [q_dim] or null (the source's)
    const float* bk = nullptr;                          // [kv_dim] or null (the source's)
};

// The INT4 group of rows of n_in weights: opt.group_size, or 64 where it does not divide
// n_in (check_awq_input made sure one fits).
int group_of(const AwqOptions& opt, int64_t n_in) { return int4_group_for(n_in, opt.group_size); }

// w[:, i] *= s[i]; w [n_out, n_in]
void scale_columns(std::vector<float>& w, int64_t n_in, const std::vector<float>& s) {
    for (size_t r = 0; r < w.size() / static_cast<size_t>(n_in); ++r)
        for (int64_t i = 0; i < n_in; ++i) w[r * n_in + i] *= s[static_cast<size_t>(i)];
}
// x[:, i] /= s[i]; x [n_rows, n]
void divide_columns(std::vector<float>& x, int64_t n, const std::vector<float>& s) {
    for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r)
        for (int64_t i = 0; i < n; ++i) x[r * n + i] /= s[static_cast<size_t>(i)];
}
// w[o, :] /= s[o]; w [n_out, n_in]
void divide_rows(std::vector<float>& w, int64_t n_in, const std::vector<float>& s) {
    for (size_t r = 0; r < s.size(); ++r)
        for (int64_t i = 0; i < n_in; ++i) w[r * n_in + i] /= s[r];
}
void divide(std::vector<float>& v, const std::vector<float>& s) {
    for (size_t i = 0; i < v.size(); ++i) v[i] /= s[i];
}

FloatLayer to_float(const LayerWeights& L, const ModelConfig& c) {
    FloatLayer f;
    f.wq = dequantize_matrix(L.wq, 1);
    f.wk = dequantize_matrix(L.wk, 1);
    f.wv = dequantize_matrix(L.wv, 1);
    f.wo = dequantize_matrix(L.wo, 1);
    f.gate = dequantize_matrix(L.w_gate, 1);
    f.up = dequantize_matrix(L.w_up, 1);
    f.down = dequantize_matrix(L.w_down, 1);
    f.attn_norm.assign(L.attn_norm, L.attn_norm + c.n_embd);
    f.ffn_norm.assign(L.ffn_norm, L.ffn_norm + c.n_embd);
    if (L.bv) f.bv.assign(L.bv, L.bv + c.n_kv_head * c.head_dim);
    f.bq = L.bq;
    f.bk = L.bk;
    return f;
}

// The calibration rows that count in the statistics and losses: all but the first `skip` of
// every sequence of seq_len rows (0: one sequence).
std::vector<int> kept_rows(int n_rows, int seq_len, int skip) {
    const int L = seq_len > 0 ? seq_len : n_rows;
    skip = std::clamp(skip, 0, L - 1);
    std::vector<int> keep;
    for (int r = 0; r < n_rows; ++r)
        if (r % L >= skip) keep.push_back(r);
    return keep;
}

// The rows `keep` of x [n_rows, n], [keep.size(), n].
std::vector<float> gather_rows(const float* x, int64_t n, const std::vector<int>& keep) {
    std::vector<float> out(keep.size() * static_cast<size_t>(n));
    for (size_t i = 0; i < keep.size(); ++i)
        std::memcpy(out.data() + i * size_t(n), x + size_t(keep[i]) * size_t(n), sizeof(float) * size_t(n));
    return out;
}

// Per-row loss weights of one layer (AwqOptions::residual_weight), [n_rows] each: 1 / the mean
// square of the residual the attention block's output (mid) or the MLP's (out) is added to,
// scaled to mean 1; empty: every row weighs 1.
struct RowWeights {
    std::vector<float> mid, out;
};

// The weight of row r (1 without weights).
float weight_of(const std::vector<float>& w, int r) { return w.empty() ? 1.0f : w[size_t(r)]; }

// The rows `keep` of x [n_rows, n], each times sqrt(its weight): a squared error of a linear's
// output on them is the weighted one. [keep.size(), n]
std::vector<float> gather_weighted_rows(const float* x, int64_t n, const std::vector<int>& keep,
                                        const std::vector<float>& w) {
    std::vector<float> out = gather_rows(x, n, keep);
    if (!w.empty())
        for (size_t i = 0; i < keep.size(); ++i) {
            const float k = std::sqrt(w[size_t(keep[i])]);
            for (int64_t j = 0; j < n; ++j) out[i * size_t(n) + size_t(j)] *= k;
        }
    return out;
}

// Weighted mean squared difference of the rows `keep` of a and b [n_rows, n] (w: per row of
// a / b, empty: 1).
double mean_squared_diff_rows(const float* a, const float* b, int64_t n, const std::vector<int>& keep,
                              const std::vector<float>& w = {}) {
    double acc = 0.0, sum_w = 0.0;
    for (int r : keep) {
        const double wr = weight_of(w, r);
        acc += wr * mean_squared_diff(a + size_t(r) * size_t(n), b + size_t(r) * size_t(n), size_t(n));
        sum_w += wr;
    }
    return sum_w > 0.0 ? acc / sum_w : 0.0;
}

// 1 / v, scaled to mean 1 (v's zeros count as the smallest positive value).
std::vector<float> inverse_mean_one(const std::vector<float>& v) {
    std::vector<float> w(v.size());
    double sum = 0.0;
    for (size_t i = 0; i < v.size(); ++i) sum += w[i] = 1.0f / std::max(v[i], 1e-30f);
    for (float& x : w) x = float(double(x) * double(w.size()) / sum);
    return w;
}

// Every row of [n_rows] as the list of rows that count.
std::vector<int> all_rows(int n_rows) {
    std::vector<int> r(static_cast<size_t>(n_rows));
    for (int i = 0; i < n_rows; ++i) r[size_t(i)] = i;
    return r;
}

// The scales of q/k/v: with AwqLoss::Block scored by the attention block's output over the
// calibration sequence (o kept in float, as AutoAWQ quantizes only the scaled linears) at the
// rows `keep` (the attention itself runs over every row).
std::vector<float> search_qkv(Backend& be, const ModelConfig& c, const FloatLayer& f, const float* x, int n_rows,
                              int seq_len, const std::vector<int>& keep, const std::vector<float>& w_rows,
                              const AwqOptions& opt, AwqGroupStats* st) {
    const int64_t E = c.n_embd, QD = int64_t(c.n_head) * c.head_dim, KV = int64_t(c.n_kv_head) * c.head_dim;
    const std::vector<const float*> ws = {f.wq.data(), f.wk.data(), f.wv.data()};
    const std::vector<int64_t> n_out = {QD, KV, KV};
    const int g = group_of(opt, E);
    const std::vector<float> xk = gather_rows(x, E, keep);  // [keep, n_embd]
    const int n_keep = int(keep.size());
    if (opt.loss == AwqLoss::Linear)
        return awq_search_scale(be, ws, n_out, E, xk.data(), n_keep, opt.n_grid, st, g, opt.duo_scaling);
    const AttnBlockWeights ref_w{
        f.wq.data(), f.wk.data(), f.wv.data(), f.wo.data(), f.bq, f.bk, f.bv.empty() ? nullptr : f.bv.data()};
    std::vector<float> ref(static_cast<size_t>(n_rows * E)), out(ref.size());  // [n_rows, n_embd] each
    attention_block_forward(be, c, ref_w, x, n_rows, ref.data(), seq_len);
    auto loss = [&](const float* s) {
        const auto q = awq_quant_dequant(f.wq.data(), QD, E, s, g);
        const auto k = awq_quant_dequant(f.wk.data(), KV, E, s, g);
        const auto v = awq_quant_dequant(f.wv.data(), KV, E, s, g);
        AttnBlockWeights w = ref_w;
        w.wq = q.data(), w.wk = k.data(), w.wv = v.data();
        attention_block_forward(be, c, w, x, n_rows, out.data(), seq_len);
        return mean_squared_diff_rows(ref.data(), out.data(), E, keep, w_rows);
    };
    const auto w_mean = opt.duo_scaling ? awq_weight_mean(ws, n_out, E, g) : std::vector<float>{};
    return awq_search_scale_by(awq_channel_mean_abs(xk.data(), n_keep, E), w_mean, opt.n_grid, loss, st);
}

// The scales of gate/up: with AwqLoss::Block scored by the MLP's output (down in float);
// x [n_rows, n_embd] holds only the rows that count, w_rows [n_rows] their weights (empty: 1).
std::vector<float> search_gate_up(Backend& be, const ModelConfig& c, const FloatLayer& f, const float* x, int n_rows,
                                  const std::vector<float>& w_rows, const AwqOptions& opt, AwqGroupStats* st) {
    const int64_t E = c.n_embd, F = c.n_ff;
    const std::vector<const float*> ws = {f.gate.data(), f.up.data()};
    const std::vector<int64_t> n_out = {F, F};
    const int g = group_of(opt, E);
    if (opt.loss == AwqLoss::Linear)
        return awq_search_scale(be, ws, n_out, E, x, n_rows, opt.n_grid, st, g, opt.duo_scaling);
    std::vector<float> ref(static_cast<size_t>(n_rows * E)), out(ref.size());  // [n_rows, n_embd] each
    mlp_block_forward(be, c, f.gate.data(), f.up.data(), f.down.data(), x, n_rows, ref.data());
    const std::vector<int> rows = all_rows(n_rows);
    auto loss = [&](const float* s) {
        const auto gq = awq_quant_dequant(f.gate.data(), F, E, s, g);
        const auto uq = awq_quant_dequant(f.up.data(), F, E, s, g);
        mlp_block_forward(be, c, gq.data(), uq.data(), f.down.data(), x, n_rows, out.data());
        return w_rows.empty() ? mean_squared_diff(ref.data(), out.data(), ref.size())
                              : mean_squared_diff_rows(ref.data(), out.data(), E, rows, w_rows);
    };
    const auto w_mean = opt.duo_scaling ? awq_weight_mean(ws, n_out, E, g) : std::vector<float>{};
    return awq_search_scale_by(awq_channel_mean_abs(x, n_rows, E), w_mean, opt.n_grid, loss, st);
}

// Search every group on the unmodified layer, then fold all scales (AutoAWQ's order);
// the activations are divided by the scales too, for the clipping search. With
// opt.sink_skip, the first rows of every sequence count nowhere; without, only the down
// loss leaves out its first down_loss_skip rows (x_mean keeps them).
void search_and_fold(Backend& be, const ModelConfig& c, FloatLayer& f, LayerActivations& a, int n_rows, int seq_len,
                     const RowWeights& rw, const AwqOptions& opt, AwqLayerStats& st) {
    const int64_t E = c.n_embd, F = c.n_ff, QD = int64_t(c.n_head) * c.head_dim;
    const bool fold_o = c.n_head == c.n_kv_head;
    const std::vector<int> keep = kept_rows(n_rows, seq_len, opt.sink_skip);  // every row when sink_skip is 0
    const int n_keep = int(keep.size());
    auto s_qkv = search_qkv(be, c, f, a.attn_in.data(), n_rows, seq_len, keep, rw.mid, opt, &st.qkv);
    std::vector<float> s_o;
    if (fold_o) {  // awq_search_scale, with the loss on weighted rows
        const int g_o = group_of(opt, QD);
        const auto xo = gather_rows(a.attn_out.data(), QD, keep),
                   xo_w = gather_weighted_rows(a.attn_out.data(), QD, keep, rw.mid);
        const auto w_mean_o = opt.duo_scaling ? awq_weight_mean({f.wo.data()}, {E}, QD, g_o) : std::vector<float>{};
        s_o = awq_search_scale_by(
            awq_channel_mean_abs(xo.data(), n_keep, QD), w_mean_o, opt.n_grid,
            [&](const float* s) { return awq_group_loss(be, {f.wo.data()}, {E}, QD, xo_w.data(), n_keep, s, g_o); },
            &st.o);
    }
    const auto xf = gather_rows(a.ffn_in.data(), E, keep);
    std::vector<float> w_gu;  // [n_keep] the kept rows' weights
    if (!rw.out.empty())
        for (int r : keep) w_gu.push_back(rw.out[size_t(r)]);
    auto s_gu = search_gate_up(be, c, f, xf.data(), n_keep, w_gu, opt, &st.gate_up);
    const std::vector<int> down_keep = opt.sink_skip > 0 ? keep : kept_rows(n_rows, seq_len, opt.down_loss_skip);
    const auto down_x = gather_weighted_rows(a.down_in.data(), F, down_keep, rw.out);  // [kept rows, n_ff]
    const int n_down = int(down_keep.size());
    const int g_down = group_of(opt, F);
    const auto w_mean = opt.duo_scaling ? awq_weight_mean({f.down.data()}, {E}, F, g_down) : std::vector<float>{};
    const auto down_mean = opt.sink_skip > 0
                               ? awq_channel_mean_abs(gather_rows(a.down_in.data(), F, down_keep).data(), n_down, F)
                               : awq_channel_mean_abs(a.down_in.data(), n_rows, F);
    auto s_down = awq_search_scale_by(
        down_mean, w_mean, opt.n_grid,
        [&](const float* s) { return awq_group_loss(be, {f.down.data()}, {E}, F, down_x.data(), n_down, s, g_down); },
        &st.down);

    divide(f.attn_norm, s_qkv);
    for (auto* w : {&f.wq, &f.wk, &f.wv}) scale_columns(*w, E, s_qkv);
    divide_columns(a.attn_in, E, s_qkv);
    if (fold_o) {
        divide_rows(f.wv, E, s_o);
        if (!f.bv.empty()) divide(f.bv, s_o);
        scale_columns(f.wo, QD, s_o);
        divide_columns(a.attn_out, QD, s_o);
    }
    divide(f.ffn_norm, s_gu);
    for (auto* w : {&f.gate, &f.up}) scale_columns(*w, E, s_gu);
    divide_columns(a.ffn_in, E, s_gu);
    divide_rows(f.up, E, s_down);
    scale_columns(f.down, F, s_down);
    divide_columns(a.down_in, F, s_down);
}

// The clipping search of v, o, gate, up and down over the calibration rows that count (with
// residual weights: each row's error weighted).
void clip_layer(Backend& be, const ModelConfig& c, FloatLayer& f, const LayerActivations& a, int n_rows, int seq_len,
                const RowWeights& rw, const AwqOptions& opt) {
    const int64_t E = c.n_embd, F = c.n_ff, QD = int64_t(c.n_head) * c.head_dim, KV = int64_t(c.n_kv_head) * c.head_dim;
    const std::vector<int> keep = kept_rows(n_rows, seq_len, opt.sink_skip_clip ? opt.sink_skip : 0);
    const int n = int(keep.size());
    const int grid = opt.clip_grid > 0 ? opt.clip_grid : opt.n_grid;
    const auto attn_in = gather_weighted_rows(a.attn_in.data(), E, keep, rw.mid);
    const auto attn_out = gather_weighted_rows(a.attn_out.data(), QD, keep, rw.mid);
    const auto ffn_in = gather_weighted_rows(a.ffn_in.data(), E, keep, rw.out);
    const auto down_in = gather_weighted_rows(a.down_in.data(), F, keep, rw.out);
    awq_clip(be, f.wv.data(), KV, E, attn_in.data(), n, grid, opt.max_shrink, group_of(opt, E), opt.asym_clip);
    awq_clip(be, f.wo.data(), E, QD, attn_out.data(), n, grid, opt.max_shrink, group_of(opt, QD), opt.asym_clip);
    awq_clip(be, f.gate.data(), F, E, ffn_in.data(), n, grid, opt.max_shrink, group_of(opt, E), opt.asym_clip);
    awq_clip(be, f.up.data(), F, E, ffn_in.data(), n, grid, opt.max_shrink, group_of(opt, E), opt.asym_clip);
    awq_clip(be, f.down.data(), E, F, down_in.data(), n, grid, opt.max_shrink, group_of(opt, F), opt.asym_clip);
}

// Encodes one float matrix into the variant's storage.
WeightView encode(std::vector<float>& w, int64_t n_out, int64_t n_in, const AwqOptions& opt,
                  std::vector<uint8_t>& slot) {
    const int g = group_of(opt, n_in);
    if (opt.output == AwqOutput::Int4) {
        const DType t = *i4_type_for_group(g);
        slot = quantize_matrix(w.data(), n_out, n_in, t, 1);
        return WeightView{t, slot.data(), n_in, n_out};
    }
    if (opt.output == AwqOutput::FakeQuant) fake_quant_int4(w.data(), w.data(), int64_t(w.size()), g);
    slot.resize(w.size() * sizeof(float));
    std::memcpy(slot.data(), w.data(), slot.size());
    return WeightView{DType::F32, slot.data(), n_in, n_out};
}

Status check_awq_input(const Model& m, const std::vector<int32_t>& tokens, const AwqOptions& opt) {
    if (tokens.empty())
        return Status::error(
            "AWQ needs calibration tokens (QuantOptions.calibration_tokens is empty): give it a "
            "calibration text, e.g. " +
            std::string(default_calibration_text_path()));
    if (opt.group_size < 1 || (opt.output == AwqOutput::Int4 && !i4_type_for_group(opt.group_size)))
        return Status::error("AWQ: INT4 storage has groups of 128 (I4_G128) or 64 (I4_G64) weights, not " +
                             std::to_string(opt.group_size));
    if (opt.n_grid < 1) return Status::error("AWQ: n_grid must be at least 1, got " + std::to_string(opt.n_grid));
    if (opt.residual_weight && (opt.sequential || opt.loss != AwqLoss::Block))
        return Status::error("AWQ: residual_weight needs the block loss and no sequential calibration");
    if (opt.clip_grid < 0)
        return Status::error("AWQ: clip_grid must be at least 0 (0: n_grid), got " + std::to_string(opt.clip_grid));
    for (size_t l = 0; l < m.layers.size(); ++l) {
        const LayerWeights& L = m.layers[l];
        const std::pair<const WeightView*, const char*> ws[] = {
            {&L.wq, "attn_q"},       {&L.wk, "attn_k"},   {&L.wv, "attn_v"},      {&L.wo, "attn_output"},
            {&L.w_gate, "ffn_gate"}, {&L.w_up, "ffn_up"}, {&L.w_down, "ffn_down"}};
        for (const auto& [w, name] : ws)
            if (group_of(opt, w->n_in) == 0)
                return Status::error("cannot quantize layer " + std::to_string(l) + " " + name + " to INT4 groups of " +
                                     std::to_string(opt.group_size) + ": a row has " + std::to_string(w->n_in) +
                                     " elements, a multiple of neither " + std::to_string(opt.group_size) + " nor 64");
    }
    return Status::ok();
}

// Layer li of the result: its scaled (and clipped) float weights encoded as the output
// asks, the folded norms and bias; the bytes live in storage.
void store_layer(FloatLayer& f, size_t li, const AwqOptions& opt, AwqStorage& storage, LayerWeights& L) {
    auto* slot = &storage.weights[li * 7];
    L.wq = encode(f.wq, L.wq.n_out, L.wq.n_in, opt, slot[0]);
    L.wk = encode(f.wk, L.wk.n_out, L.wk.n_in, opt, slot[1]);
    L.wv = encode(f.wv, L.wv.n_out, L.wv.n_in, opt, slot[2]);
    L.wo = encode(f.wo, L.wo.n_out, L.wo.n_in, opt, slot[3]);
    L.w_gate = encode(f.gate, L.w_gate.n_out, L.w_gate.n_in, opt, slot[4]);
    L.w_up = encode(f.up, L.w_up.n_out, L.w_up.n_in, opt, slot[5]);
    L.w_down = encode(f.down, L.w_down.n_out, L.w_down.n_in, opt, slot[6]);
    auto* vec = &storage.vectors[li * 3];
    vec[0] = std::move(f.attn_norm);
    vec[1] = std::move(f.ffn_norm);
    vec[2] = std::move(f.bv);
    L.attn_norm = vec[0].data();
    L.ffn_norm = vec[1].data();
    if (L.bv) L.bv = vec[2].data();
}

}  // namespace

Result<std::shared_ptr<Model>> awq_quantize(std::shared_ptr<const Model> source,
                                            const std::vector<int32_t>& calibration_tokens, const AwqOptions& opt,
                                            AwqReport* report) {
    using R = Result<std::shared_ptr<Model>>;
    using clock = std::chrono::steady_clock;
    if (!source) return R::error("awq_quantize: no source model");
    KVS_RETURN_IF_ERROR(check_awq_input(*source, calibration_tokens, opt));
    const ModelConfig& c = source->config;

    const auto t0 = clock::now();
    CalibrationOptions copt = opt.calibration;
    copt.n_threads = opt.n_threads;
    if (opt.loss == AwqLoss::Block &&
        (copt.skip_first != 0 || static_cast<int64_t>(calibration_tokens.size()) > copt.max_rows))
        return R::error("AWQ's block loss needs every calibration token's activations: give at most " +
                        std::to_string(copt.max_rows) + " tokens (got " + std::to_string(calibration_tokens.size()) +
                        ") and skip_first 0 (got " + std::to_string(copt.skip_first) + ")");
    // Calibrate on the reference function: for a source stored quantized, its linears
    // dequantized to F32 (the quantized kernels would round the activations to 8 bits).
    std::shared_ptr<const Model> calib_model = source;
    if (source->layers[0].wq.dtype != DType::F32) {
        auto ref = quantize_model(source, QuantScheme::parse("ref").value());
        if (!ref) return ref.status();
        calib_model = ref.value();
    }

    auto storage = std::make_shared<AwqStorage>();
    storage->source = source;
    storage->weights.resize(source->layers.size() * 7);
    storage->vectors.resize(source->layers.size() * 3);
    auto m = std::make_shared<Model>(*source);
    std::vector<AwqLayerStats> stats(source->layers.size());
    // Layer l's search, clipping and encoding on its activations a (consumed).
    std::vector<RowWeights> row_weights(source->layers.size());  // [n_layer], empty without residual_weight
    auto run_layer = [&](Backend& be, int l, LayerActivations& a, int n_rows, int seq_len) {
        const size_t li = static_cast<size_t>(l);
        FloatLayer f = to_float(source->layers[li], c);
        if (opt.search_scales) search_and_fold(be, c, f, a, n_rows, seq_len, row_weights[li], opt, stats[li]);
        if (opt.clip) clip_layer(be, c, f, a, n_rows, seq_len, row_weights[li], opt);
        row_weights[li] = RowWeights{};
        a = LayerActivations{};  // done with this layer's activations
        store_layer(f, li, opt, *storage, m->layers[li]);
    };
    int n_rows = 0;
    double t_calib = 0.0;
    std::atomic<int> n_done{0};
    std::atomic<bool> stopped{false};
    if (opt.sequential) {
        // Layer after layer, each calibrated on the variant's finished layers (GPTQ's loop).
        SequentialCalibration sequential(calib_model, storage);
        auto be = make_cpu_backend(opt.n_threads);
        for (int l = 0; l < c.n_layer; ++l) {
            if (opt.progress.cancelled()) {
                stopped = true;
                break;
            }
            const Progress layer_progress = opt.progress.step(l, c.n_layer);
            const std::string stage = "AWQ: layer " + std::to_string(l + 1) + " / " + std::to_string(c.n_layer);
            copt.progress = layer_progress.part(0.0, 0.5);
            copt.stage = stage + ", calibrating";
            const auto tc = clock::now();
            auto calib = sequential.collect(l, calibration_tokens, copt);
            if (!calib) return calib.status();
            t_calib += std::chrono::duration<double>(clock::now() - tc).count();
            n_rows = calib->n_rows;
            layer_progress.report(stage + ", searching", 0.5);
            run_layer(*be, l, calib->layers[size_t(l)], n_rows, calib->seq_len);
            sequential.set_layer(l, m->layers[size_t(l)]);
            layer_progress.report(stage, 1.0);
            ++n_done;
        }
    } else {
        copt.progress = opt.progress.part(0.0, 0.1);
        copt.stage = "AWQ: calibrating";
        const Progress search = opt.progress.part(0.1, 1.0);
        auto calib = collect_activations(calib_model, calibration_tokens, copt);
        if (!calib) return calib.status();
        if (opt.residual_weight) {
            auto be = make_cpu_backend(opt.n_threads);
            auto ms = residual_mean_squares(*be, *calib_model, *calib, calibration_tokens);
            if (!ms) return R::error("AWQ: " + ms.message());
            for (size_t l = 0; l < row_weights.size(); ++l)
                row_weights[l] = RowWeights{inverse_mean_one(ms.value()[l].mid), inverse_mean_one(ms.value()[l].out)};
        }
        calib_model.reset();
        t_calib = std::chrono::duration<double>(clock::now() - t0).count();
        n_rows = calib->n_rows;
        std::atomic<int> next{0};
        search.report("AWQ: searching scales, layer 0 / " + std::to_string(c.n_layer), 0.0);
        auto worker = [&]() {  // layers in parallel, one thread each
            auto be = make_cpu_backend(1);
            for (int l = next++; l < c.n_layer; l = next++) {
                if (search.cancelled()) {
                    stopped = true;
                    break;
                }
                run_layer(*be, l, calib->layers[size_t(l)], n_rows, calib->seq_len);
                const int done = ++n_done;
                search.report(
                    "AWQ: searching scales, layer " + std::to_string(done) + " / " + std::to_string(c.n_layer), done,
                    c.n_layer);
            }
        };
        std::vector<std::thread> helpers;
        for (int t = 1; t < opt.n_threads; ++t) helpers.emplace_back(worker);
        worker();
        for (auto& h : helpers) h.join();
    }
    if (stopped)
        return Progress::cancelled_status("AWQ after " + std::to_string(n_done.load()) + " of " +
                                          std::to_string(c.n_layer) + " layers");
    const auto t2 = clock::now();

    recount_weights(*m);
    m->format = opt.output == AwqOutput::Int4 ? "variant:int4-awq" : "variant:int4-awq-float";
    m->storage = storage;
    if (report) {
        report->layers = std::move(stats);
        report->n_calibration_rows = n_rows;
        report->seconds_calibration = t_calib;
        report->seconds_search = std::chrono::duration<double>(t2 - t0).count() - t_calib;
    }
    return m;
}

}  // namespace kvs
