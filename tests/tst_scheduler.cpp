// ctest-labels: unit
// The continuous-batching scheduler and the CPU swap tier, without a model (the way vLLM
// tests its scheduler). tests/support/fake_model_runner.h plays the engine on a simulated
// KV cache: it performs each step's swap-outs, swap-ins and block copies, writes the
// scheduled tokens through the block tables, reads every running request's KV back, and
// "samples" a token that hashes the request id and the KV it read. So a wrong prefix hit,
// a missed copy-on-write, a bad swap mapping or a lost token changes what a request reads
// or generates. After every step it checks the scheduler's contract (budget,
// max_num_seqs, chunks following num_computed_tokens, block tables covering them) and the
// block accounting (ref counts = tables holding a block, free queue and host tier
// consistent). It reports back through the engine's own Scheduler::update (the tokens
// each chunk produced), and can play speculative decoding: drafts that are right up to a
// random point, verified against what it samples. The cases below drive it through each
// behaviour of issue 4.
#include <QtTest>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/scheduler.h"
#include "tests/support/fake_model_runner.h"
#include "tests/support/token_ids.h"

using kvs::BatchingPolicy;
using kvs::FinishReason;
using kvs::KVCacheManager;
using kvs::PreemptionMode;
using kvs::RequestId;
using kvs::RequestStatus;
using kvs::SchedRequest;
using kvs::SchedulerConfig;

Q_DECLARE_METATYPE(PreemptionMode)
Q_DECLARE_METATYPE(BatchingPolicy)

namespace {

using kvs::test::cat;
using kvs::test::seq;
using Sim = kvs::test::FakeModelRunner;
using kvs::test::pool_invariants;

SchedulerConfig config(int budget, int max_seqs = 64) {
    SchedulerConfig c;
    c.max_num_batched_tokens = budget;
    c.max_num_seqs = max_seqs;
    c.max_model_len = 4096;
    return c;
}

#define STEP(sim)                                 \
    do {                                          \
        const QString e__ = (sim).step();         \
        QVERIFY2(e__.isEmpty(), qPrintable(e__)); \
    } while (0)
#define RUN(sim)                                  \
    do {                                          \
        const QString e__ = (sim).run();          \
        QVERIFY2(e__.isEmpty(), qPrintable(e__)); \
    } while (0)
#define ADD(sim, ...)                                        \
    do {                                                     \
        const auto st__ = (sim).s->add_request(__VA_ARGS__); \
        QVERIFY2(st__.is_ok(), st__.message().c_str());      \
    } while (0)

}  // namespace

class TestScheduler : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void names();
    void single_request();
    void add_request_rejects_data();
    void add_request_rejects();
    void rejected_request_leaves_others_running();
    void chunked_prefill_mixed_with_decodes();
    void without_chunked_prefill_prompt_runs_whole();
    void budget_and_max_num_seqs();
    void priority_admission();
    void preemption_order_data();
    void preemption_order();
    void self_preemption_recompute_covers_output();
    void swap_or_fallback_data();
    void swap_or_fallback();
    void prefix_cache_hits();
    void cow_fork_data();
    void cow_fork();
    void swap_out_reads_pending_copy_source();
    void fork_limits();
    void static_batching();
    void abort_and_finish();
    void engine_appends_token();
    void drafts_verified_and_rolled_back();
    void preempted_resume_identical_data();
    void preempted_resume_identical();
    void randomized_invariants_data();
    void randomized_invariants();
};

void TestScheduler::names() {
    QCOMPARE(QString(kvs::status_name(RequestStatus::waiting)), QString("waiting"));
    QCOMPARE(QString(kvs::status_name(RequestStatus::running)), QString("running"));
    QCOMPARE(QString(kvs::status_name(RequestStatus::swapped)), QString("swapped"));
    QCOMPARE(QString(kvs::status_name(RequestStatus::finished)), QString("finished"));
    QCOMPARE(QString(kvs::finish_reason_name(FinishReason::none)), QString("none"));
    QCOMPARE(QString(kvs::finish_reason_name(FinishReason::stop)), QString("stop"));
    QCOMPARE(QString(kvs::finish_reason_name(FinishReason::length)), QString("length"));
    QCOMPARE(QString(kvs::finish_reason_name(FinishReason::cancelled)), QString("cancelled"));
    QCOMPARE(QString(kvs::finish_reason_name(FinishReason::rejected)), QString("rejected"));
    SchedRequest r;
    r.prompt = {1, 2, 3};
    r.output = {7, 8};
    QCOMPARE(r.all_tokens(), (std::vector<int32_t>{1, 2, 3, 7, 8}));
    QCOMPARE(r.num_tokens(), 5);
}

void TestScheduler::single_request() {
    Sim sim(config(512), 32, 16, true);
    ADD(sim, 1, seq(10, 40), 5);
    QCOMPARE(sim.s->request(1)->status, RequestStatus::waiting);
    QCOMPARE(sim.s->num_waiting(), 1);
    STEP(sim);
    QCOMPARE(sim.last.step, int64_t(0));
    QCOMPARE(sim.last.chunks.size(), size_t(1));
    const auto& c = sim.last.chunks[0];
    QCOMPARE(c.start_pos, 0);
    QCOMPARE(c.num_tokens, 40);
    QVERIFY(c.is_prefill && c.sample);
    QCOMPARE(sim.last.num_prefill_tokens, 40);
    QCOMPARE(sim.s->request(1)->num_cached_tokens, 0);
    QCOMPARE(sim.s->request(1)->num_output(), 1);
    QCOMPARE(sim.s->request(1)->status, RequestStatus::running);
    QCOMPARE(sim.kv->block_table(1).size(), size_t(3));
    for (int i = 0; i < 3; ++i) {
        STEP(sim);
        QCOMPARE(sim.last.chunks.size(), size_t(1));
        QVERIFY(!sim.last.chunks[0].is_prefill);
        QCOMPARE(sim.last.num_decode_tokens, 1);
        QVERIFY(sim.last_finished.empty());
    }
    STEP(sim);  // 5th token
    QCOMPARE(sim.last_finished, (std::vector<RequestId>{1}));
    const SchedRequest* r = sim.s->request(1);
    QVERIFY(r);
    QCOMPARE(r->status, RequestStatus::finished);
    QCOMPARE(r->finish_reason, FinishReason::length);
    QCOMPARE(r->num_output(), 5);
    QCOMPARE(sim.kv->num_free_blocks(), 32);  // freed at once
    QVERIFY(!sim.s->has_unfinished());
    STEP(sim);  // nothing to do
    QVERIFY(sim.last.empty());
    QCOMPARE(sim.s->counters().steps, int64_t(6));
    sim.s->remove_request(1);
    QVERIFY(sim.s->request(1) == nullptr);
    QVERIFY(sim.s->requests().empty());
    QVERIFY(sim.check_drained().isEmpty());
}

