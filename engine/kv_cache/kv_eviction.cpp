#include "engine/kv_cache/kv_eviction.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

namespace kvs {

const char* kv_evict_policy_name(KvEvictPolicy p) {
    switch (p) {
        case KvEvictPolicy::none: return "none";
        case KvEvictPolicy::streaming: return "streaming";
        case KvEvictPolicy::h2o: return "h2o";
        case KvEvictPolicy::snapkv: return "snapkv";
        case KvEvictPolicy::merge: return "merge";
    }
    return "none";
}

Result<KvEvictPolicy> parse_kv_evict_policy(const std::string& name) {
    using R = Result<KvEvictPolicy>;
    std::string n;
    for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == "none" || n == "off" || n.empty()) return KvEvictPolicy::none;
    if (n == "streaming" || n == "streamingllm") return KvEvictPolicy::streaming;
    if (n == "h2o") return KvEvictPolicy::h2o;
    if (n == "snapkv" || n == "snap") return KvEvictPolicy::snapkv;
    if (n == "merge") return KvEvictPolicy::merge;
    return R::error("unknown KV eviction policy '" + name + "' (expected none, streaming, h2o, snapkv or merge)");
}

int KvEvictionSetting::budget_for(int context_tokens) const {
    if (budget_tokens > 0) return budget_tokens;
    const double f = budget_fraction > 0 ? budget_fraction : 0.5;
    return std::max(1, static_cast<int>(std::floor(f * context_tokens)));
}

std::string KvEvictionSetting::describe() const {
    std::string s = kv_evict_policy_name(policy);
    if (!enabled()) return s;
    if (budget_tokens > 0) return s + ":" + std::to_string(budget_tokens);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", budget_fraction > 0 ? budget_fraction : 0.5);
    return s + ":" + buf;
}

Result<KvEvictionSetting> parse_kv_eviction(const std::string& spec) {
    using R = Result<KvEvictionSetting>;
    KvEvictionSetting s;
    const auto colon = spec.find(':');
    auto policy = parse_kv_evict_policy(spec.substr(0, colon));
    if (!policy) return policy.status();
    s.policy = *policy;
    if (colon == std::string::npos) {
        if (s.enabled()) s.budget_fraction = 0.5;
        return s;
    }
    const std::string b = spec.substr(colon + 1);
    if (!s.enabled()) return R::error("KV eviction '" + spec + "': policy none takes no budget");
    char* end = nullptr;
    const double v = b.empty() ? 0.0 : std::strtod(b.c_str(), &end);
    if (b.empty() || !end || *end != '\0' || !std::isfinite(v))
        return R::error("KV eviction budget '" + b +
                        "' is not a number (tokens such as 512, or a fraction such as 0.5)");
    if (v <= 0) return R::error("KV eviction budget '" + b + "' must be more than 0");
    if (b.find('.') != std::string::npos || v < 1) {
        if (v > 1) return R::error("KV eviction budget '" + b + "' is a fraction over 1 (write tokens without a '.')");
        s.budget_fraction = v;
    } else {
        if (v > 1e7) return R::error("KV eviction budget '" + b + "' is too large");
        s.budget_tokens = static_cast<int>(v);
    }
    KVS_RETURN_IF_ERROR(check_kv_eviction(s));
    return s;
}

Status check_kv_eviction(const KvEvictionSetting& s) {
    if (!s.enabled()) return Status::ok();
    if (s.budget_tokens < 0)
        return Status::error("KV eviction budget " + std::to_string(s.budget_tokens) + " is negative");
    if (s.budget_tokens == 0 && !(s.budget_fraction > 0 && s.budget_fraction <= 1))
        return Status::error("KV eviction budget fraction " + std::to_string(s.budget_fraction) +
                             " must be in (0, 1] (or give tokens)");
    if (s.budget_tokens > 0 && s.budget_tokens < 2)
        return Status::error("KV eviction budget " + std::to_string(s.budget_tokens) + " is under 2 tokens");
    if (s.policy == KvEvictPolicy::streaming && s.sinks < 0)
        return Status::error("KV eviction sinks " + std::to_string(s.sinks) + " is negative");
    if (s.policy == KvEvictPolicy::streaming && s.budget_tokens > 0 && s.budget_tokens <= s.sinks)
        return Status::error("KV eviction budget " + std::to_string(s.budget_tokens) + " leaves no room after " +
                             std::to_string(s.sinks) + " attention sinks");
    if (s.obs_window < 1)
        return Status::error("KV eviction observation window " + std::to_string(s.obs_window) + " is under 1");
    if (s.pool_kernel < 1 || s.pool_kernel % 2 == 0)
        return Status::error("KV eviction pooling kernel " + std::to_string(s.pool_kernel) +
                             " must be odd and at least 1");
    return Status::ok();
}

int CompactionPlan::first_changed() const {
    for (size_t j = 0; j < entries.size(); ++j)
        if (entries[j].size() != 1 || entries[j][0] != static_cast<int32_t>(j)) return static_cast<int>(j);
    return static_cast<int>(entries.size());
}

