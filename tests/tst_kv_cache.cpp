// ctest-labels: unit
// The model-free paged KV cache: BlockPool (free queue doubling as the prefix-cache LRU)
// and KVCacheManager (block tables, prefix hits, copy-on-write forks). Hand-written cases
// with expected block ids worked out by hand, then a randomized run that checks the
// pool's invariants after every operation and simulates the KV contents (each slot
// holds the token written there) so a wrong prefix hit or a missed copy shows up as a
// request reading back tokens that are not its own.
#include <QtTest>

#include "tests/support/kv_admit.h"
#include "tests/support/kv_invariants.h"
#include "tests/support/token_ids.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/kv_cache/block_pool.h"
#include "engine/kv_cache/kv_cache_manager.h"

using kvs::BlockState;
using kvs::KVCacheManager;
using kvs::RequestId;
using kvs::test::admit;
using kvs::test::cat;
using kvs::test::kv_pool_invariants;
using kvs::test::seq;

namespace {}  // namespace

class TestKvCache : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void free_queue_order();
    void block_pool_allocate_release();
    void prefix_hit_repeated_prompt();
    void prefix_hit_shared_system_prompt();
    void partial_block_never_cached();
    void lru_eviction_order();
    void copy_on_write();
    void no_room_when_full();
    void free_returns_every_block();
    void block_map_snapshot();
    void prefix_caching_disabled();
    void randomized_invariants();
};

void TestKvCache::free_queue_order() {
    std::vector<kvs::KVCacheBlock> blocks(5);
    for (int i = 0; i < 5; ++i) blocks[static_cast<size_t>(i)].block_id = i;
    kvs::FreeBlockQueue q(&blocks);
    for (int i = 0; i < 5; ++i) q.push_back(i);
    q.remove(2);  // middle
    QCOMPARE(q.ids(), (std::vector<int32_t>{0, 1, 3, 4}));
    q.remove(0);  // head
    q.remove(4);  // tail
    QCOMPARE(q.ids(), (std::vector<int32_t>{1, 3}));
    q.push_front(4);
    q.push_back(0);
    QCOMPARE(q.ids(), (std::vector<int32_t>{4, 1, 3, 0}));
    QCOMPARE(q.pop_front(), 4);
    QCOMPARE(q.size(), 3);
    QCOMPARE(q.pop_front(), 1);
    QCOMPARE(q.pop_front(), 3);
    QCOMPARE(q.pop_front(), 0);
    QCOMPARE(q.pop_front(), -1);
    QCOMPARE(q.size(), 0);
}

void TestKvCache::block_pool_allocate_release() {
    kvs::BlockPool pool(4);
    auto a = pool.allocate(3);
    QVERIFY(a.is_ok());
    QCOMPARE(*a, (std::vector<int32_t>{0, 1, 2}));
    QCOMPARE(pool.n_free(), 1);
    QVERIFY(!pool.allocate(2).is_ok());  // error names the shortfall, takes nothing
    QCOMPARE(pool.n_free(), 1);
    pool.release(*a);
    QCOMPARE(pool.n_free(), 4);
    // Unhashed blocks go to the head: released 0, 1, 2 -> head 2, 1, 0, then 3.
    QCOMPARE(pool.free_queue_ids(), (std::vector<int32_t>{2, 1, 0, 3}));
}

void TestKvCache::prefix_hit_repeated_prompt() {
    KVCacheManager m(16, 4, true);
    const auto prompt = seq(100, 10);  // 2 full blocks + 2 tokens
    QCOMPARE(admit(m, 1, prompt), 0);
    const auto t1 = m.block_table(1);
    QCOMPARE(t1.size(), size_t(3));
    QCOMPARE(m.pool().cached_blocks().size(), size_t(2));
    m.free(1);
    QCOMPARE(admit(m, 2, prompt), 8);
    const auto& t2 = m.block_table(2);
    QCOMPARE(t2.size(), size_t(3));
    QCOMPARE(t2[0], t1[0]);
    QCOMPARE(t2[1], t1[1]);
    QCOMPARE(m.num_tokens(2), 10);
    QCOMPARE(m.stats().hit_tokens, int64_t(8));
    QCOMPARE(m.stats().query_tokens, int64_t(20));
    QCOMPARE(kv_pool_invariants(m), QString());

    // A prompt of exactly 2 blocks: the last block is recomputed so its logits exist.
    const auto p8 = seq(500, 8);
    QCOMPARE(admit(m, 3, p8), 0);
    m.free(3);
    QCOMPARE(admit(m, 4, p8), 4);
    QCOMPARE(m.num_tokens(4), 8);
    QCOMPARE(kv_pool_invariants(m), QString());
}

