// ctest-labels: unit engine
// Beam search's length_penalty and min_new_tokens against a brute-force reference: an exact
// search over every output sequence (each token of the vocabulary at each position, up to
// max_tokens), each scored as Hugging Face and vLLM define it: sum of log-probabilities
// (log_softmax of the full logits, end-of-generation held back as HF's min_new_tokens
// processor does, after the softmax) divided by length^alpha, the length counting the
// generated tokens and the end-of-generation token that ended them. A subtree is left
// unexplored only when an upper bound on every score in it is below the N-th best score,
// so the top N it returns is exact. Each prefix is run from scratch by a SequenceRunner.
//
// The tiny model is rewritten so that after any prefix only a few tokens matter: every
// token embedding gets a large constant in dimension 0 (the final norm's output is then
// dominated by it), and the output rows of the "live" tokens (one or two words and the
// end-of-generation token) carry +gain there, all others -gain: those others have log
// probabilities below -100. With at most 2 live words, max_tokens small and width 8, beam
// search must meet every sequence of live tokens (never more than width candidates worth
// keeping at a step), so its hypotheses must be the exact top list.
#include <QtTest>

#include <cmath>
#include <queue>
#include <random>
#include <set>

#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

constexpr float kBias = 20.0f;   // dimension 0 of every token embedding
constexpr float kGain = 10.0f;   // +/- on dimension 0 of the output rows (live / other)
constexpr float kSpread = 4.0f;  // std of the live rows' other dimensions
const std::vector<int32_t> kPrompt = {1, 120, 118, 291, 13, 119, 260, 35, 77, 200};

struct Scored {
    std::vector<int32_t> tokens;  // generated, without the end-of-generation token
    double logprob = 0;
    double score = 0;
};

// The exact top-N search described above, best first: a queue of prefixes keyed by an
// upper bound on every score below them, and of whole sequences keyed by their score. A
// whole sequence leaves the queue only when nothing left in it can score higher, so the
// sequences come out in exact order; prefixes whose bound is below the N-th are never run.
class BruteForce {
public:
    BruteForce(SequenceRunner& runner, int n_vocab, std::set<int32_t> eog, int max_tokens, double alpha, int min_new)
        : m_runner(runner),
          m_n_vocab(n_vocab),
          m_eog(std::move(eog)),
          m_max(max_tokens),
          m_alpha(alpha),
          m_min_new(min_new) {}

    std::vector<Scored> top(int n) {
        struct Node {
            double key;
            bool whole;
            Scored s;
        };
        auto less = [](const Node& a, const Node& b) { return a.key < b.key; };
        std::priority_queue<Node, std::vector<Node>, decltype(less)> queue(less);
        queue.push({0.0, false, {}});
        std::vector<Scored> out;
        while (int(out.size()) < n && !queue.empty()) {
            Node node = queue.top();
            queue.pop();
            if (node.whole) {
                out.push_back(std::move(node.s));
                continue;
            }
            if (++m_expanded > 2000) qFatal("brute force: more than 2000 prefixes run (the model is not peaked)");
            const std::vector<double> lp = log_probs(node.s.tokens);
            const int d = int(node.s.tokens.size());
            for (int32_t t = 0; t < m_n_vocab; ++t) {
                const double sum = node.s.logprob + lp[size_t(t)];
                if (m_eog.count(t)) {
                    if (d >= m_min_new) queue.push({score(sum, d + 1), true, {node.s.tokens, sum, score(sum, d + 1)}});
                    continue;
                }
                Scored next{node.s.tokens, sum, 0.0};
                next.tokens.push_back(t);
                if (d + 1 == m_max) {
                    next.score = score(sum, m_max);
                    queue.push({next.score, true, std::move(next)});
                } else {
                    queue.push({bound(sum, d + 1), false, std::move(next)});
                }
            }
        }
        return out;
    }
    int expanded() const { return m_expanded; }

private:
    double score(double sum, int length) const { return sum / std::pow(double(length), m_alpha); }
    // The best score any sequence continuing a prefix of `d` tokens with log-prob sum `s`
    // can have: its sum is <= s and its length k in [d + 1, max_tokens]; s / k^alpha is
    // monotone in k, so the maximum is at an end.
    double bound(double s, int d) const { return std::max(score(s, d + 1), score(s, m_max)); }