void TestScheduler::add_request_rejects_data() {
    QTest::addColumn<int>("prompt_len");
    QTest::addColumn<int>("max_tokens");
    QTest::addColumn<RequestId>("id");
    QTest::addColumn<QStringList>("expect");  // what the message must name
    // Config: max_model_len 100, 4 blocks of 16 = 64 tokens; request 1 already queued.
    QTest::newRow("empty prompt") << 0 << 4 << RequestId(2) << QStringList{"request 2", "empty"};
    QTest::newRow("max_tokens 0") << 5 << 0 << RequestId(2) << QStringList{"request 2", "max_tokens", "0"};
    QTest::newRow("duplicate id") << 5 << 4 << RequestId(1) << QStringList{"request 1"};
    QTest::newRow("over max_model_len") << 90 << 20 << RequestId(2) << QStringList{"request 2", "90", "20", "100"};
    QTest::newRow("over the pool") << 60 << 10 << RequestId(2)
                                   << QStringList{"request 2", "needs 5 KV blocks", "16", "60", "10", "pool", "4"};
}

void TestScheduler::add_request_rejects() {
    QFETCH(int, prompt_len);
    QFETCH(int, max_tokens);
    QFETCH(RequestId, id);
    QFETCH(QStringList, expect);
    SchedulerConfig c = config(512);
    c.max_model_len = 100;
    Sim sim(c, 4, 16, false);
    ADD(sim, 1, seq(1, 8), 4);
    const auto st = sim.s->add_request(id, seq(1, prompt_len), max_tokens);
    QVERIFY2(!st.is_ok(), "accepted");
    for (const QString& w : expect) QVERIFY2(QString::fromStdString(st.message()).contains(w), st.message().c_str());
    QCOMPARE(sim.s->counters().rejected, int64_t(1));
    QCOMPARE(sim.s->num_waiting(), 1);  // kept nothing
    QCOMPARE(sim.s->requests().size(), size_t(1));
    QCOMPARE(sim.s->request(1)->num_prompt(), 8);
    // Exactly the pool is fine: 49 + 16 - 1 = 64 tokens of KV.
    QVERIFY(sim.s->add_request(3, seq(1, 49), 16).is_ok());
}

void TestScheduler::rejected_request_leaves_others_running() {
    Sim sim(config(64), 8, 8, false);
    ADD(sim, 1, seq(1, 12), 10);
    ADD(sim, 2, seq(50, 9), 6);
    STEP(sim);
    STEP(sim);
    const auto st = sim.s->add_request(3, seq(1, 60), 20);  // 79 tokens of KV > 64
    QVERIFY(!st.is_ok());
    for (const char* w : {"request 3", "needs 10 KV blocks", "pool", "8"})
        QVERIFY2(QString::fromStdString(st.message()).contains(w), st.message().c_str());
    QCOMPARE(sim.s->request(3), nullptr);
    QCOMPARE(sim.s->num_running(), 2);
    RUN(sim);
    QCOMPARE(sim.s->request(1)->finish_reason, FinishReason::length);
    QCOMPARE(sim.s->request(1)->num_output(), 10);
    QCOMPARE(sim.s->request(2)->num_output(), 6);
}

void TestScheduler::chunked_prefill_mixed_with_decodes() {
    // Budget 16. A decodes every step; B's 40-token prompt runs as 15 + 15 + 10 beside it.
    Sim sim(config(16), 64, 4, false);
    ADD(sim, 1, seq(1, 4), 20);
    STEP(sim);
    ADD(sim, 2, seq(100, 40), 3);
    const int expect_start[] = {0, 15, 30};
    const int expect_n[] = {15, 15, 10};
    for (int i = 0; i < 3; ++i) {
        STEP(sim);
        QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{1, 2}));
        QVERIFY(!sim.chunk(1)->is_prefill);
        const auto* b = sim.chunk(2);
        QCOMPARE(b->start_pos, expect_start[i]);
        QCOMPARE(b->num_tokens, expect_n[i]);
        QVERIFY(b->is_prefill);
        QCOMPARE(b->sample, i == 2);
        QCOMPARE(sim.s->request(2)->num_output(), i == 2 ? 1 : 0);
        QCOMPARE(sim.last.total_tokens(), i == 2 ? 11 : 16);
    }
    STEP(sim);
    QVERIFY(!sim.chunk(2)->is_prefill);  // B decodes now
    QCOMPARE(sim.steps_with_mixed, 3);
    RUN(sim);
}

void TestScheduler::without_chunked_prefill_prompt_runs_whole() {
    SchedulerConfig c = config(16);
    c.chunked_prefill = false;
    Sim sim(c, 64, 4, false);
    ADD(sim, 1, seq(1, 4), 3);
    STEP(sim);
    ADD(sim, 2, seq(100, 16), 2);  // needs the whole budget: waits while A decodes
    ADD(sim, 3, seq(200, 40), 2);  // longer than any step: chunked anyway, but behind B
    STEP(sim);
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{1}));
    STEP(sim);  // A's 3rd token: A finishes
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{1}));
    QCOMPARE(sim.last_finished, (std::vector<RequestId>{1}));
    STEP(sim);
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{2}));
    QCOMPARE(sim.chunk(2)->num_tokens, 16);
    STEP(sim);  // B decodes (1), C: 15 of its 40 (longer than the budget, so chunked)
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{2, 3}));
    QCOMPARE(sim.chunk(3)->num_tokens, 15);
    RUN(sim);
}