void TestKvCache::prefix_hit_shared_system_prompt() {
    KVCacheManager m(16, 4, true);
    const auto sys = seq(1, 8);
    QCOMPARE(admit(m, 1, cat(sys, {50, 51, 52})), 0);
    QCOMPARE(admit(m, 2, cat(sys, {60, 61, 62, 63, 64})), 8);  // while 1 is still running
    const auto& t1 = m.block_table(1);
    const auto& t2 = m.block_table(2);
    QCOMPARE(t2[0], t1[0]);
    QCOMPARE(t2[1], t1[1]);
    QVERIFY(t2[2] != t1[2]);
    QCOMPARE(m.pool().block(t1[0]).ref_cnt, 2);
    QCOMPARE(m.pool().block(t1[2]).ref_cnt, 1);
    // A different first block breaks the chain even if later blocks match.
    QCOMPARE(admit(m, 3, cat(cat({9, 9, 9, 9}, seq(5, 4)), {70})), 0);
    // The hash is a chain: block 1 of request 3 ({5..8}) is not reused after another first block.
    QCOMPARE(admit(m, 4, cat(cat(seq(1, 4), seq(5, 4)), {71})), 8);
    QCOMPARE(admit(m, 5, cat(cat(seq(1, 4), {60, 61, 62, 63}), {72})), 4);
    QCOMPARE(admit(m, 6, cat(cat({9, 9, 9, 9}, seq(5, 4)), {73})), 8);
    QCOMPARE(m.block_table(6)[1], m.block_table(3)[1]);
    QCOMPARE(admit(m, 7, cat(cat(seq(1, 4), {9, 9, 9, 9}), {74})), 4);
    QCOMPARE(kv_pool_invariants(m), QString());
}

void TestKvCache::partial_block_never_cached() {
    KVCacheManager m(16, 4, true);
    auto toks = seq(10, 6);
    QCOMPARE(admit(m, 1, toks), 0);
    QCOMPARE(m.pool().cached_blocks().size(), size_t(1));
    QVERIFY(!m.pool().block(m.block_table(1)[1]).block_hash.has_value());
    // Decode two tokens: the second block becomes full and is cached then.
    toks.push_back(16);
    QVERIFY(m.allocate_slots(1, toks, 1)->new_block_ids.empty());
    QCOMPARE(m.pool().cached_blocks().size(), size_t(1));
    toks.push_back(17);
    QVERIFY(m.allocate_slots(1, toks, 1)->new_block_ids.empty());
    QCOMPARE(m.pool().cached_blocks().size(), size_t(2));
    QVERIFY(m.pool().block(m.block_table(1)[1]).block_hash.has_value());
    toks.push_back(18);
    QCOMPARE(m.allocate_slots(1, toks, 1)->new_block_ids.size(), size_t(1));
    m.free(1);
    // 6 tokens cached as 1 full block only; the 9-token prompt gets the 2 full blocks.
    QCOMPARE(admit(m, 2, seq(10, 6)), 4);
    QCOMPARE(admit(m, 3, seq(10, 9)), 8);
    QCOMPARE(kv_pool_invariants(m), QString());
}

void TestKvCache::lru_eviction_order() {
    KVCacheManager m(4, 4, true);
    const auto a = seq(100, 9);  // blocks 0, 1 full (hashed), 2 partial
    QCOMPARE(admit(m, 1, a), 0);
    QCOMPARE(m.block_table(1), (std::vector<int32_t>{0, 1, 2}));
    m.free(1);
    // Freed last block first: 2 (unhashed) to the head, then 1, 0 to the tail.
    QCOMPARE(m.pool().free_queue_ids(), (std::vector<int32_t>{2, 3, 1, 0}));
    QCOMPARE(m.block_map()[0].state, BlockState::cached);
    QCOMPARE(m.block_map()[2].state, BlockState::free);
    // An unrelated 3-block request takes 2, 3, 1: block 1 (the sequence's tail) is evicted, 0 survives.
    QCOMPARE(admit(m, 2, seq(900, 9)), 0);
    QCOMPARE(m.block_table(2), (std::vector<int32_t>{2, 3, 1}));
    QCOMPARE(m.stats().blocks.evictions, int64_t(1));
    QVERIFY(m.pool().block(0).block_hash.has_value());
    m.free(2);
    // Reviving block 0 takes it out of the middle of the free queue.
    QCOMPARE(admit(m, 3, a), 4);
    QCOMPARE(m.block_table(3)[0], 0);
    QCOMPARE(m.pool().block(0).ref_cnt, 1);
    QCOMPARE(kv_pool_invariants(m), QString());
}

