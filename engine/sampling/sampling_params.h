#pragma once
// How the next token is chosen from the logits, and when generation stops.
// Defaults follow llama.cpp's common_params_sampling (temp 0.8, top-k 40, top-p 0.95,
// min-p 0.05, penalties off, last 64 tokens) except the seed: KV Scope never seeds
// from the clock, so a run is reproducible unless the caller picks another seed.
#include <cstdint>
#include <string>
#include <vector>

namespace kvs {

struct SamplingParams {
    float temperature = 0.8f;          // 0: greedy (argmax, lowest id wins a tie)
    int32_t top_k = 40;                // keep the k highest logits; 0: off
    float top_p = 0.95f;               // nucleus: smallest top set with this much mass; 1: off
    float min_p = 0.05f;               // drop tokens below min_p * p(best token); 0: off
    float repeat_penalty = 1.0f;       // >1 discourages tokens seen in the window; 1: off
    float presence_penalty = 0.0f;     // subtracted once from the logit of every seen token
    float frequency_penalty = 0.0f;    // subtracted count times (count = occurrences in window)
    int32_t penalty_last_n = 64;       // window of the penalties in tokens; 0: off, -1: whole history
    // Which ids the penalties count. llama_cpp: repetition, presence and frequency over the
    // last penalty_last_n ids of prompt + output. vllm (vLLM's and the OpenAI API's): the
    // repetition penalty over every id of prompt and output, presence and frequency over
    // the generated ids only (penalty_last_n is not used).
    enum class PenaltyScope : uint8_t { llama_cpp, vllm };
    PenaltyScope penalty_scope = PenaltyScope::llama_cpp;
    int32_t no_repeat_ngram_size = 0;  // ban a token that would repeat an n-gram of history; 0: off
    uint64_t seed = 0xFFFFFFFFu;       // llama.cpp's LLAMA_DEFAULT_SEED value, used as is
    int32_t max_tokens = -1;           // tokens to generate; -1: until end-of-generation or context full
    std::vector<std::string> stop;     // generation ends before the first occurrence of any of these
    bool ignore_eos = false;           // keep generating past end-of-generation tokens
    // End-of-generation tokens are suppressed until this many tokens were generated
    // (Hugging Face's min_new_tokens: their logits are -inf before sampling; beam search
    // drops them from the candidates).
    int32_t min_new_tokens = 0;
    // Beam search: a finished hypothesis ranks by sum(log p) / length^length_penalty, length
    // counting its generated tokens and the end-of-generation token (Hugging Face's
    // length_penalty, default 1.0): > 0 favours longer outputs, < 0 shorter ones, 0 is the
    // plain sum.
    float length_penalty = 1.0f;
    // Watermark (engine/sampling/watermark.h, TGI's scheme and defaults): add
    // watermark_delta to the logits of a green list seeded by the previous token.
    bool watermark = false;
    float watermark_gamma = 0.5f;  // green fraction of the vocabulary, in (0, 1)
    float watermark_delta = 2.0f;  // logit bias of green tokens
    // Log-probabilities (engine/sampling/logprobs.h): -1 off; k >= 0 reports for each sampled
    // token its log-probability under the raw model distribution and the k (at most 20)
    // most likely tokens (TokenEvent::logprobs).
    int32_t logprobs = -1;
    // Prompt log-probabilities (vLLM's prompt_logprobs, TGI's decoder_input_details): -1 off;
    // k >= 0 reports for each prompt token after the first its log-probability given the
    // tokens before it and the k most likely tokens there, under the same raw distribution
    // (TokenEvent::prompt_logprobs). Such a request does not read the prefix cache (as in
    // vLLM): every prompt position must be computed to have logits.
    int32_t prompt_logprobs = -1;
};

}  // namespace kvs
