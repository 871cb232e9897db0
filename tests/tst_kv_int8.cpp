// ctest-labels: unit engine
// The INT8 (Q8_0) KV cache option end to end on tiny generated models: sizes worked out by
// hand, block moves byte for byte, logits close to the F16 cache (and decode = prefill
// with it), the batching engine with an int8 cache giving the same tokens as each request
// alone under preemption (recompute, swap), prefix sharing and copy-on-write beams (brute
// force), and every way to ask for it wrongly (unknown name, head_dim not a multiple of
// 32, a backend without the kernels) ending in a clear error. The CLI side: tst_kv_int8_cli.
#include "engine/kv_cache/kv_tensors.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "tests/support/beam_reference.h"
#include "tests/support/greedy_alone.h"
#include "tests/support/greedy_params.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "tests/support/token_ids.h"

using namespace kvs;

namespace {

using test::greedy;
using test::random_prompts;

std::unique_ptr<SequenceRunner> make_runner(std::shared_ptr<const Model> model, DType kv_type) {
    RunnerOptions ro;
    ro.n_ctx = 512;
    ro.n_threads = 2;
    ro.backend = "cpu";
    ro.kv_type = kv_type;
    auto r = SequenceRunner::create(std::move(model), ro);
    if (!r) qFatal("SequenceRunner::create: %s", r.message().c_str());
    return std::move(*r);
}

// The request alone on an int8 cache: prefill, then one token at a time.
std::vector<int32_t> run_alone(std::shared_ptr<const Model> model, const std::vector<int32_t>& prompt, int n) {
    return test::greedy_alone(*make_runner(model, DType::Q8_0), model->config.n_vocab, prompt, n);
}

// Beam search by brute force on an int8 cache (tests/support/beam_reference.h).
std::vector<BeamHypothesis> brute_force_beam(std::shared_ptr<const Model> model, const std::vector<int32_t>& prompt,
                                             int width, int n_tokens) {
    test::BeamReferenceParams p;  // no end-of-generation ids: every beam runs n_tokens
    p.width = width;
    p.max_tokens = n_tokens;
    return test::beam_reference(*make_runner(model, DType::Q8_0), model->config.n_vocab, prompt, p);
}

// A backend with only the default supports_kv (F16), as the CUDA backend reports it; its
// ops are never run (check_kv_type only asks).
class F16OnlyBackend final : public Backend {
public:
    std::string name() const override { return "f16-only"; }
    bool host_visible() const override { return true; }
    void* alloc(size_t) override { return nullptr; }
    void release(void*) override {}
    void copy_to_device(void*, const void*, size_t) override {}
    void copy_to_host(void*, const void*, size_t) override {}
    bool supports(DType) const override { return true; }
    void matmul(const WeightView&, const float*, float*, int) override {}
    void embedding(const WeightView&, const int32_t*, int, float*) override {}
    void rms_norm(const float*, const float*, float*, int, int, float) override {}
    void rope(float*, const int32_t*, int, int, int, int, float, RopeStyle) override {}
    void softmax(float*, int, int) override {}
    void swiglu(const float*, const float*, float*, int64_t) override {}
    void add(const float*, const float*, float*, int64_t) override {}
    void add_bias(const float*, const float*, float*, int, int) override {}
    void kv_store(const KvStoreArgs&) override {}
    void paged_attention(const PagedAttentionArgs&) override {}
};

bool contains(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

}  // namespace

class TestKvInt8 : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_model;       // head_dim 32: int8 KV works
    std::shared_ptr<const Model> m_model_hd16;  // head_dim 16: int8 KV must be refused
    QString m_path, m_path_hd16;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_path = m_dir.filePath("tiny_hd32.gguf");
        auto m = test::write_and_load_tiny_gguf(m_path.toStdString(), test::head_dim_32_spec());
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = *m;
        QCOMPARE(m_model->config.head_dim, 32);
        m_path_hd16 = m_dir.filePath("tiny_hd16.gguf");
        auto m16 = test::write_and_load_tiny_gguf(m_path_hd16.toStdString(), test::TinyModelSpec{});
        QVERIFY2(m16.is_ok(), m16.message().c_str());
        m_model_hd16 = *m16;
        QCOMPARE(m_model_hd16->config.head_dim, 16);
    }

    void namesAndSizes() {
        QCOMPARE(*parse_kv_type("f16"), DType::F16);
        QCOMPARE(*parse_kv_type("int8"), DType::Q8_0);
        auto bad = parse_kv_type("int4");
        QVERIFY(!bad.is_ok());
        QVERIFY2(contains(bad.message(), "'int4'") && contains(bad.message(), "f16 or int8"), bad.message().c_str());
        QCOMPARE(kv_type_name(DType::Q8_0), std::string("int8"));
        // tiny: 2 (K, V) x 2 layers x kv_dim 64 x 2 bytes; int8: 64 / 32 blocks of 34 bytes per row
        QCOMPARE(kv_cache_bytes_per_token(m_model->config, DType::F16), int64_t(2 * 2 * 64 * 2));
        QCOMPARE(kv_cache_bytes_per_token(m_model->config, DType::Q8_0), int64_t(2 * 2 * 2 * 34));
        QCOMPARE(kv_cache_bytes_per_token(m_model->config, DType::Q8_0), int64_t(272));
        // SmolLM2-135M's shape: 30 layers, 3 kv heads of 64: 23040 vs 12240 bytes per token
        ModelConfig smol;
        smol.n_layer = 30;
        smol.n_kv_head = 3;
        smol.head_dim = 64;
        QCOMPARE(kv_cache_bytes_per_token(smol, DType::F16), int64_t(23040));
        QCOMPARE(kv_cache_bytes_per_token(smol, DType::Q8_0), int64_t(12240));
    }

    // The pool from a byte budget holds 1.88x the blocks (bytes per block 8192 vs 4352).
    void byteBudgetGivesMoreBlocks() {
        for (auto [type, blocks, block_bytes] : {std::tuple{DType::F16, 128, 512 * 16}, {DType::Q8_0, 240, 272 * 16}}) {
            EngineOptions o;
            o.n_threads = 2;
            o.backend = "cpu";
            o.kv_bytes = 1 << 20;
            o.kv_type = type;
            auto e = Engine::create(m_model, nullptr, o);
            QVERIFY2(e.is_ok(), e.message().c_str());
            QCOMPARE((*e)->kv_cache().n_blocks(), blocks);  // floor(2^20 / block_bytes)
            QCOMPARE((*e)->kv_pool_bytes(), int64_t(blocks) * block_bytes);
            QCOMPARE((*e)->kv_type(), type);
        }
    }

    // Copy-on-write and swap move blocks byte for byte: a pattern written to block 2
    // reads back unchanged there and in block 4 after copy_block(2, 4); block 3 is untouched.
    void blockMovesAreByteExact() {
        auto be = make_cpu_backend(1);
        KvTensors kv(*be, m_model->config, 6, 16, DType::Q8_0);
        QVERIFY(kv.allocated());
        QCOMPARE(kv.kv_type(), DType::Q8_0);
        QCOMPARE(kv.block_bytes(), int64_t(2 * 2 * 16 * 68));  // layers x (K, V) x positions x row
        QCOMPARE(kv.bytes(), 6 * kv.block_bytes());
        std::mt19937 rng(5);
        std::vector<uint8_t> a(static_cast<size_t>(kv.block_bytes())), b(a.size()), got(a.size());
        for (auto& x : a) x = static_cast<uint8_t>(rng());
        for (auto& x : b) x = static_cast<uint8_t>(rng());
        kv.write_block(2, a.data());
        kv.write_block(3, b.data());
        kv.copy_block(2, 4);
        for (auto [blk, want] : {std::pair{2, &a}, {3, &b}, {4, &a}}) {
            kv.read_block(blk, got.data());
            QVERIFY2(got == *want, qPrintable(QString("block %1").arg(blk)));
        }
        // Layer 1's V of block 4 sits where the layout says: [n_blocks, block_size, row] per tensor.
        const size_t layer_block = 16 * 68;
        QVERIFY(std::memcmp(static_cast<uint8_t*>(kv.v(1)) + 4 * layer_block, a.data() + 3 * layer_block,
                            layer_block) == 0);
    }

    // Logits with an int8 cache stay close to the F16 cache's; they do differ (the cache is
    // really int8); and decoding token by token gives what one prefill gives (each token's
    // row is quantized on its own, whatever the chunk).
    void logitsCloseToF16() {
        const auto prompt = random_prompts(1, 200, 200, m_model->config.n_vocab, 11)[0];
        const int n_vocab = m_model->config.n_vocab;
        std::vector<float> f16, i8, step;
        QVERIFY(make_runner(m_model, DType::F16)->eval(prompt, true, &f16).is_ok());
        auto runner = make_runner(m_model, DType::Q8_0);
        QVERIFY(runner->eval(prompt, true, &i8).is_ok());
        double max_rel = 0, max_diff = 0;
        int agree = 0;
        for (size_t t = 0; t < prompt.size(); ++t) {
            const float* a = &f16[t * n_vocab];
            const float* b = &i8[t * n_vocab];
            double row_max = 0, row_diff = 0;
            for (int i = 0; i < n_vocab; ++i) {
                row_max = std::max(row_max, std::fabs(double(a[i])));
                row_diff = std::max(row_diff, std::fabs(double(a[i]) - b[i]));
            }
            max_rel = std::max(max_rel, row_diff / row_max);
            max_diff = std::max(max_diff, row_diff);
            agree += std::max_element(a, a + n_vocab) - a == std::max_element(b, b + n_vocab) - b;
        }
        qInfo("int8 vs f16 KV: max |dlogit| %.3g (%.3g of the row's largest), top-1 agreement %d / %zu", max_diff,
              max_rel, agree, prompt.size());
        QVERIFY2(max_diff > 0, "int8 and f16 caches gave identical logits: was the cache quantized?");
        // Measured 0.0083 (max |dlogit| 0.015), 199 / 200 top-1: the bound is ~3.5x that; a
        // wrong scale or block would move logits by their own size.
        QVERIFY2(max_rel < 0.03, qPrintable(QString("relative logit change %1").arg(max_rel)));
        QVERIFY(agree >= int(prompt.size()) * 95 / 100);

        runner->clear();
        for (size_t t = 0; t < prompt.size(); ++t) {
            QVERIFY(runner->eval({prompt[t]}, false, &step).is_ok());
            for (int i = 0; i < n_vocab; ++i)
                if (!(std::fabs(step[size_t(i)] - i8[t * n_vocab + i]) <= 1e-4f))
                    QFAIL(qPrintable(QString("token %1 logit %2: decode %3, prefill %4")
                                         .arg(t)
                                         .arg(i)
                                         .arg(step[size_t(i)])
                                         .arg(i8[t * n_vocab + i])));
        }
    }

    void engineMatchesAlone_data() {
        QTest::addColumn<int>("mode");
        QTest::addColumn<bool>("prefix");
        QTest::newRow("recompute preemption") << int(PreemptionMode::recompute) << false;
        QTest::newRow("swap preemption") << int(PreemptionMode::swap) << false;
        QTest::newRow("shared prefix") << int(PreemptionMode::recompute) << true;
    }
    // Requests that cannot all stay resident in 20 blocks of 8 (preempted and recomputed
    // or swapped out and in), or that share a 32-token prefix from the cache, give on an
    // int8 cache exactly the tokens they give alone on one.
    void engineMatchesAlone() {
        QFETCH(int, mode);
        QFETCH(bool, prefix);
        auto prompts = random_prompts(6, 20, 60, m_model->config.n_vocab, 3);
        if (prefix) {
            const auto shared = random_prompts(1, 32, 32, m_model->config.n_vocab, 4)[0];
            for (auto& p : prompts) p.insert(p.begin(), shared.begin(), shared.end());
        }
        EngineOptions o;
        o.n_threads = 2;
        o.backend = "cpu";
        o.kv_type = DType::Q8_0;
        o.block_size = 8;
        o.kv_blocks = prefix ? 256 : 20;
        o.max_model_len = 512;
        o.prefix_caching = prefix;
        o.scheduler.max_num_batched_tokens = 64;
        o.scheduler.preemption = PreemptionMode(mode);
        o.scheduler.n_host_blocks = 64;
        auto e = Engine::create(m_model, nullptr, o);
        QVERIFY2(e.is_ok(), e.message().c_str());
        std::vector<RequestId> ids;
        for (size_t i = 0; i < prompts.size(); ++i) {
            GenerationRequest r;
            r.prompt = prompts[i];
            r.params = greedy(30);
            ids.push_back(*(*e)->submit(r));
            if (prefix && i == 0) QVERIFY((*e)->step().is_ok());  // the first one fills the prefix cache
        }
        QVERIFY((*e)->run_until_idle().is_ok());
        const auto& counters = (*e)->scheduler().counters();
        if (prefix) QVERIFY((*e)->kv_cache().stats().hit_tokens > 0);
        else
            QVERIFY2(counters.preemptions > 0, "the pool was meant to be too small: no preemption");
        if (PreemptionMode(mode) == PreemptionMode::swap) QVERIFY(counters.swap_outs > 0);
        for (size_t i = 0; i < prompts.size(); ++i)
            QCOMPARE((*e)->output_tokens(ids[i]), run_alone(m_model, prompts[i], 30));
        QCOMPARE((*e)->kv_cache().num_free_blocks(), (*e)->kv_cache().n_blocks());
    }

    // Beams share blocks copy-on-write: on an int8 cache they still find brute force's beams.
    void beamCopyOnWriteMatchesBruteForce() {
        const auto prompt = random_prompts(1, 13, 13, m_model->config.n_vocab, 17)[0];
        EngineOptions o;
        o.n_threads = 2;
        o.backend = "cpu";
        o.kv_type = DType::Q8_0;
        o.block_size = 8;
        o.kv_blocks = 64;
        o.max_model_len = 512;
        auto e = Engine::create(m_model, nullptr, o);
        QVERIFY(e.is_ok());
        GenerationRequest beam;
        beam.prompt = prompt;
        beam.params = greedy(6);
        beam.beam_width = 3;
        auto id = (*e)->submit(beam);
        QVERIFY2(id.is_ok(), id.message().c_str());
        QVERIFY((*e)->run_until_idle().is_ok());
        QVERIFY((*e)->scheduler().counters().cow_copies > 0);
        const auto want = brute_force_beam(m_model, prompt, 3, 6);
        const auto got = (*e)->beam_hypotheses(*id);
        QCOMPARE(int(got.size()), 3);
        for (int i = 0; i < 3; ++i) {
            QCOMPARE(got[size_t(i)].tokens, want[size_t(i)].tokens);
            QVERIFY(std::abs(got[size_t(i)].logprob - want[size_t(i)].logprob) < 1e-4);
        }
    }

    void refusedWithClearErrors() {
        // head_dim 16 is not whole 32-value blocks
        auto be = make_cpu_backend(1);
        Status s = check_kv_type(*be, m_model_hd16->config, DType::Q8_0);
        QVERIFY(!s.is_ok());
        QVERIFY2(contains(s.message(), "head_dim 16") && contains(s.message(), "f16"), s.message().c_str());
        EngineOptions o;
        o.backend = "cpu";
        o.kv_blocks = 16;
        o.kv_type = DType::Q8_0;
        auto e = Engine::create(m_model_hd16, nullptr, o);
        QVERIFY(!e.is_ok());
        QVERIFY2(contains(e.message(), "head_dim 16"), e.message().c_str());
        RunnerOptions ro;
        ro.backend = "cpu";
        ro.n_ctx = 64;
        ro.kv_type = DType::Q8_0;
        auto r = SequenceRunner::create(m_model_hd16, ro);
        QVERIFY(!r.is_ok());
        QVERIFY2(contains(r.message(), "head_dim 16"), r.message().c_str());
        // a backend without int8 KV kernels (CUDA today)
        F16OnlyBackend f16_only;
        s = check_kv_type(f16_only, m_model->config, DType::Q8_0);
        QVERIFY(!s.is_ok());
        QVERIFY2(contains(s.message(), "f16-only") && contains(s.message(), "int8"), s.message().c_str());
        QVERIFY(check_kv_type(f16_only, m_model->config, DType::F16).is_ok());
        // a type that is no KV cache type at all
        s = check_kv_type(*be, m_model->config, DType::Q4_0);
        QVERIFY(!s.is_ok());
        QVERIFY2(contains(s.message(), "Q4_0"), s.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestKvInt8)
#include "tst_kv_int8.moc"
