#include "engine/sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvs {

TokenLogprobs token_logprobs(const float* logits, int n_vocab, int32_t chosen, int k) {
    TokenLogprobs out;
    double mx = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < n_vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    const float lc = logits[chosen];
    out.logprob = static_cast<float>(static_cast<double>(lc) - lse);
    for (int i = 0; i < n_vocab; ++i)
        if (logits[i] > lc) ++out.rank;
    k = std::clamp(k, 0, std::min(kMaxLogprobs, n_vocab));
    if (k == 0) return out;
    // A k-sized heap whose top is the worst kept token: higher logit first, lower id on a tie.
    auto better = [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::vector<int32_t> heap;  // [k]
    heap.reserve(static_cast<size_t>(k));
    for (int32_t i = 0; i < n_vocab; ++i) {
        if (static_cast<int>(heap.size()) < k) {
            heap.push_back(i);
            std::push_heap(heap.begin(), heap.end(), better);
        } else if (better(i, heap.front())) {
            std::pop_heap(heap.begin(), heap.end(), better);
            heap.back() = i;
            std::push_heap(heap.begin(), heap.end(), better);
        }
    }
    std::sort(heap.begin(), heap.end(), better);
    out.top.reserve(heap.size());
    for (int32_t id : heap) out.top.push_back({id, static_cast<float>(static_cast<double>(logits[id]) - lse)});
    return out;
}

}  // namespace kvs
