// ctest-labels: model
// The default model against llama.cpp (tests/fixtures/smollm2_reference.json, written by
// tests/tools/make_llama_reference.py through llama-cpp-python): our tokenizer gives the
// same prompt ids; fed llama.cpp's greedy tokens, our argmax equals llama.cpp's at every
// position where llama.cpp's choice is decisive (top-1 margin >= 0.75); the logits of the
// first generated positions agree (max |Δ| over llama.cpp's top-20 and KL on them); and we
// are about as close to llama.cpp as llama.cpp is to itself under another equally valid
// configuration (flash attention on, F32 KV cache, the prompt fed token by token: the
// fixture's "variants"), both in logits and in how long greedy continuations stay identical.
// The checks themselves: tests/support/llama_reference_check.h (shared with Gemma 3's test).
#include <QtTest>

#include "tests/support/llama_reference_check.h"
#include "tests/support/test_paths.h"

class TestLlamaReference : public QObject {
    Q_OBJECT
    kvs::test::LlamaReferenceCheck m_check{"tests/tools/make_llama_reference.py"};

private Q_SLOTS:
    void initTestCase() {
        const std::string path = kvs::test::default_model_path();
        if (path.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        m_check.load(path, "smollm2_reference.json", 512);
        // Per-position bounds from the rounding noise measured between implementations; a
        // wrong RoPE, norm or quant layout moves SmolLM2's logits by several units.
        m_check.delta_bound = 1.5;
        m_check.kl_bound = 0.1;
    }

    void greedyMatchesLlamaCpp_data() { m_check.add_case_rows(); }
    void greedyMatchesLlamaCpp() {
        QFETCH(int, index);
        m_check.greedy_case(index);
    }

    // Runs after greedyMatchesLlamaCpp (slots run in declaration order). Measured with the
    // committed fixture (160 positions), mean KL (21-bin, see top_k_agreement) vs llama.cpp
    // default: ours 2.69e-3, flash_attn 2.64e-3, kv_f32 2.46e-3, prompt_token_by_token
    // 2.12e-3 - ours sits at the edge of llama.cpp's own spread (1.02x the widest variant). A
    // factor of 1.5 leaves ~47% margin and still fails on small damage: Gaussian noise of
    // sigma 0.1 on every logit (max |delta| 1.29, every per-position KL < 0.1, so the fixed
    // bounds still pass) raised our mean KL to 4.28e-3 > 1.5 x 2.64e-3.
    void zzSpreadWithinLlamaCppOwn() { m_check.spread_within_own(1.5); }

    // Measured with the committed fixture: ours 273 (248 before the three-pass attention);
    // llama.cpp flash_attn 254, kv_f32 306, prompt_token_by_token 243 (1, 2 and 1 of 10
    // cases identical throughout; ours 2). A forward pass with a real error diverges within
    // a few tokens of every prompt.
    void zzGreedyAgreementWithinLlamaCppOwn() { m_check.greedy_within_own(0.6); }

    void cleanupTestCase() { m_check.report(); }
};

QTEST_GUILESS_MAIN(TestLlamaReference)
#include "tst_llama_reference.moc"
