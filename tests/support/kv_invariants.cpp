#include "tests/support/kv_invariants.h"

#include <set>
#include <vector>

namespace kvs::test {

QString kv_pool_invariants(const KVCacheManager& m) {
    const auto& pool = m.pool();
    const int n = pool.n_blocks();
    const auto free_ids = pool.free_queue_ids();
    if (static_cast<int>(free_ids.size()) != pool.n_free()) return "free queue length != n_free";
    std::vector<int> in_free(static_cast<size_t>(n), 0);
    for (int32_t id : free_ids) {
        if (id < 0 || id >= n) return "bad id in free queue";
        if (in_free[static_cast<size_t>(id)]++) return QString("block %1 twice in free queue").arg(id);
    }
    std::vector<int> refs(static_cast<size_t>(n), 0);
    size_t table_entries = 0;
    for (RequestId rid : m.request_ids()) {
        const auto& t = m.block_table(rid);
        const int bs = m.block_size();
        if (static_cast<int>(t.size()) != (m.num_tokens(rid) + bs - 1) / bs)
            return QString("request %1: table size does not match its tokens").arg(rid);
        std::set<int32_t> uniq(t.begin(), t.end());
        if (uniq.size() != t.size()) return QString("request %1 holds a block twice").arg(rid);
        for (int32_t b : t) ++refs[static_cast<size_t>(b)];
        table_entries += t.size();
    }
    size_t ref_sum = 0;
    for (int i = 0; i < n; ++i) {
        const auto& b = pool.block(i);
        const bool f = in_free[static_cast<size_t>(i)] != 0;
        if (f == (b.ref_cnt > 0)) return QString("block %1: free=%2 ref_cnt=%3").arg(i).arg(f).arg(b.ref_cnt);
        if (f != b.in_free_queue) return QString("block %1: in_free_queue flag wrong").arg(i);
        if (b.ref_cnt != refs[static_cast<size_t>(i)])
            return QString("block %1: ref_cnt %2 but %3 table entries")
                .arg(i)
                .arg(b.ref_cnt)
                .arg(refs[static_cast<size_t>(i)]);
        ref_sum += static_cast<size_t>(b.ref_cnt);
        if (b.block_hash) {
            auto it = pool.cached_blocks().find(*b.block_hash);
            if (it == pool.cached_blocks().end() || it->second != i)
                return QString("block %1 hashed but not in the hash map").arg(i);
        }
    }
    if (ref_sum != table_entries) return "sum of ref_cnt != table entries";
    for (const auto& [h, id] : pool.cached_blocks()) {
        if (id < 0 || id >= n) return "hash map points at a bad id";
        if (pool.block(id).block_hash != h) return QString("hash map entry for block %1 does not match").arg(id);
    }
    return swa_pool_invariants(m);
}

QString swa_pool_invariants(const KVCacheManager& m) {
    const SlidingWindowBlocks* swa = m.sliding_window();
    if (!swa) return {};
    const BlockPool& pool = swa->pool();
    const int n = pool.n_blocks(), bs = m.block_size();
    std::vector<int> refs(static_cast<size_t>(n), 0);
    for (RequestId rid : m.request_ids()) {
        const auto& t = m.block_table(rid);
        const auto& local = m.swa_block_table(rid);
        if (local.size() != t.size())
            return QString("request %1: %2 local entries beside %3 blocks").arg(rid).arg(local.size()).arg(t.size());
        for (size_t b = 0; b < local.size(); ++b) {
            if (local[b] >= n) return QString("request %1: local block %2 outside the pool").arg(rid).arg(local[b]);
            if (local[b] >= 0) {
                ++refs[static_cast<size_t>(local[b])];
            } else if (static_cast<int>(b + 1) * bs > m.num_tokens(rid) - swa->window() + 1) {
                // Freed although a query at the request's last position could still read it.
                return QString("request %1: local entry %2 freed inside the window of position %3")
                    .arg(rid)
                    .arg(b)
                    .arg(m.num_tokens(rid) - 1);
            }
        }
    }
    int held = 0;
    for (int i = 0; i < n; ++i) {
        const auto& b = pool.block(i);
        if (b.ref_cnt != refs[static_cast<size_t>(i)])
            return QString("local block %1: ref_cnt %2 but %3 table entries").arg(i).arg(b.ref_cnt).arg(refs[static_cast<size_t>(i)]);
        if (b.in_free_queue == (b.ref_cnt > 0)) return QString("local block %1: free queue flag wrong").arg(i);
        if (swa->is_freed(i) && b.ref_cnt > 0) return QString("local block %1 marked freed while held").arg(i);
        held += b.ref_cnt > 0 ? 1 : 0;
    }
    if (held != swa->n_in_use()) return "local pool: blocks held != n_in_use";
    return {};
}

}  // namespace kvs::test
