#include "kernels/dtype.h"

#include <array>
#include <cassert>

namespace kvs {
namespace {
constexpr std::array<DTypeInfo, 20> kTypes = {{
    {DType::F32, "F32", 1, 4, true},
    {DType::F16, "F16", 1, 2, true},
    {DType::Q4_0, "Q4_0", 32, 2 + 16, true},
    {DType::Q4_1, "Q4_1", 32, 2 + 2 + 16, true},
    {DType::Q5_0, "Q5_0", 32, 2 + 4 + 16, true},
    {DType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true},
    {DType::Q8_0, "Q8_0", 32, 2 + 32, true},
    {DType::Q8_1, "Q8_1", 32, 2 + 2 + 32, false},
    {DType::Q4_K, "Q4_K", 256, 2 + 2 + 12 + 128, true},
    {DType::Q5_K, "Q5_K", 256, 2 + 2 + 12 + 32 + 128, true},
    {DType::Q6_K, "Q6_K", 256, 128 + 64 + 16 + 2, true},
    {DType::Q8_K, "Q8_K", 256, 4 + 256 + 16 * 2, false},
    {DType::BF16, "BF16", 1, 2, true},
    // blocks of 32 int8 after a float scale per row (32: the activation block it pairs with)
    {DType::I8_ROW, "I8_ROW", 32, 32, true, false, 4},
    {DType::I4_G128, "I4_G128", 128, 2 + 1 + 1 + 64, true, false, 0},
    {DType::I4_G64, "I4_G64", 64, 2 + 1 + 1 + 32, true, false, 0},
    {DType::NF4, "NF4", 64, 4 + 32, true, false, 0},
    {DType::FP4, "FP4", 64, 4 + 32, true, false, 0},
    {DType::I8_LLM, "I8_LLM", 32, 32, true, false, 8},
    {DType::NF4_DQ, "NF4_DQ", 64, 1 + 32, true, false, 0},
}};
}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t ggml_type) {
    for (const auto& t : kTypes)
        if (t.ggml && static_cast<uint32_t>(t.type) == ggml_type) return t;
    return std::nullopt;
}

const DTypeInfo& dtype_info(DType t) {
    for (const auto& i : kTypes)
        if (i.type == t) return i;
    assert(false && "dtype_info: DType missing from the table");
    return kTypes[0];
}

size_t row_bytes(DType t, int64_t n) {
    const auto& i = dtype_info(t);
    return i.row_header + static_cast<size_t>(n / i.block_size) * i.block_bytes;
}

size_t tensor_bytes(DType t, int64_t n_in, int64_t n_out) {
    size_t bytes = row_bytes(t, n_in) * static_cast<size_t>(n_out);
    if (t == DType::NF4_DQ) {
        const int64_t n_blocks = n_in / 64 * n_out;
        bytes += static_cast<size_t>((n_blocks + 255) / 256 + 1) * sizeof(float);
    }
    return bytes;
}

int i4_group_size(DType t) { return t == DType::I4_G128 ? 128 : t == DType::I4_G64 ? 64 : 0; }

std::optional<DType> i4_type_for_group(int group) {
    if (group == 128) return DType::I4_G128;
    if (group == 64) return DType::I4_G64;
    return std::nullopt;
}

}  // namespace kvs