int kv_eviction_window(const KvEvictionState& s) {
    const int b = s.budget;
    int w = s.setting.window;
    if (w < 0) {
        switch (s.setting.policy) {
            case KvEvictPolicy::streaming: w = b - s.setting.sinks; break;
            case KvEvictPolicy::snapkv: w = std::min(s.setting.obs_window, b / 2); break;
            case KvEvictPolicy::merge: w = b / 4; break;
            default: w = b / 2; break;
        }
    }
    return std::clamp(w, 0, std::max(0, b - 1));
}

std::vector<int32_t> keep_top_and_recent(const std::vector<float>& score, const std::vector<int32_t>& pos, int n_top,
                                         int window) {
    const int n = static_cast<int>(score.size());
    const int w = std::clamp(window, 0, n);
    std::vector<int32_t> by_pos(static_cast<size_t>(n));  // newest first
    std::iota(by_pos.begin(), by_pos.end(), 0);
    std::stable_sort(by_pos.begin(), by_pos.end(), [&](int32_t a, int32_t b) { return pos[a] > pos[b]; });
    std::vector<int32_t> keep(by_pos.begin(), by_pos.begin() + w);
    std::vector<int32_t> older(by_pos.begin() + w, by_pos.end());
    std::sort(older.begin(), older.end(), [&](int32_t a, int32_t b) {  // most score first, ties: the older
        return score[a] != score[b] ? score[a] > score[b] : pos[a] < pos[b];
    });
    older.resize(static_cast<size_t>(std::clamp(n_top, 0, static_cast<int>(older.size()))));
    keep.insert(keep.end(), older.begin(), older.end());
    std::sort(keep.begin(), keep.end());
    return keep;
}