void TestScheduler::budget_and_max_num_seqs() {
    Sim sim(config(24, 4), 200, 4, true);
    for (int i = 0; i < 20; ++i) ADD(sim, 100 + i, seq(i * 50, 3 + (i * 7) % 30), 1 + (i * 5) % 12);
    RUN(sim);                           // checks every step: tokens <= 24, running <= 4, chunks <= 4
    QCOMPARE(sim.max_step_tokens, 24);  // the budget was reached...
    QCOMPARE(sim.max_running, 4);       // ...and so was max_num_seqs
    for (int i = 0; i < 20; ++i) QCOMPARE(sim.s->request(100 + i)->num_output(), 1 + (i * 5) % 12);
}

void TestScheduler::priority_admission() {
    Sim sim(config(512, 1), 64, 4, false);
    ADD(sim, 1, seq(1, 5), 2, /*priority*/ 5);
    ADD(sim, 2, seq(20, 5), 2, /*priority*/ 0);  // more urgent, arrived later: first
    ADD(sim, 3, seq(40, 5), 2, /*priority*/ 0);  // same priority as 2: after it (FCFS)
    ADD(sim, 4, seq(60, 5), 2, /*priority*/ 3);
    std::vector<RequestId> order;
    while (sim.s->has_unfinished()) {
        STEP(sim);
        for (RequestId id : sim.chunk_ids())
            if (order.empty() || order.back() != id) order.push_back(id);
    }
    QCOMPARE(order, (std::vector<RequestId>{2, 3, 4, 1}));
}

void TestScheduler::preemption_order_data() {
    QTest::addColumn<std::vector<int>>("priorities");  // of requests 1, 2, 3
    QTest::addColumn<RequestId>("victim");
    QTest::newRow("least urgent priority") << std::vector<int>{0, 2, 1} << RequestId(2);
    QTest::newRow("same priority: latest arrival") << std::vector<int>{0, 0, 0} << RequestId(3);
    QTest::newRow("latest arrival among least urgent") << std::vector<int>{1, 1, 0} << RequestId(2);
}

void TestScheduler::preemption_order() {
    QFETCH(std::vector<int>, priorities);
    QFETCH(RequestId, victim);
    // Block size 4, 6 blocks. Three 4-token prompts: 3 blocks, then each decode of token 4
    // takes a second block (6 of 6); token 8 needs a third block each: someone must go.
    Sim sim(config(512), 6, 4, false);
    for (int i = 0; i < 3; ++i) ADD(sim, i + 1, seq(10 * i, 4), 10, priorities[static_cast<size_t>(i)]);
    for (int i = 0; i < 5; ++i) {
        STEP(sim);
        QVERIFY(sim.last.preempted.empty());
    }
    QCOMPARE(sim.kv->num_free_blocks(), 0);
    STEP(sim);
    QCOMPARE(sim.last.preempted, (std::vector<RequestId>{victim}));
    QCOMPARE(sim.s->request(victim)->status, RequestStatus::waiting);  // recompute
    QCOMPARE(sim.s->request(victim)->num_computed_tokens, 0);
    QCOMPARE(sim.s->request(victim)->num_preemptions, 1);
    QCOMPARE(sim.s->counters().preemptions, int64_t(1));
    QCOMPARE(sim.s->counters().recomputes, int64_t(1));
    QCOMPARE(sim.last.chunks.size(), size_t(2));
    QVERIFY(sim.chunk(victim) == nullptr);
    RUN(sim);
    for (RequestId id = 1; id <= 3; ++id) QCOMPARE(sim.s->request(id)->num_output(), 10);
}

void TestScheduler::self_preemption_recompute_covers_output() {
    // Block size 4, 3 blocks. Request 1: 3-token prompt (1 block); request 2: 8 tokens (2 full
    // blocks). Step 2: request 2 needs a third block, none is free, and it is the least
    // urgent: it preempts itself. When it comes back its prefill covers prompt + output.
    Sim sim(config(512), 3, 4, false);
    ADD(sim, 1, seq(1, 3), 2);
    ADD(sim, 2, seq(100, 8), 3);
    STEP(sim);
    QCOMPARE(sim.kv->num_free_blocks(), 0);
    const auto out2 = sim.s->request(2)->output;
    ADD(sim, 3, seq(300, 2), 2);  // same priority, arrived after 2 (no room for it yet)
    STEP(sim);
    QCOMPARE(sim.last.preempted, (std::vector<RequestId>{2}));
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{1}));  // nobody admitted in a preempting step
    QCOMPARE(sim.last_finished, (std::vector<RequestId>{1}));
    STEP(sim);                                               // 2 kept its arrival: it goes before 3
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{2}));  // 3 waits: 2 took all 3 blocks
    const auto* c = sim.chunk(2);
    QCOMPARE(c->start_pos, 0);
    QCOMPARE(c->num_tokens, 9);  // 8 prompt + 1 output
    QVERIFY(c->is_prefill && c->sample);
    QCOMPARE(sim.s->request(2)->num_output(), 2);
    QCOMPARE(sim.s->request(2)->output[0], out2[0]);
    RUN(sim);
}

void TestScheduler::swap_or_fallback_data() {
    QTest::addColumn<int>("host_blocks");
    QTest::addColumn<bool>("swapped");
    QTest::newRow("host tier has room: swap") << 2 << true;
    QTest::newRow("host tier too small: recompute") << 1 << false;
    QTest::newRow("no host tier: recompute") << 0 << false;
}

