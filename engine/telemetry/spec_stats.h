#pragma once
// Speculative decoding telemetry. Plain structs; definitions chosen so the numbers mean
// one thing each:
//   drafted    draft tokens proposed and sent to the target for verification
//   evaluated  drafts the acceptance rule actually judged: every draft up to and
//              including the first rejection; the ones after it were never judged
//   accepted   judged and kept;  rejected = evaluated - accepted (at most one per step)
//   discarded  drafted after a rejection, thrown away unjudged
//   bonus      steps where every draft was accepted and the target added one more token
//   alpha      accepted / evaluated: the per-token acceptance probability the theory uses
//   theoretical tokens per target pass for k drafts: (1 - alpha^(k+1)) / (1 - alpha)
#include <cstdint>
#include <vector>

namespace kvs {

enum class TokenFate : uint8_t {
    plain,      // an ordinary decode (no drafts this step)
    accepted,   // a draft token the target kept
    corrected,  // the target's own token at the first rejected position
    bonus,      // the target's extra token after a fully accepted draft
    rejected,   // a draft token refused (not part of the output)
    discarded,  // a draft token after the rejection (not part of the output, never judged)
};
const char* token_fate_name(TokenFate f);

struct SpecTokenEvent {
    int32_t token = 0;
    TokenFate fate = TokenFate::plain;
    int draft_pos = 0;  // 1..k for draft tokens, 0 otherwise
    int64_t step = 0;   // engine step
};

struct SpecStats {
    int64_t verify_steps = 0;  // target passes that verified drafts
    int64_t drafted = 0, evaluated = 0, accepted = 0, discarded = 0, bonus = 0;
    int64_t emitted = 0;                     // tokens those passes produced (accepted + corrections + bonuses)
    int64_t sum_k = 0;                       // drafts asked for, summed over verify steps (mean k = sum_k / steps)
    std::vector<int64_t> pos_evaluated;      // [k_max] by draft position (index 0 = position 1)
    std::vector<int64_t> pos_accepted;       // [k_max]
    std::vector<int64_t> accepted_len_hist;  // [k_max + 1] verify steps by number of accepted drafts
    double draft_ms = 0;                     // proposing (draft model passes, n-gram lookups)
    double verify_ms = 0;                    // target passes that carried drafts (their whole forward)

    int64_t rejected() const { return evaluated - accepted; }
    double alpha() const { return evaluated ? double(accepted) / double(evaluated) : 0.0; }
    double mean_accepted() const { return verify_steps ? double(accepted) / double(verify_steps) : 0.0; }
    double tokens_per_pass() const { return verify_steps ? double(emitted) / double(verify_steps) : 0.0; }
    double mean_k() const { return verify_steps ? double(sum_k) / double(verify_steps) : 0.0; }
    // Records one verification of n_drafted drafts of which the first n_accepted were kept.
    void record(int n_drafted, int n_accepted, bool got_bonus);
    void add(const SpecStats& o);
};

// (1 - alpha^(k+1)) / (1 - alpha): expected tokens per target pass with k drafts when
// each is accepted independently with probability alpha (k + 1 at alpha = 1).
double theoretical_tokens_per_pass(double alpha, double k);

}  // namespace kvs
