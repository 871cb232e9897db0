// Paged attention of the CUDA backend: one thread block per (query token, query head).
// The block walks the sequence's KV blocks through its block table, each warp taking
// every kWarps-th logical block, and keeps an online softmax (running maximum, running
// sum, weighted value accumulator) per warp; the warps' partial results are merged at
// the end. Matches the two-pass reference in kernels/cpu/ops_scalar.cpp.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_blocks.cuh"
#include "kernels/cuda/device_common.cuh"

namespace kvs::cuda {
namespace {

constexpr int kWarps = 4;                      // warps per (token, head)
constexpr int kPerLane = kMaxHeadDim / kWarp;  // head dims per lane: d = lane + 32 j

// One warp's online-softmax state over the positions it has seen.
struct WarpState {
    float m = -INFINITY;  // maximum score so far
    float l = 0.0f;       // sum of exp(score - m)
    float acc[kPerLane];  // sum of exp(score - m) * v[d], d = lane + 32 j
};

// Folds position `slot` (a row of the caches) into the warp's state. q_s is the
// scaled query in shared memory.
__device__ __forceinline__ void attend_position(const PagedAttentionArgs& a, const float* q_s, int64_t slot, int kvh,
                                                int lane, WarpState& st) {
    const int64_t row = (slot * a.n_kv_head + kvh) * a.head_dim;
    const uint16_t* k = static_cast<const uint16_t*>(a.k_cache) + row;  // [head_dim] fp16 (F16 cache only)
    const uint16_t* v = static_cast<const uint16_t*>(a.v_cache) + row;  // [head_dim] fp16
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
        const int d = lane + kWarp * j;
        if (d < a.head_dim) dot = fmaf(q_s[d], half_bits_to_float(k[d]), dot);
    }
    const float s = warp_sum(dot);  // every lane holds the score
    const float m_new = fmaxf(st.m, s);
    const float corr = expf(st.m - m_new);  // 0 for the first position (m = -inf)
    const float p = expf(s - m_new);
    st.l = st.l * corr + p;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
        const int d = lane + kWarp * j;
        const float vd = d < a.head_dim ? half_bits_to_float(v[d]) : 0.0f;
        st.acc[j] = fmaf(p, vd, st.acc[j] * corr);
    }
    st.m = m_new;
}

__global__ void __launch_bounds__(kWarps* kWarp) paged_attention_kernel(PagedAttentionArgs a) {
    __shared__ float q_s[kMaxHeadDim];            // [head_dim] query * scale
    __shared__ float m_s[kWarps], l_s[kWarps];    // per-warp maximum and sum
    __shared__ float acc_s[kWarps][kMaxHeadDim];  // per-warp value accumulators

    const int t = static_cast<int>(blockIdx.x / a.n_head);
    const int h = static_cast<int>(blockIdx.x % a.n_head);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int kvh = h / (a.n_head / a.n_kv_head);
    const int seq = a.token_seq[t];
    const int n_ctx = a.token_pos[t] + 1;  // positions 0 .. token_pos[t] are visible

    const float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim;  // [head_dim]
    for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) q_s[d] = q[d] * a.scale;
    __syncthreads();

    WarpState st;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) st.acc[j] = 0.0f;
    const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;  // [max_blocks]
    const int n_logical = (n_ctx + a.block_size - 1) / a.block_size;
    for (int lb = warp; lb < n_logical; lb += kWarps) {
        const int64_t first_slot = static_cast<int64_t>(table[lb]) * a.block_size;
        const int n_in_block = min(a.block_size, n_ctx - lb * a.block_size);
        for (int off = 0; off < n_in_block; ++off) attend_position(a, q_s, first_slot + off, kvh, lane, st);
    }

    if (lane == 0) {
        m_s[warp] = st.m;
        l_s[warp] = st.l;
    }
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
        const int d = lane + kWarp * j;
        if (d < a.head_dim) acc_s[warp][d] = st.acc[j];
    }
    __syncthreads();

    // Merge: out = sum_w acc_w exp(m_w - M) / sum_w l_w exp(m_w - M). Warp 0 saw position 0,
    // so M is finite; warps that saw nothing have m_w = -inf and weigh 0.
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, m_s[w]);
    float weight[kWarps];
    float l_all = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
        weight[w] = m_s[w] == -INFINITY ? 0.0f : expf(m_s[w] - m_all);
        l_all += l_s[w] * weight[w];
    }
    const float inv = 1.0f / l_all;
    float* out = a.out + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim;  // [head_dim]
    for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
        float o = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) o = fmaf(acc_s[w][d], weight[w], o);
        out[d] = o * inv;
    }
}

}  // namespace

void launch_paged_attention(const PagedAttentionArgs& a, cudaStream_t stream) {
    const int64_t n_blocks = static_cast<int64_t>(a.n_tokens) * a.n_head;
    if (n_blocks <= 0) return;
    paged_attention_kernel<<<static_cast<unsigned>(n_blocks), kWarps * kWarp, 0, stream>>>(a);
}

}  // namespace kvs::cuda
