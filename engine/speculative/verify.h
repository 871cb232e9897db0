#pragma once
// Verification of draft tokens against the target model's logits (Leviathan et al. 2023,
// Chen et al. 2023): accept draft x with probability min(1, p(x) / q(x)); at the first
// rejection draw from normalize(max(0, p - q)) and stop; when every draft is accepted draw
// a bonus token from the target's next distribution. The emitted tokens are then
// distributed exactly as plain sampling from p would give them. p is the distribution the
// request's own Sampler draws from (penalties, temperature, top-k/p, min-p), so greedy
// requests (temperature 0) accept a draft exactly when it is the target's argmax.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling/sampler.h"
#include "engine/speculative/spec_params.h"

namespace kvs {

struct DraftToken {
    int32_t token = 0;
    // The draft's distribution at this position (the one the token was drawn from); empty
    // for a deterministic proposer (prompt lookup, a greedy draft): q = one-hot(token).
    std::vector<TokenProb> q;
};

// The rule (AcceptRule, engine/speculative/spec_params.h): exact, the rule above, or
// accept_all, the deliberately wrong one the distribution tests use.

struct VerifyResult {
    std::vector<int32_t> tokens;  // accepted drafts, then the correction or the bonus token
    int n_accepted = 0;           // drafts kept (tokens.size() - 1)
    bool bonus = false;           // every draft was accepted and tokens.back() is the bonus
};

// logits: [drafts.size() + 1, n_vocab], row j = the target's logits after the request's
// tokens and the first j drafts (modified in place). history: the request's tokens so far
// (prompt + output), for the penalties.
VerifyResult verify_drafts(Sampler& sampler, float* logits, int n_vocab, std::span<const int32_t> history,
                           std::span<const DraftToken> drafts, AcceptRule rule = AcceptRule::exact);

}  // namespace kvs