namespace {

// Kept entries stay where they are when they can; the ones past the new length fill the
// holes the dropped ones leave (attention does not care about the order of a cache whose
// keys keep their own rotation), so a step that drops one entry moves at most one.
CompactionPlan fill_holes(const std::vector<int32_t>& kept) {
    const int m = static_cast<int>(kept.size());
    std::vector<char> is_kept;
    for (int32_t k : kept) {
        if (static_cast<int>(is_kept.size()) <= k) is_kept.resize(static_cast<size_t>(k) + 1, 0);
        is_kept[static_cast<size_t>(k)] = 1;
    }
    std::vector<int32_t> tail;
    for (int32_t k : kept)
        if (k >= m) tail.push_back(k);
    CompactionPlan p;
    size_t next = 0;
    for (int j = 0; j < m; ++j) {
        const bool stays = j < static_cast<int>(is_kept.size()) && is_kept[static_cast<size_t>(j)];
        p.entries.push_back({stays ? j : tail[next++]});
        p.weights.emplace_back();
    }
    return p;
}

CompactionPlan in_order(const std::vector<int32_t>& kept, bool reposition) {
    CompactionPlan p;
    p.reposition = reposition;
    for (int32_t k : kept) {
        p.entries.push_back({k});
        p.weights.emplace_back();
    }
    return p;
}

class Streaming final : public KvEvictionPolicyImpl {
public:
    bool wants_mass(const KvEvictionState&, int) const override { return false; }
    int target(const KvEvictionState& s, int block_size) const override {
        // Every eviction re-rotates and moves the whole window: drop a few more than needed
        // (up to a block) so that it happens once every few steps, not every step.
        const int slack = std::clamp((s.budget - s.setting.sinks) / 8, 0, block_size);
        return std::max(s.setting.sinks + 1, s.budget - slack);
    }
    CompactionPlan plan(const KvEvictionState& s, int target) const override {
        const int n = s.n_entries();
        const int sinks = std::min(s.setting.sinks, target);
        std::vector<int32_t> kept;
        for (int i = 0; i < sinks && i < n; ++i) kept.push_back(i);
        for (int i = std::max(sinks, n - (target - sinks)); i < n; ++i) kept.push_back(i);
        return in_order(kept, true);
    }
};

class H2O final : public KvEvictionPolicyImpl {
public:
    bool wants_mass(const KvEvictionState&, int) const override { return true; }
    CompactionPlan plan(const KvEvictionState& s, int target) const override {
        const int w = std::min(kv_eviction_window(s), target);
        return fill_holes(keep_top_and_recent(s.mass, s.pos, target - w, w));
    }
};

class SnapKV final : public KvEvictionPolicyImpl {
public:
    bool wants_mass(const KvEvictionState& s, int p) const override {
        return !s.snapped && p < s.n_prompt && p >= s.n_prompt - s.setting.obs_window;
    }
    bool should_evict(const KvEvictionState& s, bool prompt_done) const override {
        return prompt_done && s.n_entries() > s.budget;
    }
    CompactionPlan plan(const KvEvictionState& s, int target) const override {
        const int n = s.n_entries();
        const int w = std::min(kv_eviction_window(s), target);
        std::vector<float> score(static_cast<size_t>(n));
        if (!s.snapped) {  // the prompt's scores: the observation window's attention, pooled
            const int k = s.setting.pool_kernel, half = k / 2;
            for (int i = 0; i < n; ++i) {
                double sum = 0;
                for (int j = i - half; j <= i + half; ++j)
                    if (j >= 0 && j < n) sum += s.mass[static_cast<size_t>(j)];
                score[static_cast<size_t>(i)] = static_cast<float>(sum / k);  // zero padding, as avg_pool1d
            }
        } else {  // generated tokens in a FIFO beside the chosen prompt entries
            for (int i = 0; i < n; ++i)
                score[static_cast<size_t>(i)] = s.pos[static_cast<size_t>(i)] < s.n_prompt
                                                    ? s.mass[static_cast<size_t>(i)]
                                                    : -1e6f + static_cast<float>(s.pos[static_cast<size_t>(i)]);
        }
        return fill_holes(keep_top_and_recent(score, s.pos, target - w, w));
    }
};

class Merge final : public KvEvictionPolicyImpl {
public:
    bool wants_mass(const KvEvictionState&, int) const override { return true; }
    int target(const KvEvictionState& s, int block_size) const override {
        // A merge rewrites everything after the first merged run: a few under the budget.
        const int slack = std::clamp(s.budget / 8, 0, block_size);
        return std::max(2, s.budget - slack);
    }
    CompactionPlan plan(const KvEvictionState& s, int target) const override {
        const int n = s.n_entries();
        const int w = std::min(kv_eviction_window(s), target - 1);
        int k = target - w;
        std::vector<int32_t> kept;
        for (;;) {
            kept = keep_top_and_recent(s.mass, s.pos, k, w);
            int runs = 0;
            for (int i = 0, ki = 0; i < n; ++i) {
                const bool is_kept = ki < static_cast<int>(kept.size()) && kept[static_cast<size_t>(ki)] == i;
                if (is_kept) {
                    ++ki;
                } else if (i == 0 || (ki > 0 && kept[static_cast<size_t>(ki) - 1] == i - 1)) {
                    ++runs;  // a dropped entry right after a kept one (or at the start) opens a run
                }
            }
            const int total = static_cast<int>(kept.size()) + runs;
            if (total <= target || k == 0) break;
            k = std::max(0, k - (total - target));
        }
        CompactionPlan p;
        size_t ki = 0;
        for (int i = 0; i < n;) {
            if (ki < kept.size() && kept[ki] == i) {
                p.entries.push_back({i});
                p.weights.emplace_back();
                ++ki;
                ++i;
                continue;
            }
            std::vector<int32_t> run;
            while (i < n && !(ki < kept.size() && kept[ki] == i)) run.push_back(i++);
            double sum = 0;
            for (int32_t r : run) sum += std::max(0.0f, s.mass[static_cast<size_t>(r)]);
            std::vector<float> wts;
            for (int32_t r : run)
                wts.push_back(sum > 0 ? static_cast<float>(std::max(0.0f, s.mass[static_cast<size_t>(r)]) / sum)
                                      : 1.0f / static_cast<float>(run.size()));
            if (run.size() == 1) wts.clear();
            p.entries.push_back(std::move(run));
            p.weights.push_back(std::move(wts));
        }
        return p;
    }
};

}  // namespace

bool KvEvictionPolicyImpl::should_evict(const KvEvictionState& s, bool /*prompt_done*/) const {
    return s.n_entries() > s.budget;
}

int KvEvictionPolicyImpl::target(const KvEvictionState& s, int /*block_size*/) const { return s.budget; }

std::unique_ptr<KvEvictionPolicyImpl> make_kv_eviction_policy(KvEvictPolicy p) {
    switch (p) {
        case KvEvictPolicy::streaming: return std::make_unique<Streaming>();
        case KvEvictPolicy::h2o: return std::make_unique<H2O>();
        case KvEvictPolicy::snapkv: return std::make_unique<SnapKV>();
        case KvEvictPolicy::merge: return std::make_unique<Merge>();
        case KvEvictPolicy::none: break;
    }
    return nullptr;
}

void apply_plan_to_state(const CompactionPlan& plan, KvEvictionState& s) {
    std::vector<int32_t> pos, span;
    std::vector<float> mass;
    int merged = 0;
    for (const auto& src : plan.entries) {
        int32_t sp = 0;
        float m = 0;
        for (int32_t i : src) {
            sp += s.span[static_cast<size_t>(i)];
            m += s.mass[static_cast<size_t>(i)];
        }
        pos.push_back(s.pos[static_cast<size_t>(src.front())]);
        span.push_back(sp);
        mass.push_back(m);
        merged += sp > 1 ? 1 : 0;
    }
    s.n_evicted += s.n_entries() - static_cast<int64_t>(pos.size());
    s.pos = std::move(pos);
    s.span = std::move(span);
    s.mass = std::move(mass);
    s.n_merged = merged;
    ++s.n_evictions;
}

}  // namespace kvs
