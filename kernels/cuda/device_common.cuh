#pragma once
// Warp and thread-block reductions and launch geometry shared by the CUDA kernels.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace kvs::cuda {

constexpr int kWarp = 32;
constexpr int kThreads = 256;  // threads per block of the element-wise kernels

// Blocks for a grid-stride loop over n elements with kThreads threads per block.
inline unsigned grid_for(int64_t n) {
    constexpr int64_t kMaxGrid = 1 << 20;
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxGrid ? kMaxGrid : blocks));
}

// for (each i of this thread's share of [0, n)) in a grid-stride loop.
#define KVS_GRID_STRIDE_LOOP(i, n)                                                         \
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

// Sum (kMax false) or maximum (kMax true) of v over the thread block, returned to every
// thread. blockDim.x must be a multiple of 32; `shared` holds 32 floats. Every thread
// of the block must call it (it synchronizes).
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* shared) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int n_warps = blockDim.x / kWarp;
    v = kMax ? warp_max(v) : warp_sum(v);
    __syncthreads();  // shared may still be read by a previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float r = lane < n_warps ? shared[lane] : (kMax ? -INFINITY : 0.0f);
    r = kMax ? warp_max(r) : warp_sum(r);
    return r;
}

}  // namespace kvs::cuda
