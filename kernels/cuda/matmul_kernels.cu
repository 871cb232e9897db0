// Weight kernels of the CUDA backend: GEMV for single-token matmul (one warp per
// output row, dequantizing on the fly), dequantization of weight rows to fp16 (the
// input of cuBLAS for multi-token matmul) or fp32 (embedding lookups), the fp32 ->
// fp16 conversion of activations, LLM.int8()'s matmul (activations quantized per token
// around their outliers, every token count) and the gather of activation columns by a
// weight's input permutation (GPTQ act-order).
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
__global__ void gemv_quant_kernel(DevWeight w, const float* __restrict__ x, float* __restrict__ y, int n_items) {
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
    if (row >= w.n_out) return;  // the whole warp leaves together
    float sum = 0.0f;
    for (int it = lane; it < n_items; it += kWarp) {
        float v[kItem];
        dequant_item<T>(w, row, it, v);
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
__global__ void dequant_quant_kernel(DevWeight w, const int32_t* ids, int64_t row0, int64_t n_rows, int n_items,
                                     void* out) {
    KVS_GRID_STRIDE_LOOP(idx, n_rows * n_items) {
        const int64_t r = idx / n_items;
        const int it = static_cast<int>(idx % n_items);
        const int64_t src_row = ids ? ids[r] : row0 + r;
        float v[kItem];
        dequant_item<T>(w, src_row, it, v);
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

// ---------------------------------------------------------------- LLM.int8()

// y[t, o] for LLM.int8() rows (I8_LLM: float threshold, float scale_w, n_in int8), one warp
// per (row o, token t), as the CPU reference cpu::llm_int8_dot computes it: the token's
// activations with |x| > threshold multiply their dequantized weights in float; the rest
// are quantized with scale_a = max |x| / 127 over them, q_a = rint(x * 127 / max), and
// y = scale_w * scale_a * sum(q_w * q_a) + the float part. The threshold is the row's, so
// each warp finds its token's max itself.
__global__ void llm_int8_kernel(DevWeight w, const float* __restrict__ x, float* __restrict__ y, int n_tokens) {
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
    if (row >= w.n_out) return;  // the whole warp leaves together
    const uint8_t* wr = w.row(row);
    const float threshold = load_f32(wr), scale_w = load_f32(wr + 4);
    const auto* q = reinterpret_cast<const int8_t*>(wr + 8);  // [n_in]
    for (int t = blockIdx.y; t < n_tokens; t += gridDim.y) {
        const float* xt = x + static_cast<int64_t>(t) * w.n_in;  // [n_in]
        float amax = 0.0f;
        for (int64_t i = lane; i < w.n_in; i += kWarp) {
            const float a = fabsf(__ldg(xt + i));
            if (a <= threshold) amax = fmaxf(amax, a);
        }
        amax = warp_max(amax);
        const float scale_a = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        long long acc = 0;
        float outliers = 0.0f;
        for (int64_t i = lane; i < w.n_in; i += kWarp) {
            const float xi = __ldg(xt + i);
            if (fabsf(xi) > threshold) {
                outliers = fmaf(xi, static_cast<float>(q[i]) * scale_w, outliers);
            } else {
                acc += static_cast<long long>(q[i]) * static_cast<long long>(rintf(xi * inv));
            }
        }
#pragma unroll
        for (int o = kWarp / 2; o > 0; o /= 2) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
        outliers = warp_sum(outliers);
        if (lane == 0)
            y[static_cast<int64_t>(t) * w.n_out + row] = scale_w * scale_a * static_cast<float>(acc) + outliers;
    }
}

// ---------------------------------------------------------------- input permutation

// out[t, p] = x[t, perm[p]]; x, out [n_tokens, n_in], perm [n_in]
__global__ void gather_columns_kernel(const float* __restrict__ x, const int32_t* __restrict__ perm,
                                      float* __restrict__ out, int64_t n_tokens, int64_t n_in) {
    KVS_GRID_STRIDE_LOOP(idx, n_tokens * n_in) {
        const int64_t t = idx / n_in, p = idx % n_in;
        out[idx] = x[t * n_in + perm[p]];
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
        case DType::I4_G128: f(std::integral_constant<DType, DType::I4_G128>{}); break;
        case DType::I4_G64: f(std::integral_constant<DType, DType::I4_G64>{}); break;
        case DType::NF4: f(std::integral_constant<DType, DType::NF4>{}); break;
        case DType::FP4: f(std::integral_constant<DType, DType::FP4>{}); break;
        case DType::NF4_DQ: f(std::integral_constant<DType, DType::NF4_DQ>{}); break;
        case DType::I8_ROW: f(std::integral_constant<DType, DType::I8_ROW>{}); break;
        case DType::I8_LLM: f(std::integral_constant<DType, DType::I8_LLM>{}); break;
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
            const DevWeight dw{base, rb, w.n_in, w.n_out};
            dequant_quant_kernel<T, kHalf>
                <<<grid_for(n_rows * n_items), kThreads, 0, stream>>>(dw, ids, row0, n_rows, n_items, out);
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
        } else if constexpr (T == DType::I8_LLM) {
            launch_llm_int8(w, x, y, 1, stream);
        } else {
            const int n_items = static_cast<int>(w.n_in / kItem);
            gemv_quant_kernel<T>
                <<<grid, kGemvWarps * kWarp, 0, stream>>>(DevWeight{base, rb, w.n_in, w.n_out}, x, y, n_items);
        }
    });
}

void launch_llm_int8(const WeightView& w, const float* x, float* y, int n_tokens, cudaStream_t stream) {
    if (w.n_out <= 0 || n_tokens <= 0) return;
    const DevWeight dw{static_cast<const uint8_t*>(w.data), row_bytes(w.dtype, w.n_in), w.n_in, w.n_out};
    const dim3 grid(static_cast<unsigned>((w.n_out + kGemvWarps - 1) / kGemvWarps),
                    static_cast<unsigned>(n_tokens < 65535 ? n_tokens : 65535));
    llm_int8_kernel<<<grid, kGemvWarps * kWarp, 0, stream>>>(dw, x, y, n_tokens);
}

void launch_gather_columns(const float* x, const int32_t* perm, float* out, int n_tokens, int64_t n_in,
                           cudaStream_t stream) {
    const int64_t n = static_cast<int64_t>(n_tokens) * n_in;
    if (n <= 0) return;
    gather_columns_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, perm, out, n_tokens, n_in);
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
