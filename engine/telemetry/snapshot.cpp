// Request latency math and the helpers that turn the KV cache's view into telemetry rows.
#include "engine/telemetry/snapshot.h"

#include <algorithm>

namespace kvs {

// ---- RequestMetrics ----------------------------------------------------------------------

double RequestMetrics::queue_ms() const { return first_scheduled_ms < 0 ? -1.0 : first_scheduled_ms - arrival_ms; }

double RequestMetrics::ttft_ms() const { return first_token_ms < 0 ? -1.0 : first_token_ms - arrival_ms; }

double RequestMetrics::e2e_ms() const { return finish_ms < 0 ? -1.0 : finish_ms - arrival_ms; }

double RequestMetrics::tpot_ms() const {
    // The mean of the gaps telescopes to (last - first) / (n - 1).
    const size_t n = token_times_ms.size();
    if (n < 2) return 0.0;
    return (token_times_ms.back() - token_times_ms.front()) / static_cast<double>(n - 1);
}

std::vector<double> RequestMetrics::inter_token_ms() const {
    std::vector<double> gaps;  // [n_output - 1]
    if (token_times_ms.size() < 2) return gaps;
    gaps.reserve(token_times_ms.size() - 1);
    for (size_t i = 1; i < token_times_ms.size(); ++i) gaps.push_back(token_times_ms[i] - token_times_ms[i - 1]);
    return gaps;
}

// ---- block map -------------------------------------------------------------------------

const char* block_slot_state_name(BlockSlotState s) {
    switch (s) {
        case BlockSlotState::free: return "free";
        case BlockSlotState::used: return "used";
        case BlockSlotState::cached: return "cached";
        case BlockSlotState::swapped: return "swapped";
        case BlockSlotState::freed: return "freed";
    }
    return "?";
}

static BlockSlotState slot_state(BlockState s) {
    switch (s) {
        case BlockState::free: return BlockSlotState::free;
        case BlockState::used: return BlockSlotState::used;
        case BlockState::cached: return BlockSlotState::cached;
        case BlockState::freed: return BlockSlotState::freed;
    }
    return BlockSlotState::free;
}

static std::vector<BlockView> views_of(std::vector<BlockInfo> map) {
    std::vector<BlockView> views(map.size());  // [n_blocks]
    for (size_t i = 0; i < map.size(); ++i) {
        BlockInfo& b = map[i];
        BlockView& v = views[i];
        v.block_id = b.block_id;
        v.state = slot_state(b.state);
        v.ref_cnt = b.ref_cnt;
        v.owners = std::move(b.owners);
        v.n_filled = b.n_filled;
        v.hashed = b.hashed;
    }
    return views;
}

std::vector<BlockView> block_views(const KVCacheManager& kv) { return views_of(kv.block_map()); }

std::vector<BlockView> local_block_views(const KVCacheManager& kv) { return views_of(kv.swa_block_map()); }

void fill_local_pool(EngineSnapshot& s, const KVCacheManager& kv) {
    const SlidingWindowBlocks* swa = kv.sliding_window();
    if (!swa) return;
    s.local_blocks = local_block_views(kv);
    s.sliding_window = swa->window();
    s.total_freed_blocks = swa->n_freed_total();
    fill_local_counts(s.step, kv);
}

void fill_local_counts(StepRecord& rec, const KVCacheManager& kv) {
    if (const SlidingWindowBlocks* swa = kv.sliding_window()) {
        rec.local_blocks_used = swa->n_in_use();
        rec.n_local_blocks = swa->n_blocks();
    }
}

std::vector<HostBlockView> host_block_views(
    const std::vector<std::pair<RequestId, std::vector<int32_t>>>& host_tables) {
    std::vector<HostBlockView> out;
    for (const auto& [id, table] : host_tables)
        for (int32_t hb : table) out.push_back({hb, id});
    std::sort(out.begin(), out.end(),
              [](const HostBlockView& a, const HostBlockView& b) { return a.host_block < b.host_block; });
    return out;
}

RequestView request_view(const SchedRequest& r, const KVCacheManager& kv, int n_host_blocks) {
    RequestView v;
    v.id = r.id;
    v.status = r.status;
    v.finish_reason = r.finish_reason;
    v.priority = r.priority;
    v.n_prompt = r.num_prompt();
    v.n_output = r.num_output();
    v.max_tokens = r.max_tokens;
    v.num_computed_tokens = r.num_computed_tokens;
    v.num_cached_tokens = r.num_cached_tokens;
    v.block_ids = kv.block_table(r.id);
    v.local_block_ids = kv.swa_block_table(r.id);
    v.n_host_blocks = n_host_blocks;
    v.num_preemptions = r.num_preemptions;
    if (!v.block_ids.empty()) v.tokens = r.all_tokens();
    return v;
}

void fill_block_counts(StepRecord& rec, const std::vector<BlockView>& blocks, int block_size) {
    int used = 0, cached = 0, free_blocks = 0;
    int64_t filled = 0;
    for (const BlockView& b : blocks) {
        switch (b.state) {
            case BlockSlotState::used:
                ++used;
                filled += b.n_filled;  // once per physical block, however many share it
                break;
            case BlockSlotState::cached: ++cached; break;
            case BlockSlotState::free:
            case BlockSlotState::freed: ++free_blocks; break;
            case BlockSlotState::swapped: break;  // not a device state
        }
    }
    rec.blocks_used = used;
    rec.blocks_cached = cached;
    rec.blocks_free = free_blocks;
    rec.n_blocks = static_cast<int>(blocks.size());
    rec.kv_usage = blocks.empty() ? 0.0 : static_cast<double>(used) / static_cast<double>(blocks.size());
    rec.tokens_in_kv = filled;
    const int64_t capacity = static_cast<int64_t>(used) * block_size;
    rec.internal_waste = capacity > 0 ? 1.0 - static_cast<double>(filled) / static_cast<double>(capacity) : 0.0;
}

double prefix_hit_rate(const KVCacheStats& s) {
    return s.query_tokens > 0 ? static_cast<double>(s.hit_tokens) / static_cast<double>(s.query_tokens) : 0.0;
}

}  // namespace kvs
