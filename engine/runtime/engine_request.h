#pragma once
// Inside the Engine: what it keeps per request beside the scheduler's record
// (Engine::Req), per beam-search request (Engine::BeamGroup), and what one step's
// sampling produced (Engine::StepTokens). Shared by the Engine's own files only:
// engine.cpp (the step), engine_beam.cpp (beam search), engine_spec.cpp (speculative
// decoding). Callers include engine/runtime/engine.h.
#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/llama_forward.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/text_stream.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/draft_runner.h"
#include "engine/speculative/verify.h"
#include "engine/telemetry/snapshot_ring.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

namespace kvs {

using EngineClock = std::chrono::steady_clock;
inline double ms_between(EngineClock::time_point a, EngineClock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// What the engine keeps beside the scheduler's record of a request.
struct Engine::Req {
    RequestId id = 0;
    SamplingParams params;
    Sampler sampler;
    TextStream text;
    TokenCallback on_event;
    std::vector<int32_t> history;                // prompt + output, for the penalties
    std::shared_ptr<BeamGroup> beam;             // set for every beam of a beam-search request
    std::shared_ptr<const LoraAdapter> adapter;  // null: the base model
    std::string client;                          // GenerationRequest::client
    RequestMetrics metrics;
    int n_green = 0;  // watermarked: output tokens in their green list (RequestView::n_green)
    // SamplingParams::prompt_logprobs: [n_prompt - 1] as the prompt's chunks run, handed to the
    // first token's event (TokenEvent::prompt_logprobs).
    std::vector<TokenLogprobs> prompt_lps;
    bool prompt_lps_sent = false;
    // Speculative decoding.
    SpecParams spec;
    int spec_k = 0;                  // drafts to ask for next (adaptive k moves it)
    DraftRunner* runner = nullptr;   // the draft model, null for prompt lookup
    std::vector<DraftToken> drafts;  // proposed for this step
    SpecStats spec_stats;
    std::deque<SpecTokenEvent> fates;  // the last kMaxFates token fates
    static constexpr size_t kMaxFates = 4096;
    // Parallel sampling (GenerationRequest::choices): on the request that computes the
    // prompt, the choices still to fork and what they run with; on a choice, that it waits.
    std::vector<RequestId> forks;
    int max_tokens = 0;
    int priority = 0;
    bool awaiting_fork = false;
    void add_fate(SpecTokenEvent e) {
        fates.push_back(e);
        if (fates.size() > kMaxFates) fates.pop_front();
    }
    // KV eviction (engine_eviction.cpp): the request's cache entries and its policy; null: none.
    std::unique_ptr<KvEvictionState> evict;
    std::unique_ptr<KvEvictionPolicyImpl> evict_policy;
    std::vector<int32_t> forced;  // GenerationRequest::forced_output
    Req(RequestId id_, const SamplingParams& p, const Tokenizer* tok, TokenCallback cb, std::vector<int32_t> prompt)
        : id(id_), params(p), sampler(p), text(tok, p), on_event(std::move(cb)), history(std::move(prompt)) {}
};

// A beam-search request: its live beams (each a request forked from another) and the
// hypotheses that ended. Beams advance together: once every live beam has its next-token
// log-probabilities for this position, the best `width` extensions are kept.
struct Engine::BeamGroup {
    RequestId root = 0;
    int width = 1;
    int max_tokens = 0;
    bool ignore_eos = false;
    float length_penalty = 1.0f;                  // a finished hypothesis scores logprob / length^length_penalty
    int min_new_tokens = 0;                       // no end-of-generation before this many tokens
    std::vector<RequestId> live;                  // rank order (best first)
    std::unordered_map<RequestId, double> score;  // sum of log-probs of a live beam
    // This position's best max(2, 1 + n_eog) x `width` (log-prob, token) of each live beam that has run.
    std::unordered_map<RequestId, std::vector<std::pair<double, int32_t>>> pending;
    std::vector<BeamHypothesis> done;  // at most `width`, the best by score
    bool finished = false;
    FinishReason reason = FinishReason::length;
    // Hugging Face's BeamHypotheses.add: keeps the best `width` by score, best first (an
    // equal score goes after those already there).
    void add_done(BeamHypothesis h) {
        auto at = std::upper_bound(done.begin(), done.end(), h.score,
                                   [](double s, const BeamHypothesis& d) { return s > d.score; });
        done.insert(at, std::move(h));
        if (static_cast<int>(done.size()) > width) done.pop_back();
    }
};

// One step's sampling, per chunk of the schedule (index = chunk).
struct Engine::StepTokens {
    std::vector<int> first_logit;                       // its first logit row, -1 when it does not sample
    std::vector<int> prompt_row;                        // its first prompt-logprob row, -1 when none
    std::vector<std::vector<int32_t>> emitted;          // tokens it produced (cut at a stop after sampling)
    std::vector<std::optional<VerifyResult>> verified;  // its drafts' verification, when it had drafts
    std::vector<std::vector<TokenEvent>> events;        // what it streams
    std::vector<BeamGroup*> groups;                     // beam groups with a beam in this step
    std::vector<std::vector<TokenLogprobs>> logprobs;   // per emitted token, when the request asks for them
};

// Buffers every step reuses.
struct Engine::StepBuffers {
    ForwardBatch batch;
    std::vector<float> logits;        // [logit rows, n_vocab]
    std::vector<float> raw;           // [rows of one chunk, n_vocab] its logits before any sampler edit
    std::vector<float> scratch;       // [n_vocab] a forked choice's copy of the first row
    std::vector<int> evict_mass_row;  // [chunks] the chunk's attention-mass row, -1: none (KV eviction)
};

}  // namespace kvs
