// ctest-labels: unit engine
// KV eviction in the batching engine on a tiny generated model (engine/kv_cache/
// kv_eviction.h): every policy keeps at most its budget of cached tokens after every step
// (and the KV manager's table holds exactly the entries the policy lists), the blocks it
// gives back are the ones the snapshot reports, a budget no request reaches changes no
// token, StreamingLLM keeps exactly the sinks and the recent window, H2O's choice on a
// hand-checked case, merged entries are the attention-weighted average, re-rotating a key
// equals rotating it for the new position, other requests of the batch get the same tokens
// as without the evicting one, and bad settings are refused naming the value.
#include "engine/kv_cache/kv_compaction.h"
#include "engine/kv_cache/kv_eviction.h"
#include "engine/runtime/engine.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <random>

#include "kernels/backend.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/greedy_params.h"
#include "tests/support/kv_invariants.h"
#include "tests/support/test_backend.h"
#include "tests/support/tiny_model.h"
#include "tests/support/token_ids.h"

using namespace kvs;

Q_DECLARE_METATYPE(kvs::KvEvictPolicy)

namespace {

KvEvictionSetting setting(KvEvictPolicy p, int budget) {
    KvEvictionSetting s;
    s.policy = p;
    s.budget_tokens = budget;
    return s;
}

const RequestView* view_of(const EngineSnapshot& s, RequestId id) {
    for (const auto& r : s.requests)
        if (r.id == id) return &r;
    return nullptr;
}

}  // namespace

