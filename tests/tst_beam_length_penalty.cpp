// ctest-labels: unit engine
// Beam search's length_penalty and min_new_tokens against a plain reference of Hugging
// Face's beam search (tests/support/beam_reference.h: every step recomputed from scratch),
// on a tiny model whose end-of-generation token is made likely (its output row is a scaled
// copy of a frequent token's), so hypotheses really end early and the penalty decides
// between lengths. min_new_tokens also for plain greedy decoding, against a greedy loop
// that masks end-of-generation itself.
#include <QtTest>

#include <set>

#include "engine/runtime/session.h"
#include "tests/support/beam_reference.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

std::unique_ptr<SequenceRunner> make_runner(std::shared_ptr<const Model> m) {
    RunnerOptions ro;
    ro.n_ctx = 256;
    ro.n_threads = 1;
    ro.backend = "cpu";
    auto r = SequenceRunner::create(std::move(m), ro);
    if (!r) qFatal("%s", r.message().c_str());
    return std::move(r.value());
}

const std::vector<int32_t> kPrompt = {1, 120, 118, 291, 13, 119, 260, 35, 77, 200};

}  // namespace

class TstBeamLengthPenalty : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void beams_match_reference_data();
    void beams_match_reference();
    void penalty_changes_the_winner();
    void min_new_tokens_greedy();
    void bad_values_refused();

private:
    std::vector<BeamHypothesis> engine_beams(int width, int max_tokens, float lp, int min_new);
    std::shared_ptr<Model> m_model;
    std::shared_ptr<Session> m_session;
    std::vector<float> m_output;  // [n_vocab, n_embd] the changed output head
    std::set<int32_t> m_eog;
    int32_t m_eos = -1;
};

void TstBeamLengthPenalty::initTestCase() {
    test::TinyModelSpec s;
    s.seed = 5;
    auto base = test::write_and_load_tiny_gguf(test::output_path("beam_lp_tiny.gguf"), s);
    QVERIFY2(base.is_ok(), base.message().c_str());
    auto session = Session::from_model(*base);
    QVERIFY2(session.is_ok(), session.message().c_str());
    const ModelConfig& c = (*base)->config;
    for (int32_t t = 0; t < c.n_vocab; ++t)
        if ((*session)->tokenizer().is_eog(t)) m_eog.insert(t);
    QVERIFY(!m_eog.empty());
    m_eos = (*session)->tokenizer().eos();
    QVERIFY(m_eog.count(m_eos));
    // The most likely first token after the prompt; end-of-generation's row becomes 1.02 x its row.
    std::vector<float> logits;
    QVERIFY(make_runner(*base)->eval(kPrompt, false, &logits).is_ok());
    const auto top = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const WeightView& out = (*base)->output;
    QCOMPARE(out.dtype, DType::F32);
    const auto* rows = static_cast<const float*>(out.data);
    m_output.assign(rows, rows + out.n_out * out.n_in);
    for (int64_t i = 0; i < out.n_in; ++i) m_output[size_t(m_eos * out.n_in + i)] = 1.02f * rows[top * out.n_in + i];
    auto m = std::make_shared<Model>(**base);
    m->output.data = m_output.data();
    m_model = m;
    auto sess = Session::from_model(m_model);
    QVERIFY(sess.is_ok());
    m_session = *sess;
}

std::vector<BeamHypothesis> TstBeamLengthPenalty::engine_beams(int width, int max_tokens, float lp, int min_new) {
    EngineOptions o;
    o.block_size = 8;
    o.kv_blocks = 128;
    o.backend = "cpu";
    o.n_threads = 1;
    o.max_model_len = 256;
    auto e = m_session->make_engine(o);
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
    if ((*e)->kv_cache().num_free_blocks() != (*e)->kv_cache().n_blocks()) qFatal("blocks left held");
    return (*e)->beam_hypotheses(*id);
}

void TstBeamLengthPenalty::beams_match_reference_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<float>("lp");
    QTest::addColumn<int>("min_new");
    for (int w : {2, 4})
        for (float lp : {0.0f, 1.0f, 2.0f, -1.0f})
            for (int mn : {0, 3})
                QTest::newRow(
                    qPrintable(QString("width %1, length_penalty %2, min_new_tokens %3").arg(w).arg(lp).arg(mn)))
                    << w << lp << mn;
}

