#pragma once
// The CPU tier of the KV tiers (engine/kv_cache/kv_tiers.h): full prefix blocks evicted
// from the device pool, kept in host memory under a byte bound, least recently used first
// out. put() returns what it pushed out so the caller can hand it to the disk store.
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache/kv_block_tier.h"

namespace kvs {

struct CpuTierEntry {
    uint64_t store_key = 0;  // the tier key (kv_tiers.h tier_key): chain hash + model + KV type + block size
    TierBlockKey key;
    TierBytes bytes;
};

class KvCpuTier {
public:
    explicit KvCpuTier(int64_t limit_bytes) : m_limit(limit_bytes) {}

    int64_t limit_bytes() const { return m_limit; }
    int64_t bytes() const { return m_bytes; }  // payload bytes held, never above limit_bytes()
    int n_blocks() const { return static_cast<int>(m_map.size()); }
    bool contains(uint64_t store_key) const { return m_map.count(store_key) != 0; }

    // Adds (or refreshes) an entry as the most recently used; entries pushed out to stay
    // within the bound come back, oldest first. An entry larger than the whole bound is not
    // kept (it comes back as pushed out).
    std::vector<CpuTierEntry> put(CpuTierEntry e);
    // The entry with this key, made the most recently used; nothing when absent.
    std::optional<CpuTierEntry> get(uint64_t store_key);
    // Store keys from least to most recently used (tests, telemetry).
    std::vector<uint64_t> lru_keys() const;

private:
    using List = std::list<CpuTierEntry>;  // front = least recently used
    int64_t m_limit;
    int64_t m_bytes = 0;
    List m_lru;
    std::unordered_map<uint64_t, List::iterator> m_map;
};

}  // namespace kvs
