#include "tests/support/greedy_params.h"

namespace kvs::test {

SamplingParams greedy(int n) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = n;
    p.ignore_eos = true;
    return p;
}

}  // namespace kvs::test
