#pragma once
// What the KV cache manager sees of the tiers below the device pool (LMCache-style KV
// tiers, engine/kv_cache/kv_tiers.h): a full prefix block that the device pool evicts can
// be kept there, and a prefix lookup that misses in the device pool asks them next.
//
// A block outside the device pool is named by its prefix-cache chain hash (which already
// includes the request's cache salt, the LoRA adapter's) together with its own tokens and
// the salt, so a store can check what it holds against what was asked. The model, the KV
// type and the block size are the store's own keys (one store serves one engine).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvs {

struct TierBlockKey {
    uint64_t chain_hash = 0;      // KVCacheManager::hash_block chain, block 0 rooted in the salt
    uint64_t salt = 0;            // the request's cache salt (0: the base model)
    std::vector<int32_t> tokens;  // [block_size] the block's own token ids
};

enum class KvTier : uint8_t { device = 0, cpu = 1, disk = 2 };

// One block's K and V of every layer, as KvTensors::read_block lays them out:
// [n_layer, 2 (K, V), block_size, kv_dim] in the KV type. Shared so that a pending load
// keeps its bytes even if the tier drops the entry before the engine copies it.
using TierBytes = std::shared_ptr<const std::vector<uint8_t>>;

struct TierHit {
    TierBytes bytes;
    KvTier tier = KvTier::cpu;  // where it was found: cpu or disk
};

class KvBlockTier {
public:
    virtual ~KvBlockTier() = default;
    // The block's bytes when a tier holds exactly this block (hash, salt and tokens checked),
    // else nothing. Never returns damaged data: a bad entry is dropped and reported.
    virtual std::optional<TierHit> find(const TierBlockKey& key) = 0;
};

// The tiers' state and counts since the engine started, for telemetry (EngineSnapshot).
struct KvTierStats {
    bool enabled = false;
    int64_t cpu_limit_bytes = 0;  // 0: no CPU tier
    int64_t cpu_bytes = 0;
    int cpu_blocks = 0;
    int64_t disk_limit_bytes = 0;  // 0: no disk store
    int64_t disk_bytes = 0;
    int disk_blocks = 0;
    std::string disk_folder;
    int64_t spilled_blocks = 0;   // evicted device blocks handed to the tiers
    int64_t cpu_hit_blocks = 0;   // lookups answered by the CPU tier
    int64_t disk_hit_blocks = 0;  // lookups answered by the disk store
    int64_t disk_writes = 0;
    int64_t disk_write_failures = 0;
    int64_t bad_files = 0;  // damaged or foreign block files skipped (never loaded)
};

// A tier hit the engine must copy into a device block before the forward pass.
struct TierLoad {
    int32_t block_id = 0;
    TierBytes bytes;
    KvTier tier = KvTier::cpu;
};

// A cached device block evicted this step: the engine reads its bytes before anything
// writes into the block, and hands them to the tiers.
struct TierSpill {
    int32_t block_id = 0;
    TierBlockKey key;
};

}  // namespace kvs
