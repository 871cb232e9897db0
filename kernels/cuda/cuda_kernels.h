#pragma once
// Host functions that launch the CUDA kernels of the backend (defined in the .cu
// files next to this header). Plain C++: cuda_backend.cpp includes it without nvcc.
// Every pointer is device memory; every launch goes to `stream` and returns at once.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace kvs::cuda {

// The largest head_dim paged_attention handles (8 values per lane of a warp).
constexpr int kMaxHeadDim = 256;

// ---- matmul_kernels.cu
// y[o] = sum_i W[o, i] * x[i]: one warp per row, dequantizing on the fly.
// w [n_out, n_in] in w.dtype's block layout; x [n_in]; y [n_out]
void launch_gemv(const WeightView& w, const float* x, float* y, cudaStream_t stream);
// Rows [row0, row0 + n_rows) of w as fp16; out [n_rows, w.n_in] (fp16 bits).
void launch_dequant_f16(const WeightView& w, int64_t row0, int64_t n_rows, uint16_t* out, cudaStream_t stream);
// out[t, :] = row ids[t] of w as float; out [n_tokens, w.n_in]
void launch_embedding(const WeightView& w, const int32_t* ids, int n_tokens, float* out, cudaStream_t stream);
// out = fp16 bits of x (round to nearest even); x [n], out [n]
void launch_f32_to_f16(const float* x, uint16_t* out, int64_t n, cudaStream_t stream);
// LLM.int8() (w.dtype I8_LLM) for any token count: y [n_tokens, n_out] = x [n_tokens, n_in] W^T
// with each token's activations split at the row's threshold (cpu::llm_int8_dot's arithmetic).
void launch_llm_int8(const WeightView& w, const float* x, float* y, int n_tokens, cudaStream_t stream);
// out[t, p] = x[t, perm[p]] (WeightView::in_perm); x, out [n_tokens, n_in], perm [n_in]
void launch_gather_columns(const float* x, const int32_t* perm, float* out, int n_tokens, int64_t n_in,
                           cudaStream_t stream);

// ---- elementwise_kernels.cu
void launch_rms_norm(const float* x, const float* weight, float* y, int n_rows, int n, float eps, cudaStream_t stream);
void launch_rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, int n_rot, float freq_base,
                 RopeStyle style, cudaStream_t stream);
void launch_softmax(float* x, int n_rows, int n_cols, cudaStream_t stream);
void launch_swiglu(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream);
void launch_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
void launch_add_bias(const float* x, const float* bias, float* y, int n_rows, int n, cudaStream_t stream);
void launch_kv_store(const KvStoreArgs& a, cudaStream_t stream);

// A kernel that does nothing, launched and waited for: success proves the library
// has code this GPU can run.
cudaError_t launch_probe(cudaStream_t stream);

// ---- paged_attention.cu (a.head_dim <= kMaxHeadDim)
void launch_paged_attention(const PagedAttentionArgs& a, cudaStream_t stream);

}  // namespace kvs::cuda
