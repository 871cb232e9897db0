// ctest-labels: unit
// Engine telemetry, without a model: the snapshot ring (wrap-around,
// oldest-first order, one writer and two readers at once with a consistency check inside
// every snapshot they see), block views built from a real KVCacheManager, the trace JSON
// file (read back both with plain nlohmann and with read_trace), percentiles against values
// numpy.percentile gives (worked out by hand with numpy's "linear" rule, listed below),
// and request latency math. The benchmark workload generator is tested in tst_workload.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/telemetry/latency_stats.h"
#include "engine/telemetry/snapshot.h"
#include "engine/telemetry/snapshot_ring.h"
#include "engine/telemetry/trace_json.h"
#include "tests/support/kv_admit.h"
#include "tests/support/test_paths.h"
#include "tests/support/token_ids.h"

using nlohmann::json;
using namespace kvs;

// Failure messages of QCOMPARE on JSON and on vectors: print the values.
namespace QTest {
template <>
inline char* toString(const nlohmann::json& j) {
    std::string s = j.dump();
    if (s.size() > 2000) s = s.substr(0, 2000) + "...";
    return qstrdup(s.c_str());
}
template <typename T>
char* vector_to_string(const std::vector<T>& v) {
    QString s = "[";
    for (size_t i = 0; i < v.size() && i < 64; ++i) s += (i ? ", " : "") + QString::number(v[i]);
    s += v.size() > 64 ? ", ...]" : "]";
    return qstrdup(qPrintable(s));
}
template <>
inline char* toString(const std::vector<int32_t>& v) {
    return vector_to_string(v);
}
template <>
inline char* toString(const std::vector<int64_t>& v) {
    return vector_to_string(v);
}
template <>
inline char* toString(const std::vector<double>& v) {
    return vector_to_string(v);
}
}  // namespace QTest

namespace {

using kvs::test::admit;
using kvs::test::seq;

// A snapshot whose contents all derive from k, so a reader can tell a torn one:
// step.step == k, n_blocks == blocks.size() == k % 37 + 1, every block's ref_cnt and
// owner == k, requests.size() == k % 5 with ids k.
std::shared_ptr<const EngineSnapshot> numbered_snapshot(int64_t k) {
    auto s = std::make_shared<EngineSnapshot>();
    s->step.step = k;
    s->step.n_blocks = static_cast<int>(k % 37 + 1);
    s->blocks.resize(static_cast<size_t>(s->step.n_blocks));
    for (size_t i = 0; i < s->blocks.size(); ++i) {
        s->blocks[i].block_id = static_cast<int32_t>(i);
        s->blocks[i].ref_cnt = static_cast<int32_t>(k);
        s->blocks[i].owners = {k};
    }
    s->requests.resize(static_cast<size_t>(k % 5));
    for (auto& r : s->requests) r.id = k;
    s->total_generated_tokens = k * 3;
    return s;
}

// Empty when the snapshot is consistent, else what is wrong.
QString check_numbered(const EngineSnapshot& s) {
    const int64_t k = s.step.step;
    if (s.step.n_blocks != static_cast<int>(k % 37 + 1) || s.blocks.size() != static_cast<size_t>(s.step.n_blocks))
        return QString("step %1: %2 blocks, n_blocks %3").arg(k).arg(s.blocks.size()).arg(s.step.n_blocks);
    for (const BlockView& b : s.blocks)
        if (b.ref_cnt != k || b.owners.size() != 1 || b.owners[0] != k)
            return QString("step %1: block %2 has ref_cnt %3").arg(k).arg(b.block_id).arg(b.ref_cnt);
    if (s.requests.size() != static_cast<size_t>(k % 5)) return QString("step %1: wrong request count").arg(k);
    for (const RequestView& r : s.requests)
        if (r.id != k) return QString("step %1: request id %2").arg(k).arg(r.id);
    if (s.total_generated_tokens != k * 3) return QString("step %1: wrong totals").arg(k);
    return {};
}

bool approx(double a, double b, double tol = 1e-9) { return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b)); }

