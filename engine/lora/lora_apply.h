#pragma once
// Multi-LoRA in one batch (Punica / S-LoRA's shrink and expand, on the CPU): the base
// projection y = W x runs once for every token of the batch, whatever adapter each token's
// request uses; then, per adapter, the rows of its tokens get y += s * B (A x): "shrink"
// x [n, n_in] -> t [n, r] with A, "expand" t -> [n, n_out] with B. Tokens without an adapter
// cost nothing more. Each token's row is computed on its own, in a fixed order, so a
// request gets the same bits alone or batched with others.
#include <cstdint>
#include <vector>

#include "engine/lora/lora_adapter.h"

namespace kvs {

// The adapters of one forward batch and the token rows of each.
struct LoraBatch {
    std::vector<const LoraAdapter*> adapters;  // distinct, in first-use order
    std::vector<std::vector<int32_t>> rows;    // [adapters.size()] token rows using each
    bool empty() const { return adapters.empty(); }
    // token_adapter: [n_tokens] an index into adapters or -1 (base only); empty: no adapter.
    // Adapters no token uses are left out.
    static LoraBatch group(const std::vector<const LoraAdapter*>& adapters, const std::vector<int32_t>& token_adapter);
};

// y[t, :] += s * B (A x[t, :]) for every token row t of every adapter that adapts this
// layer's projection. x: [n_tokens, n_in], y: [n_tokens, n_out], host memory.
// scratch: reused between calls (grows to [max group rows, max rank]).
void apply_lora(const LoraBatch& batch, int layer, LoraTarget target, const float* x, int n_in, float* y, int n_out,
                std::vector<float>& scratch);

}  // namespace kvs
