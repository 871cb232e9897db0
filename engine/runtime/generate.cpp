#include "engine/runtime/generate.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "engine/runtime/text_stream.h"
#include "engine/sampling/sampler.h"

namespace kvs {
namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<GenerationStats> generate(SequenceRunner& runner, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                 const SamplingParams& params, const TextCallback& on_text) {
    using R = Result<GenerationStats>;
    GenerationStats st;
    st.n_prompt = static_cast<int>(prompt.size());
    if (prompt.empty()) return R::error("the prompt is empty");
    if (runner.n_past() + st.n_prompt >= runner.n_ctx())
        return R::error("the prompt is " + std::to_string(st.n_prompt) + " tokens, which does not fit the context of " +
                        std::to_string(runner.n_ctx()) + " tokens (shorten it or raise --ctx)");

    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> logits;  // [1, n_vocab]
    if (auto s = runner.eval(prompt, false, &logits); !s) return s;
    st.prompt_ms = ms_since(t0);

    const int n_vocab = runner.model().config.n_vocab;
    Sampler sampler(params);
    TextStream stream(&tok, params);
    std::vector<int32_t> history = prompt;
    auto t_first = t0;
    st.stop_reason = "max tokens";
    for (int i = 0; params.max_tokens < 0 || i < params.max_tokens; ++i) {
        const int32_t id = sampler.sample(logits.data(), n_vocab, history);
        if (i == 0) {
            st.ttft_ms = ms_since(t0);
            t_first = std::chrono::steady_clock::now();
        }
        history.push_back(id);
        st.tokens.push_back(id);
        ++st.n_generated;
        const TextStep m = stream.push(id);
        if (m.eog) {
            st.stop_reason = "eos";
            break;
        }
        st.text += m.text;
        // Called every token, even with no text to show, so a stop request is seen at once.
        if (on_text && !on_text(m.text)) {
            st.stop_reason = "cancelled";
            break;
        }
        if (m.stopped) {
            st.stop_reason = "stop string";
            break;
        }
        if (runner.n_past() + 1 >= runner.n_ctx()) {
            st.stop_reason = "context full";
            break;
        }
        if (params.max_tokens >= 0 && i + 1 >= params.max_tokens) break;
        if (auto s = runner.eval({id}, false, &logits); !s) return s;
    }
    if (st.stop_reason != "stop string") {
        const std::string rest = stream.flush();
        st.text += rest;
        if (!rest.empty() && on_text) on_text(rest);
    }
    st.decode_ms = st.n_generated > 1 ? ms_since(t_first) : 0;
    return st;
}

int64_t peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmHWM:", 0) == 0) {
            std::istringstream is(line.substr(6));
            int64_t kb = 0;
            is >> kb;
            return kb * 1024;
        }
    }
    return 0;
}

}  // namespace kvs
