#include "engine/telemetry/spec_stats.h"

#include <algorithm>
#include <cmath>

namespace kvs {

const char* token_fate_name(TokenFate f) {
    switch (f) {
        case TokenFate::plain: return "plain";
        case TokenFate::accepted: return "accepted";
        case TokenFate::corrected: return "corrected";
        case TokenFate::bonus: return "bonus";
        case TokenFate::rejected: return "rejected";
        case TokenFate::discarded: return "discarded";
    }
    return "?";
}

void SpecStats::record(int n_drafted, int n_accepted, bool got_bonus) {
    const int n_eval = got_bonus ? n_drafted : n_accepted + 1;
    ++verify_steps;
    drafted += n_drafted;
    evaluated += n_eval;
    accepted += n_accepted;
    discarded += n_drafted - n_eval;
    bonus += got_bonus ? 1 : 0;
    emitted += n_accepted + 1;
    sum_k += n_drafted;
    if (static_cast<int>(pos_evaluated.size()) < n_drafted) {
        pos_evaluated.resize(static_cast<size_t>(n_drafted), 0);
        pos_accepted.resize(static_cast<size_t>(n_drafted), 0);
    }
    if (static_cast<int>(accepted_len_hist.size()) < n_drafted + 1)
        accepted_len_hist.resize(static_cast<size_t>(n_drafted) + 1, 0);
    for (int p = 0; p < n_eval; ++p) ++pos_evaluated[static_cast<size_t>(p)];
    for (int p = 0; p < n_accepted; ++p) ++pos_accepted[static_cast<size_t>(p)];
    ++accepted_len_hist[static_cast<size_t>(n_accepted)];
}

void SpecStats::add(const SpecStats& o) {
    verify_steps += o.verify_steps;
    drafted += o.drafted;
    evaluated += o.evaluated;
    accepted += o.accepted;
    discarded += o.discarded;
    bonus += o.bonus;
    emitted += o.emitted;
    sum_k += o.sum_k;
    auto add_vec = [](std::vector<int64_t>& a, const std::vector<int64_t>& b) {
        if (a.size() < b.size()) a.resize(b.size(), 0);
        for (size_t i = 0; i < b.size(); ++i) a[i] += b[i];
    };
    add_vec(pos_evaluated, o.pos_evaluated);
    add_vec(pos_accepted, o.pos_accepted);
    add_vec(accepted_len_hist, o.accepted_len_hist);
    draft_ms += o.draft_ms;
    verify_ms += o.verify_ms;
}

double theoretical_tokens_per_pass(double alpha, double k) {
    if (alpha >= 1.0) return k + 1.0;
    return (1.0 - std::pow(alpha, k + 1.0)) / (1.0 - alpha);
}

}  // namespace kvs
