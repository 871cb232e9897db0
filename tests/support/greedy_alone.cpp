#include "tests/support/greedy_alone.h"

#include <QtGlobal>

#include "engine/sampling/sampler.h"

namespace kvs::test {

std::vector<int32_t> greedy_alone(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt, int n) {
    std::vector<float> logits;  // [n_vocab] after the last token evaluated
    std::vector<int32_t> out;
    if (!runner.eval(prompt, false, &logits)) qFatal("greedy_alone: prefill failed");
    for (int i = 0; i < n; ++i) {
        out.push_back(argmax_lowest_id(logits.data(), n_vocab));
        if (i + 1 < n && !runner.eval({out.back()}, false, &logits)) qFatal("greedy_alone: decode failed");
    }
    return out;
}

std::vector<int32_t> sampled_alone(SequenceRunner& runner, int n_vocab, const std::vector<int32_t>& prompt,
                                   const SamplingParams& params, int n) {
    std::vector<float> logits;  // [n_vocab] after the last token evaluated
    if (!runner.eval(prompt, false, &logits)) qFatal("sampled_alone: prefill failed");
    Sampler sampler(params);
    std::vector<int32_t> history = prompt, out;
    for (int i = 0; i < n; ++i) {
        const int32_t t = sampler.sample(logits.data(), n_vocab, history);
        out.push_back(t);
        history.push_back(t);
        if (i + 1 < n && !runner.eval({t}, false, &logits)) qFatal("sampled_alone: decode failed");
    }
    return out;
}

}  // namespace kvs::test
