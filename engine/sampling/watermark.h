#pragma once
// Text watermarking of Kirchenbauer et al., "A Watermark for Large Language Models"
// (arXiv 2301.10226), as Hugging Face TGI implements it (server/.../utils/watermark.py):
//
//   generation  before each token is drawn, the previous token seeds a random generator
//               (seed = hash_key * previous id); a random permutation of the vocabulary
//               [0, n_vocab) is drawn from it and its first floor(n_vocab * gamma) ids are
//               the "green list"; delta is added to the logits of every green id. The
//               processor runs first, before penalties and the sampling filters (TGI's
//               order), and applies in greedy mode too.
//   detection   for each token after the first, is it in the green list seeded by its
//               predecessor? With T tokens scored and G green, under the null hypothesis
//               (text written without the key) G ~ Binomial(T, gamma), so
//                   z = (G - gamma T) / sqrt(T gamma (1 - gamma)),
//               p-value = P(Z >= z) = erfc(z / sqrt 2) / 2 (one-sided).
//
// Defaults are TGI's: gamma 0.5, delta 2.0, hash_key 15485863 (a large prime). TGI draws
// its permutation with torch.randperm; KV Scope has no torch, so its permutation is its own
// (below), and a text watermarked by TGI is not detected here, nor the reverse: the scheme
// and its statistics are the same, the green lists are not.
//
// The permutation, exactly (so another implementation can reproduce it):
//   state = (hash_key * prev) mod 2^64
//   next() = splitmix64: state += 0x9E3779B97F4A7C15; z = state;
//            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//            return z ^ (z >> 31)                       (all mod 2^64)
//   a = [0, 1, ..., n_vocab - 1]; for i in 0 .. k-1 (k = floor(n_vocab * gamma)):
//       j = i + ((next() * (n_vocab - i)) >> 64)        (128-bit product, its high word)
//       swap(a[i], a[j])
//   green list = a[0 .. k-1]   (a partial Fisher-Yates shuffle: k uniform draws)
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

struct WatermarkParams {
    float gamma = 0.5f;            // fraction of the vocabulary that is green, in (0, 1)
    float delta = 2.0f;            // added to every green logit
    uint64_t hash_key = 15485863;  // seeds the green list with the previous token
    Status validate() const;       // gamma in (0, 1), delta finite and >= 0
};

// The green list after `prev`, as a mask: mask[id] = 1 when id is green. The list is
// cached: asking again for the same (prev, n_vocab, params) costs nothing.
class WatermarkGreenList {
public:
    const std::vector<uint8_t>& mask(int32_t prev, int n_vocab, const WatermarkParams& p);  // [n_vocab]
    bool is_green(int32_t prev, int32_t id, int n_vocab, const WatermarkParams& p);

private:
    std::vector<uint32_t> m_perm;  // [n_vocab] scratch permutation
    std::vector<uint8_t> m_mask;   // [n_vocab]
    int32_t m_prev = -1;
    int m_n_vocab = 0;
    float m_gamma = 0;
    uint64_t m_key = 0;
};

// Adds p.delta to the logits of the green list seeded by `prev`.
void apply_watermark(float* logits /*[n_vocab]*/, int n_vocab, int32_t prev, const WatermarkParams& p,
                     WatermarkGreenList& lists);

struct WatermarkScore {
    int64_t n_scored = 0;  // tokens scored: every token that has a predecessor
    int64_t n_green = 0;
    double z = 0;                // NaN when nothing was scored
    double p_value = 1;          // one-sided, P(Z >= z)
    std::vector<uint8_t> green;  // [ids.size()] 1 when that token is green; the first is never scored (0)
};

// z-score and p-value of G green tokens out of T scored.
double watermark_z(int64_t n_green, int64_t n_scored, double gamma);
double watermark_p_value(double z);

// Scores ids[1..] against the green lists seeded by their predecessors. n_vocab is the
// model's vocabulary (the logits' width when the text was generated). Ids outside
// [0, n_vocab) are an error naming the position.
Result<WatermarkScore> detect_watermark(std::span<const int32_t> ids, int n_vocab, const WatermarkParams& p = {});

}  // namespace kvs
