#include "engine/kv_cache/kv_cpu_tier.h"

namespace kvs {

namespace {
int64_t size_of(const CpuTierEntry& e) { return e.bytes ? static_cast<int64_t>(e.bytes->size()) : 0; }
}  // namespace

std::vector<CpuTierEntry> KvCpuTier::put(CpuTierEntry e) {
    std::vector<CpuTierEntry> out;
    if (auto it = m_map.find(e.store_key); it != m_map.end()) {  // same block again: refresh
        m_lru.splice(m_lru.end(), m_lru, it->second);
        return out;
    }
    const int64_t sz = size_of(e);
    if (sz > m_limit) {
        out.push_back(std::move(e));
        return out;
    }
    while (!m_lru.empty() && m_bytes + sz > m_limit) {
        m_bytes -= size_of(m_lru.front());
        m_map.erase(m_lru.front().store_key);
        out.push_back(std::move(m_lru.front()));
        m_lru.pop_front();
    }
    const uint64_t key = e.store_key;
    m_lru.push_back(std::move(e));
    m_map[key] = std::prev(m_lru.end());
    m_bytes += sz;
    return out;
}

std::optional<CpuTierEntry> KvCpuTier::get(uint64_t store_key) {
    auto it = m_map.find(store_key);
    if (it == m_map.end()) return std::nullopt;
    m_lru.splice(m_lru.end(), m_lru, it->second);
    return *it->second;
}

std::vector<uint64_t> KvCpuTier::lru_keys() const {
    std::vector<uint64_t> keys;
    keys.reserve(m_lru.size());
    for (const auto& e : m_lru) keys.push_back(e.store_key);
    return keys;
}

}  // namespace kvs
