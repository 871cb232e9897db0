#pragma once
// Quantized variants of a loaded model, made in memory: the quantization lab's
// entry point. A variant shares the reference's config and vocabulary and owns its
// re-encoded weights; the reference stays usable beside it.
//
// Schemes (QuantScheme::parse spelling in quotes):
//   "ref"       the reference: every linear dequantized to F32. For a model stored
//               quantized (the default model is Q4_1) this is NOT an FP16 model; its
//               label says "dequantized <type>".
//   "f16"       every linear in F16 (from the reference)
//   "q8_0" ...  any GGML weight type this engine runs (round-to-nearest, llama.cpp's
//               reference quantizers), e.g. q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k
//   "int8"      INT8 per output channel, symmetric (I8_ROW), round to nearest
//   "int4-rtn"  INT4 asymmetric groups of 128 (I4_G128), round to nearest (alias "rtn4");
//               rows 128 does not divide (SmolLM2-135M's 576) take groups of 64 (I4_G64)
//   "int4-sym"  INT4 symmetric (AutoGPTQ's sym=True quantizer: range +-max|w|, zero 8; alias
//               "sym4"), round to nearest, in the same formats and groups as int4-rtn: the
//               QLoRA paper's Int4 baseline, next to which NF4 is defined
//   "int4-awq"  the same INT4 formats by AWQ (engine/quant/awq.h; alias "awq4"): needs
//               QuantOptions.calibration_tokens (engine/quant/calibration.h)
//   "int4-gptq" the same INT4 formats by GPTQ (engine/quant/gptq.h; alias "gptq4"), asymmetric
//               like int4-rtn, layers calibrated sequentially: needs calibration tokens
//   "llm-int8"  LLM.int8() (bitsandbytes' Linear8bitLt): INT8 per output channel (DType::I8_LLM,
//               I8_ROW's row after the threshold) whose matmul keeps each token's activations
//               above 6.0 in float; "llm-int8:T" another threshold T (stored in the rows),
//               "llm-int8:inf" none (every activation int8 per token)
//   "nf4", "fp4"  bitsandbytes' 4-bit NormalFloat / float formats (blocks of 64, float absmax,
//               DType::NF4 / FP4; kernels/cpu/quant_formats.h), round to the nearest code value
//   "nf4-dq"    NF4 with bitsandbytes' double quantization (DType::NF4_DQ: 8-bit absmax codes,
//               groups of 256 blocks with a float scale, the mean offset; ~4.127 bits per weight)
//   "int4-gptq-act"  GPTQ with act-order in true column order (AutoGPTQ's desc_act without
//               static groups): a permuted g_idx, stored as the same INT4 groups with the
//               columns sorted by group and that order as each linear's WeightView::in_perm
// Only the per-layer linears (q, k, v, o, gate, up, down) are re-encoded; the token
// embedding and the output head stay as the reference stores them.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/quant/gptq.h"

namespace kvs {

struct QuantScheme {
    enum class Kind {
        Reference,
        GgmlType,
        Int8PerChannel,
        Int4Rtn,
        Int4Sym,
        Int4Awq,
        Int4Gptq,
        Int4GptqAct,
        Bnb4,
        LlmInt8
    };
    Kind kind = Kind::Reference;
    DType dtype = DType::F32;  // the linears' type in the variant (INT4: I4_G128, I4_G64 where 128 does not fit)
    std::string name;          // the spelling that parsed ("q4_k", "ref", ...)
    // LlmInt8 ("llm-int8:T"): the activations above it stay float
    float llm_int8_threshold = 6.0f;

    // AWQ and GPTQ: made from calibration tokens (QuantOptions::calibration_tokens)
    bool calibrated() const { return kind == Kind::Int4Awq || kind == Kind::Int4Gptq || kind == Kind::Int4GptqAct; }

    static Result<QuantScheme> parse(const std::string& text);
    static std::vector<std::string> spellings();  // every accepted name, for help and errors
};

struct QuantOptions {
    // Calibration tokens for the calibrated schemes (AWQ, GPTQ); ignored by the others.
    std::vector<int32_t> calibration_tokens;
    // Hears every layer (AWQ and GPTQ: calibration and search too) and reaches 1 when the
    // variant is made; cancelled: quantize_model returns Progress::cancelled_status
    // (Progress::is_cancelled tells it from other errors) and no variant.
    Progress progress;
    // GPTQ's settings instead of gptq_defaults(scheme) (the variants docs/benchmarks.md's
    // issue 19 section measured); the progress above still applies.
    std::optional<GptqOptions> gptq;
};

// The settings int4-gptq / int4-gptq-act run with by default: asymmetric, 30 % dampening,
// groups of 128 (64 where 128 does not divide the row), layers in sequence; int4-gptq-act
// adds act-order (a permuted g_idx) and the MSE scale search.
GptqOptions gptq_defaults(const QuantScheme& scheme);

// The type a linear whose rows hold n_in weights becomes under `scheme`: the scheme's, except
// that INT4 rows 128 does not divide take groups of 64 (I4_G64); nullopt when no type of the
// scheme fits the row (a GGML block size that does not divide it). The reference is F32.
std::optional<DType> quant_linear_type(int64_t n_in, const QuantScheme& scheme);

// A human label for a variant, e.g. "reference (Q4_1 dequantized to F32)", "Q4_K (RTN)".
std::string quant_label(const Model& source, const QuantScheme& scheme);

// Recomputes a variant's weight_bytes and tensor_types from its weights, and file_type as
// its linears' types, most frequent first ("I4_G64+I4_G128").
void recount_weights(Model& m);

// Makes the variant. `source` must stay alive as long as the result (the result keeps
// a reference to it for the embedding and output head).
Result<std::shared_ptr<Model>> quantize_model(std::shared_ptr<const Model> source, const QuantScheme& scheme,
                                              const QuantOptions& options = {});

}  // namespace kvs
