#include "engine/kv_cache/sliding_window_blocks.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace kvs {

SlidingWindowBlocks::SlidingWindowBlocks(int n_blocks, int block_size, int window)
    : m_block_size(block_size), m_window(window), m_pool(n_blocks), m_freed(static_cast<size_t>(n_blocks), 0) {
    assert(block_size > 0 && window > 0 && n_blocks >= 0);
}

int SlidingWindowBlocks::first_needed_block(int pos) const { return std::max(0, pos - m_window + 1) / m_block_size; }

int SlidingWindowBlocks::max_blocks_per_request(int max_chunk) const {
    // Positions [p - window + 1, p + max_chunk) starting anywhere inside a block.
    return (m_window - 1 + std::max(1, max_chunk) + m_block_size - 1) / m_block_size + 1;
}

int SlidingWindowBlocks::drop_before(std::vector<int32_t>& table, int lo) {
    int n = 0;
    std::vector<int32_t> dropped;
    for (size_t b = 0; b < table.size() && static_cast<int>(b + 1) * m_block_size <= lo; ++b) {
        if (table[b] < 0) continue;
        dropped.push_back(table[b]);
        table[b] = -1;
        ++n;
    }
    // Last first, as a finished request gives its blocks back: the most recent positions are
    // the likelier prefix hits, so they stay longest in the free queue.
    std::reverse(dropped.begin(), dropped.end());
    m_pool.release(dropped);
    for (int32_t id : dropped)
        if (m_pool.block(id).ref_cnt == 0) m_freed[static_cast<size_t>(id)] = 1;
    m_freed_total += n;
    return n;
}

int SlidingWindowBlocks::longest_hit(const std::vector<uint64_t>& hashes, std::vector<int32_t>* hits) {
    const int n = static_cast<int>(hashes.size());
    std::vector<int32_t> found(hashes.size(), -1);  // [n] the cached local block of each hash, -1: none
    for (int i = 0; i < n; ++i)
        if (const auto hit = m_pool.get_cached_block(hashes[static_cast<size_t>(i)]))
            found[static_cast<size_t>(i)] = *hit;
    // The longest l whose first query (at position l * block_size) finds its window here.
    int l = n;
    for (; l > 0; --l) {
        bool all = true;
        for (int i = first_needed_block(l * m_block_size); i < l && all; ++i) all = found[static_cast<size_t>(i)] >= 0;
        if (all) break;
    }
    hits->assign(static_cast<size_t>(l), -1);
    for (int i = first_needed_block(l * m_block_size); i < l; ++i)
        (*hits)[static_cast<size_t>(i)] = found[static_cast<size_t>(i)];
    return l;
}

bool SlidingWindowBlocks::hits_valid(const std::vector<int32_t>& hits, const std::vector<uint64_t>& hashes) const {
    for (size_t i = 0; i < hits.size() && i < hashes.size(); ++i)
        if (hits[i] >= 0 && m_pool.block(hits[i]).block_hash != hashes[i]) return false;
    return true;
}

int SlidingWindowBlocks::hits_in_free_queue(const std::vector<int32_t>& hits) const {
    int n = 0;
    for (int32_t b : hits) n += b >= 0 && m_pool.block(b).ref_cnt == 0 ? 1 : 0;
    return n;
}

void SlidingWindowBlocks::take_hits(const std::vector<int32_t>& hits) {
    std::vector<int32_t> ids;
    for (int32_t b : hits)
        if (b >= 0) {
            ids.push_back(b);
            m_freed[static_cast<size_t>(b)] = 0;
        }
    m_pool.touch(ids);
}

Result<std::vector<int32_t>> SlidingWindowBlocks::allocate(int n) {
    auto got = m_pool.allocate(n);
    if (!got) return Result<std::vector<int32_t>>::error("sliding-window layers' " + got.message());
    for (int32_t b : got.value()) m_freed[static_cast<size_t>(b)] = 0;
    return got;
}

void SlidingWindowBlocks::release_table(const std::vector<int32_t>& table) {
    std::vector<int32_t> held;
    for (auto it = table.rbegin(); it != table.rend(); ++it)
        if (*it >= 0) held.push_back(*it);
    m_pool.release(held);
}

void SlidingWindowBlocks::share_table(const std::vector<int32_t>& table) {
    std::vector<int32_t> held;
    for (int32_t b : table)
        if (b >= 0) held.push_back(b);
    m_pool.touch(held);
}

std::optional<std::pair<int32_t, int32_t>> SlidingWindowBlocks::copy_last_if_shared(std::vector<int32_t>& table,
                                                                                    bool* no_room) {
    *no_room = false;
    if (table.empty() || table.back() < 0 || m_pool.block(table.back()).ref_cnt <= 1) return std::nullopt;
    if (m_pool.n_free() == 0) {
        *no_room = true;
        return std::nullopt;
    }
    auto got = allocate(1);
    if (!got) {
        *no_room = true;
        return std::nullopt;
    }
    const int32_t last = table.back(), fresh = got.value()[0];
    m_pool.release({last});  // still held by the other sharers
    table.back() = fresh;
    return std::make_pair(last, fresh);
}

void SlidingWindowBlocks::truncate_table(std::vector<int32_t>& table, size_t keep) {
    if (table.size() <= keep) return;
    std::vector<int32_t> tail(table.begin() + static_cast<ptrdiff_t>(keep), table.end());
    release_table(tail);
    table.resize(keep);
}

}  // namespace kvs