void TestKvCache::copy_on_write() {
    KVCacheManager m(16, 4, true);
    auto p = seq(1, 6);  // blocks: full, partial (2 tokens)
    QCOMPARE(admit(m, 1, p), 0);
    QVERIFY(m.fork(1, 2).is_ok());
    QCOMPARE(m.block_table(2), m.block_table(1));
    const int32_t shared_last = m.block_table(1)[1];
    QCOMPARE(m.pool().block(shared_last).ref_cnt, 2);
    // Writing into the shared partial block without preparing is refused.
    auto p2 = p;
    p2.push_back(7);
    QVERIFY(!m.allocate_slots(2, p2, 1).is_ok());
    // The child copies; the parent then owns the original alone and does not copy.
    auto c = m.prepare_append(2);
    QVERIFY(c.is_ok() && !c->no_room && c->copy.has_value());
    QCOMPARE(c->copy->src_block, shared_last);
    QVERIFY(c->copy->dst_block != shared_last);
    QCOMPARE(m.block_table(2)[1], c->copy->dst_block);
    QCOMPARE(m.block_table(2)[0], m.block_table(1)[0]);  // the full block stays shared
    QCOMPARE(m.pool().block(shared_last).ref_cnt, 1);
    QVERIFY(m.allocate_slots(2, p2, 1).is_ok());
    auto c1 = m.prepare_append(1);
    QVERIFY(c1.is_ok() && !c1->copy.has_value());
    QVERIFY(!m.prepare_append(2)->copy.has_value());  // the child's block is its own now
    QCOMPARE(kv_pool_invariants(m), QString());

    // A shared FULL last block is never written: no copy, each gets a new block.
    auto q = seq(50, 8);
    QCOMPARE(admit(m, 3, q), 0);
    QVERIFY(m.fork(3, 4).is_ok());
    QVERIFY(!m.prepare_append(3)->copy.has_value());
    QVERIFY(!m.prepare_append(4)->copy.has_value());
    q.push_back(60);
    auto a3 = m.allocate_slots(3, q, 1);
    auto a4 = m.allocate_slots(4, q, 1);
    QCOMPARE(a3->new_block_ids.size(), size_t(1));
    QCOMPARE(a4->new_block_ids.size(), size_t(1));
    QVERIFY(a3->new_block_ids[0] != a4->new_block_ids[0]);
    QVERIFY(!m.prepare_append(3)->copy.has_value());
    QCOMPARE(kv_pool_invariants(m), QString());
    QVERIFY(!m.fork(99, 5).is_ok());
    QVERIFY(!m.prepare_append(99).is_ok());
}

void TestKvCache::no_room_when_full() {
    KVCacheManager m(2, 4, true);
    auto a = seq(1, 8);
    QCOMPARE(admit(m, 1, a), 0);
    QCOMPARE(m.num_free_blocks(), 0);
    QCOMPARE(m.usage(), 1.0);
    QCOMPARE(admit(m, 2, seq(100, 1)), -1);
    QVERIFY(!m.has_request(2));
    a.push_back(9);
    auto r = m.allocate_slots(1, a, 1);
    QVERIFY(r.is_ok());
    QVERIFY(r->no_room);
    QCOMPARE(m.num_tokens(1), 8);
    QCOMPARE(m.block_table(1).size(), size_t(2));
    // A fork's copy-on-write needs a block too.
    KVCacheManager m2(3, 4, false);
    QCOMPARE(admit(m2, 1, seq(1, 5)), 0);
    QVERIFY(m2.fork(1, 2).is_ok());
    QVERIFY(m2.prepare_append(1)->copy.has_value());  // takes the last free block
    auto nr = m2.prepare_append(2);
    QVERIFY(nr.is_ok() && !nr->copy.has_value() && !nr->no_room);  // sole owner now
    QVERIFY(m2.fork(2, 3).is_ok());
    auto full = m2.prepare_append(3);
    QVERIFY(full.is_ok() && full->no_room && !full->copy.has_value());
    QCOMPARE(kv_pool_invariants(m), QString());
    QCOMPARE(kv_pool_invariants(m2), QString());
}

