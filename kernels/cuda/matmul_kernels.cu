// Weight kernels of the CUDA backend: GEMV for single-token matmul (one warp per
// output row, dequantizing on the fly), dequantization of weight rows to fp16 (the
// input of cuBLAS for multi-token matmul) or fp32 (embedding lookups), and the fp32 ->
// fp16 conversion of activations.
#include <cuda_fp16.h>

#include <cassert>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_blocks.cuh"
#include "kernels/cuda/device_common.cuh"

namespace kvs::cuda {
namespace {

constexpr int kGemvWarps = 4;  // rows per thread block of the GEMV

// fp16 bits of a (low half) and b (high half): two consecutive halves in memory.
__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
    return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(a))) |
           (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(b))) << 16);
}

// ---------------------------------------------------------------- GEMV

// Lane l of the warp of row `row` handles items l, l + 32, ...: adjacent lanes read
// adjacent 32-element items, so one warp step reads one contiguous stretch of the row.
template <DType T>
__global__ void gemv_quant_kernel(const uint8_t* w, size_t row_bytes, const float* __restrict__ x,
                                  float* __restrict__ y, int64_t n_out, int n_items) {
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
    if (row >= n_out) return;                                      // the whole warp leaves together
    const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;  // [n_items * 32] in T's layout
    float sum = 0.0f;
    for (int it = lane; it < n_items; it += kWarp) {
        float v[kItem];
        dequant_item<T>(wr, it, v);
        const float* xi = x + static_cast<int64_t>(it) * kItem;  // [32]
#pragma unroll
        for (int j = 0; j < kItem; ++j) sum = fmaf(v[j], __ldg(xi + j), sum);
    }
    sum = warp_sum(sum);
    if (lane == 0) y[row] = sum;
}

template <DType T>
__global__ void gemv_float_kernel(const uint8_t* w, size_t row_bytes, const float* __restrict__ x,
                                  float* __restrict__ y, int64_t n_out, int64_t n_in) {
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
    if (row >= n_out) return;
    const void* wr = w + static_cast<size_t>(row) * row_bytes;  // [n_in]
    float sum = 0.0f;
    for (int64_t i = lane; i < n_in; i += kWarp) sum = fmaf(load_float_elem<T>(wr, i), __ldg(x + i), sum);
    sum = warp_sum(sum);
    if (lane == 0) y[row] = sum;
}

// ---------------------------------------------------------------- dequantize rows

// One thread per (output row r, item): row ids[r] (or row0 + r) of w, written as
// fp16 (kHalf) or fp32 to out [n_rows, n_items * 32].
template <DType T, bool kHalf>
__global__ void dequant_quant_kernel(const uint8_t* w, size_t row_bytes, const int32_t* ids, int64_t row0,
                                     int64_t n_rows, int n_items, void* out) {
    KVS_GRID_STRIDE_LOOP(idx, n_rows * n_items) {
        const int64_t r = idx / n_items;
        const int it = static_cast<int>(idx % n_items);
        const int64_t src_row = ids ? ids[r] : row0 + r;
        float v[kItem];
        dequant_item<T>(w + static_cast<size_t>(src_row) * row_bytes, it, v);
        const int64_t o = r * n_items * kItem + static_cast<int64_t>(it) * kItem;
        if constexpr (kHalf) {
            // 32 halves = 64 bytes, 16-byte aligned (out is cudaMalloc'd, rows are multiples of 32)
            uint4* dst = reinterpret_cast<uint4*>(static_cast<uint16_t*>(out) + o);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const float* u = v + 8 * q;
                dst[q] = make_uint4(pack_half2(u[0], u[1]), pack_half2(u[2], u[3]), pack_half2(u[4], u[5]),
                                    pack_half2(u[6], u[7]));
            }
        } else {
            float* dst = static_cast<float*>(out) + o;
#pragma unroll
            for (int j = 0; j < kItem; ++j) dst[j] = v[j];
        }
    }
}

