#include "engine/kv_cache/kv_cache_manager.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <utility>

namespace kvs {

namespace {
constexpr uint64_t kRootParentHash = 0x9e3779b97f4a7c15ull;  // the "parent" of block 0
}

KVCacheManager::KVCacheManager(int n_blocks, int block_size, bool enable_prefix_caching)
    : m_block_size(block_size), m_enable_prefix_caching(enable_prefix_caching), m_pool(n_blocks) {
    assert(block_size > 0 && n_blocks >= 0);
}

uint64_t KVCacheManager::hash_block(uint64_t parent_hash, const int32_t* tokens, int n) {
    // buf: [parent_hash (8 bytes) | tokens (n * 4 bytes)]
    std::vector<unsigned char> buf(sizeof(uint64_t) + sizeof(int32_t) * static_cast<size_t>(n));
    std::memcpy(buf.data(), &parent_hash, sizeof(uint64_t));
    if (n > 0) std::memcpy(buf.data() + sizeof(uint64_t), tokens, sizeof(int32_t) * static_cast<size_t>(n));
    return XXH3_64bits(buf.data(), buf.size());
}

void KVCacheManager::set_cache_salt(RequestId id, uint64_t salt) {
    if (salt == 0) m_salts.erase(id);
    else
        m_salts[id] = salt;
}

uint64_t KVCacheManager::salt_of(RequestId id) const {
    auto it = m_salts.find(id);
    return it == m_salts.end() ? 0 : it->second;
}

void KVCacheManager::set_tier(KvBlockTier* tier) {
    m_tier = tier;
    m_pool.set_eviction_log(tier != nullptr);
    m_block_meta.assign(tier ? static_cast<size_t>(m_pool.n_blocks()) : 0, {});
    m_fresh.assign(tier ? static_cast<size_t>(m_pool.n_blocks()) : 0, 0);
    m_spills.clear();
}

void KVCacheManager::note_allocated(const std::vector<int32_t>& ids) {
    if (!m_evict_freed.empty())  // handed out again: no longer a block eviction gave back
        for (int32_t b : ids) m_evict_freed[static_cast<size_t>(b)] = 0;
    if (!m_tier) return;
    for (const auto& [block, hash] : m_pool.take_evictions()) {
        auto& meta = m_block_meta[static_cast<size_t>(block)];
        // A block allocated since the last take_spills holds no KV of its hash yet.
        if (!m_fresh[static_cast<size_t>(block)] && static_cast<int>(meta.tokens.size()) == m_block_size)
            m_spills.push_back({block, TierBlockKey{hash, meta.salt, std::move(meta.tokens)}});
        meta.tokens.clear();
    }
    for (int32_t b : ids) m_fresh[static_cast<size_t>(b)] = 1;
}

void KVCacheManager::note_cached(int32_t block, RequestId id, const int32_t* tokens) {
    if (!m_tier) return;
    auto& meta = m_block_meta[static_cast<size_t>(block)];
    meta.salt = salt_of(id);
    meta.tokens.assign(tokens, tokens + m_block_size);
}

std::vector<TierSpill> KVCacheManager::take_spills() {
    std::fill(m_fresh.begin(), m_fresh.end(), 0);
    return std::exchange(m_spills, {});
}

std::vector<TierSpill> KVCacheManager::hashed_blocks_for_tiers() const {
    std::vector<TierSpill> out;
    if (!m_tier) return out;
    auto add = [&](int32_t id) {
        const auto& b = m_pool.block(id);
        const auto& meta = m_block_meta[static_cast<size_t>(id)];
        if (b.block_hash && static_cast<int>(meta.tokens.size()) == m_block_size)
            out.push_back({id, TierBlockKey{*b.block_hash, meta.salt, meta.tokens}});
    };
    const std::vector<int32_t> free_ids = m_pool.free_queue_ids();  // head = least recently freed
    for (auto it = free_ids.begin(); it != free_ids.end(); ++it) add(*it);
    for (int32_t id = 0; id < m_pool.n_blocks(); ++id)
        if (m_pool.block(id).ref_cnt > 0) add(id);
    return out;
}

uint64_t KVCacheManager::root_hash(RequestId id) const {
    auto it = m_salts.find(id);
    return it == m_salts.end() ? kRootParentHash : hash_block(kRootParentHash ^ it->second, nullptr, 0);
}

void KVCacheManager::hash_full_blocks(RequestId id, RequestState& r, const std::vector<int32_t>& token_ids,
                                      int n_full) const {
    const int bs = m_block_size;
    while (static_cast<int>(r.block_hashes.size()) < n_full) {
        const size_t i = r.block_hashes.size();
        const uint64_t parent = i == 0 ? root_hash(id) : r.block_hashes[i - 1];
        r.block_hashes.push_back(hash_block(parent, token_ids.data() + i * static_cast<size_t>(bs), bs));
    }
}

Result<int> KVCacheManager::get_computed_blocks(RequestId id, const std::vector<int32_t>& token_ids) {
    auto& r = m_requests[id];
    if (!r.block_table.empty() || r.num_tokens != 0)
        return Result<int>::error("get_computed_blocks: request " + std::to_string(id) + " already holds blocks");
    r.pending_hits.clear();
    r.pending_hashes.clear();
    r.pending_tier.clear();
    r.swa_pending.clear();
    r.pending_query_tokens = 0;
    if (!m_enable_prefix_caching || token_ids.empty() || m_no_prefix.count(id)) return 0;
    const int bs = m_block_size;
    const int max_blocks = (static_cast<int>(token_ids.size()) - 1) / bs;  // keep the last token to compute
    uint64_t parent = root_hash(id);
    for (int i = 0; i < max_blocks; ++i) {
        const int32_t* block_tokens = token_ids.data() + static_cast<size_t>(i) * bs;
        const uint64_t h = hash_block(parent, block_tokens, bs);
        const auto hit = m_pool.get_cached_block(h);
        std::optional<TierHit> tier_hit;
        if (!hit && m_tier)  // not in the device pool: the CPU tier, then the disk
            tier_hit =
                m_tier->find(TierBlockKey{h, salt_of(id), std::vector<int32_t>(block_tokens, block_tokens + bs)});
        if (!hit && !tier_hit) break;
        r.pending_hits.push_back(hit ? *hit : -1);
        r.pending_hashes.push_back(h);
        r.pending_tier.push_back(tier_hit ? std::move(*tier_hit) : TierHit{});
        parent = h;
    }
    if (m_swa && !r.pending_hits.empty()) {  // the local blocks the first query's window reads must be cached too
        const size_t l = static_cast<size_t>(m_swa->longest_hit(r.pending_hashes, &r.swa_pending));
        r.pending_hits.resize(l);
        r.pending_hashes.resize(l);
        r.pending_tier.resize(l);
    }
    // Counted when allocate_slots takes the hits: a request that waits for room and asks
    // again every step is counted once.
    r.pending_query_tokens = static_cast<int>(token_ids.size());
    return static_cast<int>(r.pending_hits.size()) * bs;
}

Result<SlotAllocation> KVCacheManager::allocate_slots(RequestId id, const std::vector<int32_t>& token_ids_total,
                                                      int num_new_tokens, int num_lookahead_tokens) {
    using R = Result<SlotAllocation>;
    if (num_new_tokens < 0 || num_lookahead_tokens < 0)
        return R::error("allocate_slots: negative token count " + std::to_string(num_new_tokens) + " / " +
                        std::to_string(num_lookahead_tokens));
    auto& r = m_requests[id];
    const int bs = m_block_size;

    // Pending prefix hits must still be what get_computed_blocks found.
    for (size_t i = 0; i < r.pending_hits.size(); ++i) {
        if (r.pending_hits[i] < 0) continue;  // a tier hit: its bytes are held
        const auto& b = m_pool.block(r.pending_hits[i]);
        if (b.block_hash != r.pending_hashes[i] || (m_swa && !m_swa->hits_valid(r.swa_pending, r.pending_hashes))) {
            r.pending_hits.clear();
            r.pending_hashes.clear();
            r.pending_tier.clear();
            r.swa_pending.clear();
            return R::error("allocate_slots: prefix hits of request " + std::to_string(id) +
                            " were evicted since get_computed_blocks (call it right before allocate_slots)");
        }
    }
    const int n_pending = static_cast<int>(r.pending_hits.size());
    const int n_pending_tier = static_cast<int>(std::count(r.pending_hits.begin(), r.pending_hits.end(), int32_t{-1}));
    const int computed = r.num_tokens + n_pending * bs;
    const int total = computed + num_new_tokens;
    if (static_cast<int>(token_ids_total.size()) < total)
        return R::error("allocate_slots: request " + std::to_string(id) + " needs " + std::to_string(total) +
                        " tokens but " + std::to_string(token_ids_total.size()) + " were given");
    if (num_new_tokens > 0 && r.num_tokens % bs != 0 && !r.block_table.empty() &&
        m_pool.block(r.block_table.back()).ref_cnt > 1)
        return R::error("allocate_slots: request " + std::to_string(id) +
                        " would write into a shared block (call prepare_append first)");

    const int blocks_total = (total + num_lookahead_tokens + bs - 1) / bs;
    // Tier hits need device blocks like new tokens do.
    const int blocks_needed = std::max(0, blocks_total - static_cast<int>(r.block_table.size()) - n_pending);
    int pending_in_free_queue = 0;
    for (int32_t b : r.pending_hits) pending_in_free_queue += b >= 0 && m_pool.block(b).ref_cnt == 0 ? 1 : 0;
    // Local layers: the first new query (at `computed`) never reads before its window again;
    // the same number of blocks as the main table gets, from their own pool.
    if (m_swa) m_swa->drop_before(r.swa_table, computed - m_swa->window() + 1);
    const bool swa_no_room = m_swa && blocks_needed > m_swa->n_free() - m_swa->hits_in_free_queue(r.swa_pending);
    if (blocks_needed + n_pending_tier > m_pool.n_free() - pending_in_free_queue || swa_no_room) {
        r.pending_hits.clear();
        r.pending_hashes.clear();
        r.pending_tier.clear();
        r.swa_pending.clear();
        r.pending_query_tokens = 0;
        if (r.block_table.empty() && r.num_tokens == 0) m_requests.erase(id);
        SlotAllocation out;
        out.no_room = true;
        return out;
    }

    m_query_tokens += r.pending_query_tokens;
    m_hit_tokens += static_cast<int64_t>(n_pending) * bs;
    r.pending_query_tokens = 0;
    SlotAllocation out;
    if (n_pending > 0) {
        std::vector<int32_t> device_hits;
        for (int32_t b : r.pending_hits)
            if (b >= 0) device_hits.push_back(b);
        m_pool.touch(device_hits);  // out of the free queue before anything is allocated
        std::vector<int32_t> fresh;
        if (n_pending_tier > 0) {
            auto got = m_pool.allocate(n_pending_tier);
            if (!got) return got.status();  // cannot happen: checked above
            fresh = std::move(got.value());
            note_allocated(fresh);
        }
        size_t next_fresh = 0;
        for (size_t i = 0; i < r.pending_hits.size(); ++i) {
            int32_t b = r.pending_hits[i];
            if (b < 0) {  // a tier hit: a fresh block, registered now, filled by the engine before the forward pass
                b = fresh[next_fresh++];
                const TierHit& t = r.pending_tier[i];
                out.tier_loads.push_back({b, t.bytes, t.tier});
                (t.tier == KvTier::disk ? m_disk_hit_tokens : m_cpu_hit_tokens) += bs;
                if (m_pool.cache_full_block(b, r.pending_hashes[i]))
                    note_cached(b, id, token_ids_total.data() + i * static_cast<size_t>(bs));
            }
            r.block_table.push_back(b);
        }
        r.block_hashes = r.pending_hashes;
        r.pending_hits.clear();
        r.pending_hashes.clear();
        r.pending_tier.clear();
        if (m_swa) {
            m_swa->take_hits(r.swa_pending);
            r.swa_table.insert(r.swa_table.end(), r.swa_pending.begin(), r.swa_pending.end());
            r.swa_pending.clear();
        }
    }
    if (blocks_needed > 0) {
        auto got = m_pool.allocate(blocks_needed);
        if (!got) return got.status();  // cannot happen: checked above
        out.new_block_ids = std::move(got.value());
        note_allocated(out.new_block_ids);
        r.block_table.insert(r.block_table.end(), out.new_block_ids.begin(), out.new_block_ids.end());
        if (m_swa) {
            auto local = m_swa->allocate(blocks_needed);
            if (!local) return local.status();  // cannot happen: checked above
            r.swa_table.insert(r.swa_table.end(), local->begin(), local->end());
        }
    }
    r.num_tokens = total + num_lookahead_tokens;

    if (m_enable_prefix_caching && !m_no_prefix.count(id)) {
        // Blocks full of known tokens and not hashed yet: [hashed before, total / bs).
        // Lookahead tokens are never hashed; after a rollback the blocks they filled are
        // hashed here once real tokens fill them.
        const int n_full = total / bs;
        const int n_hashed = static_cast<int>(r.block_hashes.size());
        hash_full_blocks(id, r, token_ids_total, n_full);
        for (int i = n_hashed; i < n_full; ++i) {
            if (m_pool.cache_full_block(r.block_table[static_cast<size_t>(i)], r.block_hashes[static_cast<size_t>(i)]))
                note_cached(r.block_table[static_cast<size_t>(i)], id,
                            token_ids_total.data() + static_cast<size_t>(i) * static_cast<size_t>(bs));
            if (m_swa && r.swa_table[static_cast<size_t>(i)] >= 0)
                m_swa->cache_full_block(r.swa_table[static_cast<size_t>(i)], r.block_hashes[static_cast<size_t>(i)]);
        }
    }
    return out;
}

Result<AppendPrep> KVCacheManager::prepare_append(RequestId id) {
    auto it = m_requests.find(id);
    if (it == m_requests.end())
        return Result<AppendPrep>::error("prepare_append: unknown request " + std::to_string(id));
    auto& r = it->second;
    AppendPrep out;
    if (r.block_table.empty() || r.num_tokens % m_block_size == 0) return out;  // next token opens a new block
    const int32_t last = r.block_table.back();
    const bool shared = m_pool.block(last).ref_cnt > 1;
    const bool swa_shared =
        m_swa && !r.swa_table.empty() && r.swa_table.back() >= 0 && m_swa->pool().block(r.swa_table.back()).ref_cnt > 1;
    if ((shared && m_pool.n_free() == 0) || (swa_shared && m_swa->n_free() == 0)) {
        out.no_room = true;
        return out;
    }
    if (swa_shared) {
        bool no_room = false;
        if (auto c = m_swa->copy_last_if_shared(r.swa_table, &no_room))
            m_swa_copies.emplace_back(id, CopyOp{c->first, c->second});
    }
    if (!shared) return out;
    auto got = m_pool.allocate(1);
    if (!got) return got.status();
    note_allocated(got.value());
    const int32_t fresh = got.value()[0];
    m_pool.release({last});  // still held by the other sharers
    r.block_table.back() = fresh;
    out.copy = CopyOp{last, fresh};
    return out;
}

Status KVCacheManager::fork(RequestId parent_id, RequestId child_id) {
    auto it = m_requests.find(parent_id);
    if (it == m_requests.end()) return Status::error("fork: unknown parent request " + std::to_string(parent_id));
    if (parent_id == child_id) return Status::error("fork: child id equals parent id");
    auto cit = m_requests.find(child_id);
    if (cit != m_requests.end() && (!cit->second.block_table.empty() || cit->second.num_tokens != 0))
        return Status::error("fork: child request " + std::to_string(child_id) + " already holds blocks");
    const RequestState& p = it->second;
    RequestState c;
    c.block_table = p.block_table;
    c.num_tokens = p.num_tokens;
    c.block_hashes = p.block_hashes;
    m_pool.touch(c.block_table);
    if (m_swa) {
        c.swa_table = p.swa_table;
        m_swa->share_table(c.swa_table);
    }
    m_requests[child_id] = std::move(c);
    if (auto salt = m_salts.find(parent_id); salt != m_salts.end()) m_salts[child_id] = salt->second;
    return Status::ok();
}

void KVCacheManager::free(RequestId id) {
    auto it = m_requests.find(id);
    if (it == m_requests.end()) return;
    std::vector<int32_t> reversed(it->second.block_table.rbegin(), it->second.block_table.rend());
    m_pool.release(reversed);
    if (m_swa) {
        m_swa->release_table(it->second.swa_table);
        std::erase_if(m_swa_copies, [id](const auto& c) { return c.first == id; });
    }
    m_requests.erase(it);
}

Status KVCacheManager::truncate(RequestId id, int num_tokens) {
    auto it = m_requests.find(id);
    if (it == m_requests.end()) return Status::error("truncate: unknown request " + std::to_string(id));
    RequestState& r = it->second;
    if (num_tokens < 0) return Status::error("truncate: negative token count " + std::to_string(num_tokens));
    if (num_tokens >= r.num_tokens) return Status::ok();
    const int bs = m_block_size;
    if (static_cast<int>(r.block_hashes.size()) > num_tokens / bs)
        return Status::error("truncate: request " + std::to_string(id) + " cannot roll back to " +
                             std::to_string(num_tokens) + " tokens: block " + std::to_string(num_tokens / bs) +
                             " is in the prefix cache");
    const size_t keep = static_cast<size_t>((num_tokens + bs - 1) / bs);
    std::vector<int32_t> dropped(r.block_table.rbegin(), r.block_table.rend() - static_cast<ptrdiff_t>(keep));
    m_pool.release(dropped);
    r.block_table.resize(keep);
    if (m_swa) m_swa->truncate_table(r.swa_table, keep);
    r.num_tokens = num_tokens;
    return Status::ok();
}

std::vector<RequestId> KVCacheManager::request_ids() const {
    std::vector<RequestId> ids;
    ids.reserve(m_requests.size());
    for (const auto& [id, r] : m_requests) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    return ids;
}

const std::vector<int32_t>& KVCacheManager::block_table(RequestId id) const {
    static const std::vector<int32_t> kEmpty;
    auto it = m_requests.find(id);
    return it == m_requests.end() ? kEmpty : it->second.block_table;
}

int KVCacheManager::num_tokens(RequestId id) const {
    auto it = m_requests.find(id);
    return it == m_requests.end() ? 0 : it->second.num_tokens;
}

double KVCacheManager::usage() const {
    if (m_pool.n_blocks() == 0) return 0.0;
    return 1.0 - static_cast<double>(m_pool.n_free()) / static_cast<double>(m_pool.n_blocks());
}

std::vector<BlockInfo> KVCacheManager::block_map() const {
    std::vector<BlockInfo> map(static_cast<size_t>(m_pool.n_blocks()));
    for (int i = 0; i < m_pool.n_blocks(); ++i) {
        const auto& b = m_pool.block(i);
        auto& info = map[static_cast<size_t>(i)];
        info.block_id = i;
        info.ref_cnt = b.ref_cnt;
        info.hashed = b.block_hash.has_value();
        const bool evicted = !m_evict_freed.empty() && m_evict_freed[static_cast<size_t>(i)];
        info.state = b.ref_cnt > 0 ? BlockState::used
                     : evicted     ? BlockState::freed
                                   : (info.hashed ? BlockState::cached : BlockState::free);
        if (info.state == BlockState::cached) info.n_filled = m_block_size;
    }
    for (RequestId id : request_ids()) {
        const auto& r = m_requests.at(id);
        for (size_t i = 0; i < r.block_table.size(); ++i) {
            auto& info = map[static_cast<size_t>(r.block_table[i])];
            info.owners.push_back(id);
            const int filled = std::clamp(r.num_tokens - static_cast<int>(i) * m_block_size, 0, m_block_size);
            info.n_filled = std::max(info.n_filled, filled);
        }
    }
    return map;
}

Result<int> KVCacheManager::compact(RequestId id, int n_entries) {
    auto it = m_requests.find(id);
    if (it == m_requests.end()) return Result<int>::error("compact: unknown request " + std::to_string(id));
    RequestState& r = it->second;
    if (n_entries < 0 || n_entries > r.num_tokens)
        return Result<int>::error("compact: request " + std::to_string(id) + " has " + std::to_string(r.num_tokens) +
                                  " cached tokens, not " + std::to_string(n_entries));
    for (int32_t b : r.block_table)
        if (m_pool.block(b).ref_cnt != 1 || m_pool.block(b).block_hash)
            return Result<int>::error("compact: block " + std::to_string(b) + " of request " + std::to_string(id) +
                                      " is shared or in the prefix cache");
    const size_t keep = static_cast<size_t>((n_entries + m_block_size - 1) / m_block_size);
    std::vector<int32_t> dropped(r.block_table.rbegin(), r.block_table.rend() - static_cast<ptrdiff_t>(keep));
    m_pool.release(dropped);
    if (m_evict_freed.empty()) m_evict_freed.assign(static_cast<size_t>(m_pool.n_blocks()), 0);
    for (int32_t b : dropped) m_evict_freed[static_cast<size_t>(b)] = 1;  // the block map draws them as freed
    r.block_table.resize(keep);
    r.block_hashes.clear();
    r.num_tokens = n_entries;
    return static_cast<int>(dropped.size());
}

void KVCacheManager::enable_sliding_window(int window, int n_blocks) {
    m_swa =
        window > 0 && n_blocks > 0 ? std::make_unique<SlidingWindowBlocks>(n_blocks, m_block_size, window) : nullptr;
}

const std::vector<int32_t>& KVCacheManager::swa_block_table(RequestId id) const {
    static const std::vector<int32_t> kEmpty;
    auto it = m_requests.find(id);
    return it == m_requests.end() ? kEmpty : it->second.swa_table;
}

std::vector<CopyOp> KVCacheManager::take_swa_copies() {
    std::vector<CopyOp> out;
    for (const auto& [id, c] : m_swa_copies) out.push_back(c);
    m_swa_copies.clear();
    return out;
}

std::vector<BlockInfo> KVCacheManager::swa_block_map() const {
    if (!m_swa) return {};
    const BlockPool& pool = m_swa->pool();
    std::vector<BlockInfo> map(static_cast<size_t>(pool.n_blocks()));
    for (int i = 0; i < pool.n_blocks(); ++i) {
        const auto& b = pool.block(i);
        auto& info = map[static_cast<size_t>(i)];
        info.block_id = i;
        info.ref_cnt = b.ref_cnt;
        info.hashed = b.block_hash.has_value();
        info.state = b.ref_cnt > 0        ? BlockState::used
                     : m_swa->is_freed(i) ? BlockState::freed
                     : info.hashed        ? BlockState::cached
                                          : BlockState::free;
        if (info.state == BlockState::cached || info.state == BlockState::freed) info.n_filled = m_block_size;
    }
    for (RequestId id : request_ids()) {
        const auto& r = m_requests.at(id);
        for (size_t i = 0; i < r.swa_table.size(); ++i) {
            if (r.swa_table[i] < 0) continue;
            auto& info = map[static_cast<size_t>(r.swa_table[i])];
            info.owners.push_back(id);
            const int filled = std::clamp(r.num_tokens - static_cast<int>(i) * m_block_size, 0, m_block_size);
            info.n_filled = std::max(info.n_filled, filled);
        }
    }
    return map;
}

KVCacheStats KVCacheManager::stats() const {
    KVCacheStats s;
    s.query_tokens = m_query_tokens;
    s.hit_tokens = m_hit_tokens;
    s.cpu_hit_tokens = m_cpu_hit_tokens;
    s.disk_hit_tokens = m_disk_hit_tokens;
    s.blocks = m_pool.counters();
    return s;
}

}  // namespace kvs
