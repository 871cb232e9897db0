// ctest-labels: unit model
// engine/runtime/session: the one door front ends use. Its chat encoding must be exactly
// the template renderer + tokenizer chain (checked against those pieces called by hand),
// its policy must fill only what the caller left unset, a chat's draft choice must be
// refused by name when the model has no such draft, and what it hands out must run.
#include <QTemporaryDir>
#include <QtTest>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/runtime/session.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

class TestSession : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    std::string m_path;

    std::shared_ptr<Session> open(const SessionOptions& opt = {}) {
        auto s = Session::open(m_path, opt);
        if (!s) qWarning("%s", s.message().c_str());
        return s ? s.value() : nullptr;
    }

private Q_SLOTS:
    void initTestCase() {
        m_path = m_dir.filePath("tiny.gguf").toStdString();
        test::TinyModelSpec spec;
        spec.n_layer = 3;
        QVERIFY(test::write_tiny_gguf(m_path, spec).is_ok());
    }

    void openFailsWithTheReason() {
        auto s = Session::open(m_dir.filePath("missing.gguf").toStdString());
        QVERIFY(!s);
        QVERIFY2(s.message().find("missing.gguf") != std::string::npos, s.message().c_str());
    }

    void chatEncodingIsTheTemplateThenTheTokenizer() {
        auto s = open();
        QVERIFY(s);
        const std::vector<ChatMessage> msgs{{"system", "Be brief."}, {"user", "hello there"}};
        const VocabData& v = s->model().vocab;
        const std::string text = apply_chat_template(detect_chat_format(v.chat_template, v), msgs, true,
                                                     default_system_prompt(v.chat_template));
        QCOMPARE(s->chat_text(msgs), text);
        QVERIFY(text.find("<|im_start|>assistant\n") != std::string::npos);
        const std::vector<int32_t> ids = s->tokenizer().encode(text, true, true);
        QVERIFY(s->encode_chat(msgs) == ids);
        QVERIFY(s->encode_user("hello there", "Be brief.") == ids);
        // the specials are parsed as single tokens, not spelled out
        QVERIFY(std::find(ids.begin(), ids.end(), 1) != ids.end());  // <|im_start|>
        QCOMPARE(s->decode(s->encode_text("plain words")), std::string("plain words"));
    }

    void policyFillsOnlyWhatIsUnset() {
        auto s = open();
        QVERIFY(s);
        QCOMPARE(s->default_max_model_len(), 512);  // the tiny model's training context
        QCOMPARE(s->kv_bytes_per_token(), kv_cache_bytes_per_token(s->model().config, DType::F16));
        EngineOptions unset;
        const EngineOptions filled = s->engine_options(unset);
        QCOMPARE(filled.max_model_len, 512);
        const int64_t block_bytes = s->kv_bytes_per_token() * filled.block_size;
        QCOMPARE(filled.kv_blocks,
                 int(std::min<int64_t>(Session::pool_default_max_blocks, Session::pool_default_bytes / block_bytes)));
        EngineOptions mine;
        mine.max_model_len = 64;
        mine.kv_bytes = 1 << 20;
        const EngineOptions kept = s->engine_options(mine);
        QCOMPARE(kept.max_model_len, 64);
        QCOMPARE(kept.kv_blocks, 0);  // the caller sized the pool by bytes: untouched
        QCOMPARE(kept.kv_bytes, int64_t{1} << 20);
    }

    void draftChoicesAreCheckedByName() {
        auto plain = open();
        QVERIFY(plain);
        QVERIFY(plain->drafts().empty());
        QVERIFY(plain->spec_params("", 4, false));
        QVERIFY(plain->spec_params("ngram", 4, false));
        auto missing = plain->spec_params("int4", 4, false);
        QVERIFY(!missing);
        QVERIFY2(missing.message().find("int4") != std::string::npos, missing.message().c_str());

        SessionOptions so;
        so.self_drafts = true;
        auto s = open(so);
        QVERIFY(s);
        QCOMPARE(s->layer_skip_name(), std::string("layer-skip:1"));
        QVERIFY(s->has_draft("layer-skip:1"));
        QVERIFY(s->has_draft("int4"));
        auto p = s->spec_params("layer-skip", 12, true);
        QVERIFY(p);
        QCOMPARE(p->proposer, std::string("layer-skip:1"));
        QCOMPARE(p->k, 8);  // clamped to 1..8
        QVERIFY(p->adaptive);
        QVERIFY(!s->add_draft("layer-skip:99"));  // more layers than the model has
    }

    void handsOutWhatRuns() {
        SessionOptions so;
        so.self_drafts = true;
        auto s = open(so);
        QVERIFY(s);
        // a sequence runner and an engine loop on the same model give the same greedy ids
        RunnerOptions ro;
        ro.n_ctx = 0;  // the session's default context
        ro.n_threads = 1;
        auto runner = s->make_runner(ro);
        QVERIFY2(runner, runner.message().c_str());
        QCOMPARE((*runner)->n_ctx(), 512);
        const std::vector<int32_t> prompt = s->encode_user("hello");
        std::vector<int32_t> expect;
        std::vector<float> logits;
        std::vector<int32_t> next = prompt;
        for (int i = 0; i < 6; ++i) {
            QVERIFY((*runner)->eval(next, false, &logits).is_ok());
            const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
            expect.push_back(t);
            next = {t};
        }
        EngineOptions eo;
        eo.n_threads = 1;
        auto loop = s->start_loop(eo);
        QVERIFY2(loop, loop.message().c_str());
        GenerationRequest req;
        req.prompt = prompt;
        req.params.temperature = 0;
        req.params.max_tokens = 6;
        req.params.ignore_eos = true;
        req.spec = s->spec_params("layer-skip", 3, false).value();
        std::vector<int32_t> got;
        double ttft = -1;
        std::mutex mu;
        req.on_event = [&](const TokenEvent& ev) {
            std::lock_guard<std::mutex> lk(mu);
            if (ev.token >= 0) got.push_back(ev.token);
            if (ev.finished && ev.metrics) ttft = ev.metrics->ttft_ms();
        };
        (*loop)->submit(std::move(req));
        (*loop)->wait_idle();
        std::lock_guard<std::mutex> lk(mu);
        QVERIFY(got == expect);
        QVERIFY(ttft >= 0);  // the final event carries the engine's own milestones
    }
};

QTEST_GUILESS_MAIN(TestSession)
#include "tst_session.moc"