// The same for plain float types, one thread per element.
template <DType T, bool kHalf>
__global__ void convert_float_kernel(const uint8_t* w, size_t row_bytes, const int32_t* ids, int64_t row0,
                                     int64_t n_rows, int64_t n_in, void* out) {
    KVS_GRID_STRIDE_LOOP(idx, n_rows * n_in) {
        const int64_t r = idx / n_in, i = idx % n_in;
        const int64_t src_row = ids ? ids[r] : row0 + r;
        const float v = load_float_elem<T>(w + static_cast<size_t>(src_row) * row_bytes, i);
        if constexpr (kHalf) {
            static_cast<uint16_t*>(out)[idx] = __half_as_ushort(__float2half_rn(v));
        } else {
            static_cast<float*>(out)[idx] = v;
        }
    }
}

// ---------------------------------------------------------------- dispatch

// Calls f(std::integral_constant<DType, T>{}) for the weight type t.
template <class F>
void dispatch_type(DType t, F&& f) {
    switch (t) {
        case DType::F32: f(std::integral_constant<DType, DType::F32>{}); break;
        case DType::F16: f(std::integral_constant<DType, DType::F16>{}); break;
        case DType::BF16: f(std::integral_constant<DType, DType::BF16>{}); break;
        case DType::Q4_0: f(std::integral_constant<DType, DType::Q4_0>{}); break;
        case DType::Q4_1: f(std::integral_constant<DType, DType::Q4_1>{}); break;
        case DType::Q5_0: f(std::integral_constant<DType, DType::Q5_0>{}); break;
        case DType::Q5_1: f(std::integral_constant<DType, DType::Q5_1>{}); break;
        case DType::Q8_0: f(std::integral_constant<DType, DType::Q8_0>{}); break;
        case DType::Q4_K: f(std::integral_constant<DType, DType::Q4_K>{}); break;
        case DType::Q5_K: f(std::integral_constant<DType, DType::Q5_K>{}); break;
        case DType::Q6_K: f(std::integral_constant<DType, DType::Q6_K>{}); break;
        default: assert(false && "CUDA backend: weight type without kernels (check supports())"); break;
    }
}

// Rows of w (ids[r], or row0 + r when ids is null) to fp16 or fp32; out [n_rows, w.n_in].
template <bool kHalf>
void launch_rows(const WeightView& w, const int32_t* ids, int64_t row0, int64_t n_rows, void* out,
                 cudaStream_t stream) {
    if (n_rows <= 0 || w.n_in <= 0) return;
    const auto* base = static_cast<const uint8_t*>(w.data);
    const size_t rb = row_bytes(w.dtype, w.n_in);
    dispatch_type(w.dtype, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16) {
            convert_float_kernel<T, kHalf>
                <<<grid_for(n_rows * w.n_in), kThreads, 0, stream>>>(base, rb, ids, row0, n_rows, w.n_in, out);
        } else {
            const int n_items = static_cast<int>(w.n_in / kItem);
            dequant_quant_kernel<T, kHalf>
                <<<grid_for(n_rows * n_items), kThreads, 0, stream>>>(base, rb, ids, row0, n_rows, n_items, out);
        }
    });
}

}  // namespace

void launch_gemv(const WeightView& w, const float* x, float* y, cudaStream_t stream) {
    if (w.n_out <= 0) return;
    const auto* base = static_cast<const uint8_t*>(w.data);
    const size_t rb = row_bytes(w.dtype, w.n_in);
    const unsigned grid = static_cast<unsigned>((w.n_out + kGemvWarps - 1) / kGemvWarps);
    dispatch_type(w.dtype, [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16) {
            gemv_float_kernel<T><<<grid, kGemvWarps * kWarp, 0, stream>>>(base, rb, x, y, w.n_out, w.n_in);
        } else {
            const int n_items = static_cast<int>(w.n_in / kItem);
            gemv_quant_kernel<T><<<grid, kGemvWarps * kWarp, 0, stream>>>(base, rb, x, y, w.n_out, n_items);
        }
    });
}

void launch_dequant_f16(const WeightView& w, int64_t row0, int64_t n_rows, uint16_t* out, cudaStream_t stream) {
    launch_rows<true>(w, nullptr, row0, n_rows, out, stream);
}

void launch_embedding(const WeightView& w, const int32_t* ids, int n_tokens, float* out, cudaStream_t stream) {
    launch_rows<false>(w, ids, 0, n_tokens, out, stream);
}

void launch_f32_to_f16(const float* x, uint16_t* out, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const WeightView as_row{DType::F32, x, n, 1};
    launch_rows<true>(as_row, nullptr, 0, 1, out, stream);
}

}  // namespace kvs::cuda
