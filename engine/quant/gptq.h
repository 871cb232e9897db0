#pragma once
// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers"), written after the reference implementation as AutoGPTQ
// carries it (auto_gptq/quantization/gptq.py GPTQ.fasterquant, quantizer.py):
//
//  per linear layer W [n_out, n_in] with calibration inputs x (rows of [n_in]):
//   1. H = 2/n sum x x^T (gptq_hessian);
//   2. dead columns (H_ii = 0): H_ii = 1, W[:, i] = 0;
//   3. act-order (optional): columns in order of descending H_ii (ties: lower index first);
//   4. H += damp_percent * mean(diag H) * I; U = the upper Cholesky factor of H^-1
//      (H^-1 = U^T U);
//   5. columns left to right in lazy blocks of block_size: each column quantized with its
//      group's scale / zero, its error (w - q) / U_ii spread over the block's later
//      columns through row i of U, and once a block is done, the block's errors over every
//      later column;
//   6. a group's scale and zero come from the group's columns as they stand at the start
//      of the block its first column lies in (the reference's find_params on W, not on the
//      block's running copy), or, with static groups, from the original weights before
//      any update (exllama-compatible act-order: groups stay contiguous in the original
//      column order, so g_idx[i] = i / group).
//  The quantizer (per output row and group): xmin = min(0, min w), xmax = max(0, max w);
//  symmetric: xmax = max(|xmin|, xmax), xmin = -xmax when xmin < 0, zero = (maxq + 1) / 2;
//  an all-zero group takes [-1, 1]; scale = (xmax - xmin) / maxq; asymmetric
//  zero = round(-xmin / scale); q = clamp(round(w / scale) + zero, 0, maxq),
//  w_hat = scale * (q - zero). With GptqOptions::mse the range is shrunk to the grid with the
//  least |w - w_hat|^2.4 over the group (the reference Quantizer's mse search).
//  One deliberate difference: the scale is rounded to fp16 (to nearest; the smallest
//  positive fp16 if that is 0) before zero and q are computed, because fp16 is what the
//  checkpoint and the kernels store; the reference rounds it only when packing, so its
//  in-algorithm w_hat differs from what it saves. tests/tools/make_gptq_fixture.py is a
//  numpy transcription of the reference with the same fp16 step; tst_gptq compares.
//  All of it in double. Rows are independent once U is known and run in parallel.
//
// For a model (gptq_quantize): calibration tokens run through the model
// (engine/quant/calibration.h) and every layer is quantized in turn; with `sequential` the
// activations of layer l come from a model whose layers 0..l-1 are already the quantized
// ones (run through the kernels in their stored formats), so later layers calibrate on
// quantised inputs. Within a layer the seven linears share one pass (AutoGPTQ's
// true_sequential=False). Storage: 4 bits in groups of 128 -> I4_G128, 64 -> I4_G64,
// 32 -> Q4_1 (d, m = fp16(-d * zero)); 8 bits symmetric -> Q8_0 (d = scale per block of 32,
// q - 128 as int8); a larger group (256, a whole row from a checkpoint) is stored as several of
// those sharing one scale and zero (gptq_encode). Rows the group size does not divide take 64
// (SmolLM2-135M's 576). Act-order without static groups (a permuted g_idx) is stored with its
// columns sorted by group (gptq_group_permutation) and that order as the weight's
// WeightView::in_perm: the same 4-bit groups, the activations gathered before the matmul.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/quant/calibration.h"

namespace kvs {

struct GptqOptions {
    int bits = 4;                // 4 or 8
    int group_size = 128;        // 32, 64 or 128
    bool sym = true;             // AutoGPTQ's default
    bool act_order = false;      // desc_act
    bool static_groups = false;  // groups from the unpermuted weights (contiguous g_idx)
    double damp_percent = 0.01;  // of the mean diagonal of H
    // MSE scale search (GPTQModel's `mse`, the GPTQ repository's Quantizer(mse=True)): each
    // group's min/max range shrunk by 1 - k / mse_grid for k < mse_maxshrink * mse_grid,
    // keeping the shrink with the least sum |w - w_hat|^mse_norm. Off: plain min/max.
    bool mse = false;
    double mse_norm = 2.4;
    int mse_grid = 100;
    double mse_maxshrink = 0.8;
    int block_size = 128;    // lazy-batch width
    bool sequential = true;  // later layers calibrate on the quantized earlier ones
    // Tokens at the start of every calibration sequence left out of H (0: none, as the
    // reference). The first token is an attention sink whose down inputs are 100-1000x the
    // others'; leaving it out made SmolLM2-135M worse (PPL 25.6 vs 23.6 at 256 tokens,
    // docs/benchmarks.md): the later tokens attend to it, so its outputs matter.
    int hessian_skip_first = 0;
    int n_threads = 2;
    CalibrationOptions calibration;  // max_rows is raised to the token count (every token counts)
    // One step per layer (its calibration, then its seven linears); cancelled: gptq_quantize
    // returns Progress::cancelled_status at the next layer or calibration chunk.
    Progress progress;
};

// One quantized matrix in checkpoint terms (AutoGPTQ's scales / zeros / g_idx).
struct GptqMatrix {
    int64_t n_out = 0, n_in = 0;
    int group = 0, bits = 4;
    std::vector<float> scales;   // [n_groups, n_out] fp16 values
    std::vector<int32_t> zeros;  // [n_groups, n_out] 0..maxq
    std::vector<uint8_t> q;      // [n_out, n_in] 0..maxq, original column order
    std::vector<int32_t> g_idx;  // [n_in] group of each input column

