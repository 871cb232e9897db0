#pragma once
// KVCacheManager (vLLM v1's KVCacheManager): per request, the block table into the
// BlockPool, plus automatic prefix caching and copy-on-write forks. No model: it only
// decides which block holds which token; the caller runs the forward pass and copies.
//
// Token t of a request lives in block_table[t / block_size], slot t % block_size.
// Prefix caching hashes FULL blocks as a chain: hash_i = XXH3_64(hash_{i-1}, tokens of
// block i), so a block's hash names its whole prefix. A partial last block is never cached.
//
// The scheduler's use, one request per step:
//   n_cached = get_computed_blocks(id, prompt)              (new request only)
//   allocate_slots(id, tokens, n_new) -> no_room? preempt someone, or wait
//   prepare_append(id) before writing into a block a fork may share -> CopyOp to perform
//   free(id) when finished, cancelled or preempted
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/block_pool.h"
#include "engine/kv_cache/kv_block_tier.h"
#include "engine/kv_cache/sliding_window_blocks.h"

namespace kvs {

using RequestId = int64_t;

// Copy the KV of block src_block into dst_block (all layers, all slots) before writing.
struct CopyOp {
    int32_t src_block = 0;
    int32_t dst_block = 0;
};

struct SlotAllocation {
    bool no_room = false;                // not enough free blocks: nothing changed
    std::vector<int32_t> new_block_ids;  // blocks appended to the table (not counting prefix hits)
    std::vector<TierLoad> tier_loads;    // prefix hits from the KV tiers: copy into these blocks first
};

struct AppendPrep {
    bool no_room = false;        // the shared last block needs a copy and no block is free
    std::optional<CopyOp> copy;  // the copy the caller must perform before writing
};

// cached = free but still findable by hash; freed = free again because the request that held
// it no longer needs it while it goes on (out of its sliding window, or evicted): the block
// map shows where a sequence's KV was given back (the block may also be cached).
enum class BlockState { free, used, cached, freed };

// One block of the block map, for telemetry.
struct BlockInfo {
    int32_t block_id = 0;
    BlockState state = BlockState::free;
    int32_t ref_cnt = 0;
    std::vector<RequestId> owners;  // requests whose table holds this block (sorted)
    int n_filled = 0;               // tokens written: max over owners; block_size if cached
    bool hashed = false;            // registered in the prefix cache (used or cached)
};

struct KVCacheStats {
    int64_t query_tokens = 0;     // prompt tokens looked up in the prefix cache
    int64_t hit_tokens = 0;       // of those, found cached (any tier: device pool, CPU, disk)
    int64_t cpu_hit_tokens = 0;   // of the hits, from the CPU tier (KV tiers)
    int64_t disk_hit_tokens = 0;  // of the hits, from the disk store
    PrefixCacheCounters blocks;   // block-level queries, hits, evictions
};

class KVCacheManager {
public:
    KVCacheManager(int n_blocks, int block_size, bool enable_prefix_caching);

    int block_size() const { return m_block_size; }
    bool prefix_caching() const { return m_enable_prefix_caching; }

    // For a request holding no blocks yet: the longest chain of cached full blocks that
    // is a prefix of token_ids, at most (len-1)/block_size blocks so the last prompt
    // token is always computed (its logits are needed). Returns the cached token count
    // (a multiple of block_size). The hits are held as pending and taken by the next
    // allocate_slots for this request, which must come right after (no other allocation
    // in between, or they may have been evicted; allocate_slots then reports an error).
    Result<int> get_computed_blocks(RequestId id, const std::vector<int32_t>& token_ids);

