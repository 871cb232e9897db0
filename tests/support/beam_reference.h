#pragma once
// Hugging Face's beam search (BeamSearchScorer with early_stopping=False), written plainly
// as the reference for the engine's: every step recomputes each live beam from scratch with
// the runner (no KV reuse, no forks); log_softmax in double; end-of-generation ids dropped
// while a beam has fewer than min_new_tokens tokens; the best max(2, 1 + n_eog) x width
// candidates (ties: better parent, then lower id); an end-of-generation candidate among the first `width`
// ends a hypothesis scored sum / (tokens + 1)^length_penalty, the first `width` others
// continue; done when `width` hypotheses ended and the worst beats the best candidate's sum
// / current length^length_penalty; at max_tokens the live beams end too (score sum /
// tokens^length_penalty). Returns the best `width` hypotheses, best first.
#include <cstdint>
#include <set>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"

namespace kvs::test {

struct BeamReferenceParams {
    int width = 2;
    int max_tokens = 8;
    float length_penalty = 1.0f;
    int min_new_tokens = 0;
    std::set<int32_t> eog;  // end-of-generation ids
};

std::vector<BeamHypothesis> beam_reference(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt,
                                           const BeamReferenceParams& p);

}  // namespace kvs::test