    int64_t n_groups() const { return n_in / group; }
    float dequant(int64_t o, int64_t i) const {
        const size_t g = size_t(g_idx[size_t(i)]) * size_t(n_out) + size_t(o);
        return scales[g] * float(int(q[size_t(o * n_in + i)]) - zeros[g]);
    }
    std::vector<float> dequantize() const;  // [n_out, n_in]
    bool trivial_g_idx() const;             // g_idx[i] == i / group for every i
};

// H = 2/n * X^T X over the rows of x [n_rows, n_in], in double: [n_in, n_in].
std::vector<double> gptq_hessian(const float* x, int n_rows, int64_t n_in);

// GPTQ of one matrix w [n_out, n_in] with Hessian h [n_in, n_in] (gptq_hessian) in groups
// of `group` (must divide n_in). Errors: a group or bit width not offered, h not positive
// definite after dampening.
Result<GptqMatrix> gptq_quantize_matrix(const float* w, int64_t n_out, int64_t n_in, const std::vector<double>& h,
                                        int group, const GptqOptions& opt);

// Round to nearest with the same quantizer (no error feedback): GPTQ's baseline.
GptqMatrix gptq_rtn_matrix(const float* w, int64_t n_out, int64_t n_in, int group, const GptqOptions& opt);

// The input order that makes m's groups contiguous (exllama's act-order handling): perm[p] =
// the original column at position p, the columns sorted by g_idx (stably, so within a group
// by index); after it, g_idx of position p is p / group. Empty when g_idx is already
// i / group. Error (naming the group) when a group does not hold exactly `group` columns.
Result<std::vector<int32_t>> gptq_group_permutation(const GptqMatrix& m);
// m with its columns in the order perm (perm[p] = original column of position p):
// q[o][p] = m.q[o][perm[p]], g_idx[p] = m.g_idx[perm[p]]; scales and zeros unchanged.
GptqMatrix gptq_permute_columns(const GptqMatrix& m, const std::vector<int32_t>& perm);
// The inverse: columns at positions perm back to their original places.
GptqMatrix gptq_unpermute_columns(const GptqMatrix& m, const std::vector<int32_t>& perm);

// The storage type of a GptqMatrix, or an error naming why none fits (bits 8 asymmetric,
// a g_idx that is not contiguous, a group other than 32 / 64 / 128).
Result<DType> gptq_storage_type(const GptqMatrix& m);
// Encodes m into its storage type: [n_out, row_bytes(type, n_in)]. A g_idx that is not
// i / group (act-order without static groups) needs in_perm: the columns are stored in
// gptq_group_permutation's order and *in_perm gets it (the WeightView::in_perm the forward
// gathers its input by); without in_perm it is an error. *in_perm is emptied otherwise.
Result<std::vector<uint8_t>> gptq_encode(const GptqMatrix& m, DType* type, std::vector<int32_t>* in_perm = nullptr);

struct GptqReport {
    int n_calibration_tokens = 0;
    double seconds_calibration = 0.0;
    double seconds_quantize = 0.0;  // Hessians, GPTQ and encoding
};

// The GPTQ variant of `source`, with its linears as the storage types above. Errors: no
// calibration tokens, a linear whose rows no offered group divides, cancellation.
Result<std::shared_ptr<Model>> gptq_quantize(std::shared_ptr<const Model> source,
                                             const std::vector<int32_t>& calibration_tokens,
                                             const GptqOptions& opt = {}, GptqReport* report = nullptr);

}  // namespace kvs
