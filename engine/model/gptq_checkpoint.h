#pragma once
// AutoGPTQ / GPTQModel checkpoints (Hugging Face safetensors folders, quant_method "gptq").
//
// Settings: quantize_config.json {"bits", "group_size", "desc_act", "sym", "static_groups",
// "checkpoint_format"} (AutoGPTQ), or config.json "quantization_config" with
// "quant_method": "gptq" (transformers / optimum). checkpoint_format "gptq" (the classic
// v1 layout, the default when absent) stores every zero point minus one; "gptq_v2"
// (GPTQModel) stores it as it is; any other format (marlin, bitblas, ...) is refused.
//
// Each quantized linear `<module>` is four tensors instead of `<module>.weight`:
//   qweight  I32 [in_features * bits / 32, out_features]  32 / bits quants per word along the input
//   qzeros   I32 [n_groups, out_features * bits / 32]     32 / bits zero points per word along the output
//   scales   F16 [n_groups, out_features]
//   g_idx    I32 [in_features]                            the group of every input column
// with value j of a word at bits [bits * j, bits * (j + 1)) (ascending), n_groups =
// in_features / group_size (group_size -1: one group per row), and
//   w[out][in] = scales[g][out] * (q[in][out] - zero[g][out]),  g = g_idx[in].
//
// KV Scope runs these in its kernels' group formats (engine/quant/gptq.h gptq_encode): 4 bits
// with groups of 128 / 64 as I4_G128 / I4_G64, 32 as Q4_1; 8 bits symmetric as Q8_0; a
// group size that is a multiple of a storage group (256, -1 = the whole row) is written as
// several storage groups sharing one scale and zero (exact). A contiguous g_idx (g_idx[i] ==
// i / group_size: desc_act false, or desc_act with static_groups) is stored as it is; an
// act-order g_idx (desc_act without static groups: a permutation) has its input columns
// sorted by group (gptq_group_permutation, as exllama does), so every group is contiguous
// and keeps its stored 4-bit codes, scale and zero, and the weight carries that order as
// WeightView::in_perm: the forward gathers its input by it before the matmul (the CPU
// backend; others refuse it by name). Every group must then hold exactly group_size columns.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/awq_checkpoint.h"
#include "engine/model/model.h"
#include "engine/model/safetensors_reader.h"
#include "engine/quant/gptq.h"

namespace kvs {

struct GptqConfig {
    int bits = 4;
    int group_size = 128;  // -1: the whole row
    bool desc_act = false;
    bool sym = true;
    bool static_groups = false;
    std::string checkpoint_format = "gptq";  // "gptq" (zeros - 1) or "gptq_v2"
    std::string source;                      // the file the settings came from
};

// The folder's GPTQ settings (quantize_config.json, else config.json quantization_config
// with quant_method "gptq"); nullopt when the folder is not a GPTQ checkpoint; an error
// naming the file and field when one is missing, of the wrong type or unsupported (bits
// other than 4 / 8, an unknown checkpoint_format).
Result<std::optional<GptqConfig>> read_gptq_config(const std::string& dir);

// Unpacks `module` (n_in / n_out from the model config) into a GptqMatrix, checking every
// tensor's dtype and shape and every g_idx entry; errors name the tensor.
Result<GptqMatrix> unpack_gptq_linear(const SafetensorsSet& set, const std::string& module, int64_t n_in, int64_t n_out,
                                      const GptqConfig& cfg);

// The packed tensors of a GptqMatrix in the checkpoint layout above (v1 zeros minus one
// when v1 is true).
struct GptqPacked {
    std::vector<int32_t> qweight;  // [n_in * bits / 32, n_out]
    std::vector<int32_t> qzeros;   // [n_groups, n_out * bits / 32]
    std::vector<uint16_t> scales;  // [n_groups, n_out] fp16 bits
    std::vector<int32_t> g_idx;    // [n_in]
};
GptqPacked pack_gptq_linear(const GptqMatrix& m, bool v1);

// A GptqMatrix from a weight stored in a group format (I4_G128 / I4_G64 / Q4_1 as 4-bit
// asymmetric groups; Q4_1's zero is round(-m / d), refused when that is not exact), in the
// input's column order: a weight with an in_perm gets its act-order g_idx back.
Result<GptqMatrix> gptq_matrix_from_weight(const std::string& module, const WeightView& w);

// Every quantized linear of a GPTQ folder as a tensor named `<module>.weight` in its
// storage type (AwqTensor: name, ne = [n_in, n_out], dtype, bytes); `consumed` gets the
// packed tensors' names.
Result<std::vector<AwqTensor>> convert_gptq_linears(const SafetensorsSet& set, const ModelConfig& config,
                                                    const GptqConfig& gptq, const std::string& dir,
                                                    std::vector<std::string>& consumed);

}  // namespace kvs
