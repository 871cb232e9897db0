#include "tests/support/token_ids.h"

#include <random>

namespace kvs::test {

std::vector<int32_t> seq(int32_t first, int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
    return v;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::vector<int32_t> random_tokens(int n, int n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> tok(3, n_vocab - 1);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = tok(rng);
    return t;
}

std::vector<std::vector<int32_t>> random_prompts(int n, int min_len, int max_len, int n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> len(min_len, max_len), tok(3, n_vocab - 1);
    std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
    for (auto& p : out) {
        p.resize(static_cast<size_t>(len(rng)));
        for (auto& t : p) t = tok(rng);
    }
    return out;
}

}  // namespace kvs::test
