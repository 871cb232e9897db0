#pragma once
// The bytes of a KV eviction (engine/kv_cache/kv_eviction.h): one request's cache entries
// moved, averaged or re-rotated in every layer's K and V as a CompactionPlan says, inside
// the blocks the request holds (its table before the tail blocks go back to the pool).
// Host-visible backends only (the CPU): the rows are read and written in place.
#include <cstdint>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/kv_eviction.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/model.h"

namespace kvs {

// New entry j <- plan.entries[j] (old cache indices): a single source is copied byte for
// byte (with plan.reposition, its key is first rotated by j - source, all rotated dims of
// every kv head, the model's RoPE style and base); several sources are averaged with
// plan.weights[j] in float and stored again in the cache's type. Entries whose source is
// themselves are not touched. table: [blocks] the request's block table.
Status apply_compaction(KvTensors& kv, bool host_visible, const ModelConfig& config, const std::vector<int32_t>& table,
                        const CompactionPlan& plan);

// Rotates one stored key row (kv_dim values: n_kv_head heads of head_dim) by delta
// positions: RoPE's rotation by angle delta * base^(-2i/n_rot) on each pair. Rotations
// compose, so a key rotated for position p and then by delta is the key for p + delta (up to
// rounding). Exposed for tests.
void rerotate_key(float* k, int n_kv_head, int head_dim, int n_rot, float freq_base, RopeStyle style, int delta);

}  // namespace kvs
