#pragma once
// How the batching engine lays out its KV pools. Most models: one pool of blocks holding
// every layer. A model with sliding-window layers (gemma3's local layers) on a backend that
// runs them (supports_gemma_ops): the global layers in the main pool, the local layers in a
// pool of their own whose blocks go back as they fall out of each request's window
// (KVCacheManager::enable_sliding_window), unless EngineOptions::free_out_of_window is off.
#include <cstdint>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "kernels/dtype.h"

namespace kvs {

struct EngineOptions;

struct KvPoolPlan {
    int64_t n_blocks = 0;      // the main pool
    int n_local_blocks = 0;    // the sliding-window layers' pool; 0: none (one pool for every layer)
    ModelConfig main_layers;   // the model with the main pool's layers only (n_layer = their count)
    ModelConfig local_layers;  // the same for the local layers (meaningful when n_local_blocks > 0)
    bool split() const { return n_local_blocks > 0; }
};

// The KV budget EngineOptions asks for in bytes: kv_bytes, else kv_ram_fraction of the RAM,
// else 1 GiB (not used when kv_blocks is set).
int64_t kv_budget_bytes(const EngineOptions& opt);

// The pools for this model and options. kv_blocks, when set, is the main pool's size; a byte
// budget is shared: the local pool first, the rest to the main pool's (smaller) blocks.
// The local pool holds, unless EngineOptions::local_kv_blocks says otherwise, one window
// plus a block for every seat and one step's tokens, at most as many blocks as the main
// pool and at least what one request can hold at once. window_ops: the backend runs windowed
// attention (supports_gemma_ops). Error: a budget that holds no block.
Result<KvPoolPlan> plan_kv_pools(const ModelConfig& config, const EngineOptions& opt, bool window_ops);

}  // namespace kvs
