#pragma once
// Picks the next token from a row of logits.
//
// Order of operations (each step is skipped when its parameter is off):
//   0. watermark (params.watermark, engine/sampling/watermark.h): the green list seeded by
//      the last id of history gets +watermark_delta, before anything else (TGI's order).
//   1. penalties: repetition / presence / frequency over the last penalty_last_n ids,
//      then the no-repeat-n-gram ban (engine/sampling/penalties.h). These also apply
//      in greedy mode, as in llama.cpp, and are no-ops at their defaults.
//   2. temperature == 0: greedy, the argmax with the lowest id winning a tie.
//   3. top-k (partial selection, no full sort), temperature, top-p, min-p,
//      softmax over the survivors and one draw from a std::mt19937_64 seeded with
//      params.seed, so a fixed seed gives the same tokens.
// With top_k = 0 and top_p < 1, a histogram of the probability mass per weight bucket
// (1/8 octave) locates the nucleus boundary in one pass, and only the tokens of that
// one bucket are sorted.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/sampling/sampling_params.h"
#include "engine/sampling/watermark.h"

namespace kvs {

struct TokenProb {
    int32_t id = 0;
    float p = 0.0f;  // probability after every filter (the survivors sum to 1)
};

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);

    // Returns the next token id. logits may be modified (penalties, bans).
    int32_t sample(float* logits /*[n_vocab], may be modified*/, int n_vocab,
                   std::span<const int32_t> history /*prompt+generated ids*/);

    // The distribution sample() draws from when temperature > 0: the surviving
    // candidates, most likely first (ties: lower id first), probabilities summing to 1.
    // Applies the penalties to logits like sample(). Draws nothing.
    const std::vector<TokenProb>& distribution(float* logits /*[n_vocab], may be modified*/, int n_vocab,
                                               std::span<const int32_t> history);

    // The same distribution in no particular order (cheaper: nothing is sorted). Greedy
    // (temperature 0) gives the argmax with probability 1.
    const std::vector<TokenProb>& probabilities(float* logits /*[n_vocab], may be modified*/, int n_vocab,
                                                std::span<const int32_t> history);
    // Speculative verification draws from this sampler's own random stream:
    double uniform();                                    // [0, 1)
    int32_t draw_from(std::span<const TokenProb> dist);  // dist need not be normalized; non-empty

    const SamplingParams& params() const { return m_params; }
    // Watermarked requests: whether id is in the green list seeded by prev (the list the
    // watermark used for the token after prev; cached, so asking right after sampling is free).
    bool is_green(int32_t prev, int32_t id, int n_vocab);
    // How many leading ids of every history are the prompt (the vLLM penalty scope counts
    // presence and frequency over the rest only).
    void set_prompt_len(size_t n) { m_n_prompt = n; }

private:
    struct Candidate {
        int32_t id;
        float logit;  // logit / temperature once scaled
        float w;      // exp(logit - max logit), unnormalized probability
    };
    void compute_distribution(float* logits, int n_vocab, std::span<const int32_t> history, bool ranked);
    void select_top_k(const float* logits, int n_vocab, int k);
    void select_from_vocab(const float* logits, int n_vocab);
    double weigh();  // temperature + softmax weights of the top-k candidates; returns their mass
    void cut_top_p(double total);
    void cut_min_p();
    int32_t draw();
    void watermark(float* logits, int n_vocab, std::span<const int32_t> history);

    SamplingParams m_params;
    std::mt19937_64 m_rng;
    std::vector<Candidate> m_cand;  // [n_candidates] best first, or in id order when m_sorted is false
    bool m_sorted = true;
    std::vector<float> m_weights;   // [n_vocab] exp((logit - max) / T) when top-k is off
    std::vector<Candidate> m_edge;  // [n_edge] tokens of the top-p boundary bucket
    std::vector<TokenProb> m_dist;  // [n_candidates] result of distribution()
    WatermarkGreenList m_green;     // the last green list (params.watermark)
    size_t m_n_prompt = 0;
};

// Index of the largest logit, the lowest index among equals. -inf everywhere gives 0.
int32_t argmax_lowest_id(const float* logits /*[n_vocab]*/, int n_vocab);

}  // namespace kvs
