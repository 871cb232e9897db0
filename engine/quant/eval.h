#pragma once
// How much a quantized variant loses against its reference: perplexity, KL divergence of
// the next-token distributions, top-1 agreement, first greedy divergence, memory and
// speed. What `kvscope eval` prints and the GUI's quantization view shows.
//
// Chunking, as llama.cpp's perplexity tool does it (tools/perplexity/perplexity.cpp):
//   the tokens are cut into n_chunks = n_tokens / n_ctx whole chunks (a shorter tail is
//   dropped); every chunk is run from an empty KV cache, its first token replaced by BOS
//   when the vocabulary adds one; only the second half of a chunk is scored: with
//   first = n_ctx / 2, the logits at chunk positions first .. n_ctx-2 predict the tokens
//   at first+1 .. n_ctx-1, i.e. n_ctx - 1 - first scored tokens per chunk. Every
//   scored token has at least n_ctx / 2 tokens of context.
// Statistics, also as llama.cpp reports them: PPL = exp(mean NLL) ± PPL * stderr(NLL);
// KL(ref || variant) per scored token over the whole vocabulary (in double), its mean ±
// stderr and percentiles (numpy "linear", engine/telemetry/latency_stats.h); top-1 agreement
// = the two argmaxes (lowest id on ties) are equal; ΔPPL's error uses the covariance of the
// two models' per-token NLL.
// The reference's logits live one chunk at a time (n_vocab x n_ctx/2 floats), never all
// at once; every variant is scored against them before the next chunk runs.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs {

// Which tokens a chunked evaluation runs and scores.
struct ChunkPlan {
    int n_ctx = 0;     // tokens per chunk
    int n_chunks = 0;  // whole chunks in the sequence
    int first = 0;     // n_ctx / 2: the first logit row scored in a chunk
    int n_scored_per_chunk() const { return n_ctx - 1 - first; }
    int64_t n_scored() const { return int64_t(n_chunks) * n_scored_per_chunk(); }
};
// Errors when n_ctx < 3 (nothing to score) or the sequence is shorter than one chunk.
Result<ChunkPlan> plan_chunks(int64_t n_tokens, int n_ctx);
// Indices (into the token sequence) of the scored tokens, ascending.
std::vector<int64_t> scored_targets(const ChunkPlan& plan);

struct PerplexityResult {
    double ppl = 0, ppl_err = 0;       // exp(mean NLL), ± ppl * stderr(NLL)
    double mean_nll = 0, nll_err = 0;  // nats per token
    int64_t n_scored = 0;
    int n_chunks = 0, n_ctx = 0;
};

struct KlStats {
    int64_t n = 0;
    double mean = 0, mean_err = 0;
    double median = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
    double top1_pct = 0, top1_err_pct = 0;  // same argmax, % of scored positions
};

struct VariantQuality {
    PerplexityResult ppl;                           // the variant's own perplexity on the same chunks
    KlStats kl;                                     // KL(reference || variant)
    double delta_ppl = 0, delta_ppl_err = 0;        // PPL(variant) - PPL(reference)
    double ln_ppl_ratio = 0, ln_ppl_ratio_err = 0;  // mean NLL(variant) - mean NLL(reference)
    std::vector<double> token_nll;                  // [n_scored] each scored token's NLL, in scored_targets order
};

struct QualityReport {
    ChunkPlan plan;
    PerplexityResult reference;
    std::vector<VariantQuality> variants;  // in the order given
};

// mean(a_i - b_i) and its standard error over paired per-token values (two variants'
// token_nll: ln(PPL_a / PPL_b), with the error of the difference rather than of each side,
// so two variants' perplexities can be told apart although each has a wide error bar).
struct PairedDifference {
    double mean = 0, err = 0;
    int64_t n = 0;
};
// Errors when the sizes differ or are empty.
Result<PairedDifference> paired_difference(const std::vector<double>& a, const std::vector<double>& b);

