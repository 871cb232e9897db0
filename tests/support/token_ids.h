#pragma once
// Token id sequences for tests: runs of consecutive ids, concatenation, and random
// prompts, deterministic per seed (random ids start at 3: never the tiny vocabulary's
// special tokens).
#include <cstdint>
#include <vector>

namespace kvs::test {

// first, first + 1, ..., n ids.
std::vector<int32_t> seq(int32_t first, int n);
// a followed by b.
std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b);
// n random ids in [3, n_vocab).
std::vector<int32_t> random_tokens(int n, int n_vocab, uint32_t seed);
// n prompts of min_len..max_len random ids in [3, n_vocab).
std::vector<std::vector<int32_t>> random_prompts(int n, int min_len, int max_len, int n_vocab, uint32_t seed);

}  // namespace kvs::test