// A snapshot where every field has a distinct, non-default value.
EngineSnapshot full_snapshot() {
    EngineSnapshot s;
    s.step.step = 41;
    s.step.t_start_ms = 1234.5;
    s.step.duration_ms = 17.25;
    s.step.schedule_ms = 0.5;
    s.step.forward_ms = 15.5;
    s.step.sample_ms = 1.25;
    s.step.n_seqs = 3;
    s.step.prefill_tokens = 100;
    s.step.decode_tokens = 2;
    s.step.token_budget = 512;
    s.step.preemptions = 1;
    s.step.swap_out_blocks = 4;
    s.step.swap_in_blocks = 5;
    s.step.cow_copies = 6;
    s.step.prefix_hit_tokens = 32;
    s.step.n_waiting = 7;
    s.step.n_running = 3;
    s.step.n_swapped = 1;
    s.step.n_finished_this_step = 2;
    s.step.blocks_used = 2;
    s.step.blocks_cached = 1;
    s.step.blocks_free = 1;
    s.step.n_blocks = 4;
    s.step.kv_usage = 0.5;
    s.step.tokens_in_kv = 20;
    s.step.internal_waste = 0.375;
    s.block_size = 16;
    s.blocks = {{0, BlockSlotState::used, 2, {3, 9}, 16, true},
                {1, BlockSlotState::used, 1, {9}, 4, false},
                {2, BlockSlotState::cached, 0, {}, 16, true},
                {3, BlockSlotState::free, 0, {}, 0, false}};
    s.host_blocks = {{0, 5}, {2, 5}};
    s.n_host_blocks = 8;
    RequestView r;
    r.id = 9;
    r.status = RequestStatus::running;
    r.finish_reason = FinishReason::none;
    r.priority = 2;
    r.n_prompt = 19;
    r.n_output = 1;
    r.max_tokens = 64;
    r.num_computed_tokens = 20;
    r.num_cached_tokens = 16;
    r.block_ids = {0, 1};
    r.n_host_blocks = 0;
    r.num_preemptions = 1;
    RequestView w;
    w.id = 5;
    w.status = RequestStatus::swapped;
    w.finish_reason = FinishReason::none;
    w.n_host_blocks = 2;
    RequestView f;
    f.id = 11;
    f.status = RequestStatus::finished;
    f.finish_reason = FinishReason::cancelled;
    s.requests = {w, r, f};
    s.kv_stats.query_tokens = 200;
    s.kv_stats.hit_tokens = 48;
    s.kv_stats.blocks.queries = 13;
    s.kv_stats.blocks.hits = 3;
    s.kv_stats.blocks.evictions = 2;
    s.total_preemptions = 4;
    s.total_prompt_tokens = 900;
    s.total_generated_tokens = 321;
    s.total_finished = 8;
    s.total_swap_out_blocks = 10;
    s.total_swap_in_blocks = 6;
    s.total_cow_copies = 3;
    s.prefix_hit_rate = 0.24;
    return s;
}

}  // namespace

class TestTelemetry : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void ring_wraps_oldest_first();
    void ring_concurrent_publish_and_read();
    void block_views_from_kv_cache();
    void request_and_host_views();
    void trace_json_round_trip();
    void trace_read_errors();
    void percentile_matches_numpy_data();
    void percentile_matches_numpy();
    void request_metrics_math();
    void summarize_requests();
};

// ---- snapshot ring -------------------------------------------------------------------

void TestTelemetry::ring_wraps_oldest_first() {
    SnapshotRing ring(4, 6);
    QCOMPARE(ring.capacity(), size_t(4));
    QCOMPARE(ring.step_capacity(), size_t(6));
    QVERIFY2(ring.latest() == nullptr, "an empty ring has no latest snapshot");
    QVERIFY(ring.recent(10).empty());
    QVERIFY(ring.recent_steps(10).empty());

    ring.publish(nullptr);  // ignored
    QCOMPARE(ring.total_published(), int64_t(0));

    for (int64_t k = 0; k < 10; ++k) ring.publish(numbered_snapshot(k));
    QCOMPARE(ring.total_published(), int64_t(10));
    QCOMPARE(ring.size(), size_t(4));
    QCOMPARE(ring.latest()->step.step, int64_t(9));

    auto all = ring.recent(100);  // only the last 4 are held
    QCOMPARE(all.size(), size_t(4));
    for (size_t i = 0; i < all.size(); ++i)
        QVERIFY2(all[i]->step.step == int64_t(6 + i), "recent() must be oldest first, the last 4 published");
    auto two = ring.recent(2);
    QCOMPARE(two.size(), size_t(2));
    QCOMPARE(two[0]->step.step, int64_t(8));
    QCOMPARE(two[1]->step.step, int64_t(9));

    // Step records: a longer ring (6), fed by publish() and publish_step().
    auto steps = ring.recent_steps(100);
    QCOMPARE(steps.size(), size_t(6));
    for (size_t i = 0; i < steps.size(); ++i) QCOMPARE(steps[i].step, int64_t(4 + i));
    StepRecord lone;
    lone.step = 10;
    lone.prefill_tokens = 77;
    ring.publish_step(lone);
    QCOMPARE(ring.total_published(), int64_t(10));  // not a snapshot
    QCOMPARE(ring.total_steps_published(), int64_t(11));
    QCOMPARE(ring.latest()->step.step, int64_t(9));
    steps = ring.recent_steps(3);
    QCOMPARE(steps.size(), size_t(3));
    QCOMPARE(steps[0].step, int64_t(8));
    QCOMPARE(steps[2].step, int64_t(10));
    QCOMPARE(steps[2].prefill_tokens, 77);

    auto after = ring.steps_after(7);
    QCOMPARE(after.size(), size_t(3));
    QCOMPARE(after.front().step, int64_t(8));
    QCOMPARE(ring.steps_after(10).size(), size_t(0));
    QCOMPARE(ring.steps_after(-1).size(), size_t(6));  // everything held

    // A snapshot handed out earlier survives being overwritten in the ring.
    auto held = ring.latest();
    for (int64_t k = 11; k < 30; ++k) ring.publish(numbered_snapshot(k));
    QCOMPARE(held->step.step, int64_t(9));
    QCOMPARE(check_numbered(*held), QString());

    ring.clear();
    QVERIFY(ring.latest() == nullptr);
    QCOMPARE(ring.size(), size_t(0));
    QCOMPARE(ring.step_count(), size_t(0));
    QCOMPARE(ring.total_published(), int64_t(0));
}

