#pragma once
// A reference model and a quantized variant generating from the same prompt, one token
// at a time each, on one shared backend (two SequenceRunners stepping alternately), with
// a per-token event: both tokens and text pieces, KL(ref || variant) of the full
// next-token distributions at this position, whether the argmaxes agree, and whether the
// two have diverged yet. What the GUI's quantization compare view streams.
//
// After the first divergence the variant is, by default, teacher-forced: it is fed the
// reference's tokens, so each later event still compares the two models on the same
// context and the KL stays meaningful; its "variant token" is then what the variant
// would pick at that position of the reference's text. With teacher_forced = false each
// model continues its own text (KL after the divergence compares different contexts).
//
// Sampling: both sides get their own Sampler with the same parameters (same seed), so a
// fixed seed is reproducible; temperature 0 is greedy. KL and top-1 are computed on the raw
// logits (temperature 1, before penalties), not on the sampling distribution.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/model/model.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampling_params.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs {

struct SideBySideOptions {
    SamplingParams sampling;     // max_tokens: steps (-1: until the reference ends or the context is full)
    bool teacher_forced = true;  // after the first divergence, feed the variant the reference's tokens
    // Its cancel flag, set from any thread, stops the run before the next step (stop_reason
    // "cancelled"); with max_tokens > 0 it hears each step's share of them.
    Progress progress;
};

struct SideBySideEvent {
    int index = 0;  // generated position, 0-based
    int32_t ref_token = -1;
    int32_t variant_token = -1;  // the variant's pick at this position
    std::string ref_piece;       // text that became safe to show (TextStream of each side's picks)
    std::string variant_piece;
    double kl = 0;                // KL(ref || variant) in nats at this position
    bool top1_agree = false;      // the two argmaxes are the same token
    bool diverged = false;        // the picks differ here or at an earlier position
    bool teacher_forced = false;  // the variant's context here holds reference tokens it did not pick
    // Wall time of the forward pass that produced this position's logits, per side (index 0:
    // the prompt's pass), in ms: what a view's tokens/s of each model come from.
    double ref_ms = 0, variant_ms = 0;
};

struct SideBySideSummary {
    int n_steps = 0;
    int first_divergence = -1;  // index of the first differing pick; -1: none
    int n_top1_agree = 0;
    double mean_kl = 0, max_kl = 0;
    std::vector<int32_t> ref_tokens, variant_tokens;  // the picks, [n_steps] each
    std::string ref_text, variant_text;
    std::string stop_reason;  // "max tokens", "eos", "eos (variant)", "stop string", "context full", "cancelled"
};

// Return false to stop.
using SideBySideCallback = std::function<bool(const SideBySideEvent&)>;

class SideBySide {
public:
    // Both models must have the same vocabulary size. shared_backend: run on this backend
    // (not at the same time as its other users); null: make one from runner.backend.
    static Result<std::unique_ptr<SideBySide>> create(std::shared_ptr<const Model> reference,
                                                      std::shared_ptr<const Model> variant, const RunnerOptions& runner,
                                                      std::shared_ptr<Backend> shared_backend = nullptr);

    // Generates from `prompt` (token ids) with both models; the sequences start empty on
    // every call. Events go to on_event (may be empty) on the calling thread.
    Result<SideBySideSummary> run(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                  const SideBySideOptions& opt, const SideBySideCallback& on_event);

    Backend& backend() { return m_ref->backend(); }

private:
    SideBySide() = default;
    std::unique_ptr<SequenceRunner> m_ref, m_var;
};

}  // namespace kvs
