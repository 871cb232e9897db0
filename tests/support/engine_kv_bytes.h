#pragma once
// The engine's KV bytes per token (kv_cache_bytes_per_token, engine/kv_cache/kv_tensors.h)
// for a model shape, with the signature of ui::KvBytesPerTokenFn: what the app hands
// the memory planner, so ui tests check the planner against the engine's one definition.
#include <cstdint>

namespace kvs::test {

// K and V bytes of one token over all layers: F16 cache, or INT8 (Q8_0) when int8.
int64_t engine_kv_bytes_per_token(int n_layer, int n_kv_head, int head_dim, bool int8);

}  // namespace kvs::test
