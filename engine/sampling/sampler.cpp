#include "engine/sampling/sampler.h"

#include <algorithm>
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
        apply_penalties(logits, n_vocab, history, m_params);
        ban_repeated_ngrams(logits, n_vocab, history, m_params.no_repeat_ngram_size);
        return argmax_lowest_id(logits, n_vocab);
    }
    compute_distribution(logits, n_vocab, history);
    return draw();
}

const std::vector<TokenProb>& Sampler::distribution(float* logits, int n_vocab, std::span<const int32_t> history) {
    compute_distribution(logits, n_vocab, history);
    if (!m_sorted) {  // no truncation: sample() draws in id order, callers get the ranking
        std::sort(m_dist.begin(), m_dist.end(), [](const TokenProb& a, const TokenProb& b) {
            return a.p > b.p || (a.p == b.p && a.id < b.id);
        });
    }
    return m_dist;
}

void Sampler::compute_distribution(float* logits, int n_vocab, std::span<const int32_t> history) {
    apply_penalties(logits, n_vocab, history, m_params);
    ban_repeated_ngrams(logits, n_vocab, history, m_params.no_repeat_ngram_size);
    m_dist.clear();
    m_cand.clear();
    m_sorted = true;
    if (m_params.temperature <= 0.0f) {
        m_dist.push_back({argmax_lowest_id(logits, n_vocab), 1.0f});
        return;
    }
    double total = 0.0;  // 0: normalize over the candidates themselves
    if (m_params.top_k > 0 && m_params.top_k < n_vocab) {
        select_top_k(logits, n_vocab, m_params.top_k);
    } else if (m_params.top_p < 1.0f) {
        select_nucleus_superset(logits, n_vocab);
        total = -1.0;  // weights and the full-vocabulary mass are already computed
    } else {
        select_min_p_or_all(logits, n_vocab);
    }
    if (m_cand.empty()) {  // every logit is -inf (or NaN): nothing to draw from
        m_dist.push_back({argmax_lowest_id(logits, n_vocab), 1.0f});
        return;
    }
    total = weigh(total);
    if (m_params.top_p < 1.0f) cut_top_p(total);
    if (m_params.min_p > 0.0f) cut_min_p();

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

// top_k off, top_p < 1: computes every token's weight once, then gathers the tokens
// above a threshold (1/64 of the best, lowered 64x at a time) until they hold top_p of
// the mass. The nucleus is a prefix of that set, so only the set is sorted.
void Sampler::select_nucleus_superset(const float* logits, int n_vocab) {
    float max_l = kNegInf;
    for (int32_t i = 0; i < n_vocab; ++i) max_l = std::max(max_l, logits[i]);
    if (!(max_l > kNegInf)) return;
    const float inv_t = 1.0f / m_params.temperature;
    m_weights.resize(static_cast<size_t>(n_vocab));
    double z = 0.0;
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float l = logits[i];
        const float w = l > kNegInf ? std::exp((l - max_l) * inv_t) : 0.0f;
        m_weights[static_cast<size_t>(i)] = w;
        z += w;
    }
    const double need = static_cast<double>(m_params.top_p) * z;
    float thr = 1.0f / 64.0f;
    for (;;) {
        double mass = 0.0;
        for (float w : m_weights) mass += w >= thr ? w : 0.0f;
        if (mass >= need || thr < 1e-30f) break;
        thr *= 1.0f / 64.0f;
    }
    if (thr < 1e-30f) thr = std::numeric_limits<float>::min();
    for (int32_t i = 0; i < n_vocab; ++i) {
        const float w = m_weights[static_cast<size_t>(i)];
        if (w >= thr) m_cand.push_back({i, (logits[i] - max_l) * inv_t, w});
    }
    std::sort(m_cand.begin(), m_cand.end(), ranks_before<Candidate>);
    m_weights_total = z;
}

// top_k and top_p off: with min_p the tokens within log(min_p) of the best (scaled),
// sorted; otherwise every finite logit in id order (drawing needs no order).
void Sampler::select_min_p_or_all(const float* logits, int n_vocab) {
    float max_l = kNegInf;
    for (int32_t i = 0; i < n_vocab; ++i) max_l = std::max(max_l, logits[i]);
    if (!(max_l > kNegInf)) return;
    if (m_params.min_p > 0.0f) {
        // Slightly loose so that cut_min_p(), computed on the weights, decides exactly.
        const float floor_l = max_l + m_params.temperature * (std::log(m_params.min_p) - 1e-3f);
        for (int32_t i = 0; i < n_vocab; ++i) {
            if (logits[i] >= floor_l) m_cand.push_back({i, logits[i], 0.0f});
        }
        std::sort(m_cand.begin(), m_cand.end(), ranks_before<Candidate>);
    } else {
        for (int32_t i = 0; i < n_vocab; ++i) {
            if (logits[i] > kNegInf) m_cand.push_back({i, logits[i], 0.0f});
        }
        m_sorted = false;
    }
}

// Temperature and softmax weights for the candidates (unless the fast path already
// did both). Returns the mass top-p is measured against.
double Sampler::weigh(double total_or_flag) {
    if (total_or_flag < 0.0) return m_weights_total;
    const float inv_t = 1.0f / m_params.temperature;
    float max_l = kNegInf;
    for (const auto& c : m_cand) max_l = std::max(max_l, c.logit);
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
    if (!m_sorted) return;
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
    const double u = static_cast<double>(m_rng() >> 11) * 0x1.0p-53;  // [0, 1)
    double cum = 0.0;
    for (const auto& t : m_dist) {
        cum += t.p;
        if (u < cum) return t.id;
    }
    return m_dist.back().id;  // rounding left u above the last cumulative sum
}

}  // namespace kvs
