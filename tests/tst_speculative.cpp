// ctest-labels: unit engine
// Speculative decoding on tiny generated models: prompt lookup proposes what followed the
// context's suffix; the acceptance rule keeps greedy output token-identical to plain
// greedy decoding run alone (SequenceRunner, no scheduler) for every proposer with many
// requests batched; sampled output follows the target's own distribution (chi-square),
// and a deliberately wrong rule fails the same test; rejected drafts' KV is rolled back
// with the block pool's invariants holding after every step.
#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/draft_runner.h"
#include "engine/speculative/ngram.h"
#include "engine/speculative/verify.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>
#include <random>

#include "tests/support/greedy_alone.h"
#include "tests/support/greedy_params.h"
#include "tests/support/kv_invariants.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

using test::greedy;

std::shared_ptr<const Model> load_tiny(const QTemporaryDir& dir, const char* name, test::TinyModelSpec spec) {
    auto m = test::write_and_load_tiny_gguf(dir.filePath(name).toStdString(), spec);
    if (!m) qFatal("%s", m.message().c_str());
    return *m;
}

// Greedy decoding of one prompt alone, one token at a time (no engine, no drafts).
std::vector<int32_t> greedy_alone(std::shared_ptr<const Model> model, const std::vector<int32_t>& prompt, int n) {
    RunnerOptions ro;
    ro.n_ctx = 512;
    ro.n_threads = 2;
    auto runner = SequenceRunner::create(model, ro);
    if (!runner) qFatal("%s", runner.message().c_str());
    return test::greedy_alone(**runner, model->config.n_vocab, prompt, n);
}

// Chi-square statistic of observed counts against expected probabilities; categories
// expected fewer than 5 times are pooled. Returns {statistic, degrees of freedom}.
std::pair<double, int> chi_square(const std::map<int32_t, int>& observed, const std::vector<double>& p, int n) {
    double stat = 0, pooled_e = 0;
    int pooled_o = 0, df = -1;
    for (size_t t = 0; t < p.size(); ++t) {
        const double e = p[t] * n;
        auto it = observed.find(static_cast<int32_t>(t));
        const int o = it == observed.end() ? 0 : it->second;
        if (e < 5) {
            pooled_e += e;
            pooled_o += o;
            continue;
        }
        stat += (o - e) * (o - e) / e;
        ++df;
    }
    if (pooled_e > 0) {
        stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
        ++df;
    }
    return {stat, std::max(df, 1)};
}

// The chi-square quantile at 1 - 1e-4 (Wilson-Hilferty), z = 3.719.
double chi_square_critical(int df) {
    const double z = 3.719, k = df;
    const double c = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
    return k * c * c * c;
}

}  // namespace

