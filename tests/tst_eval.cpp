// ctest-labels: unit
// The quantization lab's measurements on a tiny generated model: perplexity, KL divergence
// and top-1 agreement against a naive computation written here (logits from
// SequenceRunner over whole chunks; softmax, NLL, KL and argmax done independently in
// long double), the chunking llama.cpp's perplexity uses (which tokens are scored), first
// greedy divergence, and the side-by-side stream against separate generate() runs.
#include "engine/quant/eval.h"
#include "engine/quant/quantize.h"
#include "engine/quant/side_by_side.h"
#include "engine/runtime/generate.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>

#include "tests/support/test_backend.h"
#include "tests/support/tiny_model.h"
#include "tests/support/token_ids.h"

using namespace kvs;

namespace {

using test::random_tokens;
using test::test_backend;

RunnerOptions runner_options(int n_ctx) {
    RunnerOptions ro;
    ro.n_ctx = n_ctx;
    ro.n_batch = n_ctx;
    ro.n_threads = 2;
    ro.backend = test_backend();
    return ro;
}

// What one model says about every position of a chunk, computed naively: all logits of
// the chunk in one eval, then softmax in long double.
struct NaiveRow {
    std::vector<long double> p;  // [n_vocab] probabilities
    int32_t argmax = 0;
};
std::vector<NaiveRow> naive_rows(std::shared_ptr<const Model> m, const std::vector<int32_t>& chunk) {
    auto r = SequenceRunner::create(m, runner_options(int(chunk.size())));
    if (!r) qFatal("runner: %s", r.message().c_str());
    std::vector<float> logits;
    if (auto s = (*r)->eval(chunk, true, &logits); !s) qFatal("eval: %s", s.message().c_str());
    const int n_vocab = m->config.n_vocab;
    std::vector<NaiveRow> rows(chunk.size());
    for (size_t j = 0; j < chunk.size(); ++j) {
        const float* l = logits.data() + j * size_t(n_vocab);
        long double z = 0;
        rows[j].p.resize(size_t(n_vocab));
        for (int i = 0; i < n_vocab; ++i) z += std::exp(static_cast<long double>(l[i]));
        for (int i = 0; i < n_vocab; ++i) {
            rows[j].p[size_t(i)] = std::exp(static_cast<long double>(l[i])) / z;
            if (l[i] > l[rows[j].argmax]) rows[j].argmax = i;
        }
    }
    return rows;
}

// Naive statistics over the positions the test itself decides to score.
struct Naive {
    long double ppl = 0, ppl_err = 0, var_ppl = 0, mean_kl = 0, max_kl = 0, top1_pct = 0;
    int64_t n = 0;
    std::vector<long double> var_token_nll;  // the variant's NLL per scored position, in order
};
// Scores rows first .. n_ctx-2 of every whole chunk (predicting tokens first+1 .. n_ctx-1)
// when second_half, otherwise rows 0 .. n_ctx-2.
Naive naive_stats(std::shared_ptr<const Model> ref, std::shared_ptr<const Model> var,
                  const std::vector<int32_t>& tokens, int n_ctx, bool second_half) {
    Naive out;
    long double nll = 0, nll2 = 0, var_nll = 0, kl = 0;
    int64_t same = 0;
    for (size_t c = 0; (c + 1) * size_t(n_ctx) <= tokens.size(); ++c) {
        const std::vector<int32_t> chunk(tokens.begin() + long(c * n_ctx), tokens.begin() + long((c + 1) * n_ctx));
        const auto rr = naive_rows(ref, chunk), vr = naive_rows(var, chunk);
        for (int j = second_half ? n_ctx / 2 : 0; j < n_ctx - 1; ++j) {
            const int32_t target = chunk[size_t(j + 1)];
            const long double x = -std::log(rr[size_t(j)].p[size_t(target)]);
            nll += x, nll2 += x * x;
            var_nll += -std::log(vr[size_t(j)].p[size_t(target)]);
            out.var_token_nll.push_back(-std::log(vr[size_t(j)].p[size_t(target)]));
            long double k = 0;
            for (size_t i = 0; i < rr[size_t(j)].p.size(); ++i)
                k += rr[size_t(j)].p[i] * std::log(rr[size_t(j)].p[i] / vr[size_t(j)].p[i]);
            kl += k;
            out.max_kl = std::max(out.max_kl, k);
            same += rr[size_t(j)].argmax == vr[size_t(j)].argmax;
            ++out.n;
        }
    }
    const long double mean = nll / out.n;
    out.ppl = std::exp(mean);
    out.ppl_err = out.ppl * std::sqrt((nll2 / out.n - mean * mean) / (out.n - 1));
    out.var_ppl = std::exp(var_nll / out.n);
    out.mean_kl = kl / out.n;
    out.top1_pct = 100.0L * same / out.n;
    return out;
}

int32_t naive_argmax(const std::vector<float>& row) {
    return int32_t(std::max_element(row.begin(), row.end()) - row.begin());  // the first of equals
}

EvalOptions eval_options(int n_ctx) {
    EvalOptions eo;
    eo.n_ctx = n_ctx;
    eo.runner = runner_options(n_ctx);
    return eo;
}

}  // namespace

