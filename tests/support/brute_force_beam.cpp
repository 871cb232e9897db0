#include "tests/support/brute_force_beam.h"

#include <QtGlobal>

#include <algorithm>
#include <cmath>

namespace kvs::test {

std::vector<BeamHypothesis> brute_force_beam(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt,
                                             int width, int n_tokens) {
    std::vector<BeamHypothesis> live = {{{}, 0.0}};
    for (int step = 0; step < n_tokens; ++step) {
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
            for (float x : logits) mx = std::max(mx, double(x));
            for (float x : logits) sum += std::exp(double(x) - mx);
            for (int t = 0; t < n_vocab; ++t)
                cands.push_back({live[rank].logprob + double(logits[size_t(t)]) - mx - std::log(sum), int(rank), t});
        }
        std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
            if (a.score != b.score) return a.score > b.score;
            return a.rank != b.rank ? a.rank < b.rank : a.token < b.token;
        });
        std::vector<BeamHypothesis> next;
        for (int i = 0; i < width; ++i) {
            BeamHypothesis h = live[size_t(cands[size_t(i)].rank)];
            h.tokens.push_back(cands[size_t(i)].token);
            h.logprob = cands[size_t(i)].score;
            next.push_back(h);
        }
        live = next;
    }
    return live;
}

}  // namespace kvs::test