void TestKvCache::free_returns_every_block() {
    KVCacheManager m(32, 4, true);
    QCOMPARE(admit(m, 1, seq(1, 13)), 0);
    QCOMPARE(admit(m, 2, seq(1, 17)), 12);
    QVERIFY(m.fork(2, 3).is_ok());
    QVERIFY(m.prepare_append(3)->copy.has_value());
    QCOMPARE(admit(m, 4, seq(200, 3)), 0);
    QVERIFY(m.usage() > 0.0);
    for (RequestId id : m.request_ids()) m.free(id);
    m.free(12345);  // unknown: ignored
    QCOMPARE(m.num_free_blocks(), 32);
    QCOMPARE(m.usage(), 0.0);
    QVERIFY(m.request_ids().empty());
    QCOMPARE(kv_pool_invariants(m), QString());
}

void TestKvCache::block_map_snapshot() {
    KVCacheManager m(8, 4, true);
    QCOMPARE(admit(m, 7, seq(1, 6)), 0);  // blocks 0 (full), 1 (2 tokens)
    QVERIFY(m.fork(7, 8).is_ok());
    auto map = m.block_map();
    QCOMPARE(map.size(), size_t(8));
    QCOMPARE(map[0].state, BlockState::used);
    QCOMPARE(map[0].ref_cnt, 2);
    QCOMPARE(map[0].owners, (std::vector<RequestId>{7, 8}));
    QCOMPARE(map[0].n_filled, 4);
    QVERIFY(map[0].hashed);
    QCOMPARE(map[1].n_filled, 2);
    QVERIFY(!map[1].hashed);
    QCOMPARE(map[2].state, BlockState::free);
    QVERIFY(map[2].owners.empty());
    m.free(7);
    m.free(8);
    map = m.block_map();
    QCOMPARE(map[0].state, BlockState::cached);
    QCOMPARE(map[0].n_filled, 4);
    QCOMPARE(map[1].state, BlockState::free);
}

void TestKvCache::prefix_caching_disabled() {
    KVCacheManager m(8, 4, false);
    QCOMPARE(admit(m, 1, seq(1, 9)), 0);
    m.free(1);
    QCOMPARE(admit(m, 2, seq(1, 9)), 0);
    QVERIFY(m.pool().cached_blocks().empty());
    QCOMPARE(kv_pool_invariants(m), QString());
}

