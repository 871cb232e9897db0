#pragma once
// The float attention and MLP blocks of one Llama layer, run on calibration rows: AWQ
// scores a candidate scaling of q/k/v (or gate/up) by how much it changes the BLOCK's
// output (attention after o, with the softmax over the whole calibration sequence; MLP
// after down), as AutoAWQ does with module2inspect = self_attn / mlp, rather than by the
// linears' own outputs.
#include <cstdint>
#include <vector>

#include "engine/model/model.h"
#include "kernels/backend.h"

namespace kvs {

// Float weights of one attention block; every matrix is [n_out, n_in] row-major.
struct AttnBlockWeights {
    const float* wq = nullptr;  // [n_head * head_dim, n_embd]
    const float* wk = nullptr;  // [n_kv_head * head_dim, n_embd]
    const float* wv = nullptr;  // [n_kv_head * head_dim, n_embd]
    const float* wo = nullptr;  // [n_embd, n_head * head_dim]
    const float* bq = nullptr;  // [n_head * head_dim] or null (qwen2)
    const float* bk = nullptr;  // [n_kv_head * head_dim] or null
    const float* bv = nullptr;  // [n_kv_head * head_dim] or null
};

// out = o(attention(rope(x wq^T), rope(x wk^T), x wv^T)) for the rows of x [n_rows, n_embd],
// which are sequences of seq_len rows (the last may be shorter; 0: one sequence), each at
// positions 0, 1, ... (causal within its sequence). out [n_rows, n_embd].
void attention_block_forward(Backend& be, const ModelConfig& c, const AttnBlockWeights& w, const float* x, int n_rows,
                             float* out, int seq_len = 0);

// out = down(silu(x gate^T) * (x up^T)); x [n_rows, n_embd], gate/up [n_ff, n_embd],
// down [n_embd, n_ff], out [n_rows, n_embd].
void mlp_block_forward(Backend& be, const ModelConfig& c, const float* gate, const float* up, const float* down,
                       const float* x, int n_rows, float* out);

// Mean squared difference of two [n] buffers.
double mean_squared_diff(const float* a, const float* b, size_t n);

}  // namespace kvs
