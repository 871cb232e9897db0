#pragma once
// The float attention and MLP blocks of one Llama layer, run on calibration rows: AWQ
// scores a candidate scaling of q/k/v (or gate/up) by how much it changes the BLOCK's
// output (attention after o, with the softmax over the whole calibration sequence; MLP
// after down), as AutoAWQ does with module2inspect = self_attn / mlp, rather than by the
// linears' own outputs.
#include <cstdint>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/quant/calibration.h"
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

// The residual stream's mean square per calibration token, recomputed from the calibration
// activations and m's weights: x_0 = the tokens' embeddings (x embd_scale), after layer l's
// attention mid_l = x_l + o(attn_out_l), after its MLP x_{l+1} = mid_l + down(down_in_l).
// An error added to a block's output reaches the next norm divided by that rms: AWQ's
// residual-weighted loss (AwqOptions::residual_weight) weights each token by 1 / mean square.
struct ResidualMeanSquares {
    std::vector<float> mid;  // [n_rows] mean square of mid_l (what the attention block adds to)
    std::vector<float> out;  // [n_rows] mean square of x_{l+1} (what the MLP adds to)
};
// Errors: a sampled calibration (d.n_rows != tokens.size(): every token is needed), a model
// with post-norms (gemma3: the blocks' outputs are normalised before the add).
Result<std::vector<ResidualMeanSquares>> residual_mean_squares(Backend& be, const Model& m, const CalibrationData& d,
                                                               const std::vector<int32_t>& tokens);

// Mean squared difference of two [n] buffers.
double mean_squared_diff(const float* a, const float* b, size_t n);

}  // namespace kvs