void TestTelemetry::ring_concurrent_publish_and_read() {
    SnapshotRing ring(8, 64);
    constexpr int64_t kPublishes = 20000;
    std::atomic<bool> done{false};

    // Each reader checks every snapshot it gets, the order of recent(), and that latest()
    // never goes back in time. It records the first problem and stops.
    auto reader = [&](QString* error, int64_t* reads) {
        int64_t last_seen = -1;
        while (!done.load(std::memory_order_acquire) && error->isEmpty()) {
            if (auto s = ring.latest()) {
                if (QString e = check_numbered(*s); !e.isEmpty()) *error = "latest: " + e;
                if (s->step.step < last_seen)
                    *error = QString("latest went back from %1 to %2").arg(last_seen).arg(s->step.step);
                last_seen = s->step.step;
            }
            auto recent = ring.recent(8);
            for (size_t i = 0; i < recent.size(); ++i) {
                if (QString e = check_numbered(*recent[i]); !e.isEmpty()) *error = "recent: " + e;
                if (i > 0 && recent[i]->step.step != recent[i - 1]->step.step + 1)
                    *error = QString("recent not consecutive: %1 then %2")
                                 .arg(recent[i - 1]->step.step)
                                 .arg(recent[i]->step.step);
            }
            auto steps = ring.recent_steps(64);
            for (size_t i = 1; i < steps.size(); ++i)
                if (steps[i].step != steps[i - 1].step + 1) *error = "recent_steps not consecutive";
            ++*reads;
        }
    };
    QString err1, err2;
    int64_t reads1 = 0, reads2 = 0;
    std::thread r1(reader, &err1, &reads1), r2(reader, &err2, &reads2);
    std::thread writer([&] {
        for (int64_t k = 0; k < kPublishes; ++k) ring.publish(numbered_snapshot(k));
        done.store(true, std::memory_order_release);
    });
    writer.join();
    r1.join();
    r2.join();
    QVERIFY2(err1.isEmpty(), qPrintable(err1));
    QVERIFY2(err2.isEmpty(), qPrintable(err2));
    QVERIFY2(reads1 > 0 && reads2 > 0, "both readers ran at least once");
    QCOMPARE(ring.total_published(), kPublishes);
    QCOMPARE(ring.latest()->step.step, kPublishes - 1);
    qInfo("readers made %lld and %lld passes during %lld publishes", static_cast<long long>(reads1),
          static_cast<long long>(reads2), static_cast<long long>(kPublishes));
}

// ---- block map from the KV cache ---------------------------------------------------------

