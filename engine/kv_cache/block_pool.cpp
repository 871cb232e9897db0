#include "engine/kv_cache/block_pool.h"

#include <cassert>
#include <string>

namespace kvs {

int32_t FreeBlockQueue::pop_front() {
    const int32_t id = m_head;
    if (id >= 0) remove(id);
    return id;
}

void FreeBlockQueue::push_back(int32_t id) {
    auto& b = at(id);
    assert(!b.in_free_queue);
    b.in_free_queue = true;
    b.prev_free = m_tail;
    b.next_free = -1;
    if (m_tail >= 0) at(m_tail).next_free = id;
    else
        m_head = id;
    m_tail = id;
    ++m_size;
}

void FreeBlockQueue::push_front(int32_t id) {
    auto& b = at(id);
    assert(!b.in_free_queue);
    b.in_free_queue = true;
    b.prev_free = -1;
    b.next_free = m_head;
    if (m_head >= 0) at(m_head).prev_free = id;
    else
        m_tail = id;
    m_head = id;
    ++m_size;
}

void FreeBlockQueue::remove(int32_t id) {
    auto& b = at(id);
    assert(b.in_free_queue);
    if (b.prev_free >= 0) at(b.prev_free).next_free = b.next_free;
    else
        m_head = b.next_free;
    if (b.next_free >= 0) at(b.next_free).prev_free = b.prev_free;
    else
        m_tail = b.prev_free;
    b.prev_free = b.next_free = -1;
    b.in_free_queue = false;
    --m_size;
}

std::vector<int32_t> FreeBlockQueue::ids() const {
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(m_size));
    for (int32_t id = m_head; id >= 0; id = (*m_blocks)[static_cast<size_t>(id)].next_free) out.push_back(id);
    return out;
}

BlockPool::BlockPool(int n_blocks) : m_blocks(static_cast<size_t>(n_blocks)), m_free(&m_blocks) {
    for (int i = 0; i < n_blocks; ++i) {
        m_blocks[static_cast<size_t>(i)].block_id = i;
        m_free.push_back(i);
    }
}

void BlockPool::evict_hash(KVCacheBlock& b) {
    if (!b.block_hash) return;
    auto it = m_cached.find(*b.block_hash);
    if (it != m_cached.end() && it->second == b.block_id) m_cached.erase(it);
    if (m_log_evictions) m_evictions.emplace_back(b.block_id, *b.block_hash);
    b.block_hash.reset();
    ++m_counters.evictions;
}

Result<std::vector<int32_t>> BlockPool::allocate(int n) {
    if (n > n_free())
        return Result<std::vector<int32_t>>::error("KV pool out of blocks: " + std::to_string(n) + " needed, " +
                                                   std::to_string(n_free()) + " of " + std::to_string(n_blocks()) +
                                                   " free");
    std::vector<int32_t> ids;
    ids.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        const int32_t id = m_free.pop_front();
        auto& b = m_blocks[static_cast<size_t>(id)];
        assert(b.ref_cnt == 0);
        evict_hash(b);
        b.ref_cnt = 1;
        ids.push_back(id);
    }
    return ids;
}

void BlockPool::release(const std::vector<int32_t>& block_ids) {
    for (int32_t id : block_ids) {
        // A block that is not held (a double release) or not in the pool would corrupt the
        // free queue (a cycle, then allocate() loops): refused in every build.
        if (id < 0 || id >= n_blocks() || m_blocks[static_cast<size_t>(id)].ref_cnt <= 0) {
            assert(!"BlockPool::release of a block that is not held");
            continue;
        }
        auto& b = m_blocks[static_cast<size_t>(id)];
        if (--b.ref_cnt == 0) {
            if (b.block_hash) m_free.push_back(id);
            else
                m_free.push_front(id);
        }
    }
}

std::optional<int32_t> BlockPool::get_cached_block(uint64_t block_hash) {
    ++m_counters.queries;
    auto it = m_cached.find(block_hash);
    if (it == m_cached.end()) return std::nullopt;
    ++m_counters.hits;
    return it->second;
}

void BlockPool::touch(const std::vector<int32_t>& block_ids) {
    for (int32_t id : block_ids) {
        if (id < 0 || id >= n_blocks()) {
            assert(!"BlockPool::touch of a block outside the pool");
            continue;
        }
        auto& b = m_blocks[static_cast<size_t>(id)];
        if (b.ref_cnt == 0) m_free.remove(id);
        ++b.ref_cnt;
    }
}

bool BlockPool::cache_full_block(int32_t block_id, uint64_t block_hash) {
    if (block_id < 0 || block_id >= n_blocks() || m_blocks[static_cast<size_t>(block_id)].ref_cnt <= 0) {
        assert(!"BlockPool::cache_full_block of a block that is not held");
        return false;  // only held blocks are registered, in every build
    }
    auto& b = m_blocks[static_cast<size_t>(block_id)];
    if (b.block_hash) return *b.block_hash == block_hash && m_cached.count(block_hash) != 0;
    if (m_cached.count(block_hash) != 0) return false;
    b.block_hash = block_hash;
    m_cached.emplace(block_hash, block_id);
    return true;
}

void BlockPool::reset_prefix_cache() {
    for (auto& b : m_blocks) b.block_hash.reset();
    m_cached.clear();
}

}  // namespace kvs
