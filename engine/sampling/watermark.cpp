#include "engine/sampling/watermark.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace kvs {
namespace {

struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

// floor(x * range / 2^64): a draw in [0, range) from a 64-bit word (Lemire's reduction).
uint32_t below(uint64_t x, uint32_t range) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(x) * range) >> 64);
}

int green_count(int n_vocab, float gamma) {
    return static_cast<int>(static_cast<double>(n_vocab) * static_cast<double>(gamma));
}

}  // namespace

Status WatermarkParams::validate() const {
    if (!(gamma > 0.0f && gamma < 1.0f))
        return Status::error("watermark gamma must be in (0, 1), got " + std::to_string(gamma));
    if (!(delta >= 0.0f) || !std::isfinite(delta))
        return Status::error("watermark delta must be a finite number >= 0, got " + std::to_string(delta));
    return Status::ok();
}

const std::vector<uint8_t>& WatermarkGreenList::mask(int32_t prev, int n_vocab, const WatermarkParams& p) {
    if (prev == m_prev && n_vocab == m_n_vocab && p.gamma == m_gamma && p.hash_key == m_key) return m_mask;
    const auto n = static_cast<size_t>(n_vocab);
    m_perm.resize(n);
    std::iota(m_perm.begin(), m_perm.end(), 0u);
    m_mask.assign(n, 0);
    SplitMix64 rng{p.hash_key * static_cast<uint64_t>(static_cast<uint32_t>(prev))};
    const int k = green_count(n_vocab, p.gamma);
    for (int i = 0; i < k; ++i) {
        const uint32_t j = static_cast<uint32_t>(i) + below(rng.next(), static_cast<uint32_t>(n_vocab - i));
        std::swap(m_perm[static_cast<size_t>(i)], m_perm[j]);
        m_mask[m_perm[static_cast<size_t>(i)]] = 1;
    }
    m_prev = prev;
    m_n_vocab = n_vocab;
    m_gamma = p.gamma;
    m_key = p.hash_key;
    return m_mask;
}

bool WatermarkGreenList::is_green(int32_t prev, int32_t id, int n_vocab, const WatermarkParams& p) {
    const auto& m = mask(prev, n_vocab, p);
    return id >= 0 && id < n_vocab && m[static_cast<size_t>(id)] != 0;
}

void apply_watermark(float* logits, int n_vocab, int32_t prev, const WatermarkParams& p, WatermarkGreenList& lists) {
    const auto& m = lists.mask(prev, n_vocab, p);
    for (int i = 0; i < n_vocab; ++i)
        if (m[static_cast<size_t>(i)]) logits[i] += p.delta;
}

double watermark_z(int64_t n_green, int64_t n_scored, double gamma) {
    if (n_scored <= 0) return std::numeric_limits<double>::quiet_NaN();
    const double t = static_cast<double>(n_scored);
    return (static_cast<double>(n_green) - gamma * t) / std::sqrt(t * gamma * (1.0 - gamma));
}

double watermark_p_value(double z) {
    if (std::isnan(z)) return 1.0;
    return 0.5 * std::erfc(z / std::sqrt(2.0));
}

Result<WatermarkScore> detect_watermark(std::span<const int32_t> ids, int n_vocab, const WatermarkParams& p) {
    if (Status s = p.validate(); !s) return s;
    if (n_vocab <= 0)
        return Status::error("watermark detection needs the vocabulary size, got " + std::to_string(n_vocab));
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return Status::error("token " + std::to_string(i) + " has id " + std::to_string(ids[i]) +
                                 ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    WatermarkScore s;
    s.green.assign(ids.size(), 0);
    WatermarkGreenList lists;
    for (size_t i = 1; i < ids.size(); ++i) {
        const bool g = lists.is_green(ids[i - 1], ids[i], n_vocab, p);
        s.green[i] = g ? 1 : 0;
        s.n_green += g ? 1 : 0;
        ++s.n_scored;
    }
    s.z = watermark_z(s.n_green, s.n_scored, p.gamma);
    s.p_value = watermark_p_value(s.z);
    return s;
}

}  // namespace kvs
