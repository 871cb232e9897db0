#pragma once
// The pool of fixed-size KV blocks (vLLM's BlockPool): every block id is either free
// or held by one or more sequences (ref_cnt). Block ids index the paged KV tensors of
// kv_cache/kv_tensors.h. Allocation never moves data: a sequence's KV lives wherever
// its block table points.
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

struct KVCacheBlock {
    int32_t block_id = 0;
    int32_t ref_cnt = 0;
};

class BlockPool {
public:
    explicit BlockPool(int n_blocks);
    int n_blocks() const { return static_cast<int>(m_blocks.size()); }
    int n_free() const { return static_cast<int>(m_free.size()); }
    // n blocks off the free queue, or an error saying how many were asked and free.
    Result<std::vector<int32_t>> allocate(int n);
    // Drops one reference of each block; blocks reaching ref_cnt 0 go back to the free queue.
    void release(const std::vector<int32_t>& block_ids);
    const KVCacheBlock& block(int32_t id) const { return m_blocks[static_cast<size_t>(id)]; }

private:
    std::vector<KVCacheBlock> m_blocks;  // [n_blocks]
    std::deque<int32_t> m_free;          // free block ids, oldest freed first
};

}  // namespace kvs
