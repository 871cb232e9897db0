#pragma once
// kvscope eval --all: the quantization comparison table of the loaded model (one row per
// scheme of engine/quant/quant_table.h's list, measured by quant_table_run.h) printed as a
// Markdown table, and written with --json (the "kvscope-quant-table" format) and --csv.
#include <cstdint>
#include <vector>

#include "app/cli/commands.h"

namespace kvs::app {

// What cmd_eval has read and tokenized before the table runs.
struct EvalTableInputs {
    std::vector<int32_t> tokens;  // the evaluation text, cut to --max-tokens
    size_t n_text_tokens = 0;     // the whole text's tokens
    std::vector<std::vector<int32_t>> prompt_ids;
    std::vector<int32_t> calibration_tokens;
};

int run_eval_table(const EvalCommandOptions& o, const Session& session, const EvalTableInputs& in);

}  // namespace kvs::app
