#pragma once
// AWQ (activation-aware weight quantization, Lin et al. 2023) for INT4 groups of 128,
// written after mit-han-lab/llm-awq and AutoAWQ:
//
//  1. calibration: run calibration tokens through the reference model and keep each
//     layer's linear inputs (engine/quant/calibration.h);
//  2. scale search, per layer and per group of linears sharing an input:
//       q/k/v      (1/s folds into attn_norm)
//       o          (1/s folds into the v rows; only when n_head == n_kv_head, as AutoAWQ
//                   skips it for grouped-query attention)
//       gate/up    (1/s folds into ffn_norm)
//       down       (1/s folds into the up rows)
//     s = mean|x|^alpha (clamped to >= 1e-4), normalised by sqrt(max(s) * min(s)), for
//     alpha in {0, 1/n_grid, ..., (n_grid-1)/n_grid}; the loss is the mean squared error
//     of the group's linear outputs with the weights W*s pseudo-quantized (then /s)
//     against the float weights, on the calibration rows. alpha = 0 is plain RTN, so the
//     chosen scales never do worse than RTN on the calibration data;
//  3. clipping search (not q/k, like AutoAWQ): per output row and group of 128, the
//     weights are clamped to +-max|w| * (1 - i/n_grid), i < max_shrink * n_grid, keeping
//     the i with the least squared error of the group's partial dot products over the
//     (scaled) calibration inputs;
//  4. encode: round-to-nearest into I4_G128.
//
// Differences from AutoAWQ: the loss of the q/k/v and gate/up groups is their linear
// outputs, not the whole attention / MLP block's output; the calibration set is one
// sequence of tokens rather than 128 samples of 512 tokens.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/quant/calibration.h"

namespace kvs {

// What awq_quantize makes of the searched weights.
enum class AwqOutput {
    I4G128,     // encoded as DType::I4_G128 (group_size must be 128): the real variant
    Float,      // F32, scaled and clipped but not quantized; with clip off the variant
                // computes the same function as the source (the fold check)
    FakeQuant,  // F32 holding the pseudo-quantized values (fake_quant_int4 in groups of
                // group_size): measurements for group sizes no storage format has
};

struct AwqOptions {
    int n_grid = 20;                     // alpha grid size; also the clipping grid's step 1/n_grid
    float max_shrink = 0.5f;             // clipping tries shrink ratios below this
    bool search_scales = true;           // false: s = 1 (RTN + clipping)
    bool clip = true;                    // run the clipping search
    AwqOutput output = AwqOutput::I4G128;
    int group_size = 128;                // the pseudo-quantizer's group (128 = I4_G128)
    int n_threads = 2;                   // layers are searched in parallel
    CalibrationOptions calibration;
};

// What the search chose, per layer; alpha -1 and losses 0 for a group that was skipped.
struct AwqGroupStats {
    float alpha = -1.0f;
    double loss_rtn = 0.0;   // output MSE at alpha = 0 (s = 1)
    double loss_best = 0.0;  // output MSE at the chosen alpha
};
struct AwqLayerStats {
    AwqGroupStats qkv, o, gate_up, down;
};
struct AwqReport {
    std::vector<AwqLayerStats> layers;  // [n_layer]
    int n_calibration_rows = 0;
    double seconds_calibration = 0.0;
    double seconds_search = 0.0;        // scale search + clipping + encoding
};

// The AWQ variant of `source`. Errors: no calibration tokens, a linear whose row length is
// not a multiple of 128, a weight_type other than I4_G128 / F32.
Result<std::shared_ptr<Model>> awq_quantize(std::shared_ptr<const Model> source,
                                            const std::vector<int32_t>& calibration_tokens,
                                            const AwqOptions& options = {}, AwqReport* report = nullptr);

// The scale search of one group of linears sharing the input x [n_rows, n_in]:
// linears[i] is [n_out[i], n_in] float. Returns s [n_in]; *stats gets alpha and losses.
// (Exposed for tests.)
std::vector<float> awq_search_scale(Backend& backend, const std::vector<const float*>& linears,
                                    const std::vector<int64_t>& n_out, int64_t n_in, const float* x, int n_rows,
                                    int n_grid, AwqGroupStats* stats, int group = 128);

// The output MSE of one group with weights pseudo-quantized after scaling by s (null: s = 1).
double awq_group_loss(Backend& backend, const std::vector<const float*>& linears, const std::vector<int64_t>& n_out,
                      int64_t n_in, const float* x, int n_rows, const float* s, int group = 128);

// The clipping search of one linear w [n_out, n_in] (float, already scaled) over its
// inputs x [n_rows, n_in]; clamps w in place.
void awq_clip(Backend& backend, float* w, int64_t n_out, int64_t n_in, const float* x, int n_rows, int n_grid,
              float max_shrink, int group = 128);

}  // namespace kvs