void TestScheduler::swap_or_fallback() {
    QFETCH(int, host_blocks);
    QFETCH(bool, swapped);
    SchedulerConfig c = config(512);
    c.preemption = PreemptionMode::swap;
    c.n_host_blocks = host_blocks;
    Sim sim(c, 3, 4, false);  // the self-preemption setup above
    ADD(sim, 1, seq(1, 3), 2);
    ADD(sim, 2, seq(100, 8), 3);
    STEP(sim);
    const auto table2 = sim.kv->block_table(2);
    STEP(sim);
    QCOMPARE(sim.last.preempted, (std::vector<RequestId>{2}));
    const SchedRequest* r = sim.s->request(2);
    QCOMPARE(sim.s->counters().preemptions, int64_t(1));
    if (swapped) {
        QCOMPARE(r->status, RequestStatus::swapped);
        QCOMPARE(r->num_computed_tokens, 8);
        QCOMPARE(sim.s->counters().swap_outs, int64_t(1));
        QCOMPARE(sim.s->counters().swapped_out_blocks, int64_t(2));
        QCOMPARE(sim.last.swap_out.size(), size_t(2));
        const auto hb = sim.s->host_blocks(2);
        QCOMPARE(hb.size(), size_t(2));
        for (size_t k = 0; k < 2; ++k) {
            QCOMPARE(sim.last.swap_out[k].device_block, table2[k]);
            QCOMPARE(sim.last.swap_out[k].host_block, hb[k]);
        }
        QCOMPARE(sim.s->num_free_host_blocks(), host_blocks - 2);
        STEP(sim);  // request 1 finished last step: request 2 comes back and decodes
        QCOMPARE(sim.last.swap_in.size(), size_t(2));
        const auto& t = sim.kv->block_table(2);
        for (size_t k = 0; k < 2; ++k) {
            QCOMPARE(sim.last.swap_in[k].host_block, hb[k]);
            QCOMPARE(sim.last.swap_in[k].device_block, t[k]);
        }
        QCOMPARE(sim.chunk(2)->start_pos, 8);
        QCOMPARE(sim.chunk(2)->num_tokens, 1);
        QVERIFY(!sim.chunk(2)->is_prefill);
        QCOMPARE(sim.s->counters().swapped_in_blocks, int64_t(2));
        QVERIFY(sim.s->host_blocks(2).empty());
        QCOMPARE(sim.s->num_free_host_blocks(), host_blocks);
    } else {
        QCOMPARE(r->status, RequestStatus::waiting);
        QCOMPARE(r->num_computed_tokens, 0);
        QVERIFY(sim.last.swap_out.empty());
        QCOMPARE(sim.s->counters().recomputes, int64_t(1));
        QCOMPARE(sim.s->counters().swap_outs, int64_t(0));
        QCOMPARE(sim.s->num_free_host_blocks(), host_blocks);
        STEP(sim);
        QVERIFY(sim.last.swap_in.empty());
        QCOMPARE(sim.chunk(2)->num_tokens, 9);
    }
    RUN(sim);
}

void TestScheduler::prefix_cache_hits() {
    // Block size 16: a 32-token system prompt is 2 full blocks.
    Sim sim(config(512), 32, 16, true);
    const auto system = seq(1000, 32);
    ADD(sim, 1, cat(system, seq(1, 10)), 3);
    STEP(sim);
    QCOMPARE(sim.last.num_prefix_hit_tokens, 0);
    QCOMPARE(sim.s->request(1)->num_cached_tokens, 0);
    ADD(sim, 2, cat(system, seq(500, 7)), 3);  // same system prompt, while 1 runs
    STEP(sim);
    QCOMPARE(sim.last.num_prefix_hit_tokens, 32);
    QCOMPARE(sim.s->request(2)->num_cached_tokens, 32);
    QCOMPARE(sim.chunk(2)->start_pos, 32);
    QCOMPARE(sim.chunk(2)->num_tokens, 7);
    const auto t1 = sim.kv->block_table(1), t2 = sim.kv->block_table(2);
    QCOMPARE(t2[0], t1[0]);
    QCOMPARE(t2[1], t1[1]);
    QCOMPARE(sim.kv->pool().block(t1[0]).ref_cnt, 2);
    RUN(sim);
    // After both finished the blocks stay cached: the exact same 48-token prompt hits
    // 2 blocks (3 would leave no token to compute; the cap keeps the last one).
    ADD(sim, 3, cat(system, seq(1, 16)), 2);
    ADD(sim, 4, seq(7000, 20), 2);  // unrelated: no hit
    STEP(sim);
    QCOMPARE(sim.s->request(3)->num_cached_tokens, 32);
    QCOMPARE(sim.s->request(4)->num_cached_tokens, 0);
    QCOMPARE(sim.last.num_prefix_hit_tokens, 32);
    RUN(sim);
    QVERIFY(sim.kv->stats().hit_tokens >= 64);
}

void TestScheduler::cow_fork_data() {
    QTest::addColumn<int>("prompt_len");
    QTest::addColumn<int>("n_children");
    QTest::addColumn<int>("copies_first_step");
    // Block size 4. After the prefill, prompt_len tokens have KV; the next write goes to
    // position prompt_len: into the shared partial last block unless prompt_len % 4 == 0.
    // With k sharers writing one block, k - 1 need a copy (the last writes in place).
    QTest::newRow("partial block, 1 child") << 10 << 1 << 1;
    QTest::newRow("partial block, 3 children") << 10 << 3 << 3;
    QTest::newRow("block boundary: no copy") << 8 << 2 << 0;
}

