#pragma once
// GGML block formats (Q4_0 ... Q6_K, Q8_0/Q8_1/Q8_K activations): fp16/bf16 conversion,
// dequantization and round-to-nearest quantization of rows. Scalar, the reference.
#include <cstdint>

#include "kernels/dtype.h"

namespace kvs::cpu {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);   // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);   // round to nearest even

// dst[0..n) = row of n elements in type t (n a multiple of t's block size). Every DType.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Round-to-nearest quantization of n floats into type t. Every DType (weight types as
// llama.cpp's reference quantizers do it, activation types Q8_0/Q8_1/Q8_K exactly as
// the matmul kernels expect).
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// The activation type a weight type's integer dot product pairs with
// (Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_1/Q5_1 -> Q8_1, K-quants -> Q8_K, floats -> F32).
DType activation_type(DType weight_type);

}  // namespace kvs::cpu
