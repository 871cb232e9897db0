#pragma once
// Per-request speculative decoding settings, and the engine-wide acceptance rule.
#include <string>

namespace kvs {

struct SpecParams {
    // "" (off), "ngram" (prompt lookup in the request's own tokens), or the name of a
    // draft model the engine was given (EngineOptions::drafts), e.g. "layer-skip:8".
    std::string proposer;
    int k = 4;              // draft tokens per step; the starting value when adaptive
    bool adaptive = false;  // grow k by one after a fully accepted draft, shrink it to
                            // (accepted + 1) after an early rejection, within [k_min, k_max]
    int k_min = 1, k_max = 8;
    int ngram_max = 4;  // prompt lookup: the longest suffix n-gram to look for
    int ngram_min = 2;  // ... and the shortest

    bool enabled() const { return !proposer.empty() && k > 0; }
};

// How verification accepts drafts (engine/speculative/verify.h, EngineOptions): exact
// rejection sampling (the output distributed exactly as without drafts), or accept_all, a
// deliberately wrong rule (every draft kept) that the distribution tests use to prove they
// can fail.
enum class AcceptRule { exact, accept_all };

}  // namespace kvs
