// ctest-labels: unit engine
// Parallel sampling (GenerationRequest::choices, the server's n > 1) on a tiny model: the
// prompt is computed once and the choices fork from it copy-on-write. Right after the
// prefill of an n = 4 request with a 100-token prompt, the pool holds one prompt's blocks;
// after the first decode at most n - 1 more (copies of the partially filled last block);
// the snapshot's block map shows the prompt's blocks shared by 4. Each choice's tokens
// equal the same request run alone through SequenceRunner (a path with no scheduler and no
// fork) with seed + i, the seed vLLM gives child i. Cancelling one choice frees only its own
// blocks; cancelling the request that computes the prompt before the fork hands the prompt
// to the next choice, whose tokens are still those of a request alone. Logprobs of a choice
// are its own token's.
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/telemetry/snapshot_ring.h"
#include "tests/support/greedy_alone.h"
#include "tests/support/test_backend.h"
#include "tests/support/tiny_model.h"
#include "tests/support/token_ids.h"

using namespace kvs;

namespace {

std::vector<int32_t> run_alone(std::shared_ptr<const Model> model, const std::vector<int32_t>& prompt,
                               const SamplingParams& params) {
    RunnerOptions ro;
    ro.n_ctx = 512;
    ro.n_threads = 2;
    ro.backend = test::test_backend();
    auto runner = SequenceRunner::create(model, ro);
    if (!runner) qFatal("%s", runner.message().c_str());
    return test::sampled_alone(**runner, model->config.n_vocab, prompt, params, params.max_tokens);
}

SamplingParams sampled(int n, uint64_t seed) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.max_tokens = n;
    return p;
}

}  // namespace