    // log_softmax of the logits after prompt + prefix, run from scratch.
    std::vector<double> log_probs(const std::vector<int32_t>& prefix) {
        std::vector<int32_t> seq = kPrompt;
        seq.insert(seq.end(), prefix.begin(), prefix.end());
        std::vector<float> logits;
        m_runner.clear();
        if (!m_runner.eval(seq, false, &logits)) qFatal("brute force: eval failed");
        double mx = -INFINITY, z = 0;
        for (int t = 0; t < m_n_vocab; ++t) mx = std::max(mx, double(logits[size_t(t)]));
        for (int t = 0; t < m_n_vocab; ++t) z += std::exp(double(logits[size_t(t)]) - mx);
        const double lse = mx + std::log(z);
        std::vector<double> lp(static_cast<size_t>(m_n_vocab));
        for (int t = 0; t < m_n_vocab; ++t) lp[size_t(t)] = double(logits[size_t(t)]) - lse;
        return lp;
    }

    SequenceRunner& m_runner;
    int m_n_vocab;
    std::set<int32_t> m_eog;
    int m_max;
    double m_alpha;
    int m_min_new;
    int m_expanded = 0;
};

std::unique_ptr<SequenceRunner> make_runner(std::shared_ptr<const Model> m) {
    RunnerOptions ro;
    ro.n_ctx = 256;
    ro.n_threads = 1;
    ro.backend = "cpu";
    auto r = SequenceRunner::create(std::move(m), ro);
    if (!r) qFatal("%s", r.message().c_str());
    return std::move(r.value());
}

// How many sequences of live tokens there are: words from `n_words`, ended by
// end-of-generation after at least min_new tokens or cut at max_tokens.
int live_sequences(int n_words, int max_tokens, int min_new) {
    int n = 0, prefixes = 1;  // prefixes of length d
    for (int d = 0; d < max_tokens; ++d) {
        if (d >= min_new) n += prefixes;  // prefix + end-of-generation
        prefixes *= n_words;
    }
    return n + prefixes;  // the ones cut at max_tokens
}

}  // namespace

class TstBeamBruteForce : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void topHypothesesAreExact_data();
    void topHypothesesAreExact();
    void penaltyMovesTheWinnerLonger();
    void minNewTokensOnAModelThatStopsAtOnce();
    void stopStringWaitsForMinNewTokens();

private:
    // The tiny model with `words` (and end-of-generation) as its live tokens; eos_boost adds
    // to the end-of-generation row's dimension 0 (a model that wants to stop).
    std::shared_ptr<Model> peaked(const std::vector<int32_t>& words, float eos_boost = 0);
    std::vector<BeamHypothesis> engine_beams(std::shared_ptr<Model> m, int width, int max_tokens, float lp, int min_new,
                                             std::vector<int32_t>* greedy = nullptr);

    std::shared_ptr<Model> m_base;
    int32_t m_wordA = -1;  // the tokens of "a" and "b"
    int32_t m_wordB = -1;
    std::set<int32_t> m_eog;
    int32_t m_eos = -1;
    std::vector<std::vector<float>> m_keep;  // weight copies the peaked models point at
};

void TstBeamBruteForce::initTestCase() {
    test::TinyModelSpec s;
    s.seed = 11;
    auto base = test::write_and_load_tiny_gguf(test::output_path("beam_brute_tiny.gguf"), s);
    QVERIFY2(base.is_ok(), base.message().c_str());
    m_base = *base;
    auto session = Session::from_model(m_base);
    QVERIFY2(session.is_ok(), session.message().c_str());
    for (int32_t t = 0; t < m_base->config.n_vocab; ++t)
        if ((*session)->tokenizer().is_eog(t)) m_eog.insert(t);
    m_eos = (*session)->tokenizer().eos();
    QVERIFY(m_eog.count(m_eos));
    const auto a = (*session)->encode_text("a"), b = (*session)->encode_text("b");
    QCOMPARE(a.size(), size_t(1));
    QCOMPARE(b.size(), size_t(1));
    m_wordA = a[0];
    m_wordB = b[0];
    QVERIFY(!m_eog.count(m_wordA) && !m_eog.count(m_wordB));
    QCOMPARE(m_base->token_embd.dtype, DType::F32);
    QCOMPARE(m_base->output.dtype, DType::F32);
}

std::shared_ptr<Model> TstBeamBruteForce::peaked(const std::vector<int32_t>& words, float eos_boost) {
    const int64_t n_vocab = m_base->config.n_vocab, n_embd = m_base->config.n_embd;
    const auto* emb = static_cast<const float*>(m_base->token_embd.data);
    std::vector<float> e(emb, emb + n_vocab * n_embd);  // [n_vocab, n_embd]
    for (int64_t t = 0; t < n_vocab; ++t) e[size_t(t * n_embd)] = kBias;
    std::vector<float> out(size_t(n_vocab * n_embd), 0.0f);  // [n_vocab, n_embd]
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, kSpread);
    std::set<int32_t> live(words.begin(), words.end());
    live.insert(m_eos);
    for (int64_t t = 0; t < n_vocab; ++t) {
        float* row = out.data() + t * n_embd;
        row[0] = live.count(int32_t(t)) ? kGain : -kGain;
        if (int32_t(t) == m_eos) row[0] += eos_boost;
        for (int64_t i = 1; i < n_embd; ++i) {
            const float v = nd(rng);  // drawn for every row: the live rows do not depend on which are live
            if (live.count(int32_t(t))) row[i] = v;
        }
    }
    auto m = std::make_shared<Model>(*m_base);
    m_keep.push_back(std::move(e));
    m->token_embd.data = m_keep.back().data();
    m_keep.push_back(std::move(out));
    m->output.data = m_keep.back().data();
    return m;
}

