#pragma once
// AWQ (activation-aware weight quantization, Lin et al. 2023) for INT4 groups of 128
// (64 for rows 128 does not divide, e.g. SmolLM2-135M's 576),
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
//     s = x_mean^alpha / w_mean^(1-alpha) (AutoAWQ's duo scaling; x_mean = mean|x| per
//     input channel, w_mean = mean over output rows of |w| / its group's max|w|), clamped
//     to >= 1e-4 and normalised by sqrt(max(s) * min(s)), for alpha in {0, 1/n_grid, ...,
//     (n_grid-1)/n_grid}, and s = 1 (RTN). The loss, with the scaled linears pseudo-
//     quantized (W*s quantized, then /s): for q/k/v the attention block's output after o
//     (the softmax over the whole calibration sequence), for gate/up the MLP's output after
//     down (AutoAWQ's module2inspect), for o and down their own outputs; the down loss
//     leaves out the first calibration token (an attention sink, see down_loss_skip);
//  3. clipping search (not q/k, like AutoAWQ): per output row and group, the scaled
//     weights are clamped to +-max|w| * (1 - i/clip_grid), i < max_shrink * clip_grid,
//     keeping the i with the least squared error of the group's partial dot products over
//     the calibration inputs divided by s;
//  4. encode: round-to-nearest into I4_G128 / I4_G64 (or float fake-quant, AwqOutput).
//
// Differences from AutoAWQ: the calibration set is at most 1024 tokens in sequences of
// 256 (CalibrationOptions::seq_len) rather than 128 samples of 512 tokens; each sequence's
// sink token is left out of the down loss; the clipping grid is 4x finer (steps of 1/80
// instead of 1/20: 40 shrink ratios down to 0.5 instead of 10), which on SmolLM2-135M
// closed 31-52 % of INT4 RTN's perplexity gap over 128 / 256 / 512 calibration tokens and
// two seeds where 1/20 closed 17-40 %, with a lower mean KL in every cell (docs/benchmarks.md
// "Robust AWQ"). Options measured there and left off: `sequential` (layers calibrated on the
// variant's earlier layers, as GPTQ), a finer alpha grid (n_grid 40 / 80), `residual_weight`
// (errors relative to each token's residual), `asym_clip` (each group's two ends clipped apart:
// a lower KL in every cell tried, but no higher perplexity share).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/quant/calibration.h"