class TestParallelChoices : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_model;

    std::unique_ptr<Engine> make_engine() {
        EngineOptions o;
        o.n_threads = 2;
        o.backend = test::test_backend();
        o.kv_blocks = 128;
        o.block_size = 16;
        auto e = Engine::create(m_model, nullptr, o);
        if (!e) qFatal("Engine::create: %s", e.message().c_str());
        return std::move(*e);
    }
    int in_use(const Engine& e) const { return e.kv_cache().n_blocks() - e.kv_cache().num_free_blocks(); }

    // An n-choice request: the parent's id first, then the choices'.
    std::vector<RequestId> submit_n(Engine& e, const std::vector<int32_t>& prompt, const SamplingParams& p, int n,
                                    std::vector<std::vector<TokenEvent>>* events = nullptr) {
        GenerationRequest g;
        g.prompt = prompt;
        g.params = p;
        std::vector<RequestId> ids{static_cast<RequestId>(100)};
        if (events) events->assign(size_t(n), {});
        auto sink = [events](int i) -> TokenCallback {
            if (!events) return nullptr;
            return [events, i](const TokenEvent& ev) { (*events)[size_t(i)].push_back(ev); };
        };
        g.on_event = sink(0);
        for (int i = 1; i < n; ++i) {
            g.choices.push_back({100 + i, p.seed + uint64_t(i), sink(i)});
            ids.push_back(100 + i);
        }
        auto id = e.submit(std::move(g), 100);
        if (!id) qFatal("submit: %s", id.message().c_str());
        return ids;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        test::TinyModelSpec spec;
        spec.n_ctx_train = 512;
        auto m = test::write_and_load_tiny_gguf(m_dir.filePath("tiny.gguf").toStdString(), spec);
        QVERIFY2(m, m.message().c_str());
        m_model = *m;
    }

    void sharedPromptBlocks() {
        auto e = make_engine();
        const auto prompt = test::random_prompts(1, 100, 100, m_model->config.n_vocab, 5)[0];
        const auto ids = submit_n(*e, prompt, sampled(6, 42), 4);
        const int prompt_blocks = (100 + 15) / 16;  // 7: six full, one holding 4 tokens
        int steps = 0;
        while (e->output_tokens(ids[0]).empty() && steps < 100) {
            QVERIFY(e->step());
            ++steps;
        }
        for (RequestId id : ids) QCOMPARE(e->output_tokens(id).size(), size_t(1));
        QCOMPARE(in_use(*e), prompt_blocks);
        // The block map shows every prompt block held by all four.
        const EngineSnapshot snap = e->snapshot(StepRecord{});
        int shared_by_4 = 0;
        for (const BlockView& b : snap.blocks)
            if (b.ref_cnt == 4) ++shared_by_4;
        QCOMPARE(shared_by_4, prompt_blocks);
        QVERIFY(e->step());  // the first decode writes into the shared last block: copies
        QVERIFY2(in_use(*e) <= prompt_blocks + 3 && in_use(*e) > prompt_blocks,
                 qPrintable(QString("%1 blocks in use after the first decode").arg(in_use(*e))));
        QVERIFY(e->run_until_idle());
    }

    void choicesEqualRequestsAlone() {
        auto e = make_engine();
        const auto prompt = test::random_prompts(1, 37, 37, m_model->config.n_vocab, 9)[0];
        const SamplingParams p = sampled(12, 1234);
        std::vector<std::vector<TokenEvent>> events;
        const auto ids = submit_n(*e, prompt, p, 4, &events);
        QVERIFY(e->run_until_idle());
        std::set<std::vector<int32_t>> distinct;
        for (int i = 0; i < 4; ++i) {
            const auto want = run_alone(m_model, prompt, sampled(12, 1234 + uint64_t(i)));
            QCOMPARE(e->output_tokens(ids[size_t(i)]), want);
            distinct.insert(want);
            QVERIFY(!events[size_t(i)].empty() && events[size_t(i)].back().finished);
            QCOMPARE(events[size_t(i)].back().finish_reason, FinishReason::length);
        }
        QVERIFY2(distinct.size() >= 2, "sampled choices with different seeds should differ somewhere");
    }

    void cancelOneChoice() {
        auto e = make_engine();
        const auto prompt = test::random_prompts(1, 40, 40, m_model->config.n_vocab, 3)[0];
        const auto ids = submit_n(*e, prompt, sampled(40, 7), 3);
        for (int s = 0; s < 20; ++s) QVERIFY(e->step());  // each choice now owns blocks past the prompt
        const auto table = e->kv_cache().block_table(ids[1]);
        int own = 0;  // blocks only choice 1 holds
        const EngineSnapshot snap = e->snapshot(StepRecord{});
        for (int32_t b : table)
            for (const BlockView& v : snap.blocks)
                if (v.block_id == b && v.ref_cnt == 1) ++own;
        QVERIFY(own >= 1);
        const int before = in_use(*e);
        QVERIFY(e->cancel(ids[1]));
        QCOMPARE(in_use(*e), before - own);
        QVERIFY(e->run_until_idle());
        for (int i : {0, 2})
            QCOMPARE(e->output_tokens(ids[size_t(i)]), run_alone(m_model, prompt, sampled(40, 7 + uint64_t(i))));
    }

    void cancelBeforeFork() {
        auto e = make_engine();
        const auto prompt = test::random_prompts(1, 30, 30, m_model->config.n_vocab, 4)[0];
        std::vector<std::vector<TokenEvent>> events;
        const auto ids = submit_n(*e, prompt, sampled(8, 77), 3, &events);
        QVERIFY(e->cancel(ids[0]));  // before any step: choice 1 computes the prompt instead
        QVERIFY(e->cancel(ids[2]));  // a waiting choice leaves the group
        QVERIFY(!e->cancel(ids[2]));
        QVERIFY(e->run_until_idle());
        QCOMPARE(events[0].back().finish_reason, FinishReason::cancelled);
        QCOMPARE(events[2].back().finish_reason, FinishReason::cancelled);
        QCOMPARE(e->output_tokens(ids[1]), run_alone(m_model, prompt, sampled(8, 78)));
        QCOMPARE(events[1].back().finish_reason, FinishReason::length);
        e->remove_finished(0);
        QCOMPARE(in_use(*e), 0);
    }

    void logprobsPerChoice() {
        auto e = make_engine();
        const auto prompt = test::random_prompts(1, 20, 20, m_model->config.n_vocab, 8)[0];
        SamplingParams p = sampled(5, 3);
        p.logprobs = 4;
        std::vector<std::vector<TokenEvent>> events;
        submit_n(*e, prompt, p, 3, &events);
        QVERIFY(e->run_until_idle());
        for (const auto& evs : events) {
            int n = 0;
            for (const TokenEvent& ev : evs) {
                if (ev.token < 0) continue;
                QVERIFY(ev.logprobs);
                QCOMPARE(ev.logprobs->top.size(), size_t(4));
                QVERIFY(ev.logprobs->logprob <= ev.logprobs->top[0].logprob);
                bool listed = false;
                for (const auto& t : ev.logprobs->top)
                    if (t.id == ev.token) {
                        listed = true;
                        QCOMPARE(t.logprob, ev.logprobs->logprob);
                    }
                QVERIFY(listed || ev.logprobs->rank > 4);
                ++n;
            }
            QCOMPARE(n, 5);
        }
    }
};

QTEST_GUILESS_MAIN(TestParallelChoices)
#include "tst_parallel_choices.moc"
