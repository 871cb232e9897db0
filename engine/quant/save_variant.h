#pragma once
// Saving a model (a loaded one, or a quantize_model() variant) to disk, in a format that
// load_model() and other programs read back:
//
//   GGUF file (`out` ends in .gguf): every weight in a GGML type (F32, F16, BF16, Q4_0 ...
//     Q6_K); KV Scope's own types are re-expressed in GGML blocks (kernels/cpu/
//     quant_formats.h ggml_equivalent): I4_G128 / I4_G64 (INT4 RTN / AWQ) as Q4_1 blocks
//     of 32 with the group's scale and m = fp16(-scale * zero), I8_ROW (INT8 per channel)
//     as Q8_0 blocks with the row's scale; quants unchanged, only m / d rounded to fp16.
//     The model must come from a GGUF file: the output keeps every metadata key
//     of that file (tokenizer, hyper-parameters, general.*; general.file_type set to the
//     new linears' type) and its tensor names and order; tensors the engine does not use
//     are copied unchanged. llama.cpp reads the result.
//   AutoAWQ folder (any other `out`, created as a folder): a model whose per-layer linears
//     are all I4_G128 / I4_G64, from a Hugging Face safetensors folder (AWQ or float). It
//     holds config.json with quantization_config {"quant_method": "awq", "bits": 4,
//     "group_size": 128 or 64, "zero_point": true, "version": "gemm"} (128 when every
//     linear is I4_G128; 64 when any is I4_G64, the I4_G128 ones written losslessly as
//     pairs of groups of 64 sharing their scale and zero), the source's tokenizer
//     files, and model.safetensors (qweight / qzeros / scales per linear, the rest as the
//     model holds it). vLLM, transformers and AutoAWQ read this layout.
//   GPTQ folder (the same, for a GPTQ variant, format "variant:int4-gptq*", or a loaded GPTQ
//     checkpoint): quantize_config.json and config.json quantization_config {"quant_method":
//     "gptq", "bits": 4, "group_size" (the smallest group of any linear; larger groups are
//     written as several sharing one scale and zero), "sym": false, "desc_act" /
//     "static_groups" (true for int4-gptq-act), "checkpoint_format": "gptq" (zeros minus
//     one; "gptq_v2" when a zero point is 0, which v1 cannot hold)}, and qweight / qzeros /
//     scales / g_idx per linear as engine/model/gptq_checkpoint.h describes.
//
// Not supported, with an error saying so: an AWQ folder from a model loaded from GGUF (it
// needs the tokenizer.json a GGUF model lacks: save to .gguf instead); I8_ROW to a folder;
// a safetensors model to GGUF.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"

namespace kvs {

struct SavedModel {
    std::string path;     // the file or folder written
    std::string format;   // "gguf" or "awq"
    int64_t n_bytes = 0;  // bytes written (all files)
};

// Files are written under temporary names and renamed into place when complete (GGUF:
// GgufWriter's temp + rename; folders: a sibling "<out>.partial-<pid>" whose files move into
// `out` at the end), so an error or a cancel (progress's flag, checked before and after the
// write) leaves no partial output behind.
Result<SavedModel> save_variant(const Model& model, const std::string& out, const Progress& progress = {});

// The llama.cpp general.file_type (LLAMA_FTYPE_*) for models whose linears are mostly
// `t`; nullopt for types llama.cpp has no file type for.
std::optional<uint32_t> gguf_file_type(DType t);

}  // namespace kvs
