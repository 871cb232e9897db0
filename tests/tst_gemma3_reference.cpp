// ctest-labels: model
// Gemma 3 270M against llama.cpp (tests/fixtures/gemma3_reference.json, written by
// tests/tools/make_gemma3_reference.py through llama-cpp-python), checked as
// tst_llama_reference checks the default model, one prompt past the 512-position sliding
// window included: our tokenizer gives the same prompt ids; fed llama.cpp's greedy tokens,
// our argmax equals llama.cpp's at every position where llama.cpp's choice is decisive
// (top-1 margin >= 0.75); the logits of the first generated positions agree within 1.5x
// llama.cpp's own largest per-position spread; and we are about as close to llama.cpp as
// llama.cpp is to itself under another equally valid configuration (flash attention on, F32
// KV cache, the prompt fed token by token: the fixture's "variants"), both in logits and in
// how long greedy continuations stay identical. Past the window, the local layers' blocks
// before it went back to their pool. The checks: tests/support/llama_reference_check.h.
#include <QtTest>

#include "tests/support/llama_reference_check.h"
#include "tests/support/test_paths.h"

class TestGemma3Reference : public QObject {
    Q_OBJECT
    kvs::test::LlamaReferenceCheck m_check{"tests/tools/make_gemma3_reference.py"};

private Q_SLOTS:
    void initTestCase() {
        const std::string path = kvs::test::gemma3_model_path();
        if (path.empty()) QSKIP("Gemma 3 270M not installed (installer/fetch_model.sh gemma3-270m)");
        m_check.load(path, "gemma3_reference.json", 0);
        // Gemma's logits move by up to ~2.5 between llama.cpp's own valid settings, more
        // than SmolLM2's; a wrong RoPE base, norm or window moves them by many units.
        m_check.bounds_from_variants(1.5);
    }

    void greedyMatchesLlamaCpp_data() { m_check.add_case_rows(); }
    void greedyMatchesLlamaCpp() {
        QFETCH(int, index);
        m_check.greedy_case(index);
        if (QTest::currentTestFailed()) return;
        const nlohmann::json& c = m_check.fixture["cases"][size_t(index)];
        const size_t n_positions = c["prompt_ids"].size() + c["greedy_ids"].size();
        const auto& runner = *m_check.runner;
        if (n_positions > size_t(m_check.model->config.sliding_window) + 32) {
            // past the window: the local layers' blocks before it went back to their pool
            QVERIFY(runner.swa_pool_blocks() > 0);
            QVERIFY2(runner.n_swa_blocks_freed() > 0, "no local-layer block was freed past the window");
            qInfo("%s: %lld local-layer blocks freed so far, %d of %d in use", c["name"].get<std::string>().c_str(),
                  static_cast<long long>(runner.n_swa_blocks_freed()), runner.swa_blocks_in_use(),
                  runner.swa_pool_blocks());
        }
    }

    // Measured with the committed fixture (112 positions, the long prompt's past the
    // 512-position window included), mean KL (21-bin) vs llama.cpp default: ours 4.69e-3,
    // flash_attn 3.97e-3, kv_f32 5.69e-3, prompt_token_by_token 3.39e-3 - ours is inside
    // llama.cpp's own spread (0.82x the widest variant). The factor 1.5 is the default
    // model's test's.
    void zzSpreadWithinLlamaCppOwn() { m_check.spread_within_own(1.5); }

    // Measured with the committed fixture (7 cases of 32 tokens): ours 136 (2 cases
    // identical throughout); llama.cpp flash_attn 91, kv_f32 111, prompt_token_by_token 112
    // (1, 2 and 2 cases identical throughout).
    void zzGreedyAgreementWithinLlamaCppOwn() { m_check.greedy_within_own(0.6); }

    void cleanupTestCase() { m_check.report(); }
};

QTEST_GUILESS_MAIN(TestGemma3Reference)
#include "tst_gemma3_reference.moc"
