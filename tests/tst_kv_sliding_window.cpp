// ctest-labels: unit
// The sliding-window layers' own pool in the KV cache manager (kv_cache/sliding_window_blocks.h,
// KVCacheManager::enable_sliding_window), without a model, as the scheduler drives it:
//  - each allocation frees exactly the local blocks wholly before its first query's window
//    (checked against the positions, block by block), the main table keeps every block;
//  - no room in the local pool is no room for the allocation, even when the main pool has
//    room, and the main table is left as it was;
//  - a fork shares both tables; writing into a shared partial last block copies it in both
//    pools (one CopyOp each); truncate rolls both back; free gives both back;
//  - prefix hits: kept while the local blocks the first query's window reads are cached,
//    cut to the longest prefix whose window is cached once they were handed out again;
//  - the invariants of both pools (tests/support/kv_invariants) after every operation;
//  - the snapshot's local pool (blocks, states, each request's local table, the freed count)
//    survives the trace / telemetry JSON and back.
#include <QtTest>

#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/telemetry/snapshot.h"
#include "engine/telemetry/trace_json.h"
#include "tests/support/kv_invariants.h"
#include "tests/support/token_ids.h"

using namespace kvs;

namespace {
constexpr int kBs = 4, kWindow = 6;

int held(const std::vector<int32_t>& t) {
    return static_cast<int>(std::count_if(t.begin(), t.end(), [](int32_t b) { return b >= 0; }));
}
}  // namespace

