#pragma once
// GGML block formats (Q4_0 ... Q6_K, Q8_0/Q8_1/Q8_K activations) and KV Scope's integer
// formats (I8_ROW, I4_G128, I4_G64): fp16/bf16 conversion, dequantization and round-to-nearest
// quantization of rows. Scalar, the reference.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/dtype.h"

namespace kvs::cpu {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

// dst[0..n) = row of n elements in type t (n a multiple of t's block size). Every DType.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Round-to-nearest quantization of n floats into type t. Every DType (weight types as
// llama.cpp's reference quantizers do it, activation types Q8_0/Q8_1/Q8_K exactly as
// the matmul kernels expect).
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// The activation type a weight type's integer dot product pairs with
// (Q4_0/Q5_0/Q8_0/I8_ROW -> Q8_0, Q4_1/Q5_1/I4_G128/I4_G64 -> Q8_1, K-quants -> Q8_K, floats -> F32).
DType activation_type(DType weight_type);

// ---- I4_G128 / I4_G64 / I8_ROW pieces for engine/quant (RTN, AWQ). Layouts in
// quant_blocks.h. quantize_row(I4_G*) / quantize_row(I8_ROW) are these applied to every
// group / the row.

// Round-to-nearest asymmetric 4-bit quantization of one group of n weights (n = 128 for
// I4_G128, 64 for I4_G64). The range [lo, hi] is [min(w), max(w)] widened to include 0 (as
// GPTQ does, so z always lands in 0..15); d = (hi - lo) / 15 rounded UP to the next fp16
// value (the stored precision, so 15 * d still spans the range), z = round(-lo / d), q[i] =
// clamp(round(w[i] / d) + z, 0, 15). Every |w[i] - d * (q[i] - z)| <= d / 2. An all-zero
// group gives d = 0, z = 0, q = 0. *d is the fp16 value as a float.
void quantize_i4_group(const float* w, int n, float* d, int* z, uint8_t* q);

// Builds a row of I4 type t (I4_G128 or I4_G64, G = i4_group_size(t)) of n weights (n a
// multiple of G) from given per-group scales d[n / G] (rounded to fp16 to nearest), zero
// points z[n / G] and quants q[n] (one per byte, element order), e.g. an AWQ checkpoint's
// own scales / zeros / qweight. Returns false, writing nothing, when a z or q is outside
// 0..15, a d is not finite, or t is not an I4 type.
bool pack_i4_row(DType t, const float* d, const int* z, const uint8_t* q, int64_t n, void* dst);
// The inverse: per-group d (as stored, fp16 -> float), z, and the quants q[n].
void unpack_i4_row(DType t, const void* src, int64_t n, float* d, int* z, uint8_t* q);
// The I4_G128 spellings of the two above.
inline bool pack_i4_g128_row(const float* d, const int* z, const uint8_t* q, int64_t n, void* dst) {
    return pack_i4_row(DType::I4_G128, d, z, q, n, dst);
}
inline void unpack_i4_g128_row(const void* src, int64_t n, float* d, int* z, uint8_t* q) {
    unpack_i4_row(DType::I4_G128, src, n, d, z, q);
}

// GGML rows from group-wise integers (quant_formats_pack.cpp; GPTQ), n a multiple of group, group a
// multiple of 32: Q4_1 from d[n / group], z[n / group] (0..15) and q[n] (0..15): every block of 32
// gets its group's d (fp16) and m = -d * z (fp16), so w = d * q + m, w = d * (q - z) up to m's
// rounding; Q8_0 from d[n / group] and q[n] (int8): w = d * q. False, writing nothing, when a value
// is out of range or a d not finite.
bool pack_q4_1_row(const float* d, const int* z, const uint8_t* q, int64_t n, int group, void* dst);
bool pack_q8_0_row(const float* d, const int8_t* q, int64_t n, int group, void* dst);

// bitsandbytes' 4-bit code books (quant_formats_bnb.cpp): NF4's 16 NormalFloat values
// (bitsandbytes functional.py / the QLoRA paper) and FP4's (kernels' dDequantizeFP4Tree:
// index bit 3 the sign, bits 0-2 -> 0, 0.0052083, 0.6666667, 1, 0.3333333, 0.5, 0.1666667,
// 0.25). quantize_row(NF4 / FP4): per block of 64, absmax = max |w|, q = the index of the code
// value nearest to w / absmax (ties to the lower value, as bitsandbytes' decision trees
// compare with >), an all-zero block gives absmax 0.
const float* bnb_code_book(DType t);  // [16]; null for other types

// LLM.int8() (Dettmers et al. 2022, bitsandbytes' Linear8bitLt) on DType::I8_LLM rows (the
// I8_ROW layout: scale_w = max|w| / 127, q_w = round(w / scale_w)): for each token, the
// activations with |x| > kLlmInt8Threshold are multiplied in float with their weight columns
// dequantized (q_w * scale_w); the rest are quantized per token, scale_a = max|x| / 127 over
// them, q_a = round(x / scale_a), and y = scale_w * scale_a * sum(q_w * q_a) + the float part.
// bitsandbytes picks the outlier columns over the whole batch; here each token picks its
// own, so a token's result does not depend on what it is batched with.
// The threshold is stored in each row (I8_LLM's 8-byte header: float threshold, then the
// I8_ROW row): quantize_row(I8_LLM) writes kLlmInt8Threshold, quantize_llm_int8_row any other
// (infinity: no decomposition, every activation quantized per token).
inline constexpr float kLlmInt8Threshold = 6.0f;
float llm_int8_dot(const void* w_row, const float* x, int64_t n);
void quantize_llm_int8_row(const float* w, int64_t n, float threshold, void* dst);
float llm_int8_threshold(const void* w_row);

// NF4 with double quantization (DType::NF4_DQ, layout in quant_blocks.h), as bitsandbytes'
// quantize_4bit(..., compress_statistics=True): the NF4 quants are chosen with each block's
// exact absmax; the absmax values minus their mean (the offset) are quantized with
// quantize_blockwise (blocks of 256, absmax2 = max |.| per group, the nearest value of the
// signed 8-bit dynamic map), and decode as dynamic_map8()[q] * absmax2 + offset.
// Whole tensors only (the groups run across rows): w [n_out, n_in] -> dst of
// tensor_bytes(NF4_DQ, n_in, n_out) bytes, and back.
void quantize_nf4_dq(const float* w, int64_t n_in, int64_t n_out, void* dst);
void dequantize_nf4_dq(const void* src, int64_t n_in, int64_t n_out, float* dst);
// Rows r0..r1 of the whole tensor src [n_out, n_in] (an embedding lookup): dst [r1 - r0, n_in].
void dequantize_nf4_dq_rows(const void* src, int64_t n_in, int64_t n_out, int64_t r0, int64_t r1, float* dst);
// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), sorted: [256].
const float* dynamic_map8();

// Symmetric per-row int8: scale = max|w| / 127 (float32), q[i] = round(w[i] / scale) in
// -127..127; |w[i] - scale * q[i]| <= scale / 2. An all-zero row gives scale 0, q 0.
// Writes row_bytes(I8_ROW, n) bytes (n a multiple of 32).
void quantize_i8_row(const float* w, int64_t n, void* dst);
// An I8_ROW row from a given scale and quants (q must be in -127..127; false otherwise).
bool pack_i8_row(float scale, const int8_t* q, int64_t n, void* dst);

// KV Scope's own types re-expressed in a GGML type, for GGUF files other programs read:
// I4_G128 / I4_G64 -> Q4_1 (each group becomes blocks of 32 with the group's d and
// m = fp16(-d * z), so w = d * q + m, the quants unchanged), I8_ROW -> Q8_0 (blocks of 32
// with d = fp16(scale), the quants unchanged). Only m / d are rounded to fp16 (relative
// error <= 2^-11 of d * z or of the scale). nullopt for every other type.
std::optional<DType> ggml_equivalent(DType t);
// One row of n weights of type t (one ggml_equivalent has) into dst, row_bytes(that, n) bytes.
void to_ggml_equivalent_row(DType t, const void* src, void* dst, int64_t n);

}  // namespace kvs::cpu
