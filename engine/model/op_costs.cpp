#include "engine/model/op_costs.h"

namespace kvs {

namespace {
// The whole tensor as stored (NF4_DQ: its rows and the per-tensor tail after them).
double weight_bytes(const WeightView& w) { return static_cast<double>(tensor_bytes(w.dtype, w.n_in, w.n_out)); }

// Adds matrices that read the same input (one n_in counted once) to a group.
void add_group(OpCostModel::Group& g, std::initializer_list<const WeightView*> ws) {
    g.io_floats += static_cast<double>((*ws.begin())->n_in);
    for (const WeightView* w : ws) {
        g.params += static_cast<double>(w->n_in) * static_cast<double>(w->n_out);
        g.weight_bytes += weight_bytes(*w);
        g.io_floats += static_cast<double>(w->n_out);
    }
}

void matmul_cost(OpCost& c, const OpCostModel::Group& g, double n_tokens) {
    c.flops = 2.0 * n_tokens * g.params;
    c.bytes = g.weight_bytes + 4.0 * n_tokens * g.io_floats;
}
}  // namespace

OpCostModel op_cost_model(const Model& model, DType kv_type) {
    const ModelConfig& c = model.config;
    OpCostModel m;
    m.n_layer = c.n_layer;
    m.n_embd = c.n_embd;
    m.n_ff = c.n_ff;
    m.n_head = c.n_head;
    m.n_kv_head = c.n_kv_head;
    m.head_dim = c.head_dim;
    m.kv_row_bytes = static_cast<int64_t>(row_bytes(kv_type, static_cast<int64_t>(c.n_kv_head) * c.head_dim));
    for (const LayerWeights& l : model.layers) {
        add_group(m.qkv, {&l.wq, &l.wk, &l.wv});
        add_group(m.attn_out, {&l.wo});
        add_group(m.ffn_gate_up, {&l.w_gate, &l.w_up});
        add_group(m.ffn_down, {&l.w_down});
    }
    add_group(m.lm_head, {&model.output});
    m.embd_row_bytes = static_cast<double>(row_bytes(model.token_embd.dtype, model.token_embd.n_in));
    m.norm_bytes = 4.0 * (2.0 * c.n_layer + 1.0) * c.n_embd;
    return m;
}

OpStepRecord op_costs(const OpCostModel& m, const std::vector<ChunkShape>& chunks, int n_logit_rows) {
    OpStepRecord r;
    double T = 0, sum_ctx_tokens = 0, kv_positions = 0;
    for (const ChunkShape& ch : chunks) {
        const double s = ch.start_pos, n = ch.num_tokens;
        T += n;
        sum_ctx_tokens += n * s + n * (n + 1) / 2;  // sum over its tokens of (pos + 1)
        kv_positions += s + n;                      // the sequence's K/V read once
        r.context_tokens += ch.start_pos + ch.num_tokens;
    }
    r.n_tokens = static_cast<int>(T);
    r.n_seqs = static_cast<int>(chunks.size());
    r.n_logit_rows = n_logit_rows;
    const double L = m.n_layer, E = m.n_embd, F = m.n_ff;
    const double q_dim = static_cast<double>(m.n_head) * m.head_dim;
    const double kv_dim = static_cast<double>(m.n_kv_head) * m.head_dim;

    matmul_cost(r.op(OpKind::qkv), m.qkv, T);
    matmul_cost(r.op(OpKind::attn_out), m.attn_out, T);
    matmul_cost(r.op(OpKind::ffn_gate_up), m.ffn_gate_up, T);
    matmul_cost(r.op(OpKind::ffn_down), m.ffn_down, T);
    matmul_cost(r.op(OpKind::lm_head), m.lm_head, n_logit_rows);
    if (n_logit_rows == 0) r.op(OpKind::lm_head) = OpCost{};

    OpCost& a = r.op(OpKind::attention);
    a.flops = L * 4.0 * q_dim * sum_ctx_tokens;
    a.bytes = L * (2.0 * kv_positions * static_cast<double>(m.kv_row_bytes) + 8.0 * T * q_dim);

    OpCost& e = r.op(OpKind::elementwise);
    const double flops_per_token = 2 * 4 * E + 3 * (q_dim + kv_dim) + 5 * F + 2 * E;
    const double bytes_per_token = 2 * 12 * E + 8 * (q_dim + kv_dim) + 4 * 2 * kv_dim +
                                   2.0 * static_cast<double>(m.kv_row_bytes) + 12 * F + 2 * 12 * E;
    e.flops = L * T * flops_per_token + 4 * E * n_logit_rows;
    e.bytes = L * T * bytes_per_token + m.norm_bytes + T * (m.embd_row_bytes + 4 * E) + 8 * E * n_logit_rows;
    return r;
}

}  // namespace kvs