void TestKvCache::randomized_invariants() {
    constexpr int kBlocks = 48, kBs = 4, kOps = 4000, kMaxLen = 48;
    KVCacheManager m(kBlocks, kBs, true);
    std::mt19937 rng(12345);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    // Simulated KV: each slot holds a fingerprint of the whole prefix up to its token, as real
    // KV depends on every earlier token and the position, so reusing a block under another
    // prefix reads back wrong.
    std::vector<std::vector<uint64_t>> kv(kBlocks, std::vector<uint64_t>(kBs, 0));
    auto fingerprints = [](const std::vector<int32_t>& toks) {
        std::vector<uint64_t> fp(toks.size());
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < toks.size(); ++i) {
            h = (h ^ static_cast<uint64_t>(static_cast<uint32_t>(toks[i]) + 1)) * 1099511628211ull;
            fp[i] = h;
        }
        return fp;
    };
    std::map<RequestId, std::vector<int32_t>> tokens;  // each live request's tokens
    const std::vector<std::vector<int32_t>> systems = {seq(1000, 11), seq(2000, 8), seq(3000, 5)};
    RequestId next_id = 1;
    int no_room = 0, copies = 0, forks = 0, cancels = 0;

    auto write = [&](RequestId id, int from) {
        const auto& t = m.block_table(id);
        const auto fp = fingerprints(tokens[id]);
        for (int p = from; p < static_cast<int>(fp.size()); ++p) {
            const int32_t b = t[static_cast<size_t>(p / kBs)];
            QVERIFY2(m.pool().block(b).ref_cnt == 1, "writing into a shared block");
            kv[static_cast<size_t>(b)][static_cast<size_t>(p % kBs)] = fp[static_cast<size_t>(p)];
        }
    };
    auto pick = [&]() -> RequestId {
        auto it = tokens.begin();
        std::advance(it, uni(0, static_cast<int>(tokens.size()) - 1));
        return it->first;
    };

    for (int op = 0; op < kOps; ++op) {
        const int r = uni(0, 99);
        if (r < 25 || tokens.empty()) {  // arrival
            std::vector<int32_t> prompt;
            if (uni(0, 3) != 0) prompt = systems[static_cast<size_t>(uni(0, 2))];
            const int extra = uni(1, 10);
            for (int i = 0; i < extra; ++i) prompt.push_back(uni(0, 3));  // small vocab: suffixes collide too
            const RequestId id = next_id++;
            auto hit = m.get_computed_blocks(id, prompt);
            QVERIFY(hit.is_ok());
            QVERIFY(*hit % kBs == 0 && *hit < static_cast<int>(prompt.size()));
            if (uni(0, 9) == 0) {  // cancelled before it was scheduled
                m.free(id);
                ++cancels;
                QVERIFY(!m.has_request(id));
            } else {
                auto a = m.allocate_slots(id, prompt, static_cast<int>(prompt.size()) - *hit);
                QVERIFY(a.is_ok());
                if (a->no_room) {
                    ++no_room;
                    QVERIFY(!m.has_request(id));
                } else {
                    tokens[id] = prompt;
                    write(id, *hit);
                }
            }
        } else if (r < 65) {  // decode one token
            const RequestId id = pick();
            auto prep = m.prepare_append(id);
            QVERIFY(prep.is_ok());
            if (prep->copy) {
                kv[static_cast<size_t>(prep->copy->dst_block)] = kv[static_cast<size_t>(prep->copy->src_block)];
                ++copies;
            }
            if (prep->no_room) {
                ++no_room;
                m.free(pick());  // preempt someone (maybe itself)
            } else {
                auto& toks = tokens[id];
                toks.push_back(uni(0, 3));
                auto a = m.allocate_slots(id, toks, 1);
                QVERIFY(a.is_ok());
                if (a->no_room) {
                    ++no_room;
                    toks.pop_back();
                    const RequestId victim = pick();
                    m.free(victim);
                    tokens.erase(victim);
                } else {
                    write(id, static_cast<int>(toks.size()) - 1);
                    if (static_cast<int>(toks.size()) >= kMaxLen) {
                        m.free(id);
                        tokens.erase(id);
                    }
                }
            }
            // prep->no_room: free(pick()) above may have removed a request; drop it from the model.
            for (auto it = tokens.begin(); it != tokens.end();)
                it = m.has_request(it->first) ? std::next(it) : tokens.erase(it);
        } else if (r < 75) {  // fork (parallel sampling / beam search)
            const RequestId parent = pick();
            const RequestId child = next_id++;
            QVERIFY(m.fork(parent, child).is_ok());
            tokens[child] = tokens[parent];
            ++forks;
        } else {  // finish or cancel a running request
            const RequestId id = pick();
            m.free(id);
            tokens.erase(id);
        }

        const QString why = kv_pool_invariants(m);
        if (!why.isEmpty()) QFAIL(qPrintable(QString("op %1: %2").arg(op).arg(why)));
        QCOMPARE(m.request_ids().size(), tokens.size());
        for (const auto& [id, toks] : tokens) {
            QCOMPARE(m.num_tokens(id), static_cast<int>(toks.size()));
            const auto& t = m.block_table(id);
            const auto fp = fingerprints(toks);
            for (size_t p = 0; p < toks.size(); ++p)
                if (kv[static_cast<size_t>(t[p / kBs])][p % kBs] != fp[p])
                    QFAIL(qPrintable(QString("op %1: request %2 reads a wrong token at %3").arg(op).arg(id).arg(p)));
        }
    }
    for (RequestId id : m.request_ids()) m.free(id);
    QCOMPARE(kv_pool_invariants(m), QString());
    QCOMPARE(m.num_free_blocks(), kBlocks);
    QCOMPARE(static_cast<int>(m.pool().free_queue_ids().size()), kBlocks);
    const auto s = m.stats();
    qInfo("hits %lld / %lld tokens, %lld evictions, %d no-room, %d copies, %d forks, %d cancels",
          static_cast<long long>(s.hit_tokens), static_cast<long long>(s.query_tokens),
          static_cast<long long>(s.blocks.evictions), no_room, copies, forks, cancels);
    QVERIFY(s.hit_tokens > 0);
    QVERIFY(s.blocks.evictions > 0);
    QVERIFY(no_room > 0);
    QVERIFY(copies > 0);
    QVERIFY(cancels > 0);
}

QTEST_GUILESS_MAIN(TestKvCache)
#include "tst_kv_cache.moc"
