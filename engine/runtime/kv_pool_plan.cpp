#include "engine/runtime/kv_pool_plan.h"

#include <algorithm>
#include <string>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/kv_cache/sliding_window_blocks.h"
#include "engine/runtime/engine.h"

namespace kvs {

int64_t kv_budget_bytes(const EngineOptions& opt) {
    int64_t bytes = opt.kv_bytes;
    if (bytes <= 0 && opt.kv_ram_fraction > 0) bytes = static_cast<int64_t>(opt.kv_ram_fraction * physical_ram_bytes());
    return bytes > 0 ? bytes : int64_t{1} << 30;
}

Result<KvPoolPlan> plan_kv_pools(const ModelConfig& c, const EngineOptions& opt, bool window_ops) {
    using R = Result<KvPoolPlan>;
    const int bs = opt.block_size;
    KvPoolPlan plan;
    plan.main_layers = c;
    int n_local_layers = 0;
    for (int il = 0; il < c.n_layer; ++il) n_local_layers += c.is_swa(il) ? 1 : 0;
    const bool split = opt.free_out_of_window && window_ops && c.sliding_window > 0 && n_local_layers > 0;
    if (split) {
        plan.main_layers.n_layer = c.n_layer - n_local_layers;
        plan.local_layers = c;
        plan.local_layers.n_layer = n_local_layers;
    }
    const int64_t main_block = kv_cache_bytes_per_token(plan.main_layers, opt.kv_type) * bs;
    const int64_t local_block = split ? kv_cache_bytes_per_token(plan.local_layers, opt.kv_type) * bs : 0;

    int64_t n_local = 0;
    if (split) {
        const SlidingWindowBlocks shape(0, bs, c.sliding_window);
        const int budget = std::max(1, opt.scheduler.max_num_batched_tokens);
        const int per_request = shape.max_blocks_per_request(budget);
        if (opt.local_kv_blocks > 0) {
            n_local = opt.local_kv_blocks;
        } else {
            const int per_seat = shape.max_blocks_per_request(1);  // a decoding request's window
            n_local = std::max<int64_t>(
                per_request, int64_t{std::max(1, opt.scheduler.max_num_seqs)} * per_seat + (budget + bs - 1) / bs);
        }
    }
    if (opt.kv_blocks > 0) {
        plan.n_blocks = opt.kv_blocks;
    } else {
        const int64_t bytes = kv_budget_bytes(opt);
        plan.n_blocks = (bytes - n_local * local_block) / std::max<int64_t>(1, main_block);
        if (split && opt.local_kv_blocks <= 0 && plan.n_blocks < n_local)  // a small budget: the same count in both
            plan.n_blocks = n_local = bytes / std::max<int64_t>(1, main_block + local_block);
    }
    if (plan.n_blocks < 1)
        return R::error("the KV memory budget holds no block: one block of " + std::to_string(bs) + " tokens takes " +
                        std::to_string(main_block + local_block) + " bytes");
    if (split && opt.local_kv_blocks <= 0) n_local = std::min(n_local, plan.n_blocks);
    plan.n_local_blocks = static_cast<int>(std::max<int64_t>(split ? 1 : 0, n_local));
    return plan;
}

}  // namespace kvs