void TestTelemetry::block_views_from_kv_cache() {
    // 8 blocks of 4 tokens, prefix caching on.
    KVCacheManager kv(8, 4, true);
    QCOMPARE(admit(kv, 1, seq(100, 6)), 0);                     // 2 blocks: one full (hashed), one with 2 tokens
    QCOMPARE(admit(kv, 2, seq(200, 3)), 0);                     // 1 block with 3 tokens
    QCOMPARE(admit(kv, 3, {100, 101, 102, 103, 300, 301}), 4);  // hits request 1's first block, + 1 block of 2
    const auto t1 = kv.block_table(1), t2 = kv.block_table(2), t3 = kv.block_table(3);
    QCOMPARE(t1.size(), size_t(2));
    QCOMPARE(t3.size(), size_t(2));
    QVERIFY2(t3[0] == t1[0], "request 3 shares request 1's first block through the prefix cache");

    auto views = block_views(kv);
    QCOMPARE(views.size(), size_t(8));
    for (size_t i = 0; i < views.size(); ++i) QCOMPARE(views[i].block_id, int32_t(i));
    const BlockView& shared = views[static_cast<size_t>(t1[0])];
    QCOMPARE(shared.state, BlockSlotState::used);
    QCOMPARE(shared.ref_cnt, 2);
    QCOMPARE(shared.owners, (std::vector<RequestId>{1, 3}));
    QCOMPARE(shared.n_filled, 4);
    QVERIFY(shared.hashed);
    QCOMPARE(views[static_cast<size_t>(t1[1])].n_filled, 2);
    QCOMPARE(views[static_cast<size_t>(t1[1])].owners, (std::vector<RequestId>{1}));
    QVERIFY(!views[static_cast<size_t>(t1[1])].hashed);
    QCOMPARE(views[static_cast<size_t>(t2[0])].n_filled, 3);
    QCOMPARE(views[static_cast<size_t>(t3[1])].n_filled, 2);

    // 4 used blocks (16 slots) hold 4 + 2 + 3 + 2 = 11 tokens: waste 5/16.
    StepRecord rec;
    fill_block_counts(rec, views, kv.block_size());
    QCOMPARE(rec.blocks_used, 4);
    QCOMPARE(rec.blocks_cached, 0);
    QCOMPARE(rec.blocks_free, 4);
    QCOMPARE(rec.n_blocks, 8);
    QVERIFY(approx(rec.kv_usage, 0.5));
    QCOMPARE(rec.tokens_in_kv, int64_t(11));
    QVERIFY2(approx(rec.internal_waste, 5.0 / 16.0), qPrintable(QString::number(rec.internal_waste)));

    // Freeing 1 and 3: the shared full block stays findable (cached), the partial ones are free.
    kv.free(1);
    kv.free(3);
    views = block_views(kv);
    QCOMPARE(views[static_cast<size_t>(t1[0])].state, BlockSlotState::cached);
    QCOMPARE(views[static_cast<size_t>(t1[0])].n_filled, 4);
    QVERIFY(views[static_cast<size_t>(t1[0])].owners.empty());
    QCOMPARE(views[static_cast<size_t>(t1[1])].state, BlockSlotState::free);
    fill_block_counts(rec, views, kv.block_size());
    QCOMPARE(rec.blocks_used, 1);
    QCOMPARE(rec.blocks_cached, 1);
    QCOMPARE(rec.blocks_free, 6);
    QCOMPARE(rec.tokens_in_kv, int64_t(3));
    QVERIFY(approx(rec.internal_waste, 0.25));

    kv.free(2);
    fill_block_counts(rec, block_views(kv), kv.block_size());
    QCOMPARE(rec.blocks_used, 0);
    QCOMPARE(rec.internal_waste, 0.0);  // nothing used: no waste, not NaN
    QCOMPARE(rec.kv_usage, 0.0);

    KVCacheStats st = kv.stats();
    QVERIFY(approx(prefix_hit_rate(st), static_cast<double>(st.hit_tokens) / static_cast<double>(st.query_tokens)));
    QCOMPARE(prefix_hit_rate(KVCacheStats{}), 0.0);
}

void TestTelemetry::request_and_host_views() {
    KVCacheManager kv(4, 4, false);
    QCOMPARE(admit(kv, 7, seq(1, 5)), 0);
    SchedRequest r;
    r.id = 7;
    r.prompt = seq(1, 5);
    r.output = {9, 9};
    r.max_tokens = 10;
    r.priority = 3;
    r.status = RequestStatus::running;
    r.num_computed_tokens = 5;
    r.num_cached_tokens = 0;
    r.num_preemptions = 2;
    RequestView v = request_view(r, kv, 0);
    QCOMPARE(v.id, RequestId(7));
    QCOMPARE(v.status, RequestStatus::running);
    QCOMPARE(v.finish_reason, FinishReason::none);
    QCOMPARE(v.priority, 3);
    QCOMPARE(v.n_prompt, 5);
    QCOMPARE(v.n_output, 2);
    QCOMPARE(v.max_tokens, 10);
    QCOMPARE(v.num_computed_tokens, 5);
    QCOMPARE(v.num_cached_tokens, 0);
    QCOMPARE(v.block_ids, kv.block_table(7));
    QCOMPARE(v.block_ids.size(), size_t(2));
    QCOMPARE(v.num_preemptions, 2);

    auto host = host_block_views({{4, {3, 0}}, {2, {1}}});
    QCOMPARE(host.size(), size_t(3));
    QCOMPARE(host[0].host_block, 0);
    QCOMPARE(host[0].owner, RequestId(4));
    QCOMPARE(host[1].host_block, 1);
    QCOMPARE(host[1].owner, RequestId(2));
    QCOMPARE(host[2].host_block, 3);
    QCOMPARE(host[2].owner, RequestId(4));
    QCOMPARE(std::string(block_slot_state_name(BlockSlotState::swapped)), std::string("swapped"));
}