void TestScheduler::cow_fork() {
    QFETCH(int, prompt_len);
    QFETCH(int, n_children);
    QFETCH(int, copies_first_step);
    Sim sim(config(512), 32, 4, false);
    ADD(sim, 1, seq(1, prompt_len), 9);
    STEP(sim);
    const auto parent_table = sim.kv->block_table(1);
    QVERIFY(!sim.s->fork_request(2, 99).is_ok());  // unknown parent
    for (int k = 0; k < n_children; ++k) QVERIFY(sim.s->fork_request(1, 10 + k).is_ok());
    QVERIFY2(!sim.s->fork_request(1, 10).is_ok(), "child id reused");
    for (int k = 0; k < n_children; ++k) {
        const SchedRequest* c = sim.s->request(10 + k);
        QCOMPARE(c->status, RequestStatus::running);
        QCOMPARE(c->num_computed_tokens, prompt_len);
        QCOMPARE(c->output, sim.s->request(1)->output);
        QCOMPARE(sim.kv->block_table(10 + k), parent_table);
    }
    for (int32_t b : parent_table) QCOMPARE(sim.kv->pool().block(b).ref_cnt, 1 + n_children);
    STEP(sim);
    QCOMPARE(static_cast<int>(sim.last.chunks.size()), 1 + n_children);
    QCOMPARE(static_cast<int>(sim.last.copies.size()), copies_first_step);
    QCOMPARE(sim.s->counters().cow_copies, int64_t(copies_first_step));
    std::set<int32_t> last_blocks;
    for (const auto& c : sim.last.copies) QCOMPARE(c.src_block, parent_table.back());
    for (RequestId id : sim.chunk_ids()) last_blocks.insert(sim.kv->block_table(id).back());
    QCOMPARE(static_cast<int>(last_blocks.size()), 1 + n_children);  // everyone writes its own block
    // The full blocks stay shared; from now on nobody writes a shared block: no more copies.
    const int full = prompt_len / 4;
    for (int i = 0; i < full; ++i)
        QCOMPARE(sim.kv->pool().block(parent_table[static_cast<size_t>(i)]).ref_cnt, 1 + n_children);
    RUN(sim);
    QCOMPARE(sim.s->counters().cow_copies, int64_t(copies_first_step));
    // The children generated their own tokens (the fake sampler hashes the request id).
    QVERIFY(sim.s->request(10)->output != sim.s->request(1)->output);
    QCOMPARE(sim.s->request(10)->num_output(), 9);
}

void TestScheduler::swap_out_reads_pending_copy_source() {
    // A request whose copy-on-write copy was queued this step, then preempted itself by
    // swap in the same step: the copy is dropped and its swap-out reads the copy's source
    // (the destination is filled only after swap-outs run). Block size 4, 4 blocks.
    SchedulerConfig c = config(512);
    c.preemption = PreemptionMode::swap;
    c.n_host_blocks = 8;
    Sim sim(c, 4, 4, false);
    sim.sample_minus_one = true;  // the engine appends tokens itself
    ADD(sim, 1, seq(1, 10), 5);
    STEP(sim);  // 10 tokens of KV in blocks 0, 1, 2 (2 partly filled)
    QVERIFY(sim.s->fork_request(1, 2).is_ok());
    for (int32_t t : {501, 502, 503}) QVERIFY(sim.s->append_token(2, t).is_ok());
    const auto table = sim.kv->block_table(1);
    // Request 1 has nothing new; request 2 copies block 2 (the last free block), then needs
    // one more block for token 12, none is free, and it is the least urgent.
    STEP(sim);
    QCOMPARE(sim.last.preempted, (std::vector<RequestId>{2}));
    QVERIFY(sim.last.chunks.empty());
    QVERIFY2(sim.last.copies.empty(), "the preempted request's copy is still queued");
    QCOMPARE(sim.s->counters().cow_copies, int64_t(0));
    QCOMPARE(sim.s->request(2)->status, RequestStatus::swapped);
    QCOMPARE(sim.last.swap_out.size(), size_t(3));
    for (size_t k = 0; k < 3; ++k) QCOMPARE(sim.last.swap_out[k].device_block, table[k]);
    QCOMPARE(sim.kv->pool().block(table[2]).ref_cnt, 1);
    sim.sample_minus_one = false;
    QVERIFY(sim.s->append_token(1, 77).is_ok());
    RUN(sim);  // request 2 comes back with the right KV (checked at every step)
    QCOMPARE(sim.s->request(2)->finish_reason, FinishReason::length);
    QCOMPARE(std::vector<int32_t>(sim.s->request(2)->output.begin(), sim.s->request(2)->output.begin() + 3),
             (std::vector<int32_t>{501, 502, 503}));
    QCOMPARE(sim.s->request(1)->output[0], 77);
}

void TestScheduler::fork_limits() {
    Sim sim(config(512, 2), 16, 4, false);
    ADD(sim, 1, seq(1, 6), 4);
    ADD(sim, 2, seq(1, 6), 4);
    ADD(sim, 3, seq(1, 6), 4);
    auto st = sim.s->fork_request(1, 10);
    QVERIFY(!st.is_ok());
    QVERIFY2(st.message().find("not running") != std::string::npos, st.message().c_str());
    STEP(sim);  // 1 and 2 run (max_num_seqs 2)
    st = sim.s->fork_request(1, 10);
    QVERIFY(!st.is_ok());
    QVERIFY2(st.message().find("max_num_seqs") != std::string::npos, st.message().c_str());
    QVERIFY(sim.s->request(10) == nullptr);
    QVERIFY(!sim.kv->has_request(10));
    QVERIFY(sim.s->abort_request(2));
    QVERIFY(sim.s->fork_request(1, 10).is_ok());
    QVERIFY(!sim.s->fork_request(1, 1).is_ok());  // own id
    RUN(sim);
    QCOMPARE(sim.s->request(10)->num_output(), 4);
}

void TestScheduler::static_batching() {
    SchedulerConfig c = config(512);
    c.policy = BatchingPolicy::static_batch;
    c.static_batch_size = 2;
    Sim sim(c, 64, 4, false);
    ADD(sim, 1, seq(1, 5), 2);
    ADD(sim, 2, seq(50, 5), 6);
    ADD(sim, 3, seq(100, 5), 2);
    ADD(sim, 4, seq(150, 5), 3);
    STEP(sim);
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{1, 2}));
    STEP(sim);
    QCOMPARE(sim.last_finished, (std::vector<RequestId>{1}));
    ADD(sim, 5, seq(200, 3), 2, /*priority*/ -10);  // very urgent, still waits for the batch
    // Request 1 is done; as in a padded static batch its seat still costs a token per step
    // (a padding chunk) and keeps its blocks until request 2 finishes.
    const size_t seat_blocks = sim.kv->block_table(1).size();
    QVERIFY(seat_blocks > 0);
    for (int i = 0; i < 4; ++i) {
        STEP(sim);
        QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{2, 1}));
        QCOMPARE(sim.last.num_padding_tokens, 1);
        QCOMPARE(sim.s->num_running(), i < 3 ? 1 : 0);
        QCOMPARE(sim.kv->block_table(1).size(), i < 3 ? seat_blocks : size_t(0));  // freed with the batch
    }
    QCOMPARE(sim.s->request(2)->status, RequestStatus::finished);
    STEP(sim);  // the next batch: the two most urgent waiting
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{5, 3}));
    STEP(sim);
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{5, 3}));
    QCOMPARE(sim.s->num_running(), 0);
    STEP(sim);
    QCOMPARE(sim.chunk_ids(), (std::vector<RequestId>{4}));
    RUN(sim);
}

