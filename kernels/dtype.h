#pragma once
// Element types of weights and caches. The numeric values of the GGML types are GGML's
// type ids, so a GGUF tensor's type field converts with dtype_info(uint32_t). KV Scope's
// own formats (I8_ROW, I4_G128, I4_G64) have ids from 1000 up, outside GGML's range, and
// dtype_info(uint32_t) rejects them: a GGUF file can never claim one.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvs {

enum class DType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,  // activation format paired with Q4_1/Q5_1 (block of 32 int8 + d + d*sum)
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,  // activation format paired with the K-quants (block of 256)
    BF16 = 30,
    // KV Scope's own weight formats (layouts in kernels/cpu/quant_blocks.h):
    I8_ROW = 1000,   // per output channel: float scale, then n_in int8; w = scale * q
    I4_G128 = 1001,  // groups of 128: fp16 d, uint8 zero z, nibbles; w = d * (q - z) (AWQ / GPTQ)
    I4_G64 = 1002,   // the same with groups of 64 (rows of 576, 64-multiples that 128 does not divide)
    NF4 = 1003,      // bitsandbytes 4-bit NormalFloat: blocks of 64, float absmax, 16-value code book
    FP4 = 1004,      // bitsandbytes 4-bit float (sign + e2m1 code book), the same block layout
    I8_LLM = 1005,   // LLM.int8(): float scale, float outlier threshold, n_in int8; activations above it stay float
    NF4_DQ = 1006,   // NF4 with bitsandbytes' double quantization: 8-bit block absmax; per-tensor tail (below)
};

struct DTypeInfo {
    DType type;
    std::string_view name;  // GGML's spelling: "Q4_1", "F16", ...
    int block_size;         // elements per block (1 for plain floats)
    size_t block_bytes;     // bytes per block
    bool weight_type;       // may appear as a model weight (Q8_1/Q8_K are activation-only)
    bool ggml = true;       // a GGML type id (may appear in a GGUF file)
    size_t row_header = 0;  // bytes at the start of every row before its blocks (I8_ROW: the scale)
};

// Info for a GGML type id KV Scope supports; nullopt for any other id, including the
// ids of KV Scope's own formats (use dtype_info(DType) for those).
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type);
const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
// Bytes used by a row of n elements (n must be a multiple of the block size):
// row_header + n / block_size * block_bytes.
size_t row_bytes(DType t, int64_t n);
// Bytes of a whole [n_out, n_in] tensor: n_out rows of row_bytes, plus, for NF4_DQ, the tail
// after the last row (one float scale per 256 blocks of 64, counted over the flattened
// tensor, and the float offset: kernels/cpu/quant_blocks.h).
size_t tensor_bytes(DType t, int64_t n_in, int64_t n_out);

// The group size of an asymmetric 4-bit group type (I4_G128: 128, I4_G64: 64), 0 for any
// other type; and the I4 type holding groups of `group` (nullopt unless 64 or 128).
int i4_group_size(DType t);
std::optional<DType> i4_type_for_group(int group);

}  // namespace kvs
