#pragma once
// Greedy decoding of one prompt alone through a SequenceRunner: prefill, then one token
// at a time, each the lowest id among the largest logits. The independent path that
// batched, INT8-cache and speculative runs are compared with, token for token.
#include <cstdint>
#include <vector>

#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampling_params.h"

namespace kvs::test {

// n tokens after prompt on a fresh runner (its cache must be empty); fails the test
// process (qFatal) when the runner does.
std::vector<int32_t> greedy_alone(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt, int n);
// The same with the engine's Sampler on `params` (its own seed; history = prompt + output):
// the path sampled, seeded and watermarked batched runs are compared with.
std::vector<int32_t> sampled_alone(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt,
                                   const SamplingParams& params, int n);

}  // namespace kvs::test