void TestScheduler::abort_and_finish() {
    SchedulerConfig c = config(512);
    c.preemption = PreemptionMode::swap;
    c.n_host_blocks = 8;
    Sim sim(c, 3, 4, false);
    ADD(sim, 1, seq(1, 3), 5);
    ADD(sim, 2, seq(100, 8), 3);
    ADD(sim, 3, seq(200, 4), 3);         // waits: no room
    QVERIFY(!sim.s->abort_request(42));  // unknown: harmless
    STEP(sim);
    STEP(sim);  // request 2 swaps itself out
    QCOMPARE(sim.s->request(2)->status, RequestStatus::swapped);
    QCOMPARE(sim.s->num_free_host_blocks(), 6);
    QVERIFY(sim.check_state().isEmpty());
    // Abort a swapped request: its host blocks are freed.
    QVERIFY(sim.s->abort_request(2));
    QCOMPARE(sim.s->request(2)->status, RequestStatus::finished);
    QCOMPARE(sim.s->request(2)->finish_reason, FinishReason::cancelled);
    QCOMPARE(sim.s->num_free_host_blocks(), 8);
    QVERIFY(!sim.s->abort_request(2));  // already finished
    // Abort a running request: its blocks are free at once.
    const int free_before = sim.kv->num_free_blocks();
    const int held = static_cast<int>(sim.kv->block_table(1).size());
    QVERIFY(held > 0);
    QVERIFY(sim.s->abort_request(1));
    QCOMPARE(sim.kv->num_free_blocks(), free_before + held);
    QVERIFY(sim.check_state().isEmpty());
    // A waiting request.
    ADD(sim, 4, seq(300, 4), 3);
    QVERIFY(sim.s->abort_request(4));
    QCOMPARE(sim.s->num_waiting(), 1);  // request 3
    // finish_request (an end-of-generation token) frees blocks too.
    STEP(sim);
    QCOMPARE(sim.s->request(3)->status, RequestStatus::running);
    sim.s->finish_request(3, FinishReason::stop);
    QCOMPARE(sim.s->request(3)->finish_reason, FinishReason::stop);
    sim.s->finish_request(3, FinishReason::length);  // already finished: unchanged
    QCOMPARE(sim.s->request(3)->finish_reason, FinishReason::stop);
    sim.s->finish_request(777, FinishReason::stop);  // unknown: ignored
    QVERIFY(sim.check_drained().isEmpty());
    QCOMPARE(sim.s->requests().size(), size_t(4));  // finished ones stay queryable...
    for (RequestId id : {1, 2, 3, 4}) sim.s->remove_request(id);
    QVERIFY(sim.s->requests().empty());  // ...until removed
    sim.s->remove_request(5);            // unknown: ignored
    // Removing an unfinished request cancels it first.
    ADD(sim, 6, seq(1, 4), 3);
    STEP(sim);
    sim.s->remove_request(6);
    QVERIFY(sim.check_drained().isEmpty());
}

void TestScheduler::engine_appends_token() {
    // The engine reports -1 (it decides the token itself, e.g. beam search) and appends.
    Sim sim(config(512), 16, 4, false);
    ADD(sim, 1, seq(1, 6), 3);
    sim.sample_minus_one = true;
    STEP(sim);
    QCOMPARE(sim.s->request(1)->num_output(), 0);
    QCOMPARE(sim.s->request(1)->num_computed_tokens, 6);
    STEP(sim);  // nothing to run until the token comes
    QVERIFY(sim.last.empty());
    QVERIFY(sim.s->append_token(1, 77).is_ok());
    QVERIFY(!sim.s->append_token(2, 77).is_ok());  // unknown
    STEP(sim);
    QCOMPARE(sim.chunk(1)->start_pos, 6);
    QVERIFY(!sim.chunk(1)->is_prefill);
    QVERIFY(sim.s->append_token(1, 78).is_ok());
    QVERIFY(sim.s->append_token(1, 79).is_ok());  // the 3rd: finished (length)
    QCOMPARE(sim.s->request(1)->finish_reason, FinishReason::length);
    QCOMPARE(sim.s->request(1)->output, (std::vector<int32_t>{77, 78, 79}));
    QVERIFY(!sim.s->append_token(1, 80).is_ok());  // finished
    QVERIFY(sim.check_drained().isEmpty());
}

