#include "engine/kv_cache/block_pool.h"

#include <cassert>
#include <string>

namespace kvs {

BlockPool::BlockPool(int n_blocks) : m_blocks(static_cast<size_t>(n_blocks)) {
    for (int i = 0; i < n_blocks; ++i) {
        m_blocks[static_cast<size_t>(i)].block_id = i;
        m_free.push_back(i);
    }
}

Result<std::vector<int32_t>> BlockPool::allocate(int n) {
    if (n > n_free())
        return Result<std::vector<int32_t>>::error("KV pool out of blocks: " + std::to_string(n) + " needed, " +
                                                   std::to_string(n_free()) + " of " + std::to_string(n_blocks()) +
                                                   " free");
    std::vector<int32_t> ids;
    ids.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        const int32_t id = m_free.front();
        m_free.pop_front();
        assert(m_blocks[static_cast<size_t>(id)].ref_cnt == 0);
        m_blocks[static_cast<size_t>(id)].ref_cnt = 1;
        ids.push_back(id);
    }
    return ids;
}

void BlockPool::release(const std::vector<int32_t>& block_ids) {
    for (int32_t id : block_ids) {
        auto& b = m_blocks[static_cast<size_t>(id)];
        assert(b.ref_cnt > 0);
        if (--b.ref_cnt == 0) m_free.push_back(id);
    }
}

}  // namespace kvs