class TestEval : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_model;  // tiny F32 llama
    std::shared_ptr<const Model> m_q4;     // its Q4_0 variant
    std::shared_ptr<const Model> m_q8;     // its Q8_0 variant

    std::shared_ptr<const Model> variant(const char* scheme) {
        auto v = quantize_model(m_model, QuantScheme::parse(scheme).value());
        if (!v) qFatal("quantize %s: %s", scheme, v.message().c_str());
        return v.value();
    }

private Q_SLOTS:
    void initTestCase() {
        test::TinyModelSpec spec;
        spec.weight_std = 0.25f;  // sharper distributions than the default, so argmaxes mean something
        const std::string path = m_dir.filePath("tiny.gguf").toStdString();
        auto m = test::write_and_load_tiny_gguf(path, spec);
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = m.value();
        m_q4 = variant("q4_0");
        m_q8 = variant("q8_0");
    }

    // Hand-computed chunk plans: n_chunks = n / n_ctx, first = n_ctx / 2, targets first+1 .. n_ctx-1.
    void chunkPlan_data() {
        QTest::addColumn<int>("n_tokens");
        QTest::addColumn<int>("n_ctx");
        QTest::addColumn<QList<qint64>>("targets");
        QTest::newRow("40 tokens, ctx 16")
            << 40 << 16 << QList<qint64>{9, 10, 11, 12, 13, 14, 15, 25, 26, 27, 28, 29, 30, 31};
        QTest::newRow("odd ctx 7") << 14 << 7 << QList<qint64>{4, 5, 6, 11, 12, 13};
        QTest::newRow("ctx 3, tail dropped") << 8 << 3 << QList<qint64>{2, 5};
        QTest::newRow("exactly one chunk") << 4 << 4 << QList<qint64>{3};
    }
    void chunkPlan() {
        QFETCH(int, n_tokens);
        QFETCH(int, n_ctx);
        QFETCH(QList<qint64>, targets);
        auto plan = plan_chunks(n_tokens, n_ctx);
        QVERIFY2(plan.is_ok(), plan.message().c_str());
        const auto got = scored_targets(plan.value());
        QCOMPARE(int64_t(got.size()), plan->n_scored());
        QCOMPARE(QList<qint64>(got.begin(), got.end()), targets);
    }

    void chunkPlanErrors() {
        auto short_text = plan_chunks(100, 512);
        QVERIFY(!short_text.is_ok());
        QVERIFY2(short_text.message().find("100 tokens") != std::string::npos &&
                     short_text.message().find("512") != std::string::npos,
                 short_text.message().c_str());
        auto tiny_ctx = plan_chunks(100, 2);
        QVERIFY(!tiny_ctx.is_ok());
        QVERIFY2(tiny_ctx.message().find("at least 3") != std::string::npos, tiny_ctx.message().c_str());
        auto rep = compare_quality(m_model, {m_q4}, random_tokens(10, m_model->config.n_vocab, 1), eval_options(16));
        QVERIFY(!rep.is_ok());
        QVERIFY2(rep.message().find("fewer than one chunk") != std::string::npos, rep.message().c_str());
        auto bad_id =
            compare_quality(m_model, {}, std::vector<int32_t>(16, m_model->config.n_vocab + 5), eval_options(16));
        QVERIFY(!bad_id.is_ok());
        QVERIFY2(bad_id.message().find("outside the vocabulary") != std::string::npos, bad_id.message().c_str());
    }

    // Reference PPL, the variant's PPL, KL and top-1 against the naive computation.
    void qualityMatchesNaive_data() {
        QTest::addColumn<QString>("scheme");
        QTest::addColumn<int>("n_ctx");
        QTest::newRow("q4_0, ctx 16") << "q4_0" << 16;
        QTest::newRow("q8_0, ctx 24") << "q8_0" << 24;
        QTest::newRow("q4_0, odd ctx 15") << "q4_0" << 15;
    }
    void qualityMatchesNaive() {
        QFETCH(QString, scheme);
        QFETCH(int, n_ctx);
        auto var = scheme == "q4_0" ? m_q4 : m_q8;
        const auto tokens = random_tokens(3 * n_ctx + 5, m_model->config.n_vocab, 11);
        auto rep = compare_quality(m_model, {var}, tokens, eval_options(n_ctx));
        QVERIFY2(rep.is_ok(), rep.message().c_str());
        const Naive nv = naive_stats(m_model, var, tokens, n_ctx, true);
        QCOMPARE(rep->reference.n_scored, nv.n);
        QCOMPARE(rep->reference.n_chunks, 3);
        const VariantQuality& q = rep->variants[0];
        auto close = [](double a, long double b, double rel) {
            return std::fabs(a - double(b)) <= rel * std::fabs(double(b));
        };
        QVERIFY2(close(rep->reference.ppl, nv.ppl, 1e-4),
                 qPrintable(QString("%1 vs %2").arg(rep->reference.ppl).arg(double(nv.ppl))));
        QVERIFY(close(rep->reference.ppl_err, nv.ppl_err, 1e-3));
        QVERIFY(close(q.ppl.ppl, nv.var_ppl, 1e-4));
        QVERIFY(close(q.delta_ppl, nv.var_ppl - nv.ppl, 1e-2));
        QVERIFY2(close(q.kl.mean, nv.mean_kl, 1e-3),
                 qPrintable(QString("%1 vs %2").arg(q.kl.mean).arg(double(nv.mean_kl))));
        QVERIFY(close(q.kl.max, nv.max_kl, 1e-3));
        QCOMPARE(q.token_nll.size(), nv.var_token_nll.size());
        for (size_t i = 0; i < q.token_nll.size(); ++i)
            QVERIFY2(
                std::fabs(q.token_nll[i] - double(nv.var_token_nll[i])) <= 1e-4 * (1.0 + q.token_nll[i]),
                qPrintable(QString("token %1: %2 vs %3").arg(i).arg(q.token_nll[i]).arg(double(nv.var_token_nll[i]))));
        QVERIFY(q.kl.mean > 0 && q.kl.median > 0 && q.kl.median <= q.kl.p90 && q.kl.p90 <= q.kl.p95 &&
                q.kl.p95 <= q.kl.p99 && q.kl.p99 <= q.kl.max);
        // Top-1 may differ by a position whose two best logits are a float rounding apart.
        QVERIFY2(std::fabs(q.kl.top1_pct - double(nv.top1_pct)) <= 100.0 / double(nv.n) + 1e-9,
                 qPrintable(QString("%1 vs %2").arg(q.kl.top1_pct).arg(double(nv.top1_pct))));
        // The test can tell the documented positions from others: scoring every row differs.
        const Naive all_rows = naive_stats(m_model, var, tokens, n_ctx, false);
        QVERIFY(!close(rep->reference.ppl, all_rows.ppl, 1e-3));
    }

    // Two variants told apart token by token: the mean of the paired differences is the
    // difference of their log perplexities; its error is the spread of the differences
    // (computed here directly), smaller than either side's own when they move together.
    void pairedDifference() {
        const auto tokens = random_tokens(64, m_model->config.n_vocab, 17);
        auto rep = compare_quality(m_model, {m_q4, m_q8}, tokens, eval_options(16));
        QVERIFY2(rep.is_ok(), rep.message().c_str());
        const auto& a = rep->variants[0].token_nll;
        const auto& b = rep->variants[1].token_nll;
        auto d = paired_difference(a, b);
        QVERIFY2(d.is_ok(), d.message().c_str());
        QCOMPARE(d->n, rep->reference.n_scored);
        const double ln_ratio = rep->variants[0].ppl.mean_nll - rep->variants[1].ppl.mean_nll;
        QVERIFY2(std::fabs(d->mean - ln_ratio) <= 1e-12 * (1.0 + std::fabs(ln_ratio)),
                 qPrintable(QString("%1 vs %2").arg(d->mean).arg(ln_ratio)));
        long double mean = 0, ss = 0;
        for (size_t i = 0; i < a.size(); ++i) mean += (long double)(a[i]) - b[i];
        mean /= a.size();
        for (size_t i = 0; i < a.size(); ++i) ss += std::pow((long double)(a[i]) - b[i] - mean, 2);
        const double err = double(std::sqrt(ss / (a.size() - 1) / a.size()));
        QVERIFY2(std::fabs(d->err - err) <= 1e-9 * err, qPrintable(QString("%1 vs %2").arg(d->err).arg(err)));
        QVERIFY(d->err > 0);
        // The same variant against itself: no difference at all.
        auto self = paired_difference(a, a);
        QVERIFY(self.is_ok());
        QCOMPARE(self->mean, 0.0);
        QCOMPARE(self->err, 0.0);
        // Unequal or empty inputs are refused by name.
        auto bad = paired_difference(a, std::vector<double>(a.begin(), a.end() - 1));
        QVERIFY(!bad.is_ok());
        QVERIFY2(bad.message().find("different counts") != std::string::npos, bad.message().c_str());
        QVERIFY(!paired_difference({}, {}).is_ok());
    }

    void perplexityAloneEqualsCompare() {
        const auto tokens = random_tokens(64, m_model->config.n_vocab, 5);
        auto p = perplexity(m_model, tokens, eval_options(32));
        auto rep = compare_quality(m_model, {m_q8}, tokens, eval_options(32));
        QVERIFY(p.is_ok() && rep.is_ok());
        QCOMPARE(p->ppl, rep->reference.ppl);
        QCOMPARE(p->n_scored, int64_t(2 * 15));
    }

    // Only scored targets and their context count: the dropped tail and (with BOS) the
    // first token of every chunk do not change anything.
    void unscoredTokensDoNotMatter() {
        auto tokens = random_tokens(2 * 16 + 9, m_model->config.n_vocab, 21);
        EvalOptions eo = eval_options(16);
        eo.bos = 1;
        auto a = compare_quality(m_model, {m_q4}, tokens, eo);
        for (size_t i = 32; i < tokens.size(); ++i) tokens[i] = 3 + int32_t(i % 7);  // the tail
        tokens[0] = 5, tokens[16] = 6;                                               // replaced by BOS
        auto b = compare_quality(m_model, {m_q4}, tokens, eo);
        QVERIFY(a.is_ok() && b.is_ok());
        QCOMPARE(a->reference.ppl, b->reference.ppl);
        QCOMPARE(a->variants[0].kl.mean, b->variants[0].kl.mean);
        tokens[26] = tokens[26] == 3 ? 4 : 3;  // a scored target
        auto c = compare_quality(m_model, {m_q4}, tokens, eo);
        QVERIFY(c.is_ok());
        QVERIFY(c->reference.ppl != a->reference.ppl);
    }

    void selfComparisonIsExact() {
        auto same = variant("ref");  // an F32 model's reference keeps its weights as they are
        const auto tokens = random_tokens(48, m_model->config.n_vocab, 3);
        auto rep = compare_quality(m_model, {same, m_model}, tokens, eval_options(16));
        QVERIFY2(rep.is_ok(), rep.message().c_str());
        for (const VariantQuality& q : rep->variants) {
            QCOMPARE(q.kl.mean, 0.0);
            QCOMPARE(q.kl.max, 0.0);
            QCOMPARE(q.kl.top1_pct, 100.0);
            QCOMPARE(q.delta_ppl, 0.0);
            QCOMPARE(q.ppl.ppl, rep->reference.ppl);
        }
        auto q4 = compare_quality(m_model, {m_q4}, tokens, eval_options(16));
        QVERIFY(q4.is_ok());
        QVERIFY(q4->variants[0].kl.mean > 1e-6);
    }

    void distributionMath() {
        // KL of [0, ln 3] against uniform: p = (1/4, 3/4): 1/4 ln(1/2) + 3/4 ln(3/2).
        const float a[2] = {0.0f, float(std::log(3.0))}, b[2] = {2.0f, 2.0f};
        QVERIFY(std::fabs(kl_divergence(a, b, 2) - (0.25 * std::log(0.5) + 0.75 * std::log(1.5))) < 1e-7);
        QVERIFY(std::fabs(log_sum_exp(a, 2) - std::log(4.0)) < 1e-7);
        const float big[3] = {1000.0f, 1000.0f, -1000.0f};  // no overflow
        QVERIFY(std::fabs(log_sum_exp(big, 3) - (1000.0 + std::log(2.0))) < 1e-9);
    }

    // Against two plain token-by-token greedy runs per prompt.
    void firstDivergence() {
        const std::vector<std::vector<int32_t>> prompts{
            {5, 6, 7, 8}, random_tokens(9, m_model->config.n_vocab, 4), {42}};
        auto tok = Tokenizer::create(m_model->vocab);
        QVERIFY(tok.is_ok());
        auto res =
            first_greedy_divergence(m_model, {m_model, m_q8, m_q4}, tok.value(), prompts, 24, runner_options(64));
        QVERIFY2(res.is_ok(), res.message().c_str());
        QCOMPARE(int(res->size()), 3);
        SamplingParams greedy;
        greedy.temperature = 0;
        greedy.max_tokens = 24;
        int n_diverged = 0;
        for (size_t p = 0; p < prompts.size(); ++p) {
            auto rr = SequenceRunner::create(m_model, runner_options(64));
            auto a = generate(**rr, tok.value(), prompts[p], greedy, nullptr);
            QVERIFY(a.is_ok());
            QCOMPARE((*res)[0][p].first, -1);  // the model against itself
            for (size_t v = 0; v < res->size(); ++v) QCOMPARE((*res)[v][p].n_compared, int(a->tokens.size()));
            for (size_t v = 1; v < res->size(); ++v) {
                auto rv = SequenceRunner::create(v == 1 ? m_q8 : m_q4, runner_options(64));
                auto b = generate(**rv, tok.value(), prompts[p], greedy, nullptr);
                int expect = -1;
                for (size_t i = 0; i < a->tokens.size() && expect < 0; ++i)
                    if (i >= b->tokens.size() || a->tokens[i] != b->tokens[i]) expect = int(i);
                QCOMPARE((*res)[v][p].first, expect);
                n_diverged += expect >= 0;
            }
        }
        QVERIFY2(n_diverged > 0, "no variant diverged: the comparison above tested nothing");
        QVERIFY(!first_greedy_divergence(m_model, {m_q4}, tok.value(), prompts, 0, runner_options(64)).is_ok());
        QVERIFY(!first_greedy_divergence(m_model, {m_q4}, tok.value(), {{}}, 8, runner_options(64)).is_ok());
    }

    // Free-running side by side = two separate generate() runs; teacher-forced: the
    // variant's picks after the divergence are its argmax on the reference's text.
    void sideBySideMatchesSeparateRuns_data() {
        QTest::addColumn<float>("temperature");
        QTest::newRow("greedy") << 0.0f;
        QTest::newRow("seeded, temp 0.9") << 0.9f;
    }
    void sideBySideMatchesSeparateRuns() {
        QFETCH(float, temperature);
        auto tok = Tokenizer::create(m_model->vocab);
        QVERIFY(tok.is_ok());
        const std::vector<int32_t> prompt{10, 20, 30, 40, 50};
        SamplingParams sp;
        sp.temperature = temperature;
        sp.seed = 1234;
        sp.max_tokens = 32;
        sp.ignore_eos = true;
        auto rr = SequenceRunner::create(m_model, runner_options(64));
        auto rv = SequenceRunner::create(m_q4, runner_options(64));
        auto a = generate(**rr, tok.value(), prompt, sp, nullptr);
        auto b = generate(**rv, tok.value(), prompt, sp, nullptr);
        QVERIFY(a.is_ok() && b.is_ok());

        auto sbs = SideBySide::create(m_model, m_q4, runner_options(64));
        QVERIFY2(sbs.is_ok(), sbs.message().c_str());
        SideBySideOptions so;
        so.sampling = sp;
        so.teacher_forced = false;
        std::vector<SideBySideEvent> events;
        auto free = (*sbs)->run(tok.value(), prompt, so, [&](const SideBySideEvent& e) {
            events.push_back(e);
            return true;
        });
        QVERIFY2(free.is_ok(), free.message().c_str());
        QCOMPARE(free->ref_tokens, a->tokens);
        QCOMPARE(free->variant_tokens, b->tokens);
        QCOMPARE(free->ref_text, a->text);
        QCOMPARE(free->variant_text, b->text);
        QCOMPARE(int(events.size()), 32);
        QVERIFY2(free->first_divergence >= 0, "the Q4_0 variant should diverge within 32 tokens");
        for (const auto& e : events) QCOMPARE(e.diverged, e.index >= free->first_divergence);

        so.teacher_forced = true;
        events.clear();
        auto tf = (*sbs)->run(tok.value(), prompt, so, [&](const SideBySideEvent& e) {
            events.push_back(e);
            return true;
        });
        QVERIFY(tf.is_ok());
        QCOMPARE(tf->ref_tokens, a->tokens);
        QCOMPARE(tf->first_divergence, free->first_divergence);
        // Teacher forcing, checked on an independent runner fed the reference's text.
        auto check = SequenceRunner::create(m_q4, runner_options(64));
        auto ref_check = SequenceRunner::create(m_model, runner_options(64));
        std::vector<int32_t> ctx = prompt;
        std::vector<float> lv, lr;
        const int n_vocab = m_model->config.n_vocab;
        for (const auto& e : events) {
            QCOMPARE(e.teacher_forced, e.index > tf->first_divergence);
            (*check)->clear(), (*ref_check)->clear();
            QVERIFY((*check)->eval(ctx, false, &lv).is_ok() && (*ref_check)->eval(ctx, false, &lr).is_ok());
            QVERIFY(std::fabs(e.kl - kl_divergence(lr.data(), lv.data(), n_vocab)) <= 1e-6 + 1e-3 * e.kl);
            if (temperature == 0.0f) QCOMPARE(e.variant_token, naive_argmax(lv));
            ctx.push_back(e.ref_token);
        }
    }

    void sideBySideSelfAndCancel() {
        auto tok = Tokenizer::create(m_model->vocab);
        auto sbs = SideBySide::create(m_model, m_model, runner_options(64));
        QVERIFY(tok.is_ok() && sbs.is_ok());
        SideBySideOptions so;
        so.sampling.temperature = 0.7f;
        so.sampling.max_tokens = 16;
        so.sampling.ignore_eos = true;
        auto s = (*sbs)->run(tok.value(), {7, 8, 9}, so,
                             [](const SideBySideEvent& e) { return e.kl == 0.0 && e.top1_agree && !e.diverged; });
        QVERIFY(s.is_ok());
        QCOMPARE(s->n_steps, 16);  // no event returned false
        QCOMPARE(s->first_divergence, -1);
        QCOMPARE(s->stop_reason, std::string("max tokens"));

        int seen = 0;
        auto c = (*sbs)->run(tok.value(), {7, 8, 9}, so, [&](const SideBySideEvent&) { return ++seen < 3; });
        QVERIFY(c.is_ok());
        QCOMPARE(c->n_steps, 3);
        QCOMPARE(c->stop_reason, std::string("cancelled"));
        CancelFlag cancel{true};
        so.progress = Progress({}, &cancel);
        auto pre = (*sbs)->run(tok.value(), {7, 8, 9}, so, nullptr);
        QVERIFY(pre.is_ok());
        QCOMPARE(pre->n_steps, 0);

        auto empty = (*sbs)->run(tok.value(), {}, so, nullptr);
        QVERIFY(!empty.is_ok());
        auto too_long = (*sbs)->run(tok.value(), random_tokens(80, m_model->config.n_vocab, 2), so, nullptr);
        QVERIFY(!too_long.is_ok());
        QVERIFY2(too_long.message().find("80 tokens") != std::string::npos, too_long.message().c_str());
    }

    void memoryAndSpeed() {
        const MemoryInfo ref = memory_info(*m_model), q4 = memory_info(*m_q4), q8 = memory_info(*m_q8);
        // 2 layers x 2 KV heads x head_dim 16: 2 * 2 * 2 * 16 * 2 bytes.
        QCOMPARE(ref.kv_bytes_per_token, int64_t(256));
        QCOMPARE(ref.linear_bits_per_weight, 32.0);
        QCOMPARE(q4.linear_bits_per_weight, 4.5);  // 18 bytes per 32 weights
        QCOMPARE(q8.linear_bits_per_weight, 8.5);  // 34 bytes per 32 weights
        QVERIFY(q4.weight_bytes < q8.weight_bytes && q8.weight_bytes < ref.weight_bytes);
        SpeedOptions so;
        so.n_prompt = 32;
        so.n_gen = 8;
        so.repeat = 3;
        so.runner = runner_options(64);
        auto sp = measure_speed(m_q4, random_tokens(20, m_model->config.n_vocab, 9), so);
        QVERIFY2(sp.is_ok(), sp.message().c_str());
        QCOMPARE(int(sp->pp.values.size()), 3);
        QCOMPARE(int(sp->tg.values.size()), 3);
        QVERIFY(sp->pp.mean > 0 && sp->tg.mean > 0 && sp->pp.min <= sp->pp.mean && sp->pp.mean <= sp->pp.max);
    }
};

QTEST_GUILESS_MAIN(TestEval)
#include "tst_eval.moc"
