#pragma once
// Sampling parameters for greedy decoding of exactly n tokens (temperature 0, EOS
// ignored): what tests compare batched, speculative and single-sequence runs with.
#include "engine/sampling/sampling_params.h"

namespace kvs::test {

SamplingParams greedy(int n);

}  // namespace kvs::test
