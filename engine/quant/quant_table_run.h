#pragma once
// Measuring the quantization comparison table (quant_table.h) for one loaded model: every
// scheme is made from the model, scored against the reference on the same chunks
// (compare_quality), greedy-decoded on the same prompts (first_greedy_divergence) and
// timed single-stream (measure_speed). What `kvscope eval --all` and the GUI's table run.
//
// The reference row is measured like every other row (the reference is also scored as a
// variant of itself), so its KL of 0, top-1 of 1 and full first-divergence count are
// measured values, not typed-in ones: they check that the evaluation is deterministic.
// Every measured row also gets ln(PPL / PPL of the reference) and ln(PPL / PPL of int4-rtn)
// paired on the same scored tokens (eval.h ln_ppl_ratio and paired_difference), so two rows
// can be told apart although each perplexity has a wide error bar.
// A scheme that cannot be made for the model (a row width its blocks do not divide, no
// calibration tokens) becomes a row with only scheme, label and a note saying why.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/quant/quant_table.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs {

struct QuantTableOptions {
    // QuantScheme spellings in row order; empty: quant_table_schemes(). "ref" is always
    // the first row whether named or not.
    std::vector<std::string> schemes;
    std::vector<int32_t> eval_tokens;           // the evaluation text, already cut to length
    int n_ctx = 512;                            // tokens per chunk (eval.h ChunkPlan)
    int32_t bos = -1;                           // >= 0: replaces each chunk's first token
    std::vector<int32_t> calibration_tokens;    // for AWQ and GPTQ; empty: those rows say so
    std::vector<std::vector<int32_t>> prompts;  // first greedy divergence; empty: no such column
    const Tokenizer* tokenizer = nullptr;       // the model's (needed with prompts: EOS ends a decode)
    int divergence_tokens = 64;
    bool speed = true;  // pp / tg runs; false: null speeds
    int n_prompt = 512, n_gen = 128, repeat = 1;
    RunnerOptions runner;  // backend and threads
    // Hears (what is being done, fraction of the whole run 0..1, monotone) at each step:
    // every scheme made (each of its layers; AWQ / GPTQ calibration and search too), every
    // chunk and model scored, the divergence pass, every speed run. Its cancel flag stops the
    // run at the next of those steps: an error Progress::is_cancelled recognizes, no table.
    Progress progress;
};

// The evaluation text of `kvscope eval` and the GUI's table: the GPL-3 every Debian system ships.
inline const char* default_evaluation_text_path() { return "/usr/share/common-licenses/GPL-3"; }
// The fixed prompt set of the first greedy divergence (raw text, no chat template).
const std::vector<std::string>& default_divergence_prompts();

// The table of `source` (its model name, n_params and machine filled in). Errors: an
// unknown scheme name, evaluation text shorter than one chunk, cancellation, a failure of
// the reference itself.
Result<QuantTable> measure_quant_table(const std::shared_ptr<const Model>& source, const QuantTableOptions& options);

// The CPU's model name from /proc/cpuinfo and the backend, e.g.
// "AMD EPYC 7B13 (cpu-avx2, 2 threads)".
std::string quant_table_machine(const std::string& backend, int n_threads);

}  // namespace kvs
