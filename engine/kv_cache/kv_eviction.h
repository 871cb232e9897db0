#pragma once
// KV eviction ("squeezed" attention) per request: a request may hold at most a budget of
// cached tokens; when its cache grows past it, a policy picks which entries stay, the kept
// K/V entries are compacted toward the front of its block table (engine/kv_cache/
// kv_compaction.h moves the bytes) and whole tail blocks go back to the pool.
//
// The cache then no longer holds one entry per token: entry i of a request's cache stands
// for the logical position pos[i] (a merged entry for a run of span[i] positions). A new
// token's query keeps its logical position for RoPE (keys are stored already rotated, and
// moved entries keep their rotation), except under StreamingLLM, which, as the paper does,
// uses positions inside the cache: a moved key is re-rotated by (new index - old index) and
// a new token is rotated by its cache index.
//
// Policies (all keep one set of entries for every layer and head: the block table is
// shared by the layers; scores are summed over layers and query heads):
//  - streaming (StreamingLLM, Xiao et al. 2023): the first `sinks` entries (attention
//    sinks, 4) + the most recent entries.
//  - h2o (Zhang et al. 2023): the entries with the largest accumulated attention mass
//    (every query of prompt and output adds its probabilities) + a recent window (half
//    the budget unless given).
//  - snapkv (Li et al. 2024): once, at the end of the prefill, prompt entries are scored
//    by the attention of the last `obs_window` prompt queries (32), averaged over
//    `pool_kernel` (5) neighbours; the top ones + the observation window stay. After that,
//    generated tokens are kept in a FIFO window beside the chosen prompt entries.
//  - merge (the lesson's variant): the top entries by accumulated attention mass + a recent
//    window stay; every run of dropped entries between two kept ones becomes one entry, the
//    average of their K and V weighted by their attention mass.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

enum class KvEvictPolicy { none, streaming, h2o, snapkv, merge };

const char* kv_evict_policy_name(KvEvictPolicy p);  // "none", "streaming", "h2o", "snapkv", "merge"
// Also takes "streamingllm" and "snap"; an error naming the value and the names otherwise.
Result<KvEvictPolicy> parse_kv_evict_policy(const std::string& name);

// A request's eviction setting (GenerationRequest::kv_eviction).
struct KvEvictionSetting {
    KvEvictPolicy policy = KvEvictPolicy::none;
    int budget_tokens = 0;         // > 0: at most this many cached tokens
    double budget_fraction = 0.0;  // else (0, 1]: of the request's context (prompt + max_tokens)
    int sinks = 4;                 // streaming: attention sinks kept at the front
    int window = -1;               // recent entries always kept; -1: the policy's default
    int obs_window = 32;           // snapkv: prompt queries that score the prompt
    int pool_kernel = 5;           // snapkv: average pooling of the scores (odd)
    bool enabled() const { return policy != KvEvictPolicy::none; }
    // The budget in tokens for a request of context_tokens (prompt + max_tokens).
    int budget_for(int context_tokens) const;
    std::string describe() const;  // "h2o:512", "streaming:0.5"
};

// "POLICY[:BUDGET]": "streaming:512", "h2o:0.5", "none"; a budget with a '.' or below 1 is a
// fraction of the context, otherwise tokens; no budget: half of the context. Errors name the
// value: an unknown policy, a budget that is not a number, 0, negative or a fraction over 1.
Result<KvEvictionSetting> parse_kv_eviction(const std::string& spec);
// The setting's numbers checked (budget, sinks, windows); the error names the value.
Status check_kv_eviction(const KvEvictionSetting& s);

// One request's cache as the policy sees it, entry i = cache index i.
struct KvEvictionState {
    KvEvictionSetting setting;
    int budget = 0;  // tokens (setting.budget_for at submit)
    int n_prompt = 0;
    std::vector<int32_t> pos;   // [n_entries] logical position (a merged entry: its run's first)
    std::vector<int32_t> span;  // [n_entries] positions it stands for (1, or a merged run)
    std::vector<float> mass;    // [n_entries] accumulated attention mass (h2o, merge; snapkv: its score)
    bool snapped = false;       // snapkv: the prompt was compressed
    // Counters for telemetry and the tests.
    int64_t n_evicted = 0;       // logical positions no longer in the cache (merged ones included)
    int n_merged = 0;            // merged entries in the cache now
    int64_t n_freed_blocks = 0;  // blocks given back by compaction
    int peak_entries = 0;        // most entries held at once (during a step, before eviction)
    int n_evictions = 0;         // compactions run
    void reset() {               // preempted by recompute: the cache starts over
        pos.clear();
        span.clear();
        mass.clear();
        snapped = false;
        n_evicted = 0;
        n_merged = 0;
    }
    int n_entries() const { return static_cast<int>(pos.size()); }
};

// What a compaction does: new entry j of the cache is made from the old entries
// entries[j] (ascending cache indices): one entry is moved (or stays, when it is j); several
// are averaged, weighted by weights[j] (same length; they sum to 1).
struct CompactionPlan {
    std::vector<std::vector<int32_t>> entries;  // [new entries] old cache indices
    std::vector<std::vector<float>> weights;    // [new entries] empty for a single source
    bool reposition = false;                    // streaming: keys re-rotated from their old index to the new one
    int first_changed() const;                  // the first new index whose content changes (entries.size() when none)
};

// The policy: which entries stay when the cache must shrink to at most `target` entries.
class KvEvictionPolicyImpl {
public:
    virtual ~KvEvictionPolicyImpl() = default;
    // Whether this step's tokens of a request should report attention mass: h2o and merge
    // always; snapkv for the prompt's last obs_window tokens before it has compressed.
    virtual bool wants_mass(const KvEvictionState& s, int logical_pos) const = 0;
    // Whether the request must shrink now (entries over the budget; snapkv only once its
    // prompt is computed). prompt_done: every prompt token has its K/V.
    virtual bool should_evict(const KvEvictionState& s, bool prompt_done) const;
    // Entries to shrink to when evicting (<= budget; some policies go a few under it so that
    // the next evictions come less often).
    virtual int target(const KvEvictionState& s, int block_size) const;
    virtual CompactionPlan plan(const KvEvictionState& s, int target) const = 0;
};
std::unique_ptr<KvEvictionPolicyImpl> make_kv_eviction_policy(KvEvictPolicy p);

// The state after `plan` ran: positions, spans, masses and counters of the new entries.
void apply_plan_to_state(const CompactionPlan& plan, KvEvictionState& s);

// Helpers the policies share (exposed for tests): the recent-window size for a budget, and
// the kept cache indices (ascending) of "the `window` entries with the latest positions, plus
// the top `n_top` of the others by score" (ties go to the older position).
int kv_eviction_window(const KvEvictionState& s);
std::vector<int32_t> keep_top_and_recent(const std::vector<float>& score, const std::vector<int32_t>& pos, int n_top,
                                         int window);

}  // namespace kvs
