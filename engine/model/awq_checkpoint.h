#pragma once
// AutoAWQ checkpoints (Hugging Face safetensors folders made by AutoAWQ, the format
// vLLM and transformers load as quant_method "awq"), GEMM packing only.
//
// Each quantized linear `<module>` (e.g. model.layers.0.self_attn.q_proj) is three tensors
// instead of `<module>.weight`:
//   qweight  I32 [in_features, out_features / 8]          8 4-bit quants per word
//   qzeros   I32 [in_features / group, out_features / 8]  8 4-bit zero points per word
//   scales   F16 [in_features / group, out_features]
// with w[in][out] = (q - z) * s. Words hold their 8 values (8 neighbouring output
// columns) in AutoAWQ's order: nibble i (bits 4i..4i+3) is column kAwqOrder[i], so column
// k is nibble kAwqReverseOrder[k]. The settings live in config.json
// "quantization_config" {"quant_method": "awq", "bits": 4, "group_size": 128,
// "zero_point": true, "version": "gemm"} or, in older checkpoints, quant_config.json
// {"w_bit", "q_group_size", "zero_point", "version"}.
//
// KV Scope runs these as I4_G128 or I4_G64 weights (groups of 128 or 64 along the input
// dim, fp16 scale, zero point): group_size 128 and 64 fit those formats, other group sizes
// are refused.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/model/safetensors_reader.h"

namespace kvs {

inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
inline constexpr int kAwqReverseOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
inline constexpr int kAwqGroupSize = 128;  // AutoAWQ's default group size (I4_G128); 64 is I4_G64

// values[k] (0..15) of 8 neighbouring columns -> one packed word, and back.
uint32_t awq_pack_word(const uint8_t values[8]);
void awq_unpack_word(uint32_t word, uint8_t values[8]);

struct AwqConfig {
    int bits = 4;
    int group_size = 128;
    bool zero_point = true;
    std::string version = "gemm";
    std::string source;  // the file the settings came from
};

// The folder's AWQ settings: config.json "quantization_config" with quant_method "awq",
// else quant_config.json. nullopt when the folder is not an AWQ checkpoint; an error
// when it says AWQ but a field is missing or has the wrong JSON type.
Result<std::optional<AwqConfig>> read_awq_config(const std::string& dir);
// Refuses settings KV Scope cannot run (bits != 4, group_size other than 128 or 64, no
// zero point, a packing other than GEMM), naming the file and field.
Status check_awq_config(const AwqConfig& c);

// One quantized linear, unpacked, in KV Scope's [n_out rows, n_in] order.
struct AwqLinear {
    std::string module;  // e.g. model.layers.0.self_attn.q_proj
    int64_t n_in = 0;    // in_features
    int64_t n_out = 0;   // out_features
    int group_size = kAwqGroupSize;
    std::vector<uint8_t> q;     // [n_out, n_in] 0..15
    std::vector<int> zeros;     // [n_out, n_in / group_size] 0..15
    std::vector<float> scales;  // [n_out, n_in / group_size] fp16 values
};

// Expected (n_in, n_out) of a Llama/qwen2 module by its Hugging Face name, nullopt for
// a name that is not one of the model's linears.
std::optional<std::pair<int64_t, int64_t>> awq_module_dims(const ModelConfig& c, const std::string& module);

// Unpacks `module` from the checkpoint, checking dtypes (I32, I32, F16) and shapes.
// n_in / n_out are the expected sizes (from the config); errors name the tensor, the
// shape found and the shape expected.
Result<AwqLinear> unpack_awq_linear(const SafetensorsSet& set, const std::string& module, int64_t n_in, int64_t n_out,
                                    int group_size);

// The packed tensors of an AwqLinear (the inverse of unpack_awq_linear), row-major in
// the shapes listed at the top of this file.
struct AwqPacked {
    std::vector<int32_t> qweight;  // [n_in, n_out / 8]
    std::vector<int32_t> qzeros;   // [n_in / group, n_out / 8]
    std::vector<uint16_t> scales;  // [n_in / group, n_out] fp16 bits
};
AwqPacked pack_awq_linear(const AwqLinear& l);

// AwqLinear <-> I4 rows ([n_out, row_bytes(t, n_in)], t = I4_G128 for group_size 128,
// I4_G64 for 64). The I4 side is exact: the same q, z and fp16 scale per group.
// awq_linear_from_i4 writes groups of `group_size` (0: the weight's own group size); 64
// from an I4_G128 weight gives each half of a group of 128 that group's scale and zero,
// which dequantizes to the same weights.
Result<std::vector<uint8_t>> awq_linear_to_i4(const AwqLinear& l);
// Errors: w is not I4_G128 / I4_G64, or group_size does not divide its own group size.
Result<AwqLinear> awq_linear_from_i4(const std::string& module, const WeightView& w, int group_size = 0);

// Every quantized linear of an AWQ folder as an I4 tensor (I4_G128 or I4_G64, by the
// config's group_size) named `<module>.weight`, in GGUF order (ne = [n_in, n_out]).
// `consumed` gets the names of the packed tensors (qweight / qzeros / scales) that the
// result replaces.
struct AwqTensor {
    std::string name;                // <module>.weight
    std::vector<int64_t> ne;         // [n_in, n_out]
    DType dtype = DType::I4_G128;    // I4_G128 or I4_G64
    std::vector<uint8_t> data;       // [n_out, row_bytes(dtype, n_in)]
    std::vector<int32_t> in_perm{};  // [n_in] or empty: WeightView::in_perm (GPTQ act-order)
};
Result<std::vector<AwqTensor>> convert_awq_linears(const SafetensorsSet& set, const ModelConfig& config,
                                                   const AwqConfig& awq, const std::string& dir,
                                                   std::vector<std::string>& consumed);

}  // namespace kvs
