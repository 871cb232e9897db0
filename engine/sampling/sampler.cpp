#include "engine/sampling/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "engine/sampling/penalties.h"

namespace kvs {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Candidate ranking: higher logit first, the lower id on a tie.
template <typename C>
bool ranks_before(const C& a, const C& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

int32_t argmax_lowest_id(const float* logits, int n_vocab) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
        if (logits[i] > logits[best]) best = i;  // strict: an equal later id never wins
    }
    return best;
}

Sampler::Sampler(const SamplingParams& params) : m_params(params), m_rng(params.seed) {}

int32_t Sampler::sample(float* logits, int n_vocab, std::span<const int32_t> history) {
    if (m_params.temperature <= 0.0f) {
        watermark(logits, n_vocab, history);
        apply_penalties(logits, n_vocab, history, m_params, m_n_prompt);
        ban_repeated_ngrams(logits, n_vocab, history, m_params.no_repeat_ngram_size);
        return argmax_lowest_id(logits, n_vocab);
    }
    compute_distribution(logits, n_vocab, history, false);
    return draw();
}

const std::vector<TokenProb>& Sampler::distribution(float* logits, int n_vocab, std::span<const int32_t> history) {
    compute_distribution(logits, n_vocab, history, true);
    return m_dist;
}

const std::vector<TokenProb>& Sampler::probabilities(float* logits, int n_vocab, std::span<const int32_t> history) {
    compute_distribution(logits, n_vocab, history, false);
    return m_dist;
}

double Sampler::uniform() { return static_cast<double>(m_rng() >> 11) * 0x1.0p-53; }

int32_t Sampler::draw_from(std::span<const TokenProb> dist) {
    double total = 0.0;
    for (const auto& t : dist) total += t.p;
    const double u = uniform() * total;
    double cum = 0.0;
    for (const auto& t : dist) {
        cum += t.p;
        if (u < cum) return t.id;
    }
    for (auto it = dist.rbegin(); it != dist.rend(); ++it)  // rounding: the last token with mass
        if (it->p > 0) return it->id;
    return dist.back().id;
}

void Sampler::watermark(float* logits, int n_vocab, std::span<const int32_t> history) {
    if (!m_params.watermark || history.empty()) return;  // TGI needs one token to seed the list too
    const WatermarkParams wp{m_params.watermark_gamma, m_params.watermark_delta};
    apply_watermark(logits, n_vocab, history.back(), wp, m_green);
}

bool Sampler::is_green(int32_t prev, int32_t id, int n_vocab) {
    const WatermarkParams wp{m_params.watermark_gamma, m_params.watermark_delta};
    return m_green.is_green(prev, id, n_vocab, wp);
}

void Sampler::compute_distribution(float* logits, int n_vocab, std::span<const int32_t> history, bool ranked) {
    watermark(logits, n_vocab, history);
    apply_penalties(logits, n_vocab, history, m_params, m_n_prompt);
    ban_repeated_ngrams(logits, n_vocab, history, m_params.no_repeat_ngram_size);
    m_dist.clear();
    m_cand.clear();
    m_sorted = true;
    if (m_params.temperature <= 0.0f) {
        m_dist.push_back({argmax_lowest_id(logits, n_vocab), 1.0f});
        return;
    }
    if (m_params.top_k > 0 && m_params.top_k < n_vocab) {
        select_top_k(logits, n_vocab, m_params.top_k);
        if (!m_cand.empty()) {
            const double total = weigh();
            if (m_params.top_p < 1.0f) cut_top_p(total);
        }
    } else {
        select_from_vocab(logits, n_vocab);  // temperature and top-p included
    }
    if (m_cand.empty()) {  // every logit is -inf (or NaN): nothing to draw from
        m_dist.push_back({argmax_lowest_id(logits, n_vocab), 1.0f});
        return;
    }
    if (m_params.min_p > 0.0f) cut_min_p();
    if (ranked && !m_sorted) std::sort(m_cand.begin(), m_cand.end(), ranks_before<Candidate>);

    double sum = 0.0;
    for (const auto& c : m_cand) sum += c.w;
    m_dist.reserve(m_cand.size());
    for (const auto& c : m_cand) m_dist.push_back({c.id, static_cast<float>(c.w / sum)});
}

// Keeps the k best logits with a k-sized heap whose top is the worst kept candidate:
// one comparison per logit, a heap update only for the few that beat it.
void Sampler::select_top_k(const float* logits, int n_vocab, int k) {
    auto worse_on_top = [](const Candidate& a, const Candidate& b) { return ranks_before(a, b); };
    m_cand.reserve(static_cast<size_t>(k));
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float l = logits[i];
        if (!(l > kNegInf)) continue;  // -inf and NaN never survive
        if (m_cand.size() < static_cast<size_t>(k)) {
            m_cand.push_back({i, l, 0.0f});
            std::push_heap(m_cand.begin(), m_cand.end(), worse_on_top);
        } else if (l > m_cand.front().logit) {  // a later id with an equal logit ranks after
            std::pop_heap(m_cand.begin(), m_cand.end(), worse_on_top);
            m_cand.back() = {i, l, 0.0f};
            std::push_heap(m_cand.begin(), m_cand.end(), worse_on_top);
        }
    }
    std::sort(m_cand.begin(), m_cand.end(), ranks_before<Candidate>);
}

