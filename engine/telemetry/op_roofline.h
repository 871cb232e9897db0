#pragma once
// The roofline's data: what each op group of one engine step cost (FLOPs and bytes moved,
// from shapes: engine/model/op_costs.h) and how long it took (the forward pass's op timer,
// LlamaForward::op_ms). Achieved GFLOP/s = flops / ms / 1e6; arithmetic intensity (AI) =
// flops / bytes. Plain data, no Qt: EngineSnapshot::op_steps carries it to the views and
// `kvscope roofline` prints it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvs {

// The op groups of a forward pass, each timed as one interval per layer (summed over layers).
enum class OpKind : uint8_t {
    qkv,          // the Q/K/V projections (one fused matmul on the CPU), their LoRA and biases
    attn_out,     // the output projection o
    ffn_gate_up,  // the MLP's gate and up projections
    ffn_down,     // the MLP's down projection
    attention,    // paged attention: scores q.k over each token's context, softmax, weights x V
    lm_head,      // the output head over the rows that need logits
    elementwise,  // RMSNorms, RoPE, KV store, SwiGLU, residual adds, embedding rows
};
inline constexpr int n_op_kinds = 7;
const char* op_kind_name(OpKind k);  // "qkv", "attn_out", "ffn_gate_up", ...

struct OpCost {
    double flops = 0;  // floating-point operations (a multiply-add counts 2)
    double bytes = 0;  // bytes the op must move at least: weights + KV read + activations in and out
    double ms = 0;     // measured; 0 when the pass was not timed
    double intensity() const { return bytes > 0 ? flops / bytes : 0; }  // FLOP per byte
    double gflops() const { return ms > 0 ? flops / (ms * 1e6) : 0; }   // achieved GFLOP/s
};

// One timed engine step, per op group. prefill: the step ran prompt tokens (a mixed step of
// prefill chunks and decodes counts as prefill); else every token was a decode.
struct OpStepRecord {
    int64_t step = -1;
    bool prefill = false;
    int n_tokens = 0;       // tokens of the forward pass
    int n_seqs = 0;         // chunks (requests)
    int decode_tokens = 0;  // of n_tokens, decode tokens
    int n_logit_rows = 0;
    int64_t context_tokens = 0;  // sum over sequences of the context attention reads
    std::array<OpCost, n_op_kinds> ops{};

    const OpCost& op(OpKind k) const { return ops[static_cast<size_t>(k)]; }
    OpCost& op(OpKind k) { return ops[static_cast<size_t>(k)]; }
};

// The batch-size class of a decode step on the roofline: 1, 2, 4, ..., (the power of two at
// or below its decode tokens). The engine keeps the newest decode step of each class.
int decode_batch_class(int decode_tokens);
// Adds a timed step to the roofline's history: a prefill step replaces the kept prefill step
// unless that one ran more tokens (the largest prefill stays: the one nearest the compute
// roof); a decode step replaces the decode step of its batch class. The history stays
// ordered: the prefill step first, then decode steps by class.
void keep_op_step(std::vector<OpStepRecord>& history, const OpStepRecord& step);

}  // namespace kvs
