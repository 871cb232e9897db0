#pragma once
// FLOPs and bytes moved by each op group of one forward pass (engine/telemetry/op_roofline.h
// names the groups), from the model's shapes, its weights' storage types (quantized block
// headers and scales included: row_bytes) and the batch: which tokens run, at which
// positions of which sequences. The one definition the roofline view and `kvscope roofline`
// use. Counted as the least traffic an op needs (each weight and each sequence's K/V read
// once per pass, float activations in and out), the roofline model's convention; a kernel
// that re-reads more (the CPU's paged attention reads a block once per 4 query tokens of a
// prompt) sits lower on the plot than its count suggests.
//
//   matmul group (per layer, summed):  flops = 2 T sum(n_in n_out)
//                                      bytes = weight bytes + 4 T (n_in + sum n_out)
//   attention (per layer):             flops = 4 n_head head_dim sum_t (pos_t + 1)
//                                      bytes = sum_seq 2 ctx_seq row_bytes(kv_type, kv_dim) + 8 T q_dim
//                                      (ctx_seq: the highest position of the sequence in the pass + 1;
//                                      softmax's few flops per score are left out)
//   lm_head:                           as a matmul over the R rows that need logits
//   elementwise (per layer and token): 2 RMSNorms (4 flops, 12 bytes per value: read, write,
//                                      weight), RoPE of q and k (3 flops, 8 bytes per value),
//                                      KV store (read 2 kv_dim floats, write 2 cache rows),
//                                      SwiGLU (5 flops, 12 bytes per n_ff value), 2 residual adds
//                                      (1 flop, 12 bytes per value); plus the embedding rows
//                                      (T rows of token_embd read, T n_embd floats written) and
//                                      the final norm of the R logit rows.
#include <cstdint>
#include <vector>

#include "engine/model/model.h"
#include "engine/telemetry/op_roofline.h"
#include "kernels/dtype.h"

namespace kvs {

// What the count needs from a model, summed over its layers; built once per model.
struct OpCostModel {
    int n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
    int64_t kv_row_bytes = 0;  // one position's K (or V) row of one layer in the cache's type
    struct Group {
        double params = 0;        // sum over layers and matrices of n_in x n_out
        double weight_bytes = 0;  // their stored bytes
        double io_floats = 0;     // per token: sum over layers of n_in + sum of the matrices' n_out
    };
    Group qkv, attn_out, ffn_gate_up, ffn_down, lm_head;
    double embd_row_bytes = 0;  // one row of token_embd
    double norm_bytes = 0;      // the norm weights read once per pass (2 n_layer n_embd + n_embd floats)
};
OpCostModel op_cost_model(const Model& model, DType kv_type);

// One sequence's part of the pass: num_tokens tokens at positions start_pos .. start_pos + num_tokens - 1.
struct ChunkShape {
    int start_pos = 0;
    int num_tokens = 0;
};

// FLOPs and bytes of every op group for a pass over these chunks with n_logit_rows rows
// through the output head (ms left 0).
OpStepRecord op_costs(const OpCostModel& m, const std::vector<ChunkShape>& chunks, int n_logit_rows);

}  // namespace kvs
