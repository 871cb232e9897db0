#pragma once
// The engine's per-token log-probabilities (engine/sampling/logprobs.h: the raw model
// distribution, vLLM's default) in the OpenAI API's shapes:
//   chat         choices[].logprobs = {"content": [{token, logprob, bytes, top_logprobs:
//                [{token, logprob, bytes}] x top_logprobs}]}
//   completions  choices[].logprobs = {tokens, token_logprobs, top_logprobs: [{token: logprob}]
//                (the k best and the sampled token, as vLLM), text_offset}
//   TGI          details.tokens / prefill / top_tokens: [{id, text, logprob, special}]
//                (tgi_token: TGI's Token; a prefill entry has no "special")
// A token's string is its text when its bytes are valid UTF-8, else vLLM's spelling of raw
// bytes ("bytes:\xe2\x80"); `bytes` always holds the raw bytes.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/session.h"

namespace kvs::server {

// Where the next token starts in a completion's text, counted in characters (Unicode code
// points of the UTF-8 decoded text, as OpenAI and vLLM count text_offset: a Python str's
// len), not bytes. A character whose bytes are split over tokens counts once it is whole, so
// a token that begins inside a character gets that character's offset. Carried across the
// tokens of a reply and across stream chunks.
struct TextOffset {
    int64_t chars = 0;  // whole characters so far
    int pending = 0;    // continuation bytes the last character still needs
    void advance(const std::string& bytes);
};

class LogprobsJson {
public:
    LogprobsJson(const Tokenizer& tok, int top_k) : m_tok(tok), m_top_k(top_k) {}
    // Chat: the entries of `content` for these tokens (one per token with logprobs).
    nlohmann::json chat_content(const std::vector<int32_t>& tokens, const std::vector<TokenLogprobs>& lps) const;
    // Completions: the object for these tokens; *text_offset is where the first one starts in
    // the choice's text, and moves past them.
    nlohmann::json completion(const std::vector<int32_t>& tokens, const std::vector<TokenLogprobs>& lps,
                              TextOffset* text_offset) const;
    // TGI's Token {id, text, logprob, special} (logprob null when NaN); TGI's PrefillToken
    // without "special"; the top alternatives of lp as TGI's top_tokens entry (m_top_k of them).
    nlohmann::json tgi_token(int32_t id, float logprob, bool prefill = false) const;
    nlohmann::json tgi_top_tokens(const TokenLogprobs& lp) const;
    std::string token_string(int32_t id) const;

private:
    nlohmann::json entry(int32_t id, float logprob) const;
    const Tokenizer& m_tok;
    int m_top_k;
};

}  // namespace kvs::server