    // Gives the request slots for num_new_tokens more tokens after the ones it has
    // (including pending prefix hits). token_ids_total: all of its tokens so far, at least
    // that many (used to hash blocks that become full). no_room leaves everything as it
    // was except that pending prefix hits are dropped. Error: misuse (token_ids_total too
    // short, shared partial last block without prepare_append, stale prefix hits).
    // num_lookahead_tokens: slots for that many more tokens after the new ones (speculative
    // draft tokens, vLLM's lookahead slots): they get slots but are never hashed into the
    // prefix cache, and truncate() gives back the ones that were rejected.
    Result<SlotAllocation> allocate_slots(RequestId id, const std::vector<int32_t>& token_ids_total, int num_new_tokens,
                                          int num_lookahead_tokens = 0);

    // Rolls the request back to its first num_tokens tokens (rejected draft tokens): the
    // blocks past them are released, last first. Refuses to cut into a block registered in
    // the prefix cache (only tokens that were never hashed may be rolled back).
    Status truncate(RequestId id, int num_tokens);

    // Before writing the next token: if the last block is partly filled and shared
    // (ref_cnt > 1), moves this request onto a fresh block and returns the copy to make.
    Result<AppendPrep> prepare_append(RequestId id);

    // The child gets the parent's table (every block ref_cnt++) and token count.
    Status fork(RequestId parent_id, RequestId child_id);

    // Releases every block of the request, last block first (so a cached sequence's tail
    // is evicted before its head), and forgets it. Unknown ids are ignored.
    void free(RequestId id);

    bool has_request(RequestId id) const { return m_requests.count(id) != 0; }
    std::vector<RequestId> request_ids() const;                   // sorted
    const std::vector<int32_t>& block_table(RequestId id) const;  // empty if unknown
    int num_tokens(RequestId id) const;                           // tokens with slots
    int num_free_blocks() const { return m_pool.n_free(); }
    int n_blocks() const { return m_pool.n_blocks(); }
    double usage() const;                      // fraction of blocks held by requests
    std::vector<BlockInfo> block_map() const;  // [n_blocks]
    KVCacheStats stats() const;
    const BlockPool& pool() const { return m_pool; }

    // A request's prefix-cache key beside its tokens (vLLM's extra keys: the LoRA adapter):
    // block 0 of a salted request chains from the salt, so requests with different salts
    // never share cached blocks. Set before the request's first allocation; kept across
    // preemption and swaps (free() keeps it), copied by fork(), dropped by forget_salt().
    void set_cache_salt(RequestId id, uint64_t salt);
    void forget_salt(RequestId id) {
        m_salts.erase(id);
        m_no_prefix.erase(id);
    }
    // A request that neither takes nor registers prefix-cache blocks (KV eviction compacts
    // its blocks in place, so they are never shared and never findable). Set before its
    // first allocation; kept across preemption, dropped by forget_salt().
    void set_prefix_caching(RequestId id, bool on) {
        if (on) m_no_prefix.erase(id);
        else
            m_no_prefix.insert(id);
    }
    // KV eviction: the request's cache now holds its first n_entries slots only (the caller
    // has moved the kept entries there); the blocks past them go back to the pool, last
    // first. Returns how many blocks were freed. Refused for a request whose blocks are shared
    // or hashed (it must have set_prefix_caching(id, false) and no forks) or for more entries
    // than it has.
    Result<int> compact(RequestId id, int n_entries);

    // KV tiers below the device pool (kv_tiers.h; null: none, the default). With a tier,
    // a prefix lookup that misses in the pool asks it next (its hits are allocated fresh
    // blocks and come back as SlotAllocation::tier_loads), and every cached block that an
    // allocation evicts is listed for take_spills(). Set before the first request.
    void set_tier(KvBlockTier* tier);
    // The cached blocks evicted since the last call whose bytes are still in the pool (a
    // block hashed and evicted again before anything was computed into it is left out).
    // The caller copies them out before this step writes into any block.
    std::vector<TierSpill> take_spills();
    // Every block registered in the prefix cache with the key the tiers store it under:
    // cached (free) blocks from least to most recently freed, then the blocks in use. What
    // the engine hands to the tiers when it goes, so a restart finds them on disk.
    std::vector<TierSpill> hashed_blocks_for_tiers() const;