std::vector<BeamHypothesis> TstBeamBruteForce::engine_beams(std::shared_ptr<Model> m, int width, int max_tokens,
                                                            float lp, int min_new, std::vector<int32_t>* greedy) {
    auto session = Session::from_model(m);
    if (!session) qFatal("%s", session.message().c_str());
    EngineOptions o;
    o.block_size = 8;
    o.kv_blocks = 256;
    o.backend = "cpu";
    o.n_threads = 1;
    o.max_model_len = 256;
    auto e = (*session)->make_engine(o);
    if (!e) qFatal("%s", e.message().c_str());
    GenerationRequest g;
    g.prompt = kPrompt;
    g.params.temperature = 0;
    g.params.max_tokens = max_tokens;
    g.params.length_penalty = lp;
    g.params.min_new_tokens = min_new;
    g.beam_width = width;
    auto id = (*e)->submit(g);
    if (!id || !(*e)->run_until_idle()) qFatal("beam run failed");
    if (greedy) *greedy = (*e)->output_tokens(*id);
    if (width == 1) return {};
    return (*e)->beam_hypotheses(*id);
}

void TstBeamBruteForce::topHypothesesAreExact_data() {
    QTest::addColumn<int>("words");
    QTest::addColumn<int>("maxTokens");
    QTest::addColumn<float>("alpha");
    QTest::addColumn<int>("minNew");
    for (float a : {0.0f, 0.5f, 1.0f, 2.0f, -1.0f}) {
        for (int mn : {0, 1})
            QTest::newRow(qPrintable(QString("2 words, 2 tokens, alpha %1, min_new %2").arg(a).arg(mn)))
                << 2 << 2 << a << mn;
        for (int mn : {0, 3})
            QTest::newRow(qPrintable(QString("1 word, 6 tokens, alpha %1, min_new %2").arg(a).arg(mn)))
                << 1 << 6 << a << mn;
    }
}

void TstBeamBruteForce::topHypothesesAreExact() {
    QFETCH(int, words);
    QFETCH(int, maxTokens);
    QFETCH(float, alpha);
    QFETCH(int, minNew);
    const std::vector<int32_t> w = words == 2 ? std::vector<int32_t>{m_wordA, m_wordB} : std::vector<int32_t>{m_wordA};
    auto m = peaked(w);
    const int n_live = live_sequences(words, maxTokens, minNew);
    QVERIFY(n_live <= 8);
    const auto got = engine_beams(m, 8, maxTokens, alpha, minNew);
    auto runner = make_runner(m);
    BruteForce bf(*runner, m->config.n_vocab, m_eog, maxTokens, alpha, minNew);
    const auto want = bf.top(n_live);
    qInfo("  %d prefixes expanded for %d live sequences", bf.expanded(), n_live);
    QCOMPARE(int(want.size()), n_live);
    QVERIFY(int(got.size()) >= n_live);
    std::set<int32_t> live(w.begin(), w.end());
    for (int i = 0; i < n_live; ++i) {
        const Scored& b = want[size_t(i)];
        QString toks;
        for (int32_t t : b.tokens) toks += QString::number(t) + " ";
        qInfo("  #%d: [%s] %s sum %.5f score %.5f", i, qPrintable(toks.trimmed()),
              int(b.tokens.size()) < maxTokens ? "+eos" : "(length)", b.logprob, b.score);
        for (int32_t t : b.tokens) QVERIFY2(live.count(t), "the reference's top list left the live tokens");
        QCOMPARE(got[size_t(i)].tokens, b.tokens);
        QVERIFY2(std::abs(got[size_t(i)].logprob - b.logprob) < 1e-3,
                 qPrintable(QString("sum %1 vs %2").arg(got[size_t(i)].logprob).arg(b.logprob)));
        QVERIFY2(std::abs(got[size_t(i)].score - b.score) < 1e-3,
                 qPrintable(QString("score %1 vs %2").arg(got[size_t(i)].score).arg(b.score)));
    }
    // The list really has sequences of different lengths, so alpha takes part in the order.
    std::set<size_t> lengths;
    for (const Scored& b : want) lengths.insert(b.tokens.size());
    QVERIFY(lengths.size() > 1);
}

