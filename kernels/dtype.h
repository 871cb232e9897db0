#pragma once
// Element types of weights and caches. The numeric values are GGML's type ids,
// so a GGUF tensor's type field converts with dtype_from_ggml().
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
    Q8_1 = 9,   // activation format paired with Q4_1/Q5_1 (block of 32 int8 + d + d*sum)
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,  // activation format paired with the K-quants (block of 256)
    BF16 = 30,
};

struct DTypeInfo {
    DType type;
    std::string_view name;  // GGML's spelling: "Q4_1", "F16", ...
    int block_size;         // elements per block (1 for plain floats)
    size_t block_bytes;     // bytes per block
    bool weight_type;       // may appear as a model weight (Q8_1/Q8_K are activation-only)
};

// Info for a known type; nullopt for a GGML id KV Scope does not support.
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type);
const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
// Bytes used by a row of n elements (n must be a multiple of the block size).
size_t row_bytes(DType t, int64_t n);

}  // namespace kvs
