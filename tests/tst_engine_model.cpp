// ctest-labels: model engine
// The batching engine on the installed default model (SmolLM2-135M-Instruct Q4_1) at
// temperature 0: requests batched together, and requests preempted and resumed (by
// recompute and by swap), give the tokens each request gives alone through
// SequenceRunner. Skipped when the default model is not installed.
#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/draft_runner.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

#include <QtTest>

#include "tests/support/greedy_params.h"
#include "tests/support/test_backend.h"
#include "tests/support/test_paths.h"

using namespace kvs;

namespace {
const char* kPrompts[] = {
    "What is the capital of France?",
    "Write a haiku about autumn leaves.",
    "Explain in two sentences what a hash table is.",
    "List three fruits that are red.",
    "def fibonacci(n):",
    "Translate 'good morning' into Spanish.",
};
constexpr int kTokens = 32;
using test::test_backend;
}  // namespace

class TestEngineModel : public QObject {
    Q_OBJECT
    std::shared_ptr<const Model> m_model;
    std::shared_ptr<const Tokenizer> m_tok;
    std::vector<std::vector<int32_t>> m_prompts;
    std::vector<std::vector<int32_t>> m_alone;  // each prompt run alone

    SamplingParams greedy() const { return test::greedy(kTokens); }

private Q_SLOTS:
    void initTestCase() {
        const std::string path = test::default_model_path();
        if (path.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        auto m = load_model(path);
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = *m;
        auto tok = Tokenizer::create(m_model->vocab);
        QVERIFY2(tok.is_ok(), tok.message().c_str());
        m_tok = std::make_shared<Tokenizer>(std::move(*tok));
        const std::string& tmpl = m_model->vocab.chat_template;
        const ChatFormat fmt = detect_chat_format(tmpl, m_model->vocab);
        for (const char* p : kPrompts) {
            const std::string text = apply_chat_template(fmt, {{"user", p}}, true, default_system_prompt(tmpl));
            m_prompts.push_back(m_tok->encode(text, true, true));
        }
        // Alone: SequenceRunner, prompt in one pass, then one token per pass.
        RunnerOptions ro;
        ro.n_ctx = 512;
        ro.backend = test_backend();
        auto runner = SequenceRunner::create(m_model, ro);
        QVERIFY2(runner.is_ok(), runner.message().c_str());
        for (const auto& prompt : m_prompts) {
            (*runner)->clear();
            std::vector<float> logits;
            std::vector<int32_t> out;
            QVERIFY((*runner)->eval(prompt, false, &logits).is_ok());
            for (int i = 0; i < kTokens; ++i) {
                out.push_back(argmax_lowest_id(logits.data(), m_model->config.n_vocab));
                if (i + 1 < kTokens) QVERIFY((*runner)->eval({out.back()}, false, &logits).is_ok());
            }
            m_alone.push_back(out);
        }
    }

    void batchedMatchesAlone_data() {
        QTest::addColumn<int>("budget");
        QTest::addColumn<int>("kv_blocks");
        QTest::addColumn<int>("mode");
        QTest::newRow("budget 512, roomy pool") << 512 << 256 << int(PreemptionMode::recompute);
        QTest::newRow("budget 40 (chunked prefill), roomy pool") << 40 << 256 << int(PreemptionMode::recompute);
        QTest::newRow("pool of 14 blocks, preempt by recompute") << 64 << 14 << int(PreemptionMode::recompute);
        QTest::newRow("pool of 14 blocks, preempt by swap") << 64 << 14 << int(PreemptionMode::swap);
    }
    void batchedMatchesAlone() {
        QFETCH(int, budget);
        QFETCH(int, kv_blocks);
        QFETCH(int, mode);
        EngineOptions o;
        o.backend = test_backend();
        o.kv_blocks = kv_blocks;
        o.max_model_len = 512;
        o.prefix_caching = false;  // preemption must recompute, not find its own blocks
        o.scheduler.max_num_batched_tokens = budget;
        o.scheduler.preemption = PreemptionMode(mode);
        o.scheduler.n_host_blocks = 64;
        auto e = Engine::create(m_model, m_tok, o);
        QVERIFY2(e.is_ok(), e.message().c_str());
        std::vector<RequestId> ids;
        for (const auto& p : m_prompts) {
            GenerationRequest r;
            r.prompt = p;
            r.params = greedy();
            auto id = (*e)->submit(r);
            QVERIFY2(id.is_ok(), id.message().c_str());
            ids.push_back(*id);
        }
        QVERIFY((*e)->run_until_idle().is_ok());
        if (kv_blocks < 20) QVERIFY2((*e)->scheduler().counters().preemptions > 0, "expected preemptions");
        for (size_t i = 0; i < ids.size(); ++i) {
            const auto got = (*e)->output_tokens(ids[i]);
            QVERIFY2(got == m_alone[i], qPrintable(QString("prompt %1: batched '%2' vs alone '%3'")
                                                       .arg(i)
                                                       .arg(QString::fromStdString(m_tok->decode(got)))
                                                       .arg(QString::fromStdString(m_tok->decode(m_alone[i])))));
        }
        QCOMPARE((*e)->kv_cache().num_free_blocks(), (*e)->kv_cache().n_blocks());
    }

    // Speculative decoding, every request batched with its drafts: greedy output is
    // token-identical to each prompt run alone without drafts.
    void speculativeMatchesAlone_data() {
        QTest::addColumn<QString>("proposer");
        QTest::addColumn<int>("k");
        QTest::newRow("prompt lookup, k 4") << "ngram" << 4;
        QTest::newRow("layer-skip 10 of 30, k 3") << "layer-skip:10" << 3;
        QTest::newRow("int4 self-draft, k 4, adaptive") << "int4" << 4;
    }
    void speculativeMatchesAlone() {
        QFETCH(QString, proposer);
        QFETCH(int, k);
        EngineOptions o;
        o.backend = test_backend();
        o.kv_blocks = 256;
        o.max_model_len = 512;
        if (proposer != "ngram") {
            auto d = make_draft_model(proposer.toStdString(), m_model);
            QVERIFY2(d.is_ok(), d.message().c_str());
            o.drafts = {{proposer.toStdString(), *d}};
        }
        auto e = Engine::create(m_model, m_tok, o);
        QVERIFY2(e.is_ok(), e.message().c_str());
        std::vector<RequestId> ids;
        for (const auto& p : m_prompts) {
            GenerationRequest r;
            r.prompt = p;
            r.params = greedy();
            r.spec.proposer = proposer.toStdString();
            r.spec.k = k;
            r.spec.adaptive = proposer == "int4";
            auto id = (*e)->submit(r);
            QVERIFY2(id.is_ok(), id.message().c_str());
            ids.push_back(*id);
        }
        QVERIFY((*e)->run_until_idle().is_ok());
        for (size_t i = 0; i < ids.size(); ++i) {
            const auto got = (*e)->output_tokens(ids[i]);
            QVERIFY2(got == m_alone[i], qPrintable(QString("prompt %1: speculative '%2' vs alone '%3'")
                                                       .arg(i)
                                                       .arg(QString::fromStdString(m_tok->decode(got)))
                                                       .arg(QString::fromStdString(m_tok->decode(m_alone[i])))));
        }
        const SpecStats& t = (*e)->spec_totals();
        QVERIFY2(t.drafted > 0, "no drafts were verified");
        qInfo("%s k=%d: alpha %.3f, %.2f tokens per target pass", qPrintable(proposer), k, t.alpha(),
              t.tokens_per_pass());
        QCOMPARE((*e)->kv_cache().num_free_blocks(), (*e)->kv_cache().n_blocks());
    }
};

QTEST_GUILESS_MAIN(TestEngineModel)
#include "tst_engine_model.moc"
