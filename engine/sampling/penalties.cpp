#include "engine/sampling/penalties.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace kvs {

namespace {

// vLLM's order: the repetition penalty on the tokens of prompt or output, then frequency and
// presence on the output's counts.
void apply_vllm_penalties(float* logits, int n_vocab, std::span<const int32_t> history, const SamplingParams& params,
                          size_t n_prompt) {
    n_prompt = std::min(n_prompt, history.size());
    std::vector<int32_t> seen(history.begin(), history.end());  // [n_history]
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    if (params.repeat_penalty != 1.0f)
        for (int32_t id : seen) {
            if (id < 0 || id >= n_vocab) continue;
            float& l = logits[id];
            l = l > 0.0f ? l / params.repeat_penalty : l * params.repeat_penalty;
        }
    if (params.presence_penalty == 0.0f && params.frequency_penalty == 0.0f) return;
    std::vector<int32_t> output(history.begin() + static_cast<std::ptrdiff_t>(n_prompt), history.end());  // [n_output]
    std::sort(output.begin(), output.end());
    for (size_t i = 0; i < output.size();) {
        size_t j = i;
        while (j < output.size() && output[j] == output[i]) ++j;
        const int32_t id = output[i];
        const float count = static_cast<float>(j - i);
        i = j;
        if (id < 0 || id >= n_vocab) continue;
        logits[id] -= count * params.frequency_penalty;
        logits[id] -= params.presence_penalty;
    }
}

}  // namespace

void apply_penalties(float* logits, int n_vocab, std::span<const int32_t> history, const SamplingParams& params,
                     size_t n_prompt) {
    const bool off =
        params.repeat_penalty == 1.0f && params.presence_penalty == 0.0f && params.frequency_penalty == 0.0f;
    if (off || history.empty()) return;
    if (params.penalty_scope == SamplingParams::PenaltyScope::vllm)
        return apply_vllm_penalties(logits, n_vocab, history, params, n_prompt);
    if (params.penalty_last_n == 0) return;
    const size_t n_window = params.penalty_last_n < 0
                                ? history.size()
                                : std::min(history.size(), static_cast<size_t>(params.penalty_last_n));
    std::vector<int32_t> window(history.end() - static_cast<std::ptrdiff_t>(n_window), history.end());  // [n_window]
    std::sort(window.begin(), window.end());
    for (size_t i = 0; i < window.size();) {
        size_t j = i;
        while (j < window.size() && window[j] == window[i]) ++j;
        const int32_t id = window[i];
        const float count = static_cast<float>(j - i);
        i = j;
        if (id < 0 || id >= n_vocab) continue;
        float& l = logits[id];
        l = l > 0.0f ? l / params.repeat_penalty : l * params.repeat_penalty;
        l -= count * params.frequency_penalty + params.presence_penalty;
    }
}

int ban_repeated_ngrams(float* logits, int n_vocab, std::span<const int32_t> history, int n) {
    if (n <= 0 || history.size() < static_cast<size_t>(n)) return 0;
    const size_t n_hist = history.size();
    const size_t n_prefix = static_cast<size_t>(n) - 1;
    // The n-gram that would end with the next token starts with these n-1 ids.
    std::span<const int32_t> prefix = history.subspan(n_hist - n_prefix);  // [n-1]
    int n_banned = 0;
    // Every complete n-gram of history: start i, ids [i, i+n). Its last id is banned
    // when its first n-1 ids equal the current prefix.
    for (size_t i = 0; i + n_prefix < n_hist; ++i) {
        if (!std::equal(prefix.begin(), prefix.end(), history.begin() + static_cast<std::ptrdiff_t>(i))) continue;
        const int32_t id = history[i + n_prefix];
        if (id < 0 || id >= n_vocab || logits[id] == -std::numeric_limits<float>::infinity()) continue;
        logits[id] = -std::numeric_limits<float>::infinity();
        ++n_banned;
    }
    return n_banned;
}

}  // namespace kvs