void TestScheduler::drafts_verified_and_rolled_back() {
    // Speculative decoding: a decode with drafts runs [last token, drafts...] on lookahead
    // slots; update() keeps the accepted drafts and the target's own token, gives back the
    // slots of rejected drafts, and stops at max_tokens.
    Sim sim(config(512), 16, 4, false);  // drafts set by hand (max_drafts 0)
    ADD(sim, 1, seq(1, 6), 10);
    ADD(sim, 2, seq(50, 6), 5, /*priority*/ 1);
    QVERIFY(!sim.s->set_spec_tokens(1, {5}));   // waiting: nothing to decode yet
    QVERIFY(!sim.s->set_spec_tokens(99, {5}));  // unknown
    STEP(sim);                                  // prefills, first tokens
    QCOMPARE(sim.s->request(1)->num_output(), 1);
    // Two right drafts, then a wrong one.
    const auto own = sim.own_tokens(1, 3);
    QVERIFY(sim.s->set_spec_tokens(1, {own[0], own[1], own[2] % 30000 + 1}));
    STEP(sim);
    QCOMPARE(sim.chunk(1)->num_spec, 3);
    QCOMPARE(sim.chunk(1)->num_tokens, 4);
    QCOMPARE(sim.chunk(1)->start_pos, 6);
    QCOMPARE(sim.last.num_spec_tokens, 3);
    QCOMPARE(sim.last.num_decode_tokens, 5);  // request 1's 4, request 2's 1
    const SchedRequest* r = sim.s->request(1);
    QCOMPARE(std::vector<int32_t>(r->output.begin() + 1, r->output.end()), own);  // 2 accepted + the correction
    QCOMPARE(r->num_computed_tokens, 9);                                          // the correction has no KV yet
    QCOMPARE(sim.kv->num_tokens(1), 9);  // the rejected draft's slot is given back
    QVERIFY(r->spec_tokens.empty());
    QCOMPARE(sim.spec_drafted, int64_t(3));
    QCOMPARE(sim.spec_accepted, int64_t(2));
    // More right drafts than max_tokens leaves room for: trimmed, and the bonus token ends it.
    QVERIFY(sim.s->set_spec_tokens(1, sim.own_tokens(1, 8)));
    STEP(sim);
    QCOMPARE(sim.chunk(1)->num_spec, 10 - 4 - 1);
    QCOMPARE(sim.last_finished, (std::vector<RequestId>{1}));
    QCOMPARE(sim.s->request(1)->finish_reason, FinishReason::length);
    QCOMPARE(sim.s->request(1)->num_output(), 10);
    RUN(sim);
}

void TestScheduler::preempted_resume_identical_data() {
    QTest::addColumn<PreemptionMode>("mode");
    QTest::addColumn<int>("host_blocks");
    QTest::addColumn<bool>("prefix_caching");
    QTest::addColumn<int>("drafts");
    QTest::newRow("recompute") << PreemptionMode::recompute << 0 << false << 0;
    QTest::newRow("recompute, prefix cache") << PreemptionMode::recompute << 0 << true << 0;
    QTest::newRow("swap") << PreemptionMode::swap << 64 << false << 0;
    QTest::newRow("swap, prefix cache") << PreemptionMode::swap << 64 << true << 0;
    QTest::newRow("swap, tiny host tier") << PreemptionMode::swap << 3 << true << 0;
    QTest::newRow("recompute, drafts") << PreemptionMode::recompute << 0 << true << 4;
    QTest::newRow("swap, drafts") << PreemptionMode::swap << 64 << false << 4;
}

void TestScheduler::preempted_resume_identical() {
    QFETCH(PreemptionMode, mode);
    QFETCH(int, host_blocks);
    QFETCH(bool, prefix_caching);
    QFETCH(int, drafts);
    auto workload = [](Sim& sim) {
        for (int i = 0; i < 12; ++i) {
            const auto prompt =
                cat(i % 3 == 0 ? seq(9000, 12) : std::vector<int32_t>{}, seq(100 * i, 5 + (i * 7) % 17));
            const auto st = sim.s->add_request(i + 1, prompt, 8 + (i * 5) % 20, i % 2);
            if (!st.is_ok()) return st.message();
        }
        return std::string();
    };
    // Alone-sized pool: nobody is ever preempted.
    SchedulerConfig base_cfg = config(32, 16);
    Sim base(base_cfg, 400, 4, false);
    QCOMPARE(QString::fromStdString(workload(base)), QString());
    RUN(base);
    QCOMPARE(base.s->counters().preemptions, int64_t(0));
    // A tight pool: preemptions all along (and with drafts, tokens verified several at a
    // time: the same tokens all the same).
    SchedulerConfig c = base_cfg;
    c.preemption = mode;
    c.n_host_blocks = host_blocks;
    Sim tight(c, 14, 4, prefix_caching);
    tight.max_drafts = drafts;
    QCOMPARE(QString::fromStdString(workload(tight)), QString());
    RUN(tight);
    const auto& k = tight.s->counters();
    QVERIFY2(k.preemptions >= 5, qPrintable(QString("only %1 preemptions").arg(k.preemptions)));
    if (mode == PreemptionMode::swap && host_blocks >= 64) {
        QCOMPARE(k.swap_outs, k.preemptions);
        QCOMPARE(k.swapped_in_blocks, k.swapped_out_blocks);
    }
    if (mode == PreemptionMode::swap && host_blocks < 64)
        QVERIFY2(k.recomputes > 0 && k.swap_outs > 0, "expected both kinds");
    if (mode == PreemptionMode::recompute) QCOMPARE(k.recomputes, k.preemptions);
    if (drafts > 0) QVERIFY(tight.spec_accepted > 0 && tight.spec_accepted < tight.spec_drafted);
    for (RequestId id = 1; id <= 12; ++id) {
        QCOMPARE(tight.s->request(id)->finish_reason, FinishReason::length);
        QCOMPARE(tight.s->request(id)->output, base.s->request(id)->output);
    }
}

void TestScheduler::randomized_invariants_data() {
    QTest::addColumn<PreemptionMode>("mode");
    QTest::addColumn<BatchingPolicy>("policy");
    QTest::addColumn<bool>("prefix_caching");
    QTest::addColumn<bool>("chunked");
    QTest::addColumn<int>("seed");
    QTest::addColumn<int>("drafts");  // speculative decoding: up to this many drafts per decode
    const auto continuous = BatchingPolicy::continuous, static_batch = BatchingPolicy::static_batch;
    const auto recompute = PreemptionMode::recompute, swap = PreemptionMode::swap;
    for (int seed : {1, 2, 3}) {
        QTest::addRow("recompute, prefix, seed %d", seed) << recompute << continuous << true << true << seed << 0;
        QTest::addRow("swap, prefix, seed %d", seed) << swap << continuous << true << true << seed << 0;
        QTest::addRow("recompute, no prefix, unchunked, seed %d", seed)
            << recompute << continuous << false << false << seed << 0;
        QTest::addRow("swap, no prefix, unchunked, seed %d", seed) << swap << continuous << false << false << seed << 0;
        QTest::addRow("static, swap, prefix, seed %d", seed) << swap << static_batch << true << true << seed << 0;
        QTest::addRow("static, recompute, seed %d", seed) << recompute << static_batch << false << true << seed << 0;
        QTest::addRow("drafts, recompute, prefix, seed %d", seed)
            << recompute << continuous << true << true << seed << 4;
        QTest::addRow("drafts, swap, unchunked, seed %d", seed) << swap << continuous << false << false << seed << 4;
        QTest::addRow("drafts, static, swap, prefix, seed %d", seed)
            << swap << static_batch << true << true << seed << 3;
    }
}

