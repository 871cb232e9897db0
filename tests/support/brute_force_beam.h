#pragma once
// Beam search by brute force, the independent reference the engine's beam search is
// checked against: every position recomputes each beam from scratch with the given runner
// and ranks every vocabulary token; ties go to the better-ranked parent, then the lower id.
#include <cstdint>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"

namespace kvs::test {

std::vector<BeamHypothesis> brute_force_beam(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt,
                                             int width, int n_tokens);

}  // namespace kvs::test
