#pragma once
// The pool of fixed-size KV blocks (vLLM v1's BlockPool): every block id is either free
// (on the free-block queue, ref_cnt 0) or held by one or more sequences (ref_cnt > 0),
// never both. Block ids index the paged KV tensors of kv_cache/kv_tensors.h.
// Allocation never moves data: a sequence's KV lives wherever its block table points.
//
// Prefix caching: a full block whose contents are known can be given a hash
// (cache_full_block). The free-block queue doubles as the LRU of cached blocks: a freed
// block that carries a hash goes to the tail and keeps its hash in the hash -> block map,
// so a later request with the same prefix can revive it (touch). Allocation takes from
// the head and evicts the cached hash of a block it takes. Freed blocks with no hash go
// to the head: they hold nothing worth keeping, so they are reused first.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

struct KVCacheBlock {
    int32_t block_id = 0;
    int32_t ref_cnt = 0;
    std::optional<uint64_t> block_hash;  // set only for a full block registered in the prefix cache
    // Links of the free-block queue (block ids, -1 = none); meaningful only while in_free_queue.
    int32_t prev_free = -1;
    int32_t next_free = -1;
    bool in_free_queue = false;
};

// A doubly linked list over block ids stored inside the blocks themselves:
// O(1) push at either end, pop from the head and removal from the middle.
class FreeBlockQueue {
public:
    explicit FreeBlockQueue(std::vector<KVCacheBlock>* blocks) : m_blocks(blocks) {}
    int size() const { return m_size; }
    int32_t head() const { return m_head; }
    int32_t pop_front();  // -1 when empty
    void push_back(int32_t id);
    void push_front(int32_t id);
    void remove(int32_t id);
    std::vector<int32_t> ids() const;  // head (next to be allocated) to tail

private:
    KVCacheBlock& at(int32_t id) { return (*m_blocks)[static_cast<size_t>(id)]; }
    std::vector<KVCacheBlock>* m_blocks;
    int32_t m_head = -1, m_tail = -1;
    int m_size = 0;
};

struct PrefixCacheCounters {
    int64_t queries = 0;    // block-hash lookups
    int64_t hits = 0;       // lookups that found a cached block
    int64_t evictions = 0;  // cached blocks whose hash was dropped to reuse the block
};

class BlockPool {
public:
    explicit BlockPool(int n_blocks);
    BlockPool(const BlockPool&) = delete;
    BlockPool& operator=(const BlockPool&) = delete;

    int n_blocks() const { return static_cast<int>(m_blocks.size()); }
    int n_free() const { return m_free.size(); }
    // n blocks off the head of the free queue (ref_cnt 1 each, cached hashes evicted),
    // or an error saying how many were asked and free.
    Result<std::vector<int32_t>> allocate(int n);
    // Drops one reference of each block, in the order given; blocks reaching ref_cnt 0
    // go back to the free queue (tail if hashed, head otherwise). An id that is not held
    // (a double release) or not in the pool is skipped, so the free queue stays intact.
    void release(const std::vector<int32_t>& block_ids);

    // Prefix cache. The cached block with this hash (free or in use), if any; counts a query.
    std::optional<int32_t> get_cached_block(uint64_t block_hash);
    // Takes one more reference of each block, removing it from the free queue if it was there.
    void touch(const std::vector<int32_t>& block_ids);
    // Registers a full, held block under its hash. If another block already holds that
    // hash, this block stays unhashed (the first copy is the one reused). Returns whether
    // the block was registered.
    bool cache_full_block(int32_t block_id, uint64_t block_hash);
    // Drops every cached hash (blocks in use keep their data, just not findable).
    void reset_prefix_cache();
    // KV tiers: while on, every cached hash that allocate() evicts is logged (block id, hash)
    // until taken, so its bytes can be copied out before the block is written again.
    void set_eviction_log(bool on) { m_log_evictions = on; }
    std::vector<std::pair<int32_t, uint64_t>> take_evictions() { return std::exchange(m_evictions, {}); }

    const KVCacheBlock& block(int32_t id) const { return m_blocks[static_cast<size_t>(id)]; }
    const PrefixCacheCounters& counters() const { return m_counters; }
    const std::unordered_map<uint64_t, int32_t>& cached_blocks() const { return m_cached; }
    std::vector<int32_t> free_queue_ids() const { return m_free.ids(); }

private:
    void evict_hash(KVCacheBlock& b);

    std::vector<KVCacheBlock> m_blocks;              // [n_blocks]
    FreeBlockQueue m_free;                           // head = next to allocate, tail = most recently freed cached
    std::unordered_map<uint64_t, int32_t> m_cached;  // block hash -> block id
    PrefixCacheCounters m_counters;
    bool m_log_evictions = false;
    std::vector<std::pair<int32_t, uint64_t>> m_evictions;  // (block id, evicted hash), oldest first
};

}  // namespace kvs