void TestScheduler::randomized_invariants() {
    QFETCH(PreemptionMode, mode);
    QFETCH(BatchingPolicy, policy);
    QFETCH(bool, prefix_caching);
    QFETCH(bool, chunked);
    QFETCH(int, seed);
    QFETCH(int, drafts);
    SchedulerConfig c = config(48, 12);
    c.max_model_len = 160;
    c.preemption = mode;
    c.policy = policy;
    c.chunked_prefill = chunked;
    c.static_batch_size = 5;
    c.n_host_blocks = 20;
    constexpr int kBlocks = 40, kBs = 4;
    Sim sim(c, kBlocks, kBs, prefix_caching);
    sim.max_drafts = drafts;
    sim.draft_rng.seed(static_cast<uint32_t>(seed));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const std::vector<std::vector<int32_t>> systems = {seq(5000, 16), seq(6000, 9)};
    RequestId next_id = 1;
    int added = 0, rejected = 0, aborted = 0, forks = 0, stops = 0;
    std::vector<RequestId> live;  // ids that may be unfinished
    for (int it = 0; it < 400; ++it) {
        // Arrivals: half share a system prompt; a few can never fit (too long).
        for (int a = uni(0, 4) == 0 ? uni(1, 3) : 0; a > 0; --a) {
            std::vector<int32_t> prompt;
            if (uni(0, 1)) prompt = systems[static_cast<size_t>(uni(0, 1))];
            prompt = cat(prompt, seq(uni(0, 100000), uni(1, 30)));
            const int max_tokens = uni(0, 20) == 0 ? 150 : uni(1, 25);
            const auto st = sim.s->add_request(next_id, prompt, max_tokens, uni(0, 2));
            if (st.is_ok()) {
                live.push_back(next_id);
                ++added;
            } else {
                ++rejected;
            }
            ++next_id;
        }
        // Cancels (also of unknown and finished ids), forks, end-of-generation stops.
        if (uni(0, 9) == 0) {
            const RequestId id = live.empty() || uni(0, 3) == 0
                                     ? RequestId(uni(1, 10000) + 100000)
                                     : live[static_cast<size_t>(uni(0, static_cast<int>(live.size()) - 1))];
            const SchedRequest* r = sim.s->request(id);
            const bool expect = r && r->status != RequestStatus::finished;
            QCOMPARE(sim.s->abort_request(id), expect);
            aborted += expect ? 1 : 0;
        }
        std::vector<RequestId> running;
        for (const SchedRequest* r : sim.s->requests())
            if (r->status == RequestStatus::running) running.push_back(r->id);
        if (uni(0, 4) == 0 && !running.empty()) {
            const RequestId p = running[static_cast<size_t>(uni(0, static_cast<int>(running.size()) - 1))];
            const auto st = sim.s->fork_request(p, next_id);
            // Only max_num_seqs may refuse a fork of a running request.
            QVERIFY2(st.is_ok() || sim.s->num_running() >= c.max_num_seqs, st.message().c_str());
            if (st.is_ok()) {
                live.push_back(next_id);
                ++forks;
            }
            ++next_id;
        } else if (uni(0, 9) == 0 && !running.empty()) {
            const RequestId id = running[static_cast<size_t>(uni(0, static_cast<int>(running.size()) - 1))];
            sim.s->finish_request(id, FinishReason::stop);
            QCOMPARE(sim.s->request(id)->finish_reason, FinishReason::stop);
            ++stops;
        }
        QVERIFY2(sim.check_state().isEmpty(), qPrintable(sim.check_state()));
        STEP(sim);
        // Drop finished ids now and then.
        if (it % 50 == 49) {
            std::vector<RequestId> keep;
            for (RequestId id : live) {
                const SchedRequest* r = sim.s->request(id);
                if (r && r->status == RequestStatus::finished) sim.s->remove_request(id);
                else
                    keep.push_back(id);
            }
            live = keep;
        }
    }
    RUN(sim);
    const auto& k = sim.s->counters();
    qInfo(
        "added %d, rejected %d, aborted %d, forks %d, stops %d; preemptions %lld (swap %lld, recompute %lld), "
        "copies %lld, prefix hit tokens %lld, drafts accepted %lld of %lld",
        added, rejected, aborted, forks, stops, static_cast<long long>(k.preemptions),
        static_cast<long long>(k.swap_outs), static_cast<long long>(k.recomputes), static_cast<long long>(k.cow_copies),
        static_cast<long long>(sim.kv->stats().hit_tokens), static_cast<long long>(sim.spec_accepted),
        static_cast<long long>(sim.spec_drafted));
    QVERIFY(rejected > 0);
    QCOMPARE(k.rejected, int64_t(rejected));
    QVERIFY(forks > 0);
    if (policy == BatchingPolicy::continuous) {
        QVERIFY2(k.preemptions > 0, "the pool was never tight enough to preempt");
        if (mode == PreemptionMode::swap) QVERIFY(k.swap_outs > 0);
        QVERIFY(k.cow_copies > 0);
    }
    if (prefix_caching) QVERIFY(sim.kv->stats().hit_tokens > 0);
    if (drafts > 0) QVERIFY(sim.spec_accepted > 0 && sim.spec_accepted < sim.spec_drafted);
    // Every request ended with a reason that fits what happened to it.
    for (const SchedRequest* r : sim.s->requests()) {
        QCOMPARE(r->status, RequestStatus::finished);
        if (r->finish_reason == FinishReason::length) QCOMPARE(r->num_output(), r->max_tokens);
    }
}

QTEST_GUILESS_MAIN(TestScheduler)
#include "tst_scheduler.moc"
