#pragma once
// Prompt-lookup (n-gram) drafting: find the request's last n tokens earlier in its own
// context and propose the tokens that followed them there. Costs no model.
#include <cstdint>
#include <span>
#include <vector>

namespace kvs {

// Up to k tokens that followed the most recent earlier occurrence of the context's last
// n tokens, trying n = n_max down to n_min; empty when no suffix n-gram recurs.
std::vector<int32_t> propose_ngram(std::span<const int32_t> context, int k, int n_max, int n_min);

}  // namespace kvs
