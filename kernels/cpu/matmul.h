#pragma once
// The CPU matrix multiply: y[n_tokens, n_out] = x[n_tokens, n_in] . W[n_out, n_in]^T for
// every weight DType. Quantized weights multiply against activations quantized to
// activation_type(w.dtype) with integer dot products; float weights use FMA.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"

namespace kvs::cpu {

void matmul(ThreadPool& pool, SimdLevel level, const WeightView& w, const float* x, float* y, int n_tokens);

// One dot product of n elements: a weight row in type t against an activation row
// already quantized to activation_type(t). The building block tests compare per level.
float vec_dot(SimdLevel level, DType t, const void* w_row, const void* act_row, int64_t n);

// Q4_0 / Q4_1 weights in the AVX2 kernels' layout (WeightView::cpu_tiles: 8-row tiles,
// nibbles pre-transposed; same results, bit for bit, without the per-call transpose).
// Bytes for [n_out, n_in], and the packing of data into out. Only with SimdLevel::Avx2+.
size_t q4_tiles_bytes(int64_t n_in, int64_t n_out);
void pack_q4_tiles(DType t, const void* data, int64_t n_in, int64_t n_out, void* out);

}  // namespace kvs::cpu
