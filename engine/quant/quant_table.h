#pragma once
// The quantization comparison table: one row per scheme of one model (reference, INT8 RTN,
// LLM.int8(), NF4, FP4, INT4 RTN, GPTQ, GPTQ act-order, AWQ, Q4_K_M-style GGUF, Q8_0) with
// its size, quality against the reference and speed on the machine that measured it. What
// `kvscope eval --all` writes (--json, --csv), the GUI's table view shows and loads, and the
// "Which quantization fits?" chooser reads. This file is the format only; quant_table_run.h
// measures one.
//
// JSON (version 3), every key always present, null for a value not measured:
//   {"format": "kvscope-quant-table", "version": 3, "model": "<name>", "n_params": N,
//    "machine": "<cpu>",
//    "rows": [{"scheme": "int4-gptq", "label": "GPTQ", "bits_per_weight": 4.5,
//              "size_bytes": N, "ppl": x, "ppl_err": x, "ln_ppl_vs_ref": x,
//              "ln_ppl_vs_ref_err": x, "ln_ppl_vs_int4_rtn": x, "ln_ppl_vs_int4_rtn_err": x,
//              "mean_kl": x, "top1": 0.xx, "first_divergence": x, "prefill_tok_s": x,
//              "decode_tok_s": x,
//              "prefill_runs": 3, "prefill_sd": x, "prefill_min": x, "prefill_max": x,
//              "prefill_values": [x, x, x], "decode_runs": 3, "decode_sd": x, "decode_min": x,
//              "decode_max": x, "decode_values": [x, x, x], "note": ""}]}
// Fields of a row:
//   scheme            QuantScheme::name ("ref", "int8", "llm-int8", "nf4", "fp4", "int4-rtn",
//                     "int4-gptq", "int4-gptq-act", "int4-awq", "q4_k", "q8_0", ...)
//   label             the family's short name ("reference", "INT8 RTN", "GPTQ", ...)
//   bits_per_weight   stored bits per weight of the per-layer linears (scales included)
//   size_bytes        every weight tensor as stored (linears + embedding + output head)
//   ppl, ppl_err      perplexity on the evaluation text, ± its standard error
//   ln_ppl_vs_ref     ln(PPL / PPL of the reference) on the same scored tokens (eval.h
//                     VariantQuality::ln_ppl_ratio), ± the standard error of the per-token NLL
//                     differences (_err): 0 ± 0 for the reference row itself
//   ln_ppl_vs_int4_rtn  the same against the int4-rtn row (eval.h paired_difference of the two
//                     rows' per-token NLLs): 0 ± 0 for that row itself, null in every row when
//                     the table has no measured int4-rtn row. Paired, so far tighter than either
//                     row's ppl_err: |value| > 2 x _err is a real difference
//   mean_kl           mean KL(reference || scheme) of the next-token distributions, nats
//   top1              share of scored positions whose argmax equals the reference's, 0..1
//   first_divergence  mean over the fixed prompt set of the index of the first generated
//                     token where the scheme's greedy decode leaves the reference's; a
//                     prompt that never left counts as the number of tokens compared
//   prefill_tok_s     single-stream prompt processing, tokens/s
//   decode_tok_s      single-stream generation, tokens/s
//   prefill_runs ..   the timed runs behind prefill_tok_s (the mean of them): how many, their
//   prefill_values    sample standard deviation (0 for one run), min, max and each run's
//                     tokens/s in the order run; decode_* the same for decode_tok_s. All five
//                     null together (no speed measured). The CSV writes the values as one
//                     cell, separated by ';'.
//   note              why a row has no values (the scheme cannot apply to the model), or ""
// The reader accepts unknown keys (a later version may add some) and refuses a missing or
// mistyped known key, a negative count or size, and a top1 outside 0..1, naming the row and
// the field; of a spread it refuses runs < 1, a values list whose length is not runs, min >
// max and a spread given in part; of a paired value it refuses one without its error (or an
// error without its value), a negative error and a number too large to be finite. It reads
// versions 1 (written before the spreads: its rows have none) and 2 (before the paired values:
// its rows have none) too.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/status.h"

namespace kvs {

inline constexpr const char* kQuantTableFormat = "kvscope-quant-table";
inline constexpr int kQuantTableVersion = 3;

// The timed runs behind a mean speed (eval.h SpeedSample without its mean).
struct QuantTableSpread {
    int runs = 0;
    double sd = 0, min = 0, max = 0;  // tokens/s; sd: the sample standard deviation, 0 for one run
    std::vector<double> values;       // [runs] each run's tokens/s, in the order run
};

struct QuantTableRow {
    std::string scheme;
    std::string label;
    std::optional<double> bits_per_weight;
    std::optional<int64_t> size_bytes;
    std::optional<double> ppl, ppl_err;
    // ln(PPL / PPL_other) on the same tokens ± the paired standard error, against the reference
    // and against int4-rtn (none in version 1 / 2 files; vs int4-rtn none without that row)
    std::optional<double> ln_ppl_vs_ref, ln_ppl_vs_ref_err;
    std::optional<double> ln_ppl_vs_int4_rtn, ln_ppl_vs_int4_rtn_err;
    std::optional<double> mean_kl;
    std::optional<double> top1;  // 0..1
    std::optional<double> first_divergence;
    std::optional<double> prefill_tok_s, decode_tok_s;              // the means of the runs
    std::optional<QuantTableSpread> prefill_spread, decode_spread;  // their runs (none in version 1 files)
    std::string note;                                               // "" for a measured row

    bool measured() const { return ppl.has_value(); }
};

struct QuantTable {
    std::string model;  // the model's name or file
    std::optional<int64_t> n_params;
    std::string machine;  // the CPU (or GPU) that measured the speeds
    std::vector<QuantTableRow> rows;

    // The row of `scheme`, or nullptr.
    const QuantTableRow* find(const std::string& scheme) const;
};

// The schemes of the full table in the order, with their short labels:
// ref "reference", int8 "INT8 RTN", llm-int8 "LLM.int8()", nf4 "NF4", fp4 "FP4",
// int4-rtn "INT4 RTN", int4-gptq "GPTQ", int4-gptq-act "GPTQ act-order", int4-awq "AWQ",
// q4_k "Q4_K_M-style GGUF", q8_0 "Q8_0".
struct QuantTableScheme {
    const char* scheme;
    const char* label;
};
const std::vector<QuantTableScheme>& quant_table_schemes();
// The short label of a scheme of that list; otherwise the scheme name itself.
std::string quant_table_label(const std::string& scheme);

nlohmann::json quant_table_to_json(const QuantTable& t);
// `where` names the source in errors ("table.json").
Result<QuantTable> quant_table_from_json(const nlohmann::json& j, const std::string& where = "quant table");

// One header line (the JSON row keys, in the JSON's order) and a line per row; a null
// value is an empty cell; text cells with a comma, quote or line break are quoted.
std::string quant_table_csv(const QuantTable& t);

// Files: written whole (to a temporary name, then renamed); errors name the file.
Status write_quant_table_json(const QuantTable& t, const std::string& path);
Status write_quant_table_csv(const QuantTable& t, const std::string& path);
Result<QuantTable> read_quant_table(const std::string& path);

}  // namespace kvs
