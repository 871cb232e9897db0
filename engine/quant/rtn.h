#pragma once
// Round-to-nearest (RTN) weight quantization: the straight schemes of the quantization
// lab (INT8 per output channel = DType::I8_ROW, INT4 asymmetric groups of 128 =
// DType::I4_G128, or any GGML weight type), and the float "pseudo-quantizer" AWQ
// searches with (quantize then dequantize, in float).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "kernels/backend.h"

namespace kvs {

// Elements per INT4 group (I4_G128).
constexpr int kInt4Group = 128;

// The INT4 group size for rows of n_in weights when groups of `preferred` (128 or 64) are
// asked for: `preferred` where it divides n_in, else 64 where that does (SmolLM2-135M's
// rows of 576 = 4.5 x 128), else 0 (no INT4 storage format fits the row).
int int4_group_for(int64_t n_in, int preferred = kInt4Group);

// out[i] = dequantize(quantize_row(I4_G128, w))[i] for group = 128, computed in float: per
// group, range [min(w), max(w)] widened to include 0, d = (hi - lo) / 15 rounded up to
// fp16, z = clamp(round(-lo / d), 0, 15), q = clamp(round(w / d) + z, 0, 15),
// out = d * (q - z). Other group sizes (64 for rows of 576) have no storage format: they
// exist for pseudo-quantized measurements. n must be a multiple of group; out may alias w.
void fake_quant_int4(const float* w, float* out, int64_t n, int group = kInt4Group);

// The whole matrix in float: [n_out, n_in] rows dequantized from any weight type, in the
// input's column order (a weight with WeightView::in_perm is un-permuted). NF4_DQ, whose
// rows cannot decode alone (their absmax codes need the tensor's tail), decodes as a whole
// tensor (w.data holds tensor_bytes(NF4_DQ, n_in, n_out) bytes).
std::vector<float> dequantize_matrix(const WeightView& w, int n_threads = 2);

// Rows of a float matrix [n_out, n_in] quantized into `to` (round to nearest), rows split
// over n_threads. The result is [n_out, row_bytes(to, n_in)].
std::vector<uint8_t> quantize_matrix(const float* w, int64_t n_out, int64_t n_in, DType to, int n_threads = 2);

// Splits [0, n) into n_threads contiguous ranges and runs fn(begin, end) on each, the
// last on the calling thread.
void parallel_ranges(int64_t n, int n_threads, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace kvs
