#include "engine/speculative/ngram.h"

#include <algorithm>

namespace kvs {

std::vector<int32_t> propose_ngram(std::span<const int32_t> context, int k, int n_max, int n_min) {
    const int len = static_cast<int>(context.size());
    if (k <= 0) return {};
    for (int n = std::min(n_max, len - 1); n >= std::max(1, n_min); --n) {
        const auto suffix = context.subspan(static_cast<size_t>(len - n));
        // Latest start first: recent context predicts best. A match must end before the suffix.
        for (int start = len - n - 1; start >= 0; --start) {
            if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
            const int from = start + n;
            const int take = std::min(k, len - from);
            return {context.begin() + from, context.begin() + from + take};
        }
    }
    return {};
}

}  // namespace kvs
