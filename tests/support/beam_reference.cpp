#include "tests/support/beam_reference.h"

#include <QtGlobal>

#include <algorithm>
#include <cmath>

namespace kvs::test {

namespace {
void add_done(std::vector<BeamHypothesis>& done, const BeamHypothesis& h, int width) {
    if (static_cast<int>(done.size()) < width || h.score > done.back().score) {
        done.push_back(h);
        std::stable_sort(done.begin(), done.end(),
                         [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; });
        if (static_cast<int>(done.size()) > width) done.pop_back();
    }
}
}  // namespace

std::vector<BeamHypothesis> beam_reference(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt,
                                           const BeamReferenceParams& p) {
    struct Beam {
        std::vector<int32_t> tokens;
        double sum = 0;
    };
    std::vector<Beam> live = {{}};
    std::vector<BeamHypothesis> done;
    for (int cur = 1; cur <= p.max_tokens; ++cur) {
        struct Cand {
            double score;
            int rank;
            int32_t token;
        };
        std::vector<Cand> cands;
        for (size_t rank = 0; rank < live.size(); ++rank) {
            std::vector<int32_t> seq = prompt;
            seq.insert(seq.end(), live[rank].tokens.begin(), live[rank].tokens.end());
            std::vector<float> logits;
            runner.clear();
            if (!runner.eval(seq, false, &logits)) qFatal("eval failed");
            double mx = -INFINITY, sum = 0;
            for (int t = 0; t < n_vocab; ++t) mx = std::max(mx, double(logits[size_t(t)]));
            for (int t = 0; t < n_vocab; ++t) sum += std::exp(double(logits[size_t(t)]) - mx);
            const bool hold = static_cast<int>(live[rank].tokens.size()) < p.min_new_tokens;
            for (int t = 0; t < n_vocab; ++t) {
                if (hold && p.eog.count(t)) continue;
                cands.push_back({live[rank].sum + double(logits[size_t(t)]) - mx - std::log(sum), int(rank), t});
            }
        }
        std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
            if (a.score != b.score) return a.score > b.score;
            return a.rank != b.rank ? a.rank < b.rank : a.token < b.token;
        });
        cands.resize(std::min(cands.size(), size_t(std::max<size_t>(2, 1 + p.eog.size()) * size_t(p.width))));
        std::vector<Beam> next;
        for (size_t i = 0; i < cands.size() && static_cast<int>(next.size()) < p.width; ++i) {
            const Cand& c = cands[i];
            const Beam& parent = live[size_t(c.rank)];
            if (p.eog.count(c.token)) {
                if (static_cast<int>(i) < p.width)
                    add_done(done, {parent.tokens, c.score, c.score / std::pow(double(cur), double(p.length_penalty))},
                             p.width);
                continue;
            }
            Beam b = parent;
            b.tokens.push_back(c.token);
            b.sum = c.score;
            next.push_back(b);
        }
        if (static_cast<int>(done.size()) >= p.width &&
            done.back().score >= cands.front().score / std::pow(double(cur), double(p.length_penalty)))
            return done;
        live = next;
        if (live.empty()) return done;
    }
    for (const Beam& b : live)
        add_done(done, {b.tokens, b.sum, b.sum / std::pow(double(b.tokens.size()), double(p.length_penalty))}, p.width);
    return done;
}

}  // namespace kvs::test
