#pragma once
// "Which quantization fits?": for a model (the loaded one, an installed one, a preset with
// published numbers, or just its parameter count and attention shape), a device (RAM or
// VRAM, CPU or GPU) and a goal (quality first, edge CPU, throughput), every scheme's weight
// size, the room it leaves for KV at a chosen context and batch, whether it fits, and a
// ranking with its reasons. What `kvscope quant-fit` prints and the window's "Which
// quantization fits?" dialog shows.
//
// Sizes, each from its one definition in the engine:
//   weights    every per-layer linear [n_out, n_in] at the type the scheme gives it
//              (quant_linear_type, engine/quant/quantize.h: INT4 rows 128 does not divide
//              take groups of 64; a GGML block that does not divide a row: the scheme does
//              not apply), row_bytes (kernels/dtype.h) per row; the embedding and output
//              head as the source stores them (quantize_model keeps them), F16 for a shape
//              typed in (a Hugging Face checkpoint's). With a parameter count only, every
//              parameter at the scheme's bits per weight (marked as an estimate).
//   KV         Session::kv_bytes_per_token (2 x layers x one token's K row in the cache type)
//              x whole blocks of EngineOptions' block size per sequence x batch, the way
//              the engine allocates it (and the memory planner draws it).
//   usable     the device memory x usable_fraction: 0.9 by default, the engine's own budget
//              (check_kv_cache_fits allows 90% of RAM) and vLLM's gpu_memory_utilization
//              default; the default device is this machine's available RAM
//              (MemAvailable), the rest being what other programs hold.
//   room       usable - weights: what is left for KV (and the engine's scratch, which this
//              does not count); fits: the KV of `batch` sequences of `context` fits in it.
//
// Quality, per scheme, from (in this order):
//   anchors    published perplexities for the preset's model: the AWQ paper (Lin et al.
//              2023, arXiv 2306.00978, Table 4: WikiText-2, INT4 g128) for Llama-2-7B / 13B
//              / 70B and LLaMA-7B / 13B / 30B / 65B: FP16, RTN, GPTQ, GPTQ with reordering
//              (act-order), AWQ;
//   measured   a comparison table (`kvscope eval --all --json`, format kvscope-quant-table)
//              of this model, or of a small model standing in for a large one (then only
//              the ratio to its reference is used, and the row says so);
//   none       ranked by bits per weight below every row with a number.
// The quality number is the perplexity increase over the reference, in percent.
//
// Goals (only rows that fit are ranked; the others follow, unranked, with the reason):
//   quality     the least perplexity increase (more bits first where none is known);
//   edge-cpu    a CPU with little memory: within 10% of the reference's perplexity, fastest
//               decode first (measured tok/s; else the fewest weight bytes, since decode
//               reads every weight once per token), then the rest the same way;
//   throughput  the most concurrent sequences of `context` tokens in the KV room, within 5%
//               of the reference's perplexity; ties: the better quality.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "kernels/dtype.h"