namespace kvs {

// What awq_quantize makes of the searched weights.
enum class AwqOutput {
    Int4,       // encoded as DType::I4_G128, or I4_G64 for rows 128 does not divide (group_size
                // 128 or 64): the real variant
    Float,      // F32, scaled and clipped but not quantized; with clip off the variant
                // computes the same function as the source (the fold check)
    FakeQuant,  // F32 holding the pseudo-quantized values (fake_quant_int4 in groups of
                // group_size): measurements for group sizes no storage format has
};

// What the scale search of q/k/v and gate/up minimises.
enum class AwqLoss {
    Block,   // the attention block's output (after o, softmax within each calibration sequence)
             // and the MLP's output (after down), like AutoAWQ; needs the calibration
             // tokens unsampled (at most calibration.max_rows of them)
    Linear,  // the group's own linear outputs (cheaper, a weaker objective)
};

struct AwqOptions {
    int n_grid = 20;            // alpha grid size; also the clipping grid's step 1/n_grid
    int clip_grid = 80;         // the clipping grid's step is 1/clip_grid (0: 1/n_grid, AutoAWQ's 20)
    float max_shrink = 0.5f;    // clipping tries shrink ratios below this
    bool search_scales = true;  // false: s = 1 (RTN + clipping)
    bool clip = true;           // run the clipping search
    bool asym_clip = false;     // the clipping search also shrinks each group's two ends apart (awq_clip)
    bool duo_scaling = true;    // s = x_mean^a / w_mean^(1-a) (AutoAWQ's default), else x_mean^a
    AwqLoss loss = AwqLoss::Block;
    // Calibration rows left out of the down group's loss (its mean |x| keeps them). The
    // first token is an attention sink whose down inputs are 100-1000x the others': in the
    // loss it alone decides the down scales (SmolLM2-135M layer 11 picked alpha 0.95,
    // doubling the error on every other token).
    int down_loss_skip = 1;
    // Rows at the start of every calibration sequence left out of every group's statistics and
    // loss (x_mean, the q/k/v and gate/up block losses, the o and down losses) and, with
    // sink_skip_clip, of the clipping search; the attention still runs over them. 0 (the
    // default): only down_loss_skip applies. Measured on SmolLM2-135M (docs/benchmarks.md,
    // issue 19 part 5): leaving the sink row out everywhere made AWQ far worse than RTN (PPL
    // 33.1 against RTN's 23.1 at 128 tokens): the sink token's weights must stay right.
    int sink_skip = 0;
    bool sink_skip_clip = true;  // sink_skip applies to the clipping search too
    // Layers in sequence, each calibrated on the variant's earlier layers (scaled, clipped and
    // quantized: SequentialCalibration, as GPTQ) instead of all on the reference's activations
    // (AutoAWQ, llm-awq). One calibration pass per layer; the layers are no longer searched in
    // parallel (n_threads goes to each search's matmuls).
    bool sequential = false;
    // Every calibration token's errors weighted by 1 / the mean square of the residual stream
    // they are added to (awq_block.h residual_mean_squares): the error the next norm's input
    // sees, relative, rather than absolute, so tokens with a huge residual (the attention sink)
    // no longer dominate the block losses. Scale search and clipping; block loss only, not
    // with `sequential`.
    bool residual_weight = false;
    AwqOutput output = AwqOutput::Int4;
    int group_size = 128;  // INT4 group; rows it does not divide use 64 (rows of 576)
    int n_threads = 2;     // layers are searched in parallel
    CalibrationOptions calibration;
    // Calibration (the first tenth, replacing calibration.progress), then one report per layer
    // searched; cancelled: the layers being searched finish, no new one starts, and
    // awq_quantize returns Progress::cancelled_status.
    Progress progress;
};

// What the search chose, per layer; alpha -1 and losses 0 for a group that was skipped.
struct AwqGroupStats {
    float alpha = -1.0f;     // -1: skipped, or s = 1 (RTN) had the least loss
    double loss_rtn = 0.0;   // output MSE at s = 1
    double loss_best = 0.0;  // output MSE at the chosen alpha
};
struct AwqLayerStats {
    AwqGroupStats qkv, o, gate_up, down;
};
struct AwqReport {
    std::vector<AwqLayerStats> layers;  // [n_layer]
    int n_calibration_rows = 0;
    double seconds_calibration = 0.0;
    double seconds_search = 0.0;  // scale search + clipping + encoding
};

// The AWQ variant of `source`. Errors: no calibration tokens, a linear whose row length is
// a multiple of neither group_size nor 64, an INT4 group_size other than 128 / 64, cancellation.
Result<std::shared_ptr<Model>> awq_quantize(std::shared_ptr<const Model> source,
                                            const std::vector<int32_t>& calibration_tokens,
                                            const AwqOptions& options = {}, AwqReport* report = nullptr);

// The scale search's loss for candidate scales s [n_in] (null: s = 1).
using AwqScaleLoss = std::function<double(const float* s)>;

// The scale search over the alpha grid, given mean |x| per input channel x_mean [n_in] and,
// for duo scaling, the weights' mean group-normalised magnitude w_mean [n_in] (empty: off).
// s = 1 is a candidate too. Returns the best s [n_in]; *stats gets alpha and losses.
std::vector<float> awq_search_scale_by(const std::vector<float>& x_mean, const std::vector<float>& w_mean, int n_grid,
                                       const AwqScaleLoss& loss, AwqGroupStats* stats);

// The scale search of one group of linears sharing the input x [n_rows, n_in], scored by
// the linears' outputs (awq_group_loss): linears[i] is [n_out[i], n_in] float.
std::vector<float> awq_search_scale(Backend& backend, const std::vector<const float*>& linears,
                                    const std::vector<int64_t>& n_out, int64_t n_in, const float* x, int n_rows,
                                    int n_grid, AwqGroupStats* stats, int group = 128, bool duo_scaling = false);

// The output MSE of one group with weights pseudo-quantized after scaling by s (null: s = 1).
double awq_group_loss(Backend& backend, const std::vector<const float*>& linears, const std::vector<int64_t>& n_out,
                      int64_t n_in, const float* x, int n_rows, const float* s, int group = 128);

// mean |x| per channel of x [n_rows, n].
std::vector<float> awq_channel_mean_abs(const float* x, int n_rows, int64_t n);
// Duo scaling's weight term: per input channel, the mean over every output row of the
// linears of |w| / max|w| of its group of `group` (AutoAWQ's w_mean).
std::vector<float> awq_weight_mean(const std::vector<const float*>& linears, const std::vector<int64_t>& n_out,
                                   int64_t n_in, int group);
// Q(w diag(s)) diag(1/s) for w [n_out, n_in] (s null: Q(w)), Q = fake_quant_int4 in groups.
std::vector<float> awq_quant_dequant(const float* w, int64_t n_out, int64_t n_in, const float* s, int group);

// The clipping search of one linear w [n_out, n_in] (float, already scaled) over its
// inputs x [n_rows, n_in]; clamps w in place. Per output row and group: symmetric clamps
// +-max|w| * (1 - i/n_grid) first (AutoAWQ); with `asymmetric`, then the upper end alone
// (max(w, 0) * (1 - i/n_grid)) and then the lower end alone, each keeping the clamp so far
// when no candidate is better (the INT4 grid is asymmetric: a group's two ends need not
// shrink together).
void awq_clip(Backend& backend, float* w, int64_t n_out, int64_t n_in, const float* x, int n_rows, int n_grid,
              float max_shrink, int group = 128, bool asymmetric = false);

}  // namespace kvs