// ---- trace JSON ----------------------------------------------------------------------

void TestTelemetry::trace_json_round_trip() {
    const EngineSnapshot snap = full_snapshot();
    std::vector<StepRecord> steps(3);
    for (int i = 0; i < 3; ++i) {
        steps[static_cast<size_t>(i)].step = 40 + i;
        steps[static_cast<size_t>(i)].prefill_tokens = 10 * i;
        steps[static_cast<size_t>(i)].internal_waste = 0.125 * i;
    }
    steps[1] = snap.step;
    RequestMetrics a;
    a.id = 9;
    a.arrival_ms = 100;
    a.first_scheduled_ms = 130;
    a.first_token_ms = 180;
    a.token_times_ms = {180, 200, 230, 290};
    a.finish_ms = 290;
    a.n_prompt = 19;
    a.n_output = 4;
    a.finish_reason = FinishReason::length;
    RequestMetrics b;  // rejected: no milestones
    b.id = 12;
    b.arrival_ms = 50;
    b.n_prompt = 5000;
    b.finish_reason = FinishReason::rejected;
    const std::vector<RequestMetrics> reqs = {a, b};
    json meta = {{"model", "smollm2-135m"}, {"workload", "mixed:n=2"}};

    const std::string path = kvs::test::output_path("tst_telemetry_trace.json");
    const Status st = write_trace(path, meta, steps, {std::make_shared<const EngineSnapshot>(snap), nullptr}, reqs, 1);
    QVERIFY2(st.is_ok(), st.message().c_str());

    // 1. The file as any JSON reader sees it.
    std::ifstream in(path);
    QVERIFY2(in.good(), path.c_str());
    const json j = json::parse(in);
    QCOMPARE(j.at("format").get<std::string>(), std::string("kvscope-trace"));
    QCOMPARE(j.at("version").get<int>(), 1);
    QCOMPARE(j.at("meta").at("model").get<std::string>(), std::string("smollm2-135m"));
    QCOMPARE(j.at("steps").size(), size_t(3));
    QCOMPARE(j.at("steps")[2].at("prefill_tokens").get<int>(), 20);
    QCOMPARE(j.at("steps")[1].at("step").get<int64_t>(), int64_t(41));
    QCOMPARE(j.at("steps")[1].at("t_start_ms").get<double>(), 1234.5);
    QCOMPARE(j.at("steps")[1].at("swap_in_blocks").get<int>(), 5);
    QCOMPARE(j.at("steps")[1].at("internal_waste").get<double>(), 0.375);
    QCOMPARE(j.at("snapshots").size(), size_t(1));  // the null snapshot is skipped
    const json& js = j.at("snapshots")[0];
    QCOMPARE(js.at("step").at("cow_copies").get<int>(), 6);
    QCOMPARE(js.at("block_size").get<int>(), 16);
    QCOMPARE(js.at("blocks").size(), size_t(4));
    QCOMPARE(js.at("blocks")[0].at("state").get<std::string>(), std::string("used"));
    QCOMPARE(js.at("blocks")[0].at("owners"), json::array({3, 9}));
    QCOMPARE(js.at("blocks")[2].at("state").get<std::string>(), std::string("cached"));
    QCOMPARE(js.at("blocks")[3].at("state").get<std::string>(), std::string("free"));
    QCOMPARE(js.at("blocks")[1].at("n_filled").get<int>(), 4);
    QCOMPARE(js.at("blocks")[1].at("hashed").get<bool>(), false);
    QCOMPARE(js.at("host_blocks")[1].at("host_block").get<int>(), 2);
    QCOMPARE(js.at("host_blocks")[1].at("owner").get<int>(), 5);
    QCOMPARE(js.at("n_host_blocks").get<int>(), 8);
    QCOMPARE(js.at("requests")[0].at("status").get<std::string>(), std::string("swapped"));
    QCOMPARE(js.at("requests")[1].at("status").get<std::string>(), std::string("running"));
    QCOMPARE(js.at("requests")[1].at("block_ids"), json::array({0, 1}));
    QCOMPARE(js.at("requests")[1].at("num_cached_tokens").get<int>(), 16);
    QCOMPARE(js.at("requests")[2].at("finish_reason").get<std::string>(), std::string("cancelled"));
    QCOMPARE(js.at("kv_stats").at("hit_tokens").get<int>(), 48);
    QCOMPARE(js.at("kv_stats").at("block_evictions").get<int>(), 2);
    QCOMPARE(js.at("total_generated_tokens").get<int>(), 321);
    QCOMPARE(js.at("prefix_hit_rate").get<double>(), 0.24);
    const json& jr = j.at("requests");
    QCOMPARE(jr.size(), size_t(2));
    QCOMPARE(jr[0].at("finish_reason").get<std::string>(), std::string("length"));
    QCOMPARE(jr[0].at("token_times_ms"), json::array({180.0, 200.0, 230.0, 290.0}));
    QCOMPARE(jr[0].at("ttft_ms").get<double>(), 80.0);
    QCOMPARE(jr[0].at("queue_ms").get<double>(), 30.0);
    QCOMPARE(jr[0].at("tpot_ms").get<double>(), 110.0 / 3.0);
    QCOMPARE(jr[1].at("finish_reason").get<std::string>(), std::string("rejected"));
    QCOMPARE(jr[1].at("first_token_ms").get<double>(), -1.0);
    // Summary: TTFT over the one request with a token; TPOT of nobody else.
    const json& sum = j.at("summary");
    QCOMPARE(sum.at("n_requests").get<int>(), 2);
    QCOMPARE(sum.at("n_rejected").get<int>(), 1);
    QCOMPARE(sum.at("ttft_ms").at("count").get<int>(), 1);
    QCOMPARE(sum.at("ttft_ms").at("p50").get<double>(), 80.0);
    QCOMPARE(sum.at("itl_ms").at("count").get<int>(), 3);
    QVERIFY2(sum.at("e2e_ms").at("count").get<int>() == 1, "only request a has finish_ms");

    // 2. read_trace gives back every field: its JSON equals the original's.
    auto t = read_trace(path);
    QVERIFY2(t.is_ok(), t.message().c_str());
    QCOMPARE(t->meta, meta);
    QCOMPARE(t->steps.size(), size_t(3));
    QCOMPARE(t->snapshots.size(), size_t(1));
    QCOMPARE(t->requests.size(), size_t(2));
    QCOMPARE(json(t->steps), json(steps));
    QCOMPARE(json(t->snapshots[0]), json(snap));
    QCOMPARE(json(t->requests), json(reqs));
    QCOMPARE(json(t->summary), json(summarize(reqs)));
    // And a few fields compared as C++ values, not through JSON.
    QCOMPARE(t->snapshots[0].blocks[2].state, BlockSlotState::cached);
    QCOMPARE(t->snapshots[0].requests[2].finish_reason, FinishReason::cancelled);
    QCOMPARE(t->snapshots[0].step.tokens_in_kv, int64_t(20));
    QCOMPARE(t->requests[0].token_times_ms, a.token_times_ms);
    QVERIFY2(std::isnan(t->summary.tpot_ms.p50) == false && t->summary.tpot_ms.count == 1, "tpot of request a");
    QVERIFY2(std::isnan(t->summary.queue_ms.p99) == false, "queue of request a");

    // Empty distributions are null in the file and NaN when read back.
    const std::string path2 = kvs::test::output_path("tst_telemetry_trace_empty.json");
    const Status st2 = write_trace(path2, json(), {}, {}, {b});
    QVERIFY2(st2.is_ok(), st2.message().c_str());
    std::ifstream in2(path2);
    const json j2 = json::parse(in2);
    QVERIFY(j2.at("summary").at("ttft_ms").at("p50").is_null());
    QVERIFY(j2.at("meta").is_object());
    auto t2 = read_trace(path2);
    QVERIFY2(t2.is_ok(), t2.message().c_str());
    QVERIFY(std::isnan(t2->summary.ttft_ms.p50));
    QCOMPARE(t2->summary.ttft_ms.count, int64_t(0));
}