class TestKvEviction : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_model;

    std::unique_ptr<Engine> make_engine(int step_tokens = 24, int block_size = 8) {
        EngineOptions o;
        o.n_threads = 2;
        o.backend = test::test_backend();
        o.block_size = block_size;
        o.kv_blocks = 256;
        o.max_model_len = 512;
        o.scheduler.max_num_batched_tokens = step_tokens;
        auto e = Engine::create(m_model, nullptr, o);
        if (!e) qFatal("Engine::create: %s", e.message().c_str());
        return std::move(*e);
    }

    RequestId submit(Engine& e, const std::vector<int32_t>& prompt, int n, KvEvictionSetting s = {}) {
        GenerationRequest r;
        r.prompt = prompt;
        r.params = test::greedy(n);
        r.kv_eviction = s;
        auto id = e.submit(r);
        if (!id) qFatal("submit: %s", id.message().c_str());
        return *id;
    }

    std::vector<int32_t> run_alone(const std::vector<int32_t>& prompt, int n, KvEvictionSetting s = {},
                                   int step_tokens = 24) {
        auto e = make_engine(step_tokens);
        const RequestId id = submit(*e, prompt, n, s);
        const Status st = e->run_until_idle();
        if (!st) qFatal("run: %s", st.message().c_str());
        return e->output_tokens(id);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        test::TinyModelSpec spec;
        spec.n_ctx_train = 512;
        auto m = test::write_and_load_tiny_gguf(m_dir.filePath("tiny.gguf").toStdString(), spec);
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = *m;
    }

    void parsesAndRefuses() {
        auto a = parse_kv_eviction("streaming:512");
        QVERIFY2(a.is_ok(), a.message().c_str());
        QCOMPARE(a->policy, KvEvictPolicy::streaming);
        QCOMPARE(a->budget_tokens, 512);
        auto b = parse_kv_eviction("h2o:0.5");
        QVERIFY(b.is_ok());
        QCOMPARE(b->budget_fraction, 0.5);
        QCOMPARE(b->budget_for(1000), 500);
        auto c = parse_kv_eviction("SnapKV");
        QVERIFY(c.is_ok());
        QCOMPARE(c->policy, KvEvictPolicy::snapkv);
        QCOMPARE(c->budget_fraction, 0.5);
        QCOMPARE(parse_kv_eviction("merge:64")->describe(), std::string("merge:64"));
        QVERIFY(!parse_kv_eviction("none").value().enabled());
        struct Bad {
            const char* spec;
            const char* named;
        };
        for (const Bad& bad :
             {Bad{"lru:512", "'lru'"}, Bad{"h2o:abc", "'abc'"}, Bad{"h2o:0", "'0'"}, Bad{"h2o:1.5", "'1.5'"},
              Bad{"h2o:-3", "'-3'"}, Bad{"streaming:3", "3"}, Bad{"h2o:", "''"}}) {
            auto r = parse_kv_eviction(bad.spec);
            QVERIFY2(!r.is_ok(), bad.spec);
            QVERIFY2(r.message().find(bad.named) != std::string::npos, r.message().c_str());
        }
        // The engine refuses what it cannot do, naming it, and keeps running.
        auto e = make_engine();
        GenerationRequest r;
        r.prompt = test::seq(3, 10);
        r.params = test::greedy(4);
        r.kv_eviction = setting(KvEvictPolicy::h2o, 32);
        r.beam_width = 2;
        auto refused = e->submit(r);
        QVERIFY(!refused.is_ok());
        QVERIFY2(refused.message().find("beam search") != std::string::npos, refused.message().c_str());
        r.beam_width = 1;
        QVERIFY(e->submit(r).is_ok());
        QVERIFY(e->run_until_idle());
    }

    void budgetHeldEveryStep_data() {
        QTest::addColumn<KvEvictPolicy>("policy");
        QTest::addColumn<int>("budget");
        for (KvEvictPolicy p :
             {KvEvictPolicy::streaming, KvEvictPolicy::h2o, KvEvictPolicy::snapkv, KvEvictPolicy::merge})
            for (int b : {20, 37})
                QTest::newRow((std::string(kv_evict_policy_name(p)) + ":" + std::to_string(b)).c_str()) << p << b;
    }
    // A 60-token prompt in chunks of 24 and 50 generated tokens: after every step the cache
    // holds at most the budget (SnapKV from the end of its prefill), the KV manager's table
    // holds exactly the policy's entries in ceil(entries / 8) blocks, the pool's books
    // balance, and the blocks the compactions gave back (counted here from the step's chunk
    // and the table) are what the snapshot reports.
    void budgetHeldEveryStep() {
        QFETCH(KvEvictPolicy, policy);
        QFETCH(int, budget);
        auto e = make_engine(24, 8);
        const RequestId id =
            submit(*e, test::random_tokens(60, m_model->config.n_vocab, 5), 50, setting(policy, budget));
        int entries_before = 0, freed = 0, steps = 0, evicting_steps = 0;
        while (e->has_work()) {
            auto step = e->step();
            QVERIFY2(step.is_ok(), step.message().c_str());
            ++steps;
            const KvEvictionState* st = e->kv_eviction(id);
            QVERIFY(st);
            const SchedRequest* s = e->scheduler().request(id);
            QVERIFY(s);
            const QString inv = test::kv_pool_invariants(e->kv_cache());
            QVERIFY2(inv.isEmpty(), qPrintable(inv));
            if (s->status != RequestStatus::running) break;
            const int n_kv = e->kv_cache().num_tokens(id);
            QCOMPARE(n_kv, st->n_entries());
            QCOMPARE(s->num_computed_tokens - s->num_evicted, n_kv);
            const bool prompt_done = s->num_computed_tokens >= s->num_prompt();
            if (policy != KvEvictPolicy::snapkv || prompt_done)
                QVERIFY2(n_kv <= budget,
                         qPrintable(QString("step %1: %2 cached > %3").arg(steps).arg(n_kv).arg(budget)));
            const int n_blocks = static_cast<int>(e->kv_cache().block_table(id).size());
            QCOMPARE(n_blocks, (n_kv + 7) / 8);
            int chunk = 0;
            for (const auto& ch : step->out.chunks)
                if (ch.id == id) chunk = ch.num_tokens;
            freed += (entries_before + chunk + 7) / 8 - n_blocks;  // blocks this step had, minus those it kept
            evicting_steps += entries_before + chunk > n_kv ? 1 : 0;
            entries_before = n_kv;
            QCOMPARE(e->kv_cache().num_free_blocks(), e->kv_cache().n_blocks() - n_blocks);
            const EngineSnapshot snap = e->snapshot(step->record);
            const RequestView* v = view_of(snap, id);
            QVERIFY(v);
            QCOMPARE(v->kv_freed_blocks, static_cast<int64_t>(freed));
            QCOMPARE(v->kv_budget, budget);
            QCOMPARE(static_cast<int>(v->kv_entry_pos.size()), n_kv);
            int held = 0;
            for (const auto& b : snap.blocks) held += b.owners == std::vector<RequestId>{id} ? 1 : 0;
            QCOMPARE(held, n_blocks);
        }
        QCOMPARE(static_cast<int>(e->output_tokens(id).size()), 50);
        QVERIFY(evicting_steps > 10);
        QVERIFY(freed > 0);
    }

    void largeBudgetChangesNothing_data() {
        QTest::addColumn<KvEvictPolicy>("policy");
        for (KvEvictPolicy p :
             {KvEvictPolicy::streaming, KvEvictPolicy::h2o, KvEvictPolicy::snapkv, KvEvictPolicy::merge})
            QTest::newRow(kv_evict_policy_name(p)) << p;
    }
    // Budget >= prompt + output: never evicts, same tokens as no eviction.
    void largeBudgetChangesNothing() {
        QFETCH(KvEvictPolicy, policy);
        const auto prompt = test::random_tokens(70, m_model->config.n_vocab, 11);
        const auto want = run_alone(prompt, 40);
        QCOMPARE(run_alone(prompt, 40, setting(policy, 110)), want);
        QCOMPARE(run_alone(prompt, 40, setting(policy, 400)), want);
    }

    // The mass H2O accumulates is attention probability: with nothing evicted, every query
    // token adds 1 per layer and query head, so the entries' total is tokens x layers x heads.
    void massIsProbability() {
        auto e = make_engine(24, 8);
        const RequestId id =
            submit(*e, test::random_tokens(45, m_model->config.n_vocab, 8), 20, setting(KvEvictPolicy::h2o, 400));
        QVERIFY(e->run_until_idle());
        const KvEvictionState& st = *e->kv_eviction(id);
        QCOMPARE(st.n_entries(), 45 + 19);
        double total = 0;
        for (float m : st.mass) total += m;
        const double want = 64.0 * m_model->config.n_layer * m_model->config.n_head;
        QVERIFY2(std::abs(total - want) < 1e-3 * want, qPrintable(QString("%1 vs %2").arg(total).arg(want)));
        // The newest entry was attended by its own query only, the first by every query.
        QVERIFY(st.mass.front() > st.mass.back());
    }

    // StreamingLLM: after every step the cache is the 4 sinks, then the most recent tokens,
    // in order, positions inside the cache.
    void streamingKeepsSinksAndWindow() {
        auto e = make_engine(16, 8);
        const int budget = 30;
        const RequestId id = submit(*e, test::random_tokens(40, m_model->config.n_vocab, 3), 60,
                                    setting(KvEvictPolicy::streaming, budget));
        int checked = 0;
        while (e->has_work()) {
            QVERIFY(e->step().is_ok());
            const SchedRequest* s = e->scheduler().request(id);
            if (s->status != RequestStatus::running) break;
            const KvEvictionState& st = *e->kv_eviction(id);
            const int n = st.n_entries();
            const int last = s->num_computed_tokens - 1;  // the newest token with KV
            if (last + 1 <= budget) {
                QCOMPARE(n, last + 1);
                continue;
            }
            QVERIFY(n <= budget && n > 4);
            for (int i = 0; i < 4; ++i) QCOMPARE(st.pos[static_cast<size_t>(i)], i);
            for (int i = 4; i < n; ++i) QCOMPARE(st.pos[static_cast<size_t>(i)], last - (n - 1 - i));
            ++checked;
        }
        QVERIFY(checked > 30);
    }

    // H2O on a hand-checked case: budget 6, window 3 -> the 3 newest stay, then the 3 largest
    // masses of the rest; ties go to the older entry.
    void h2oKeepsHeavyHittersHandChecked() {
        KvEvictionState st;
        st.setting = setting(KvEvictPolicy::h2o, 6);
        st.setting.window = 3;
        st.budget = 6;
        st.pos = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
        st.span.assign(10, 1);
        st.mass = {5.0f, 0.1f, 3.0f, 0.2f, 3.0f, 0.3f, 9.0f, 0.0f, 0.0f, 0.0f};
        auto pol = make_kv_eviction_policy(KvEvictPolicy::h2o);
        QVERIFY(pol->should_evict(st, true));
        const CompactionPlan plan = pol->plan(st, pol->target(st, 8));
        apply_plan_to_state(plan, st);
        std::vector<int32_t> kept = st.pos;
        std::sort(kept.begin(), kept.end());
        QCOMPARE(kept, (std::vector<int32_t>{0, 2, 6, 7, 8, 9}));  // 6 (9.0), 0 (5.0), 2 (3.0, older than 4)
        QCOMPARE(st.n_evicted, int64_t{4});
        // Holes are filled from the tail: entries 0 and 2 stay in place, nothing moves twice.
        QCOMPARE(plan.entries[0], std::vector<int32_t>{0});
        QCOMPARE(plan.entries[2], std::vector<int32_t>{2});
    }

    // The lesson's merge: a dropped run becomes one entry, the mass-weighted average of its
    // K and V (checked on the cache bytes), standing for the whole run.
    void mergeAveragesDroppedRuns() {
        auto be = make_cpu_backend(1);
        ModelConfig c = m_model->config;
        auto kv = KvTensors::create(*be, c, 4, 8, DType::F16);
        QVERIFY(kv.is_ok());
        const int kv_dim = c.n_kv_head * c.head_dim;
        std::vector<int32_t> table = {2, 0};  // 16 slots
        std::mt19937 rng(4);
        std::normal_distribution<float> nd;
        std::vector<std::vector<float>> rows(16, std::vector<float>(static_cast<size_t>(kv_dim)));
        for (int i = 0; i < 16; ++i)
            for (int il = 0; il < c.n_layer; ++il)
                for (void* cache : {(*kv)->k(il), (*kv)->v(il)}) {
                    auto* h = static_cast<uint16_t*>(cache) +
                              (static_cast<size_t>(table[static_cast<size_t>(i / 8)]) * 8 + i % 8) * kv_dim;
                    for (int d = 0; d < kv_dim; ++d) {
                        if (il == 0 && cache == (*kv)->k(il))
                            rows[static_cast<size_t>(i)][static_cast<size_t>(d)] = nd(rng);
                        h[d] = cpu::fp32_to_fp16(rows[static_cast<size_t>(i)][static_cast<size_t>(d)]);
                    }
                }
        KvEvictionState st;
        st.setting = setting(KvEvictPolicy::merge, 8);
        st.setting.window = 2;
        st.budget = 8;
        for (int i = 0; i < 12; ++i) st.pos.push_back(i);
        st.span.assign(12, 1);
        st.mass = {9, 1, 3, 8, 1, 1, 2, 7, 1, 4, 0, 0};
        auto pol = make_kv_eviction_policy(KvEvictPolicy::merge);
        const CompactionPlan plan = pol->plan(st, 8);
        QVERIFY(static_cast<int>(plan.entries.size()) <= 8);
        QVERIFY(apply_compaction(**kv, true, c, table, plan).is_ok());
        int merged = 0;
        for (size_t j = 0; j < plan.entries.size(); ++j) {
            const auto& src = plan.entries[j];
            if (src.size() < 2) continue;
            ++merged;
            double wsum = 0;
            for (int32_t s : src) wsum += st.mass[static_cast<size_t>(s)];
            const auto* h =
                static_cast<const uint16_t*>((*kv)->v(1)) + (static_cast<size_t>(table[j / 8]) * 8 + j % 8) * kv_dim;
            for (int d = 0; d < kv_dim; ++d) {
                double want = 0;
                for (int32_t s : src)
                    want +=
                        st.mass[static_cast<size_t>(s)] / wsum * rows[static_cast<size_t>(s)][static_cast<size_t>(d)];
                QVERIFY(std::abs(cpu::fp16_to_fp32(h[d]) - want) < 2e-3 * (1 + std::abs(want)));
            }
        }
        QVERIFY(merged >= 1);
        apply_plan_to_state(plan, st);
        int span = 0;
        for (int32_t s : st.span) span += s;
        QCOMPARE(span, 12);  // every position is still stood for
        QCOMPARE(st.pos.back(), 11);
    }

    // A key rotated for position p, re-rotated by d, is the key rotated for p + d.
    void rerotationComposes() {
        auto be = make_cpu_backend(1);
        const auto& c = m_model->config;
        std::mt19937 rng(9);
        std::normal_distribution<float> nd;
        const int kv_dim = c.n_kv_head * c.head_dim;
        std::vector<float> raw(static_cast<size_t>(kv_dim));
        for (float& x : raw) x = nd(rng);
        for (auto [p, d] : {std::pair{37, -20}, std::pair{300, -296}, std::pair{5, 11}}) {
            std::vector<float> a = raw, b = raw;
            const int32_t pa = p, pb = p + d;
            be->rope(a.data(), &pa, 1, c.n_kv_head, c.head_dim, c.n_rot, c.rope_freq_base, c.rope_style);
            be->rope(b.data(), &pb, 1, c.n_kv_head, c.head_dim, c.n_rot, c.rope_freq_base, c.rope_style);
            rerotate_key(a.data(), c.n_kv_head, c.head_dim, c.n_rot, c.rope_freq_base, c.rope_style, d);
            for (int i = 0; i < kv_dim; ++i)
                QVERIFY(std::abs(a[static_cast<size_t>(i)] - b[static_cast<size_t>(i)]) < 1e-4f);
        }
    }

    // Preemption: by swap, an evicting request keeps its compacted entries on the host and
    // comes back to the same tokens as alone; by recompute, it starts over with an empty cache
    // (the scheduler's evicted count back to 0). Either way every step holds the budget.
    void preemptionKeepsTheBudget_data() {
        QTest::addColumn<bool>("swap");
        QTest::newRow("swap") << true;
        QTest::newRow("recompute") << false;
    }
    void preemptionKeepsTheBudget() {
        QFETCH(bool, swap);
        const int nv = m_model->config.n_vocab;
        // A request without eviction that keeps growing, then three evicting ones: the growing
        // one runs out of blocks and the latest running request is preempted.
        std::vector<std::vector<int32_t>> prompts{test::random_tokens(50, nv, 29)};
        for (uint32_t i = 0; i < 3; ++i)
            prompts.push_back(test::random_tokens(40 + 5 * static_cast<int>(i), nv, 30 + i));
        const KvEvictionSetting ev = setting(KvEvictPolicy::h2o, 24);
        EngineOptions o;
        o.n_threads = 2;
        o.backend = test::test_backend();
        o.block_size = 8;
        o.kv_blocks = 16;  // the growing request's 7..15 blocks beside the others' 3-7: not all fit
        o.max_model_len = 512;
        o.scheduler.max_num_batched_tokens = 256;  // every prompt in one chunk, as alone
        o.scheduler.preemption = swap ? PreemptionMode::swap : PreemptionMode::recompute;
        o.scheduler.n_host_blocks = swap ? 64 : 0;
        auto created = Engine::create(m_model, nullptr, o);
        QVERIFY2(created.is_ok(), created.message().c_str());
        Engine& e = **created;
        std::vector<RequestId> ids{submit(e, prompts[0], 70)};
        for (size_t i = 1; i < prompts.size(); ++i) ids.push_back(submit(e, prompts[i], 60, ev));
        int64_t preempted = 0;
        while (e.has_work()) {
            auto step = e.step();
            QVERIFY2(step.is_ok(), step.message().c_str());
            for (RequestId p : step->out.preempted) preempted += p != ids[0] ? 1 : 0;
            for (size_t i = 1; i < ids.size(); ++i) {
                const SchedRequest* s = e.scheduler().request(ids[i]);
                if (s->status != RequestStatus::running) continue;
                QCOMPARE(e.kv_cache().num_tokens(ids[i]), e.kv_eviction(ids[i])->n_entries());
                QCOMPARE(s->num_computed_tokens - s->num_evicted, e.kv_cache().num_tokens(ids[i]));
                QVERIFY(e.kv_cache().num_tokens(ids[i]) <= 24);
            }
            const QString inv = test::kv_pool_invariants(e.kv_cache());
            QVERIFY2(inv.isEmpty(), qPrintable(inv));
        }
        QVERIFY2(preempted > 0, "an evicting request was meant to be preempted");
        QCOMPARE(static_cast<int>(e.output_tokens(ids[0]).size()), 70);
        for (size_t i = 1; i < ids.size(); ++i) {
            QCOMPARE(static_cast<int>(e.output_tokens(ids[i]).size()), 60);
            if (swap) QCOMPARE(e.output_tokens(ids[i]), run_alone(prompts[i], 60, ev, 256));
        }
    }

    // Two requests without eviction batched with one that evicts hard get the tokens they
    // get without it.
    void otherRequestsUnaffected() {
        const int nv = m_model->config.n_vocab;
        const auto p1 = test::random_tokens(50, nv, 21), p2 = test::random_tokens(33, nv, 22),
                   p3 = test::random_tokens(64, nv, 23);
        const auto want1 = run_alone(p1, 30), want3 = run_alone(p3, 30);
        for (KvEvictPolicy p : {KvEvictPolicy::streaming, KvEvictPolicy::h2o, KvEvictPolicy::merge}) {
            auto e = make_engine(40, 8);
            const RequestId a = submit(*e, p1, 30);
            const RequestId b = submit(*e, p2, 30, setting(p, 16));
            const RequestId c = submit(*e, p3, 30);
            QVERIFY(e->run_until_idle());
            QCOMPARE(e->output_tokens(a), want1);
            QCOMPARE(e->output_tokens(c), want3);
            QCOMPARE(static_cast<int>(e->output_tokens(b).size()), 30);
            QVERIFY(e->kv_eviction(b)->n_evicted > 0);
        }
    }
};

QTEST_GUILESS_MAIN(TestKvEviction)
#include "tst_kv_eviction.moc"
