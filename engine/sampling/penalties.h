#pragma once
// Logit penalties that depend on the tokens seen so far: llama.cpp's repetition,
// presence and frequency penalties, and Hugging Face's no-repeat-n-gram ban.
// Both edit the logits in place before any truncation or drawing.
#include <cstdint>
#include <span>

#include "engine/sampling/sampling_params.h"

namespace kvs {

// params.penalty_scope llama_cpp: for each token that occurs c > 0 times in the last
// params.penalty_last_n ids of history (all of it when -1, none when 0), llama.cpp semantics:
//   logit = logit > 0 ? logit / repeat_penalty : logit * repeat_penalty;
//   logit -= c * frequency_penalty + presence_penalty;
// params.penalty_scope vllm: vLLM's apply_penalties (vllm/model_executor/layers/utils.py),
// history[0, n_prompt) being the prompt and the rest the output: the repetition penalty as
// above on every token of prompt or output; then, with c = the token's count in the output
// only, logit -= c * frequency_penalty + (c > 0) * presence_penalty.
// Ids outside [0, n_vocab) in history are ignored. No-op when all penalties are off.
void apply_penalties(float* logits /*[n_vocab]*/, int n_vocab, std::span<const int32_t> history,
                     const SamplingParams& params, size_t n_prompt = 0);

// Sets to -inf the logit of every token t such that (last n-1 ids of history, t) is an
// n-gram that already occurs in history. n = 1 bans every token already in history.
// No-op when n <= 0. Returns the number of distinct tokens banned.
int ban_repeated_ngrams(float* logits /*[n_vocab]*/, int n_vocab, std::span<const int32_t> history, int n);

}  // namespace kvs