// top_k off. Every token's weight w = exp((l - max) / T) in (0, 1] is computed once.
// Without top-p every token with w > 0 (and w >= min_p) is a candidate, in id order
// (a draw needs no order). With top-p, one pass builds a histogram of the mass per weight bucket (the
// float's exponent and top 3 mantissa bits, 1/8 of an octave); walking it from the top
// finds the bucket where the cumulative mass reaches top_p. Every token above that
// bucket is in the nucleus, so only the boundary bucket's tokens are sorted.
void Sampler::select_from_vocab(const float* logits, int n_vocab) {
    float max_l = kNegInf;
    for (int32_t i = 0; i < n_vocab; ++i) max_l = std::max(max_l, logits[i]);
    if (!(max_l > kNegInf)) return;
    const float inv_t = 1.0f / m_params.temperature;
    m_weights.resize(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float l = logits[i];
        m_weights[static_cast<size_t>(i)] = l > kNegInf ? std::exp((l - max_l) * inv_t) : 0.0f;
    }
    m_sorted = false;
    if (m_params.top_p >= 1.0f) {
        const float floor_w = m_params.min_p;  // min-p early: the best token's weight is exactly 1
        for (int32_t i = 0; i < n_vocab; ++i) {
            const float w = m_weights[static_cast<size_t>(i)];
            if (w > 0.0f && w >= floor_w) m_cand.push_back({i, (logits[i] - max_l) * inv_t, w});
        }
        return;
    }
    auto bucket_of = [](float w) { return std::bit_cast<uint32_t>(w) >> 20; };  // w = 1 -> 1016
    constexpr uint32_t kBuckets = (0x3F800000u >> 20) + 1;
    std::array<double, kBuckets> mass{};  // [kBuckets] total weight per bucket
    double z = 0.0;
    for (float w : m_weights) {
        mass[bucket_of(w)] += w;
        z += w;
    }
    const double need = static_cast<double>(m_params.top_p) * z;
    uint32_t boundary = kBuckets - 1;
    double above = 0.0;  // mass of the buckets above the boundary
    while (boundary > 0 && above + mass[boundary] < need) above += mass[boundary--];

    std::vector<Candidate>& edge = m_edge;  // [n_edge] tokens of the boundary bucket
    edge.clear();
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float w = m_weights[static_cast<size_t>(i)];
        if (w <= 0.0f) continue;
        const uint32_t b = bucket_of(w);
        if (b > boundary) m_cand.push_back({i, (logits[i] - max_l) * inv_t, w});
        else if (b == boundary)
            edge.push_back({i, (logits[i] - max_l) * inv_t, w});
    }
    std::sort(edge.begin(), edge.end(), ranks_before<Candidate>);
    for (const auto& c : edge) {
        if (above >= need && !m_cand.empty()) break;
        m_cand.push_back(c);
        above += c.w;
    }
}

// Temperature and softmax weights of the top-k candidates. Returns their total mass.
double Sampler::weigh() {
    const float inv_t = 1.0f / m_params.temperature;
    const float max_l = m_cand.front().logit;  // sorted best first
    double z = 0.0;
    for (auto& c : m_cand) {
        c.logit = (c.logit - max_l) * inv_t;
        c.w = std::exp(c.logit);
        z += c.w;
    }
    return z;
}

// Keeps the most likely candidates until their mass reaches top_p (at least one).
void Sampler::cut_top_p(double total) {
    const double need = static_cast<double>(m_params.top_p) * total;
    double cum = 0.0;
    for (size_t i = 0; i < m_cand.size(); ++i) {
        cum += m_cand[i].w;
        if (cum >= need) {
            m_cand.resize(i + 1);
            return;
        }
    }
}

// Drops candidates whose probability is below min_p times the best one's. The best
// candidate has weight exp(0) = 1, so the cut is on the weight itself.
void Sampler::cut_min_p() {
    float w_max = 0.0f;
    for (const auto& c : m_cand) w_max = std::max(w_max, c.w);
    const float floor_w = m_params.min_p * w_max;
    std::erase_if(m_cand, [floor_w](const Candidate& c) { return c.w < floor_w; });
}

int32_t Sampler::draw() {
    const double u = uniform();
    double cum = 0.0;
    for (const auto& t : m_dist) {
        cum += t.p;
        if (u < cum) return t.id;
    }
    return m_dist.back().id;  // rounding left u above the last cumulative sum
}

}  // namespace kvs
