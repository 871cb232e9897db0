// Normalization, rotary embedding, softmax, element-wise ops and the KV-cache store
// of the CUDA backend. Formulas follow the scalar reference (kernels/cpu/ops_scalar.cpp).
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"

namespace kvs::cuda {
namespace {

constexpr int kRowThreads = 256;  // threads per row of rms_norm and softmax

// One block per row; y may alias x (each thread reads x[i] before writing y[i]).
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ weight, float* y, int n, float eps) {
    __shared__ float red[32];
    const int64_t r = blockIdx.x;
    const float* xr = x + r * n;  // [n]
    float* yr = y + r * n;        // [n]
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    ss = block_reduce<false>(ss, red);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * inv * weight[i];
}

// One thread per (token, head, rotated pair); the angle is computed in double like the
// reference, so long positions keep their precision.
__global__ void rope_kernel(float* x, const int32_t* __restrict__ pos, int n_tokens, int n_head, int head_dim,
                            int n_rot, float freq_base, bool neox) {
    const int half = n_rot / 2;
    KVS_GRID_STRIDE_LOOP(idx, static_cast<int64_t>(n_tokens) * n_head * half) {
        const int i = static_cast<int>(idx % half);
        const int64_t th = idx / half;  // token * n_head + head
        const int64_t t = th / n_head;
        const double theta = static_cast<double>(pos[t]) * pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
        double s, c;
        sincos(theta, &s, &c);
        const float cf = static_cast<float>(c), sf = static_cast<float>(s);
        float* v = x + th * head_dim;  // [head_dim]
        const int i0 = neox ? i : 2 * i;
        const int i1 = neox ? i + half : 2 * i + 1;
        const float a = v[i0], b = v[i1];
        v[i0] = a * cf - b * sf;
        v[i1] = a * sf + b * cf;
    }
}

// One block per row, in place: max, exp and sum, scale.
__global__ void softmax_kernel(float* x, int n_cols) {
    __shared__ float red[32];
    float* xr = x + static_cast<int64_t>(blockIdx.x) * n_cols;  // [n_cols]
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n_cols; i += blockDim.x) mx = fmaxf(mx, xr[i]);
    mx = block_reduce<true>(mx, red);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n_cols; i += blockDim.x) {
        const float e = expf(xr[i] - mx);
        xr[i] = e;
        sum += e;
    }
    sum = block_reduce<false>(sum, red);
    const float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < n_cols; i += blockDim.x) xr[i] *= inv;
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* y, int64_t n) {
    KVS_GRID_STRIDE_LOOP(i, n) {
        const float g = gate[i];
        y[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
    KVS_GRID_STRIDE_LOOP(i, n) { y[i] = a[i] + b[i]; }
}

__global__ void add_bias_kernel(const float* x, const float* __restrict__ bias, float* y, int64_t n_total, int n) {
    KVS_GRID_STRIDE_LOOP(i, n_total) { y[i] = x[i] + bias[i % n]; }
}

// One thread per (token, element of kv_dim); tokens with a negative slot are padding.
__global__ void kv_store_kernel(const float* __restrict__ k, const float* __restrict__ v, uint16_t* k_cache,
                                uint16_t* v_cache, const int32_t* __restrict__ slot_mapping, int n_tokens, int kv_dim) {
    KVS_GRID_STRIDE_LOOP(idx, static_cast<int64_t>(n_tokens) * kv_dim) {
        const int64_t t = idx / kv_dim, i = idx % kv_dim;
        const int64_t slot = slot_mapping[t];
        if (slot < 0) continue;
        k_cache[slot * kv_dim + i] = __half_as_ushort(__float2half_rn(k[idx]));
        v_cache[slot * kv_dim + i] = __half_as_ushort(__float2half_rn(v[idx]));
    }
}

__global__ void probe_kernel(int* out) {
    if (out) *out = 1;
}

// Threads per row: enough warps for n elements, at most kRowThreads.
int row_threads(int n) {
    const int warps = (n + kWarp - 1) / kWarp;
    return warps >= kRowThreads / kWarp ? kRowThreads : (warps < 1 ? kWarp : warps * kWarp);
}

}  // namespace

void launch_rms_norm(const float* x, const float* weight, float* y, int n_rows, int n, float eps, cudaStream_t stream) {
    if (n_rows <= 0 || n <= 0) return;
    rms_norm_kernel<<<n_rows, row_threads(n), 0, stream>>>(x, weight, y, n, eps);
}

void launch_rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, int n_rot, float freq_base,
                 RopeStyle style, cudaStream_t stream) {
    const int64_t n = static_cast<int64_t>(n_tokens) * n_head * (n_rot / 2);
    if (n <= 0) return;
    rope_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, pos, n_tokens, n_head, head_dim, n_rot, freq_base,
                                                      style == RopeStyle::Neox);
}

void launch_softmax(float* x, int n_rows, int n_cols, cudaStream_t stream) {
    if (n_rows <= 0 || n_cols <= 0) return;
    softmax_kernel<<<n_rows, row_threads(n_cols), 0, stream>>>(x, n_cols);
}

void launch_swiglu(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    swiglu_kernel<<<grid_for(n), kThreads, 0, stream>>>(gate, up, y, n);
}

void launch_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    add_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n);
}

void launch_add_bias(const float* x, const float* bias, float* y, int n_rows, int n, cudaStream_t stream) {
    const int64_t total = static_cast<int64_t>(n_rows) * n;
    if (total <= 0) return;
    add_bias_kernel<<<grid_for(total), kThreads, 0, stream>>>(x, bias, y, total, n);
}

void launch_kv_store(const KvStoreArgs& a, cudaStream_t stream) {
    const int64_t total = static_cast<int64_t>(a.n_tokens) * a.kv_dim;
    if (total <= 0) return;
    kv_store_kernel<<<grid_for(total), kThreads, 0, stream>>>(a.k, a.v, static_cast<uint16_t*>(a.k_cache),
                                                              static_cast<uint16_t*>(a.v_cache), a.slot_mapping,
                                                              a.n_tokens, a.kv_dim);
}

cudaError_t launch_probe(cudaStream_t stream) {
    probe_kernel<<<1, 1, 0, stream>>>(nullptr);
    const cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaStreamSynchronize(stream);
}

}  // namespace kvs::cuda