// On the one-word chain (the choice is only where to stop) a larger alpha never picks a
// shorter best hypothesis, and between -1 and 2 it changes the winner.
void TstBeamBruteForce::penaltyMovesTheWinnerLonger() {
    auto m = peaked({m_wordA});
    size_t last = 0;
    std::vector<size_t> lens;
    for (float a : {-1.0f, 0.0f, 1.0f, 2.0f, 4.0f}) {
        const auto got = engine_beams(m, 8, 6, a, 0);
        QVERIFY(!got.empty());
        lens.push_back(got[0].tokens.size());
        qInfo("  alpha %.1f: best has %zu tokens", double(a), got[0].tokens.size());
        QVERIFY(got[0].tokens.size() >= last);
        last = got[0].tokens.size();
    }
    QVERIFY(lens.front() < lens.back());
}

// A model whose end-of-generation token is far the most likely after the prompt: without
// min_new_tokens greedy decoding and beam search stop at once; with it they do not stop
// before min_new_tokens tokens, and beam search still matches the exhaustive search.
void TstBeamBruteForce::minNewTokensOnAModelThatStopsAtOnce() {
    auto m = peaked({m_wordA, m_wordB}, 2.0f);
    auto runner = make_runner(m);
    std::vector<float> logits;
    QVERIFY(runner->eval(kPrompt, false, &logits).is_ok());
    const auto top = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    QCOMPARE(top, m_eos);
    std::vector<int32_t> greedy;
    engine_beams(m, 1, 6, 1.0f, 0, &greedy);
    QCOMPARE(greedy, std::vector<int32_t>{m_eos});  // stops at once
    for (int mn : {2, 4}) {
        engine_beams(m, 1, 6, 1.0f, mn, &greedy);
        QVERIFY2(int(greedy.size()) > mn, qPrintable(QString("greedy gave %1 tokens").arg(greedy.size())));
        for (int i = 0; i < mn; ++i) QVERIFY(!m_eog.count(greedy[size_t(i)]));
    }
    const auto beams0 = engine_beams(m, 4, 3, 1.0f, 0);
    QVERIFY(!beams0.empty());
    QVERIFY(beams0[0].tokens.empty());  // the best hypothesis is the immediate stop
    const auto beams = engine_beams(m, 8, 2, 1.0f, 1);
    BruteForce bf(*runner, m->config.n_vocab, m_eog, 2, 1.0, 1);
    const auto want = bf.top(live_sequences(2, 2, 1));
    QVERIFY(int(beams.size()) >= int(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
        QVERIFY(!want[i].tokens.empty());
        QCOMPARE(beams[i].tokens, want[i].tokens);
        QVERIFY(std::abs(beams[i].score - want[i].score) < 1e-3);
    }
}

// vLLM's min_tokens: a stop string does not end the output before min_new_tokens tokens.
// On the one-word model ("a" or end-of-generation) with stop "a": the first "a" stops it
// at once; with min_new_tokens 4 the three "a" before the fourth token are text, and the
// fourth token ends it (a stop string or end-of-generation, both leave "aaa").
void TstBeamBruteForce::stopStringWaitsForMinNewTokens() {
    auto m = peaked({m_wordA});
    auto session = Session::from_model(m);
    QVERIFY(session.is_ok());
    for (int mn : {0, 4}) {
        EngineOptions o;
        o.kv_blocks = 64;
        o.backend = "cpu";
        o.n_threads = 1;
        o.max_model_len = 256;
        auto e = (*session)->make_engine(o);
        QVERIFY(e.is_ok());
        GenerationRequest g;
        g.prompt = kPrompt;
        g.params.temperature = 0;
        g.params.max_tokens = 10;
        g.params.min_new_tokens = mn;
        g.params.stop = {"a"};
        std::string text;
        FinishReason why = FinishReason::none;
        g.on_event = [&](const TokenEvent& ev) {
            text += ev.text;
            if (ev.finished) why = ev.finish_reason;
        };
        auto id = (*e)->submit(g);
        QVERIFY(id.is_ok());
        QVERIFY((*e)->run_until_idle().is_ok());
        const auto out = (*e)->output_tokens(*id);
        qInfo("  min_new_tokens %d: %zu tokens, text '%s'", mn, out.size(), text.c_str());
        QCOMPARE(int(why), int(FinishReason::stop));
        if (mn == 0) {
            QCOMPARE(int(out.size()), 1);
            QCOMPARE(text, std::string());
        } else {
            QCOMPARE(int(out.size()), mn);
            QCOMPARE(text, std::string("aaa"));
        }
    }
}

QTEST_GUILESS_MAIN(TstBeamBruteForce)
#include "tst_beam_brute_force.moc"