void TestTelemetry::trace_read_errors() {
    auto write = [](const std::string& name, const std::string& text) {
        const std::string p = kvs::test::output_path(name);
        std::ofstream(p) << text;
        return p;
    };
    auto expect_error = [](const Result<Trace>& r, const char* needle) {
        QVERIFY2(!r.is_ok(), needle);
        QVERIFY2(r.message().find(needle) != std::string::npos, r.message().c_str());
    };
    expect_error(read_trace(kvs::test::output_path("no_such_trace.json")), "cannot open trace");
    expect_error(read_trace(write("bad_trace1.json", "{not json")), "not valid JSON");
    expect_error(read_trace(write("bad_trace2.json", R"({"format":"other","version":1})")), "\"format\"");
    expect_error(read_trace(write("bad_trace3.json", R"({"format":"kvscope-trace","version":7})")), "version 7");
    expect_error(
        read_trace(write("bad_trace4.json",
                         R"({"format":"kvscope-trace","version":1,"snapshots":[{"blocks":[{"state":"bogus"}]}]})")),
        "unknown block state \"bogus\"");
    expect_error(
        read_trace(write("bad_trace5.json", R"({"format":"kvscope-trace","version":1,"steps":[{"step":"x"}]})")),
        "\"steps\"");
    expect_error(read_trace(write("bad_trace6.json",
                                  R"({"format":"kvscope-trace","version":1,"requests":[{"finish_reason":"later"}]})")),
                 "unknown finish reason \"later\"");
    // Unknown keys are ignored, missing ones keep their defaults.
    auto ok = read_trace(
        write("ok_trace.json", R"({"format":"kvscope-trace","version":1,"steps":[{"step":3,"new_field":1}]})"));
    QVERIFY2(ok.is_ok(), ok.message().c_str());
    QCOMPARE(ok->steps.size(), size_t(1));
    QCOMPARE(ok->steps[0].step, int64_t(3));
    QCOMPARE(ok->steps[0].prefill_tokens, 0);
    QVERIFY(ok->snapshots.empty());

    const Status st = write_trace("/nonexistent-dir/trace.json", json::object(), {}, {}, {});
    QVERIFY(!st.is_ok());
    QVERIFY2(st.message().find("/nonexistent-dir/trace.json") != std::string::npos, st.message().c_str());
}