struct EvalOptions {
    int n_ctx = 512;
    int32_t bos = -1;      // >= 0: replaces the first token of every chunk (when the vocabulary adds BOS)
    RunnerOptions runner;  // backend and threads; n_ctx and n_batch are set by the evaluator
    // One step per chunk (the reference, then each variant); cancelled: the evaluation
    // returns Progress::cancelled_status before the next model runs a chunk.
    Progress progress;
};

// Perplexity of one model over `tokens`.
Result<PerplexityResult> perplexity(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens,
                                    const EvalOptions& opt);
// The reference's perplexity and every variant's quality against it, all on one shared
// backend, chunk by chunk. The variants must share the reference's vocabulary size.
Result<QualityReport> compare_quality(std::shared_ptr<const Model> reference,
                                      const std::vector<std::shared_ptr<const Model>>& variants,
                                      const std::vector<int32_t>& tokens, const EvalOptions& opt);

// ---- distribution math on rows of logits (shared with side_by_side) ----
// log(sum_i exp(logits[i])), in double, stable.
double log_sum_exp(const float* logits /*[n]*/, int n);
// KL(softmax(ref) || softmax(var)) in nats, in double.
double kl_divergence(const float* ref_logits /*[n]*/, const float* var_logits /*[n]*/, int n);

// ---- first greedy divergence ----
struct DivergenceResult {
    int first = -1;      // index of the first generated token where the two differ; -1: none
    int n_compared = 0;  // generated positions compared (< n_tokens when the reference ended)
};
// Greedy-decodes n_tokens with the reference from each prompt (token ids), then runs each
// variant over the reference's text in one pass: up to the first divergence a variant's
// own greedy decode sees exactly that text, so the first position where its argmax
// differs from the reference's token is where the two greedy decodes part (the variant's
// logits come from a batched pass, not token by token: equal up to float rounding).
// Result: [n_variants][n_prompts]. Everything runs on one shared backend. `progress` hears
// one step per prompt (the reference's decode, then each variant); cancelled: it returns
// Progress::cancelled_status before the next decode or variant pass.
Result<std::vector<std::vector<DivergenceResult>>> first_greedy_divergence(
    std::shared_ptr<const Model> reference, const std::vector<std::shared_ptr<const Model>>& variants,
    const Tokenizer& tok, const std::vector<std::vector<int32_t>>& prompts, int n_tokens, const RunnerOptions& runner,
    const Progress& progress = {});

// ---- memory and speed ----
struct MemoryInfo {
    int64_t weight_bytes = 0;           // Model::weight_bytes (linears + embedding + head as stored)
    int64_t kv_bytes_per_token = 0;     // F16 K and V of every layer
    double linear_bits_per_weight = 0;  // the per-layer linears only (what a scheme changes)
};
MemoryInfo memory_info(const Model& m);

struct SpeedSample {
    double mean = 0, sd = 0, min = 0, max = 0;  // tokens/s; sd is 0 for one run
    std::vector<double> values;
};
struct SpeedOptions {
    int n_prompt = 512;  // pp: one prompt of this many tokens, one forward pass
    int n_gen = 128;     // tg: this many single-token steps from an empty context
    int repeat = 1;
    RunnerOptions runner;
    // One step per timed run (pp, then tg), heard as "<stage>: pp512" etc.; cancelled:
    // measure_speed returns Progress::cancelled_status before the next run (never inside one).
    Progress progress;
    std::string stage = "speed";
};
struct SpeedResult {
    int n_prompt = 0, n_gen = 0;
    SpeedSample pp, tg;
    std::string backend;
    int n_threads = 0;
};
// Single-stream pp and tg via SequenceRunner, after one short warm-up. `tokens` feeds
// both (repeated when shorter than needed).
Result<SpeedResult> measure_speed(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens,
                                  const SpeedOptions& opt);

}  // namespace kvs