    // Sliding-window layers (gemma3's local layers) in a pool of n_blocks of their own
    // (sliding_window_blocks.h): every request gets a second table, entry for entry beside
    // its block table, whose blocks wholly before its next query's window go back to that
    // pool at each allocate_slots; allocate_slots reports no_room when either pool lacks
    // blocks; prefix hits stop where a needed local block is no longer cached; forks share,
    // prepare_append copies (take_swa_copies) and truncate rolls back both tables. Call
    // before the first request.
    void enable_sliding_window(int window, int n_blocks);
    const SlidingWindowBlocks* sliding_window() const { return m_swa.get(); }
    // The request's local table (-1 = freed), [block_table(id).size()]; empty without.
    const std::vector<int32_t>& swa_block_table(RequestId id) const;
    // Local-layer block copies that prepare_append decided since the last call (dropped for
    // requests freed since): the caller copies them with the CopyOps of the same step.
    std::vector<CopyOp> take_swa_copies();
    // The local pool's block map, [its n_blocks] (empty without sliding-window layers).
    std::vector<BlockInfo> swa_block_map() const;

    // The chained hash of one full block (exposed for tests).
    static uint64_t hash_block(uint64_t parent_hash, const int32_t* tokens, int n);

private:
    struct RequestState {
        std::vector<int32_t> block_table;
        int num_tokens = 0;                  // tokens with slots
        std::vector<uint64_t> block_hashes;  // chain hashes of the full blocks so far
        std::vector<int32_t> pending_hits;   // from get_computed_blocks, taken by allocate_slots (-1: a tier hit)
        std::vector<uint64_t> pending_hashes;
        std::vector<TierHit> pending_tier;  // [pending_hits.size()] the bytes of the tier hits
        int pending_query_tokens = 0;       // prompt length looked up, counted when the hits are taken
        // Sliding-window layers: [block_table.size()] local-layer blocks, -1 = freed; and
        // [pending_hits.size()] local prefix hits (-1: before the first query's window).
        std::vector<int32_t> swa_table;
        std::vector<int32_t> swa_pending;
    };
    void hash_full_blocks(RequestId id, RequestState& r, const std::vector<int32_t>& token_ids, int n_full) const;
    uint64_t root_hash(RequestId id) const;  // the "parent" of block 0
    uint64_t salt_of(RequestId id) const;
    void note_allocated(const std::vector<int32_t>& ids);  // tiers: evictions -> spills, fresh blocks
    void note_cached(int32_t block, RequestId id, const int32_t* tokens);

    int m_block_size;
    bool m_enable_prefix_caching;
    BlockPool m_pool;
    std::unordered_map<RequestId, RequestState> m_requests;
    std::unordered_map<RequestId, uint64_t> m_salts;  // set_cache_salt
    int64_t m_query_tokens = 0, m_hit_tokens = 0, m_cpu_hit_tokens = 0, m_disk_hit_tokens = 0;
    // KV tiers (set_tier).
    struct BlockMeta {
        uint64_t salt = 0;
        std::vector<int32_t> tokens;
    };
    KvBlockTier* m_tier = nullptr;
    std::vector<BlockMeta> m_block_meta;  // [n_blocks] of the hashed blocks: what a spill needs
    std::vector<char> m_fresh;            // [n_blocks] allocated since the last take_spills (no KV yet)
    std::vector<TierSpill> m_spills;
    std::unique_ptr<SlidingWindowBlocks> m_swa;  // enable_sliding_window, or null
    std::vector<std::pair<RequestId, CopyOp>> m_swa_copies;
    std::unordered_set<RequestId> m_no_prefix;  // set_prefix_caching(id, false)
    std::vector<char> m_evict_freed;            // [n_blocks] given back by compact() and not handed out since (lazy)
};

}  // namespace kvs