class TstKvSlidingWindow : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void freesExactlyWhatLeftTheWindow() {
        // Prefix caching on (the engine's default): a freed full block keeps its hash and waits at
        // the free queue's tail, so it shows as freed until the pool runs out of other blocks.
        KVCacheManager kv(32, kBs, true);
        kv.enable_sliding_window(kWindow, 8);
        const auto toks = test::seq(10, 60);
        int computed = 0;
        for (int chunk : {5, 3, 1, 1, 1, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4}) {
            auto a = kv.allocate_slots(1, toks, chunk);
            QVERIFY2(a && !a->no_room, a ? "no room" : a.message().c_str());
            const auto& local = kv.swa_block_table(1);
            QCOMPARE(local.size(), kv.block_table(1).size());
            for (size_t b = 0; b < local.size(); ++b) {
                // freed <=> every position of block b is before the window of the query at `computed`
                const bool out_of_window = int(b + 1) * kBs <= computed - kWindow + 1;
                QVERIFY2(
                    (local[b] < 0) == out_of_window,
                    qPrintable(QString("block %1 at first query %2: entry %3").arg(b).arg(computed).arg(local[b])));
            }
            QVERIFY(held(local) <= kv.sliding_window()->max_blocks_per_request(7));
            QVERIFY2(test::kv_pool_invariants(kv).isEmpty(), qPrintable(test::kv_pool_invariants(kv)));
            computed += chunk;
        }
        QCOMPARE(int(kv.block_table(1).size()), (computed + kBs - 1) / kBs);
        const int64_t freed = kv.sliding_window()->n_freed_total();
        QCOMPARE(freed, int64_t(std::count(kv.swa_block_table(1).begin(), kv.swa_block_table(1).end(), -1)));
        // freed blocks are marked as such in the local block map until handed out again
        int marked = 0;
        for (const BlockInfo& b : kv.swa_block_map()) marked += b.state == BlockState::freed ? 1 : 0;
        QCOMPARE(int64_t(marked), freed);
        kv.free(1);
        QCOMPARE(kv.sliding_window()->n_in_use(), 0);
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
    }

    void localPoolFullIsNoRoom() {
        KVCacheManager kv(64, kBs, false);
        kv.enable_sliding_window(kWindow, 4);
        const auto toks = test::seq(10, 40);
        QVERIFY(!kv.allocate_slots(1, toks, 9)->no_room);  // 3 local blocks
        QVERIFY(!kv.allocate_slots(2, toks, 4)->no_room);  // 1 more: the local pool is full
        const auto before = kv.block_table(3);
        auto a = kv.allocate_slots(3, toks, 4);
        QVERIFY(a && a->no_room);
        QVERIFY(kv.block_table(3).empty() && before.empty());
        QCOMPARE(kv.num_free_blocks(), 64 - 4);  // the main pool gave nothing either
        // request 1 moves on (its first query at 9 reads from 4): block 0 goes back, room for block 3
        QVERIFY(!kv.allocate_slots(1, toks, 4)->no_room);
        QCOMPARE(kv.swa_block_table(1).size(), size_t(4));
        QVERIFY(kv.swa_block_table(1)[0] < 0);
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
    }

    void forkCopyOnWriteTruncate() {
        KVCacheManager kv(32, kBs, false);
        kv.enable_sliding_window(kWindow, 16);
        const auto toks = test::seq(10, 40);
        QVERIFY(!kv.allocate_slots(1, toks, 10)->no_room);  // 3 blocks, the last holding 2 tokens
        QVERIFY(kv.fork(1, 2));
        QCOMPARE(kv.swa_block_table(2), kv.swa_block_table(1));
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
        const int32_t shared_local = kv.swa_block_table(1).back();
        auto prep = kv.prepare_append(2);
        QVERIFY(prep && !prep->no_room && prep->copy);
        const std::vector<CopyOp> local_copies = kv.take_swa_copies();
        QCOMPARE(local_copies.size(), size_t(1));
        QCOMPARE(local_copies[0].src_block, shared_local);
        QCOMPARE(local_copies[0].dst_block, kv.swa_block_table(2).back());
        QVERIFY(kv.swa_block_table(1).back() == shared_local);
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
        // drafts: slots for 1 + 5 lookahead tokens, then rolled back to 1
        QVERIFY(!kv.allocate_slots(2, toks, 1, 5)->no_room);
        QCOMPARE(kv.swa_block_table(2).size(), size_t(4));
        QVERIFY(kv.truncate(2, 11));
        QCOMPARE(kv.swa_block_table(2).size(), size_t(3));
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
        // a request freed before the step copies nothing
        QVERIFY(kv.fork(1, 3));
        QVERIFY(kv.prepare_append(3)->copy);
        kv.free(3);
        QVERIFY(kv.take_swa_copies().empty());
        kv.free(1);
        kv.free(2);
        QCOMPARE(kv.sliding_window()->n_in_use(), 0);
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
    }

    void prefixHitNeedsTheWindowCached() {
        KVCacheManager kv(64, kBs, true);
        kv.enable_sliding_window(kWindow, 6);
        const auto p = test::seq(100, 20);  // 5 full blocks
        const auto q = test::cat(p, {7, 8});
        QVERIFY(!kv.allocate_slots(1, p, 20)->no_room);
        kv.free(1);  // blocks 0..4 cached in both pools (none was freed: one chunk)
        QCOMPARE(*kv.get_computed_blocks(2, q), 20);
        auto a = kv.allocate_slots(2, q, 2);
        QVERIFY(a && !a->no_room);
        // the hit's local entries: only the window of position 20 (positions 15..19: blocks 3, 4)
        const auto& local = kv.swa_block_table(2);
        QCOMPARE(local.size(), size_t(6));
        for (int b = 0; b < 3; ++b) QCOMPARE(local[size_t(b)], -1);
        QVERIFY(local[3] >= 0 && local[4] >= 0 && local[5] >= 0);
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
        kv.free(2);
        // another request takes every local block: the cached local blocks are handed out again
        const auto other = test::seq(300, 24);
        QVERIFY(!kv.allocate_slots(3, other, 24)->no_room);
        kv.free(3);
        QCOMPARE(*kv.get_computed_blocks(4, q), 0);  // the main pool still has p's blocks, the window not
        kv.free(4);
        QVERIFY(test::kv_pool_invariants(kv).isEmpty());
    }

    void snapshotJsonCarriesTheLocalPool() {
        KVCacheManager kv(16, kBs, true);
        kv.enable_sliding_window(kWindow, 6);
        const auto toks = test::seq(10, 30);
        QVERIFY(!kv.allocate_slots(1, toks, 12)->no_room);
        QVERIFY(!kv.allocate_slots(1, toks, 4)->no_room);  // first query at 12 reads from 7: block 0 freed
        QVERIFY(!kv.allocate_slots(1, toks, 4)->no_room);  // at 16, from 11: block 1 freed
        SchedRequest r;
        r.id = 1;
        r.prompt = toks;
        r.max_tokens = 4;
        r.status = RequestStatus::running;
        r.num_computed_tokens = 20;
        EngineSnapshot s;
        s.block_size = kBs;
        s.blocks = block_views(kv);
        s.requests.push_back(request_view(r, kv));
        fill_local_pool(s, kv);
        QCOMPARE(s.requests[0].local_block_ids[0], -1);
        QCOMPARE(s.total_freed_blocks, int64_t(2));
        QCOMPARE(s.step.local_blocks_used, 3);
        QCOMPARE(s.step.n_local_blocks, 6);
        int freed = 0;
        for (const BlockView& b : s.local_blocks) freed += b.state == BlockSlotState::freed ? 1 : 0;
        QCOMPARE(freed, 2);
        const nlohmann::json j = s;
        const auto back = j.get<EngineSnapshot>();
        QCOMPARE(back.requests[0].local_block_ids, s.requests[0].local_block_ids);
        QCOMPARE(back.local_blocks.size(), s.local_blocks.size());
        for (size_t i = 0; i < s.local_blocks.size(); ++i) {
            QCOMPARE(back.local_blocks[i].state, s.local_blocks[i].state);
            QCOMPARE(back.local_blocks[i].owners, s.local_blocks[i].owners);
        }
        QCOMPARE(back.total_freed_blocks, s.total_freed_blocks);
        QCOMPARE(back.sliding_window, kWindow);
        QCOMPARE(back.step.local_blocks_used, 3);
        QCOMPARE(j.at("local_blocks")[0].at("state").get<std::string>(), std::string("freed"));
    }
};

QTEST_GUILESS_MAIN(TstKvSlidingWindow)
#include "tst_kv_sliding_window.moc"
