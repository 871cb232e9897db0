#include "engine/speculative/verify.h"

#include <algorithm>
#include <unordered_map>

namespace kvs {

namespace {

float prob_of(std::span<const TokenProb> dist, int32_t token) {
    for (const auto& t : dist)
        if (t.id == token) return t.p;
    return 0.0f;
}

// normalize(max(0, p - q)) as unnormalized weights (draw_from normalizes).
std::vector<TokenProb> residual(std::span<const TokenProb> p, const DraftToken& d) {
    std::unordered_map<int32_t, float> q;
    if (d.q.empty()) q[d.token] = 1.0f;
    for (const auto& t : d.q) q[t.id] = t.p;
    std::vector<TokenProb> r;
    r.reserve(p.size());
    for (const auto& t : p) {
        auto it = q.find(t.id);
        const float w = t.p - (it == q.end() ? 0.0f : it->second);
        if (w > 0) r.push_back({t.id, w});
    }
    return r;
}

}  // namespace

VerifyResult verify_drafts(Sampler& sampler, float* logits, int n_vocab, std::span<const int32_t> history,
                           std::span<const DraftToken> drafts, AcceptRule rule) {
    VerifyResult res;
    std::vector<int32_t> hist(history.begin(), history.end());
    const bool greedy = sampler.params().temperature <= 0.0f;
    for (size_t j = 0; j <= drafts.size(); ++j) {
        float* row = logits + j * static_cast<size_t>(n_vocab);
        if (j == drafts.size()) {  // every draft accepted: the bonus token
            res.tokens.push_back(sampler.sample(row, n_vocab, hist));
            res.bonus = true;
            break;
        }
        const DraftToken& d = drafts[j];
        bool accept = false;
        int32_t instead = -1;
        if (greedy) {
            instead = sampler.sample(row, n_vocab, hist);
            accept = instead == d.token || rule == AcceptRule::accept_all;
        } else {
            const std::vector<TokenProb> p = sampler.probabilities(row, n_vocab, hist);
            const float px = prob_of(p, d.token);
            const float qx = d.q.empty() ? 1.0f : prob_of(d.q, d.token);
            accept = rule == AcceptRule::accept_all || (qx > 0 && sampler.uniform() * qx < px);
            if (!accept) {
                const auto r = residual(p, d);
                instead = r.empty() ? sampler.draw_from(p) : sampler.draw_from(r);
            }
        }
        if (!accept) {
            res.tokens.push_back(instead);
            break;
        }
        res.tokens.push_back(d.token);
        hist.push_back(d.token);
        ++res.n_accepted;
    }
    return res;
}

}  // namespace kvs
