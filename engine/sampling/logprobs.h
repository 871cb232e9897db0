#pragma once
// Log-probabilities of a sampled token and its most likely alternatives (the OpenAI API's
// logprobs / top_logprobs). Like vLLM's default (logprobs_mode "raw_logprobs"), they are
// the model's own distribution: log_softmax of the raw logits of the position, before the
// watermark, penalties, bans, min_new_tokens, temperature or any truncation touch them.
#include <cstdint>
#include <vector>

namespace kvs {

// The most alternatives a request may ask for (OpenAI's and vLLM's default limit).
constexpr int kMaxLogprobs = 20;

struct TokenLogprob {
    int32_t id = 0;
    float logprob = 0.0f;  // natural log
};

struct TokenLogprobs {
    float logprob = 0.0f;           // of the sampled token
    int32_t rank = 1;               // 1 + the number of tokens with a higher logit
    std::vector<TokenLogprob> top;  // [k] the k most likely tokens, best first (ties: lower id)
};

// log_softmax (in double) of logits, read at `chosen`, and its top k (0..kMaxLogprobs).
TokenLogprobs token_logprobs(const float* logits /*[n_vocab] raw*/, int n_vocab, int32_t chosen, int k);

}  // namespace kvs