// ---- latency statistics --------------------------------------------------------------

// Expected values: numpy.percentile(values, p) with the default method="linear",
// i.e. h = (n-1)*p/100, x[floor h] + frac(h) * (x[floor h + 1] - x[floor h]) on sorted x.
void TestTelemetry::percentile_matches_numpy_data() {
    QTest::addColumn<std::vector<double>>("values");
    QTest::addColumn<double>("p");
    QTest::addColumn<double>("expected");
    const std::vector<double> four = {1, 2, 3, 4};
    QTest::newRow("1..4 p0") << four << 0.0 << 1.0;
    QTest::newRow("1..4 p10") << four << 10.0 << 1.3;   // h = 0.3
    QTest::newRow("1..4 p25") << four << 25.0 << 1.75;  // h = 0.75
    QTest::newRow("1..4 p50") << four << 50.0 << 2.5;   // h = 1.5
    QTest::newRow("1..4 p90") << four << 90.0 << 3.7;   // h = 2.7
    QTest::newRow("1..4 p99") << four << 99.0 << 3.97;  // h = 2.97
    QTest::newRow("1..4 p100") << four << 100.0 << 4.0;
    const std::vector<double> five = {40, 15, 50, 35, 20};  // unsorted on purpose
    QTest::newRow("5 p10") << five << 10.0 << 17.0;         // h = 0.4: 15 + 0.4*5
    QTest::newRow("5 p25") << five << 25.0 << 20.0;         // h = 1
    QTest::newRow("5 p50") << five << 50.0 << 35.0;
    QTest::newRow("5 p90") << five << 90.0 << 46.0;  // h = 3.6: 40 + 0.6*10
    QTest::newRow("5 p99") << five << 99.0 << 49.6;  // h = 3.96
    QTest::newRow("single") << std::vector<double>{7} << 99.0 << 7.0;
    QTest::newRow("two p50") << std::vector<double>{0.5, 0.1} << 50.0 << 0.3;
    QTest::newRow("two p99") << std::vector<double>{0.5, 0.1} << 99.0 << 0.496;  // 0.1 + 0.99*0.4
    std::vector<double> hundred;
    for (int i = 1; i <= 100; ++i) hundred.push_back(i);
    QTest::newRow("1..100 p50") << hundred << 50.0 << 50.5;                         // h = 49.5
    QTest::newRow("1..100 p90") << hundred << 90.0 << 90.1;                         // h = 89.1
    QTest::newRow("1..100 p99") << hundred << 99.0 << 99.01;                        // h = 98.01
    QTest::newRow("duplicates") << std::vector<double>{3, 1, 3, 3} << 25.0 << 2.5;  // sorted 1 3 3 3, h = 0.75
}

void TestTelemetry::percentile_matches_numpy() {
    QFETCH(std::vector<double>, values);
    QFETCH(double, p);
    QFETCH(double, expected);
    const double got = percentile(values, p);
    QVERIFY2(approx(got, expected, 1e-12),
             qPrintable(QString("percentile %1 = %2, numpy gives %3").arg(p).arg(got, 0, 'g', 17).arg(expected)));
}