void TstBeamLengthPenalty::beams_match_reference() {
    QFETCH(int, width);
    QFETCH(float, lp);
    QFETCH(int, min_new);
    const int max_tokens = 8;
    const auto got = engine_beams(width, max_tokens, lp, min_new);
    test::BeamReferenceParams p;
    p.width = width;
    p.max_tokens = max_tokens;
    p.length_penalty = lp;
    p.min_new_tokens = min_new;
    p.eog = m_eog;
    auto runner = make_runner(m_model);
    const auto want = test::beam_reference(*runner, m_model->config.n_vocab, kPrompt, p);
    QCOMPARE(got.size(), want.size());
    int ended = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        qInfo("  #%zu: %zu tokens, sum %.5f, score %.5f", i, want[i].tokens.size(), want[i].logprob, want[i].score);
        QCOMPARE(got[i].tokens, want[i].tokens);
        QVERIFY(std::abs(got[i].logprob - want[i].logprob) < 1e-5);
        QVERIFY(std::abs(got[i].score - want[i].score) < 1e-5);
        QVERIFY(int(got[i].tokens.size()) >= min_new);
        ended += int(got[i].tokens.size()) < max_tokens;
    }
    if (lp <= 1.0f && min_new == 0) QVERIFY2(ended > 0, "no hypothesis ended early: the penalty was not tested");
}

// The same request under different penalties picks different best hypotheses: shorter
// ones with a negative penalty, longer with a large one.
void TstBeamLengthPenalty::penalty_changes_the_winner() {
    const auto shortest = engine_beams(4, 8, -1.0f, 0);
    const auto longest = engine_beams(4, 8, 3.0f, 0);
    QVERIFY(!shortest.empty() && !longest.empty());
    qInfo("best with penalty -1: %zu tokens; with 3: %zu tokens", shortest[0].tokens.size(), longest[0].tokens.size());
    QVERIFY(shortest[0].tokens.size() < longest[0].tokens.size());
}

// Plain greedy decoding: end-of-generation is held back for min_new_tokens tokens, then
// allowed; the reference masks it itself.
void TstBeamLengthPenalty::min_new_tokens_greedy() {
    const int n_vocab = m_model->config.n_vocab;
    for (int min_new : {0, 4}) {
        auto runner = make_runner(m_model);
        std::vector<float> logits;
        QVERIFY(runner->eval(kPrompt, false, &logits).is_ok());
        std::vector<int32_t> want;
        for (int i = 0; i < 12; ++i) {
            if (i < min_new)
                for (int32_t t : m_eog) logits[size_t(t)] = -INFINITY;
            const auto t = int32_t(std::max_element(logits.begin(), logits.begin() + n_vocab) - logits.begin());
            want.push_back(t);
            if (m_eog.count(t)) break;
            QVERIFY(runner->eval({t}, false, &logits).is_ok());
        }
        EngineOptions o;
        o.kv_blocks = 64;
        o.backend = "cpu";
        o.n_threads = 1;
        o.max_model_len = 256;
        auto e = m_session->make_engine(o);
        QVERIFY(e.is_ok());
        GenerationRequest g;
        g.prompt = kPrompt;
        g.params.temperature = 0;
        g.params.max_tokens = 12;
        g.params.min_new_tokens = min_new;
        auto id = (*e)->submit(g);
        QVERIFY(id.is_ok());
        QVERIFY((*e)->run_until_idle().is_ok());
        qInfo("min_new_tokens %d: %zu tokens", min_new, want.size());
        QCOMPARE((*e)->output_tokens(*id), want);
        if (min_new == 0) QCOMPARE(int(want.size()), 1);  // the changed head ends at once without it
        else
            QVERIFY(int(want.size()) > min_new);
    }
}

void TstBeamLengthPenalty::bad_values_refused() {
    auto e = m_session->make_engine(EngineOptions{});
    QVERIFY(e.is_ok());
    GenerationRequest g;
    g.prompt = kPrompt;
    g.params.min_new_tokens = -1;
    auto id = (*e)->submit(g);
    QVERIFY(!id.is_ok());
    QVERIFY(QString::fromStdString(id.message()).contains("min_new_tokens"));
    g.params.min_new_tokens = 0;
    g.params.length_penalty = NAN;
    id = (*e)->submit(g);
    QVERIFY(!id.is_ok());
    QVERIFY(QString::fromStdString(id.message()).contains("length_penalty"));
    QVERIFY(!(*e)->has_work());
}

QTEST_GUILESS_MAIN(TstBeamLengthPenalty)
#include "tst_beam_length_penalty.moc"