namespace kvs {

// One published perplexity of a model under a scheme.
struct FitAnchor {
    std::string scheme;  // QuantScheme name: "f16", "int4-rtn", "int4-gptq", "int4-gptq-act", "int4-awq"
    double ppl = 0;
    std::string source;  // "AWQ paper (arXiv 2306.00978) Table 4, WikiText-2, INT4 g128"
};

// A model as the chooser sees it.
struct FitModel {
    std::string name;
    int n_layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
    int64_t n_embd = 0, n_ff = 0, n_vocab = 0;  // 0: unknown
    bool tied_embeddings = false;
    int n_ctx_train = 0;   // 0: unknown
    int64_t n_params = 0;  // every weight
    // Per-layer linears (rows n_out of n_in each, `count` of them in the whole model); empty:
    // every parameter at the scheme's bits (an estimate).
    struct Linears {
        int64_t n_out = 0, n_in = 0, count = 0;
    };
    std::vector<Linears> linears;
    int64_t kept_bytes = 0;  // what no scheme changes: embedding, output head, norms as stored
    std::string stored_as;   // the loaded file's weight type ("Q4_1"), "" for a shape
    std::vector<FitAnchor> anchors;
};

// The loaded model's shape, linears and kept bytes.
FitModel fit_model_of(const Model& m);
// A Llama-family shape typed in (embedding and head in F16, as a Hugging Face checkpoint
// stores them). Errors name the field: a count below 1, heads that kv_heads does not
// divide, n_embd not heads x head_dim.
Result<FitModel> fit_model_of_shape(const std::string& name, int n_layer, int64_t n_embd, int n_head, int n_kv_head,
                                    int64_t n_ff, int64_t n_vocab, bool tied, int n_ctx_train);
// Only a parameter count and the KV shape: weights estimated at the scheme's bits.
Result<FitModel> fit_model_of_params(const std::string& name, int64_t n_params, int n_layer, int n_kv_head,
                                     int head_dim);
// Presets with published anchors (Llama-2-7B, Llama-2-13B, Llama-2-70B, LLaMA-7B, LLaMA-13B,
// LLaMA-30B, LLaMA-65B); names compare without case.
std::vector<std::string> fit_preset_names();
Result<FitModel> fit_preset(const std::string& name);

enum class FitDeviceKind { Cpu, Gpu };
struct FitDevice {
    FitDeviceKind kind = FitDeviceKind::Cpu;
    int64_t memory_bytes = 0;
    double usable_fraction = 0.9;
    std::string described;  // "8.0 GiB of GPU memory", "11.2 GiB available RAM (MemAvailable)"
};
// This machine's available RAM (MemAvailable of /proc/meminfo), 0 when unknown.
int64_t available_ram_bytes();

enum class FitGoal { Quality, EdgeCpu, Throughput };
// "quality", "edge-cpu" (or "edge"), "throughput"; an error naming the accepted words.
Result<FitGoal> parse_fit_goal(const std::string& text);
std::string fit_goal_name(FitGoal g);

// One measured row of a comparison table (kvscope-quant-table), as the chooser uses it.
struct FitMeasurement {
    std::string scheme;
    std::optional<double> ppl, ppl_err, mean_kl, top1, prefill_tok_s, decode_tok_s;
};
struct FitMeasurements {
    std::string model;  // the model the table measured
    std::string machine;
    std::vector<FitMeasurement> rows;
};

struct FitRequest {
    FitModel model;
    FitDevice device;
    FitGoal goal = FitGoal::Quality;
    int64_t context = 4096;  // tokens per sequence
    int64_t batch = 1;       // sequences
    DType kv_type = DType::F16;
    int block_size = 0;  // 0: the engine's default (EngineOptions)
    std::optional<FitMeasurements> table;
    std::vector<std::string> schemes;  // empty: fit_default_schemes()
};

// f16, q8_0, int8, llm-int8, nf4, fp4, int4-rtn, int4-gptq, int4-gptq-act, int4-awq, q4_k, q4_0.
std::vector<std::string> fit_default_schemes();

struct FitRow {
    std::string scheme, label;
    bool applies = true;         // false: the scheme cannot encode this model (note says why)
    double bits_per_weight = 0;  // the linears, as stored
    int64_t weight_bytes = 0;
    bool weights_estimated = false;          // a parameter count only
    int64_t kv_bytes = 0;                    // batch x whole blocks of context
    int64_t room_bytes = 0;                  // usable - weights (negative: the weights alone do not fit)
    bool fits = false;                       // weights + kv_bytes <= usable
    int64_t max_context = 0;                 // tokens per sequence for `batch` sequences in the room (whole blocks)
    int64_t max_batch = 0;                   // sequences of `context` tokens in the room
    std::optional<double> ppl;               // the source's number: anchor or measured perplexity
    std::optional<double> ppl_increase_pct;  // over the reference, %
    std::string quality_source;              // where ppl_increase_pct comes from, or "no measurement"
    std::optional<double> decode_tok_s, prefill_tok_s;  // measured (table), this table's machine
    int rank = 0;                                       // 1 = best for the goal; 0 = not ranked (does not fit)
    std::string why;                                    // the rank's reason, or why it does not fit / apply
};

struct FitResult {
    int64_t usable_bytes = 0;
    int64_t kv_bytes_per_token = 0;
    int block_size = 0;
    std::vector<FitRow> rows;        // ranked rows first (rank 1, 2, ...), then the rest
    std::vector<std::string> notes;  // what the numbers assume, where they come from
};

// Errors name the input: no model shape, context or batch below 1, device memory not
// positive, a usable fraction outside (0, 1], an unknown scheme, a context past the model's
// trained one.
Result<FitResult> quant_fit(const FitRequest& request);

}  // namespace kvs