void TestTelemetry::request_metrics_math() {
    RequestMetrics m;
    m.arrival_ms = 100;
    QCOMPARE(m.queue_ms(), -1.0);
    QCOMPARE(m.ttft_ms(), -1.0);
    QCOMPARE(m.e2e_ms(), -1.0);
    QCOMPARE(m.tpot_ms(), 0.0);
    QVERIFY(m.inter_token_ms().empty());
    m.first_scheduled_ms = 130;
    m.first_token_ms = 180;
    m.token_times_ms = {180};
    QCOMPARE(m.queue_ms(), 30.0);
    QCOMPARE(m.ttft_ms(), 80.0);
    QCOMPARE(m.tpot_ms(), 0.0);  // one token: no gap yet
    m.token_times_ms = {180, 200, 230, 290};
    m.finish_ms = 290;
    QCOMPARE(m.inter_token_ms(), (std::vector<double>{20, 30, 60}));
    QVERIFY(approx(m.tpot_ms(), 110.0 / 3.0));  // mean of 20, 30, 60
    QCOMPARE(m.e2e_ms(), 190.0);

    QVERIFY(std::isnan(percentile({}, 50)));
    QVERIFY(std::isnan(mean({})));
    QCOMPARE(mean({1, 2, 6}), 3.0);
    const Distribution d = describe({5, 1, 3});
    QCOMPARE(d.count, int64_t(3));
    QCOMPARE(d.min, 1.0);
    QCOMPARE(d.max, 5.0);
    QCOMPARE(d.mean, 3.0);
    QCOMPARE(d.p50, 3.0);
    QVERIFY(approx(d.p90, 4.6));   // h = 1.8
    QVERIFY(approx(d.p99, 4.96));  // h = 1.98
    const Distribution e = describe({});
    QCOMPARE(e.count, int64_t(0));
    QVERIFY(std::isnan(e.p50) && std::isnan(e.mean));
}

void TestTelemetry::summarize_requests() {
    RequestMetrics a;  // queue 30, ttft 80, gaps 20 30 60, tpot 36.67
    a.arrival_ms = 100;
    a.first_scheduled_ms = 130;
    a.first_token_ms = 180;
    a.token_times_ms = {180, 200, 230, 290};
    a.finish_ms = 290;
    a.n_prompt = 10;
    a.n_output = 4;
    a.finish_reason = FinishReason::length;
    RequestMetrics b;  // queue 10, ttft 50, gap 10, tpot 10
    b.arrival_ms = 0;
    b.first_scheduled_ms = 10;
    b.first_token_ms = 50;
    b.token_times_ms = {50, 60};
    b.finish_ms = 60;
    b.n_prompt = 20;
    b.n_output = 2;
    b.finish_reason = FinishReason::stop;
    RequestMetrics c;  // rejected at once
    c.arrival_ms = 5;
    c.finish_ms = 5;
    c.n_prompt = 9000;
    c.finish_reason = FinishReason::rejected;
    RequestMetrics d;  // still waiting
    d.arrival_ms = 20;
    d.n_prompt = 7;

    const LatencySummary s = summarize({a, b, c, d});
    QCOMPARE(s.n_requests, 4);
    QCOMPARE(s.n_finished, 3);
    QCOMPARE(s.n_rejected, 1);
    QCOMPARE(s.n_cancelled, 0);
    QCOMPARE(s.prompt_tokens, int64_t(10 + 20 + 9000 + 7));
    QCOMPARE(s.output_tokens, int64_t(6));
    QCOMPARE(s.span_ms, 290.0);  // arrival 0 to finish 290
    QVERIFY(approx(s.output_tok_per_s, 6.0 / 0.29));
    QCOMPARE(s.ttft_ms.count, int64_t(2));
    QCOMPARE(s.ttft_ms.p50, 65.0);  // numpy.percentile([80, 50], 50)
    QVERIFY(approx(s.ttft_ms.p99, 50 + 0.99 * 30));
    QCOMPARE(s.tpot_ms.count, int64_t(2));
    QVERIFY(approx(s.tpot_ms.p50, (110.0 / 3.0 + 10.0) / 2.0));  // 23.333..., as numpy
    QCOMPARE(s.itl_ms.count, int64_t(4));
    QCOMPARE(s.itl_ms.p50, 25.0);         // numpy.percentile([20, 30, 60, 10], 50)
    QVERIFY(approx(s.itl_ms.p99, 59.1));  // numpy.percentile([20, 30, 60, 10], 99)
    QCOMPARE(s.queue_ms.count, int64_t(2));
    QCOMPARE(s.queue_ms.p50, 20.0);
    QCOMPARE(s.e2e_ms.count, int64_t(3));  // a 190, b 60, c 0
    QCOMPARE(s.e2e_ms.max, 190.0);

    const LatencySummary none = summarize({});
    QCOMPARE(none.n_requests, 0);
    QCOMPARE(none.output_tok_per_s, 0.0);
    QVERIFY(std::isnan(none.ttft_ms.p50));
}

QTEST_GUILESS_MAIN(TestTelemetry)
#include "tst_telemetry.moc"