class TestSpeculative : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_target, m_other;

    std::unique_ptr<Engine> make_engine(EngineOptions o, bool with_drafts = true) {
        o.n_threads = 2;
        o.backend = "cpu";
        if (with_drafts) {
            auto skip = make_draft_model("layer-skip:1", m_target);
            auto int4 = make_draft_model("int4", m_target);
            auto small_head = make_draft_model("int4@280", m_target);
            if (!skip || !int4 || !small_head) qFatal("make_draft_model failed");
            o.drafts = {{"layer-skip:1", *skip}, {"int4", *int4}, {"int4@280", *small_head}, {"other", m_other}};
        }
        auto e = Engine::create(m_target, nullptr, o);
        if (!e) qFatal("Engine::create: %s", e.message().c_str());
        return std::move(*e);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        test::TinyModelSpec spec;
        spec.weight_std = 0.25f;  // peaked distributions: greedy loops, drafts get accepted
        m_target = load_tiny(m_dir, "target.gguf", spec);
        spec.seed = 7;  // same vocabulary, other weights: a poor but valid draft
        m_other = load_tiny(m_dir, "other.gguf", spec);
    }

    void ngramProposer() {
        const std::vector<int32_t> ctx = {5, 6, 7, 8, 9, 5, 6, 7};
        QCOMPARE(propose_ngram(ctx, 2, 3, 1), (std::vector<int32_t>{8, 9}));
        QCOMPARE(propose_ngram(ctx, 8, 3, 1), (std::vector<int32_t>{8, 9, 5, 6, 7}));  // runs to the end
        // The most recent occurrence wins: "1 2" is followed by 3 at first, by 4 later.
        QCOMPARE(propose_ngram(std::vector<int32_t>{1, 2, 3, 1, 2, 4, 9, 1, 2}, 1, 2, 2), (std::vector<int32_t>{4}));
        QVERIFY(propose_ngram(std::vector<int32_t>{1, 2, 3, 4}, 4, 3, 1).empty());  // no suffix recurs
        QVERIFY(propose_ngram(std::vector<int32_t>{1, 2, 3, 2}, 4, 3, 2).empty());  // only a 1-gram recurs, n_min is 2
        QCOMPARE(propose_ngram(std::vector<int32_t>{1, 2, 3, 2}, 4, 3, 1), (std::vector<int32_t>{3, 2}));
    }

    void verifyGreedy() {
        // Three positions over a vocabulary of 4; argmaxes 2, 1, 3.
        std::vector<float> logits = {0, 1, 5, 0, /**/ 0, 4, 1, 0, /**/ 0, 0, 0, 9};
        SamplingParams p = greedy(8);
        Sampler s(p);
        const std::vector<int32_t> hist = {0};
        auto run = [&](std::vector<int32_t> drafts) {
            std::vector<DraftToken> d;
            for (int32_t t : drafts) d.push_back({t, {}});
            std::vector<float> l = logits;
            return verify_drafts(s, l.data(), 4, hist, d);
        };
        VerifyResult all = run({2, 1});
        QCOMPARE(all.tokens, (std::vector<int32_t>{2, 1, 3}));
        QCOMPARE(all.n_accepted, 2);
        QVERIFY(all.bonus);
        VerifyResult second = run({2, 0});
        QCOMPARE(second.tokens, (std::vector<int32_t>{2, 1}));  // the target's token replaces draft 2
        QCOMPARE(second.n_accepted, 1);
        QVERIFY(!second.bonus);
        VerifyResult first = run({3, 1});
        QCOMPARE(first.tokens, (std::vector<int32_t>{2}));
        QCOMPARE(first.n_accepted, 0);
    }

    // The first emitted token of verification, over many draws, follows p for a draft
    // distribution q far from p; the accept-all rule follows q instead and fails.
    void verifyDistribution_data() {
        QTest::addColumn<bool>("broken");
        QTest::newRow("exact rule") << false;
        QTest::newRow("accept-all rule (must fail)") << true;
    }
    void verifyDistribution() {
        QFETCH(bool, broken);
        const std::vector<float> target = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 1.5f};  // p = softmax
        const std::vector<TokenProb> q = {{3, 0.5f}, {4, 0.3f}, {0, 0.1f}, {1, 0.1f}};
        std::vector<double> p(target.size());
        double z = 0;
        for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(double(target[i]));
        for (auto& v : p) v /= z;
        SamplingParams sp;
        sp.temperature = 1.0f;
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        sp.seed = 42;
        Sampler s(sp);
        std::mt19937_64 rng(7);
        std::discrete_distribution<int> draw_q({0.1, 0.1, 0.0, 0.5, 0.3, 0.0});
        const int n = 20000;
        std::map<int32_t, int> seen;
        for (int i = 0; i < n; ++i) {
            std::vector<DraftToken> d = {{draw_q(rng), q}};
            std::vector<float> l = target;
            l.insert(l.end(), target.begin(), target.end());  // row 2: the bonus position
            auto v = verify_drafts(s, l.data(), 6, {}, d, broken ? AcceptRule::accept_all : AcceptRule::exact);
            ++seen[v.tokens.front()];
        }
        auto [stat, df] = chi_square(seen, p, n);
        const double crit = chi_square_critical(df);
        if (broken)
            QVERIFY2(stat > crit, qPrintable(QString("chi2 %1 <= %2: the broken rule passed").arg(stat).arg(crit)));
        else
            QVERIFY2(stat < crit, qPrintable(QString("chi2 %1 >= %2 (df %3)").arg(stat).arg(crit).arg(df)));
    }

    // Greedy speculative output equals greedy decoding alone, for every proposer, with
    // several requests batched, small and large step budgets, fixed and adaptive k.
    void greedyIdentical_data() {
        QTest::addColumn<QString>("proposer");
        QTest::addColumn<int>("k");
        QTest::addColumn<bool>("adaptive");
        QTest::addColumn<int>("budget");
        QTest::newRow("ngram k4") << "ngram" << 4 << false << 512;
        QTest::newRow("ngram k8 adaptive, budget 12") << "ngram" << 8 << true << 12;
        QTest::newRow("layer-skip k2") << "layer-skip:1" << 2 << false << 512;
        QTest::newRow("layer-skip k4 adaptive, budget 9") << "layer-skip:1" << 4 << true << 9;
        QTest::newRow("int4 k4") << "int4" << 4 << false << 512;
        QTest::newRow("int4, head cut to 280 ids, k3") << "int4@280" << 3 << false << 512;
        QTest::newRow("other model k3") << "other" << 3 << false << 64;
    }
    void greedyIdentical() {
        QFETCH(QString, proposer);
        QFETCH(int, k);
        QFETCH(bool, adaptive);
        QFETCH(int, budget);
        EngineOptions o;
        o.kv_blocks = 256;
        o.block_size = 8;
        o.scheduler.max_num_batched_tokens = budget;
        auto e = make_engine(o);
        std::mt19937 rng(3);
        std::vector<std::vector<int32_t>> prompts;
        std::vector<RequestId> ids;
        const int n_out = 40;
        for (int i = 0; i < 5; ++i) {
            // A random motif repeated: prompt lookup has suffixes to find.
            std::vector<int32_t> motif(static_cast<size_t>(2 + i)), pr;
            for (auto& t : motif) t = 3 + static_cast<int32_t>(rng() % 300);
            for (int rep = 0; rep < 3 + i; ++rep) pr.insert(pr.end(), motif.begin(), motif.end());
            prompts.push_back(pr);
            GenerationRequest r;
            r.prompt = pr;
            r.params = greedy(n_out);
            r.spec.proposer = proposer.toStdString();
            r.spec.k = k;
            r.spec.adaptive = adaptive;
            auto id = e->submit(r);
            QVERIFY2(id.is_ok(), id.message().c_str());
            ids.push_back(*id);
        }
        while (e->has_work()) {
            auto st = e->step();
            QVERIFY2(st.is_ok(), st.message().c_str());
            const QString bad = test::kv_pool_invariants(e->kv_cache());
            QVERIFY2(bad.isEmpty(), qPrintable(bad));
        }
        QCOMPARE(e->kv_cache().num_free_blocks(), e->kv_cache().n_blocks());
        for (size_t i = 0; i < ids.size(); ++i)
            QCOMPARE(e->output_tokens(ids[i]), greedy_alone(m_target, prompts[i], n_out));
        const SpecStats& t = e->spec_totals();
        QVERIFY2(t.verify_steps > 0 && t.drafted > 0, "no drafts were verified");
        QCOMPARE(t.emitted, t.accepted + t.verify_steps);
        QCOMPARE(t.drafted, t.evaluated + t.discarded);
        QVERIFY(t.accepted <= t.evaluated);
        qInfo("%s: alpha %.3f, %.2f tokens per pass, %lld drafts", qPrintable(proposer), t.alpha(), t.tokens_per_pass(),
              static_cast<long long>(t.drafted));
        // The same request's fates: every output token appears once as plain/accepted/corrected/bonus.
        std::vector<int32_t> from_fates;
        for (const auto& ev : e->spec_events(ids[0]))
            if (ev.fate != TokenFate::rejected && ev.fate != TokenFate::discarded) from_fates.push_back(ev.token);
        QCOMPARE(from_fates, e->output_tokens(ids[0]));
    }

    // Sampling (temperature 1, no filters): the first two generated tokens of a fixed
    // prompt follow the target's own distribution with a poor draft model; the wrong rule fails.
    void sampledDistribution_data() {
        QTest::addColumn<QString>("proposer");
        QTest::addColumn<bool>("broken");
        QTest::newRow("plain sampling") << "" << false;
        QTest::newRow("draft model") << "other" << false;
        QTest::newRow("draft model, accept-all rule (must fail)") << "other" << true;
    }
    void sampledDistribution() {
        QFETCH(QString, proposer);
        QFETCH(bool, broken);
        const std::vector<int32_t> prompt = {40, 41, 42, 43, 44};
        // The target's distribution of the first token, and of the second after each first.
        RunnerOptions ro;
        ro.n_ctx = 64;
        ro.n_threads = 2;
        auto runner = SequenceRunner::create(m_target, ro);
        QVERIFY(runner.is_ok());
        const int n_vocab = m_target->config.n_vocab;
        std::vector<float> logits;
        QVERIFY((*runner)->eval(prompt, false, &logits).is_ok());
        std::vector<double> p1(static_cast<size_t>(n_vocab));
        double z = 0, mx = *std::max_element(logits.begin(), logits.end());
        for (int t = 0; t < n_vocab; ++t) z += p1[t] = std::exp(double(logits[t]) - mx);
        for (auto& v : p1) v /= z;

        EngineOptions o;
        o.kv_blocks = 512;
        o.block_size = 8;
        o.scheduler.max_num_seqs = 64;
        o.spec_accept_rule = broken ? AcceptRule::accept_all : AcceptRule::exact;
        auto e = make_engine(o, !proposer.isEmpty());
        const int n = 3000;
        std::vector<RequestId> ids;
        for (int i = 0; i < n; ++i) {
            GenerationRequest r;
            r.prompt = prompt;
            r.params.temperature = 1.0f;
            r.params.top_k = 0;
            r.params.top_p = 1.0f;
            r.params.min_p = 0.0f;
            r.params.seed = 1000 + static_cast<uint64_t>(i);
            r.params.max_tokens = 3;
            r.params.ignore_eos = true;
            r.spec.proposer = proposer.toStdString();
            r.spec.k = 2;
            auto id = e->submit(r);
            QVERIFY(id.is_ok());
            ids.push_back(*id);
        }
        QVERIFY(e->run_until_idle().is_ok());
        // The second token: drafted and verified (the first comes from the prompt's pass).
        // Its marginal: sum over first tokens t of p1(t) p2(. | t); estimated over the
        // first tokens that occurred, weighting by their observed frequency instead.
        std::map<int32_t, int> first, second;
        std::map<int32_t, int> first_counts;
        for (RequestId id : ids) {
            const auto out = e->output_tokens(id);
            QCOMPARE(static_cast<int>(out.size()), 3);
            ++first[out[0]];
            ++second[out[1]];
        }
        auto [s1, df1] = chi_square(first, p1, n);
        QVERIFY2(s1 < chi_square_critical(df1), qPrintable(QString("first token chi2 %1 (df %2)").arg(s1).arg(df1)));
        std::vector<double> p2(static_cast<size_t>(n_vocab), 0.0);
        for (const auto& [t, c] : first) {
            auto r2 = SequenceRunner::create(m_target, ro);
            std::vector<int32_t> ctx = prompt;
            ctx.push_back(t);
            std::vector<float> l2;
            QVERIFY((*r2)->eval(ctx, false, &l2).is_ok());
            double z2 = 0, m2 = *std::max_element(l2.begin(), l2.end());
            std::vector<double> q(static_cast<size_t>(n_vocab));
            for (int u = 0; u < n_vocab; ++u) z2 += q[u] = std::exp(double(l2[u]) - m2);
            for (int u = 0; u < n_vocab; ++u) p2[u] += double(c) / n * q[u] / z2;
        }
        auto [s2, df2] = chi_square(second, p2, n);
        const double crit2 = chi_square_critical(df2);
        qInfo("second token chi2 %.1f, df %d, critical %.1f", s2, df2, crit2);
        if (broken) QVERIFY2(s2 > crit2, "the accept-all rule passed the distribution test");
        else
            QVERIFY2(s2 < crit2, qPrintable(QString("second token chi2 %1 >= %2 (df %3)").arg(s2).arg(crit2).arg(df2)));
        if (!proposer.isEmpty()) QVERIFY(e->spec_totals().drafted > 0);
    }

    void rollbackKeepsPoolExact() {
        // A tiny pool: drafts need lookahead blocks, rejected ones are given back.
        EngineOptions o;
        o.kv_blocks = 20;
        o.block_size = 8;
        o.scheduler.max_num_batched_tokens = 32;
        auto e = make_engine(o);
        for (int i = 0; i < 4; ++i) {
            GenerationRequest r;
            r.prompt = {static_cast<int32_t>(10 + i), 11, 12, 13, 14};
            r.params = greedy(24);
            r.spec.proposer = "other";  // a poor draft: mostly rejected
            r.spec.k = 6;
            QVERIFY(e->submit(r).is_ok());
        }
        int steps_with_drafts = 0;
        while (e->has_work()) {
            auto st = e->step();
            QVERIFY2(st.is_ok(), st.message().c_str());
            steps_with_drafts += st->record.spec_drafted > 0;
            const QString bad = test::kv_pool_invariants(e->kv_cache());
            QVERIFY2(bad.isEmpty(), qPrintable(bad));
            for (RequestId id : e->kv_cache().request_ids()) {
                const SchedRequest* s = e->scheduler().request(id);
                // After a step nothing beyond the computed tokens holds slots.
                QCOMPARE(e->kv_cache().num_tokens(id), s->num_computed_tokens);
                QCOMPARE(static_cast<int>(e->kv_cache().block_table(id).size()), (s->num_computed_tokens + 7) / 8);
            }
        }
        QVERIFY(steps_with_drafts > 0);
        QVERIFY(e->spec_totals().rejected() > 0);
        QCOMPARE(e->kv_cache().num_free_blocks(), e->kv_cache().n_blocks());
    }

    void badInput() {
        EngineOptions o;
        o.kv_blocks = 64;
        auto e = make_engine(o);
        GenerationRequest r;
        r.prompt = {5, 6, 7};
        r.params = greedy(4);
        r.spec.proposer = "nope";
        auto a = e->submit(r);
        QVERIFY(!a.is_ok());
        QVERIFY2(a.message().find("unknown draft proposer 'nope'") != std::string::npos, a.message().c_str());
        QVERIFY2(a.message().find("layer-skip:1") != std::string::npos, a.message().c_str());
        r.spec.proposer = "ngram";
        r.spec.k = 40;
        auto b = e->submit(r);
        QVERIFY(!b.is_ok());
        QVERIFY2(b.message().find("1 to 16") != std::string::npos, b.message().c_str());
        r.spec.k = 4;
        r.beam_width = 2;
        auto c = e->submit(r);
        QVERIFY(!c.is_ok());
        QVERIFY2(c.message().find("beam search") != std::string::npos, c.message().c_str());
        // Nothing was queued by the refusals; a good request still runs.
        r.beam_width = 1;
        QVERIFY(e->submit(r).is_ok());
        QVERIFY(e->run_until_idle().is_ok());

        auto bad_head = make_draft_model("int4@100000", m_target);
        QVERIFY(!bad_head.is_ok());
        QVERIFY2(bad_head.message().find("256 to 323") != std::string::npos, bad_head.message().c_str());
        auto bad_layers = make_draft_model("layer-skip:2", m_target);  // the tiny target has 2 layers
        QVERIFY(!bad_layers.is_ok());
        QVERIFY2(bad_layers.message().find("1 to 1") != std::string::npos, bad_layers.message().c_str());
        test::TinyModelSpec other_vocab;
        other_vocab.n_merges = 40;
        const std::string path = m_dir.filePath("other_vocab.gguf").toStdString();
        QVERIFY(test::write_tiny_gguf(path, other_vocab).is_ok());
        auto wrong = make_draft_model(path, m_target);
        QVERIFY(!wrong.is_ok());
        QVERIFY2(wrong.message().find("different vocabulary") != std::string::npos, wrong.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestSpeculative)
#include "tst_speculative.moc"
