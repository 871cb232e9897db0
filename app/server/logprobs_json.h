#pragma once
// The engine's per-token log-probabilities (engine/sampling/logprobs.h: the raw model
// distribution, vLLM's default) in the OpenAI API's shapes:
//   chat         choices[].logprobs = {"content": [{token, logprob, bytes, top_logprobs:
//                [{token, logprob, bytes}] x top_logprobs}]}
//   completions  choices[].logprobs = {tokens, token_logprobs, top_logprobs: [{token: logprob}]
//                (the k best and the sampled token, as vLLM), text_offset}
// A token's string is its text when its bytes are valid UTF-8, else vLLM's spelling of raw
// bytes ("bytes:\xe2\x80"); `bytes` always holds the raw bytes.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/session.h"

namespace kvs::server {

class LogprobsJson {
public:
    LogprobsJson(const Tokenizer& tok, int top_k) : m_tok(tok), m_top_k(top_k) {}
    // Chat: the entries of `content` for these tokens (one per token with logprobs).
    nlohmann::json chat_content(const std::vector<int32_t>& tokens, const std::vector<TokenLogprobs>& lps) const;
    // Completions: the object for these tokens; *text_offset is where the first one starts in
    // the choice's text, and moves past them.
    nlohmann::json completion(const std::vector<int32_t>& tokens, const std::vector<TokenLogprobs>& lps,
                              int64_t* text_offset) const;
    std::string token_string(int32_t id) const;

private:
    nlohmann::json entry(int32_t id, float logprob) const;
    const Tokenizer& m_tok;
    int m_top_k;
};

}  // namespace kvs::server
