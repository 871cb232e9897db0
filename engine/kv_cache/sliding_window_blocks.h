#pragma once
// The KV blocks of a model's sliding-window layers (Gemma 3's local layers) in the batching
// engine: a BlockPool of their own (the local layers' K/V live in a KvTensors of their
// own, the main pool then holds only the global layers), and per request a second block
// table beside the main one, entry for entry (block i holds positions [i * block_size,
// (i + 1) * block_size) in both), -1 where the block fell out of the window and went back
// to the pool. A query at position p reads positions p - window + 1 .. p only, so a
// request whose next query is at position q never needs a block wholly before
// q - window + 1 again (drop_before); KVCacheManager calls it at every allocation.
//
// Prefix caching: a full local block is registered under the same chain hash as the main
// block of the same index. A window-freed block keeps its hash while it waits in the free
// queue (its bytes are intact until the pool hands it out again), so a later request with
// the same prefix can take it; longest_hit keeps a main-pool hit only as far as the local
// blocks its first query's window needs are still cached here: a prefix hit never
// reuses a local block that was freed and handed out again.
//
// "Freed" (BlockState::freed in the block map): a block that went back to the pool because
// the request it belonged to no longer needs it (out of its window) while that request
// lives on; it stays marked until it is allocated or taken as a prefix hit again.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/block_pool.h"

namespace kvs {

class SlidingWindowBlocks {
public:
    SlidingWindowBlocks(int n_blocks, int block_size, int window);

    int window() const { return m_window; }
    int block_size() const { return m_block_size; }
    int n_blocks() const { return m_pool.n_blocks(); }
    int n_free() const { return m_pool.n_free(); }
    int n_in_use() const { return m_pool.n_blocks() - m_pool.n_free(); }
    const BlockPool& pool() const { return m_pool; }
    bool is_freed(int32_t block) const { return m_freed[static_cast<size_t>(block)] != 0; }
    // Blocks given back by drop_before since the start.
    int64_t n_freed_total() const { return m_freed_total; }

    // The first table index a query at position pos reads: (pos - window + 1) / block_size, 0 at least.
    int first_needed_block(int pos) const;
    // The most local blocks one request holds right after an allocation whose chunk (new
    // tokens plus lookahead) has at most max_chunk tokens: its window's blocks and the chunk's.
    int max_blocks_per_request(int max_chunk) const;

    // Gives back the table's blocks wholly before position lo (their entries become -1);
    // blocks another request still shares only lose this reference. Returns how many
    // entries it cleared.
    int drop_before(std::vector<int32_t>& table, int lo);

    // Prefix hits. hashes: the chain hashes of the main pool's hit blocks 0..n-1. Returns the
    // longest l <= n such that every local block a query at position l * block_size reads
    // (table indices first_needed_block(l * block_size) .. l - 1) is cached here; *hits gets
    // l entries, -1 below that first index (never read again), the cached block otherwise.
    // Counts the lookups it makes in the pool's prefix counters.
    int longest_hit(const std::vector<uint64_t>& hashes, std::vector<int32_t>* hits);
    // Whether the hits still hold those hashes (nothing evicted them since longest_hit).
    bool hits_valid(const std::vector<int32_t>& hits, const std::vector<uint64_t>& hashes) const;
    // Of the hits, those waiting in the free queue (taking them uses up free blocks).
    int hits_in_free_queue(const std::vector<int32_t>& hits) const;
    // Takes one reference of each hit (entries >= 0).
    void take_hits(const std::vector<int32_t>& hits);

    // n fresh blocks, or an error naming the local pool and the numbers.
    Result<std::vector<int32_t>> allocate(int n);
    // Drops one reference of each entry >= 0, last first (a finished or preempted request).
    void release_table(const std::vector<int32_t>& table);
    // One reference of each entry >= 0 more (a fork shares the table).
    void share_table(const std::vector<int32_t>& table);
    // The last block of a table, shared and partly filled, is about to be written: a fresh
    // block replaces it in the table and the copy to make is returned (nullopt: none needed;
    // no_room set when the pool has no free block, the table unchanged).
    std::optional<std::pair<int32_t, int32_t>> copy_last_if_shared(std::vector<int32_t>& table, bool* no_room);
    // Registers a full block under the chain hash of its index (as the main pool does).
    void cache_full_block(int32_t block, uint64_t hash) { (void)m_pool.cache_full_block(block, hash); }
    // Gives back the tail of a table past its first keep entries (a speculative rollback).
    void truncate_table(std::vector<int32_t>& table, size_t keep);

private:
    int m_block_size;
    int m_window;
    BlockPool m_pool;
    std::vector<char> m_freed;  // [n_blocks] freed by the window, not handed out since
    int64_t m_freed_total = 0;
};

}  // namespace kvs
