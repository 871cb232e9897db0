// ctest-labels: unit engine
// Errors the engine reports instead of crashing: a KV cache larger than the machine (the
// single-sequence runner and the batching engine share one check and one message), a
// backend that refuses memory at any allocation of the forward pass or of the KV cache
// (the error names what and how many bytes), and strings from a damaged GGUF file whose
// NUL or control bytes are escaped in the message rather than cutting it short.
#include "engine/core/quote.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/gguf_reader.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/llama_forward.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"

#include <QTemporaryDir>
#include <QtTest>

#include <climits>
#include <cstring>

#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

// A CPU backend whose allocations fail from the fail_from-th on (0-based; -1: never), like a
// GPU that runs out of memory. host_visible = false makes the forward pass copy its weights
// to the "device" (plain host memory here), so those allocations are exercised too.
class FailingBackend : public Backend {
public:
    FailingBackend(int fail_from, bool host_visible)
        : m_inner(make_cpu_backend(1, "scalar")), m_fail_from(fail_from), m_host_visible(host_visible) {}
    int n_allocs() const { return m_n; }

    std::string name() const override { return "failing-test-backend"; }
    bool host_visible() const override { return m_host_visible; }
    void* alloc(size_t bytes) override {
        const int i = m_n++;
        if (m_fail_from >= 0 && i >= m_fail_from) return nullptr;
        return m_inner->alloc(bytes);
    }
    void release(void* p) override { m_inner->release(p); }
    void copy_to_device(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
    void copy_to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
    bool supports(DType t) const override { return m_inner->supports(t); }
    void matmul(const WeightView& w, const float* x, float* y, int n) override { m_inner->matmul(w, x, y, n); }
    void embedding(const WeightView& t, const int32_t* ids, int n, float* out) override {
        m_inner->embedding(t, ids, n, out);
    }
    void rms_norm(const float* x, const float* w, float* y, int rows, int n, float eps) override {
        m_inner->rms_norm(x, w, y, rows, n, eps);
    }
    void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, int n_rot, float base,
              RopeStyle style) override {
        m_inner->rope(x, pos, n_tokens, n_head, head_dim, n_rot, base, style);
    }
    void softmax(float* x, int rows, int cols) override { m_inner->softmax(x, rows, cols); }
    void swiglu(const float* g, const float* u, float* y, int64_t n) override { m_inner->swiglu(g, u, y, n); }
    void add(const float* a, const float* b, float* y, int64_t n) override { m_inner->add(a, b, y, n); }
    void add_bias(const float* x, const float* b, float* y, int rows, int n) override {
        m_inner->add_bias(x, b, y, rows, n);
    }
    bool supports_kv(DType t) const override { return m_inner->supports_kv(t); }
    void kv_store(const KvStoreArgs& a) override { m_inner->kv_store(a); }
    void paged_attention(const PagedAttentionArgs& a) override { m_inner->paged_attention(a); }

private:
    std::unique_ptr<Backend> m_inner;
    int m_fail_from;
    bool m_host_visible;
    int m_n = 0;
};

ForwardBatch eight_tokens() {
    ForwardBatch b;
    b.tokens = {1, 120, 118, 291, 13, 119, 260, 35};
    for (int i = 0; i < 8; ++i) {
        b.positions.push_back(i);
        b.token_seq.push_back(0);
    }
    b.block_tables = {0};
    b.n_seqs = 1;
    b.max_blocks_per_seq = 1;
    b.logit_rows = {7};
    return b;
}

bool has_nul(const std::string& s) { return std::strlen(s.c_str()) != s.size(); }

}  // namespace

class TestEngineErrors : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_model;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        const std::string path = m_dir.filePath("tiny.gguf").toStdString();
        QVERIFY(test::write_tiny_gguf(path, test::TinyModelSpec{}).is_ok());
        auto m = load_model(path);
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = *m;
    }

    // `kvscope generate --ctx 70000000` used to die in kv_store on a null KV tensor.
    void runnerWithHugeContextFails() {
        const double need = double(kv_cache_bytes_per_token(m_model->config, DType::F16)) * (INT_MAX - 64);
        if (need < double(physical_ram_bytes()) * 0.9) QSKIP("this machine has RAM for 2^31 tokens of the tiny model");
        RunnerOptions ro;
        ro.n_ctx = INT_MAX - 64;
        ro.backend = "cpu";
        ro.n_threads = 1;
        auto r = SequenceRunner::create(m_model, ro);
        QVERIFY(!r.is_ok());
        const QString msg = QString::fromStdString(r.message());
        QVERIFY2(msg.contains("the KV cache for 2147483584 tokens") && msg.contains("GiB") &&
                     msg.contains("more than 90% of this machine's") && msg.contains("RAM"),
                 r.message().c_str());

        // The batching engine says it the same way.
        EngineOptions eo;
        eo.backend = "cpu";
        eo.n_threads = 1;
        eo.kv_blocks = INT_MAX / 16;
        auto e = Engine::create(m_model, nullptr, eo);
        QVERIFY(!e.is_ok());
        QVERIFY2(QString::fromStdString(e.message()).contains("the KV cache for"), e.message().c_str());
    }

    void kvTensorsReportFailedAllocation() {
        FailingBackend be(3, true);
        auto kv = KvTensors::create(be, m_model->config, 4, 16);
        QVERIFY(!kv.is_ok());
        const QString msg = QString::fromStdString(kv.message());
        QVERIFY2(msg.contains("out of memory") && msg.contains("failing-test-backend") &&
                     msg.contains(QString::number(kv_cache_bytes_per_token(m_model->config, DType::F16) * 64)) &&
                     msg.contains("bytes"),
                 kv.message().c_str());
        FailingBackend ok(-1, true);
        QVERIFY(KvTensors::create(ok, m_model->config, 4, 16).is_ok());
        QVERIFY(!KvTensors::create(ok, m_model->config, 0, 16).is_ok());
    }

    // Every allocation LlamaForward::create makes, made to fail in turn: an error naming the
    // bytes each time, never a crash; with none failing it runs.
    void forwardCreateChecksEveryAllocation_data() {
        QTest::addColumn<bool>("host_visible");
        QTest::newRow("host visible (fused weights)") << true;
        QTest::newRow("device (weight copies)") << false;
    }
    void forwardCreateChecksEveryAllocation() {
        QFETCH(bool, host_visible);
        FailingBackend counter(-1, host_visible);
        auto kv = KvTensors::create(counter, m_model->config, 1, 16);
        QVERIFY(kv.is_ok());
        const int kv_allocs = counter.n_allocs();
        int n_allocs = 0;
        {
            auto f = LlamaForward::create(m_model, counter, **kv, 8);
            QVERIFY2(f.is_ok(), f.message().c_str());
            n_allocs = counter.n_allocs() - kv_allocs;
            std::vector<float> logits;
            QVERIFY((*f)->forward(eight_tokens(), &logits).is_ok());
            QCOMPARE(logits.size(), size_t(m_model->config.n_vocab));
        }
        QVERIFY(n_allocs > 10);
        for (int k = 0; k < n_allocs; ++k) {
            FailingBackend be(k, host_visible);
            auto f = LlamaForward::create(m_model, be, **kv, 8);
            QVERIFY2(!f.is_ok(), qPrintable(QString("allocation %1 failed unnoticed").arg(k)));
            const QString msg = QString::fromStdString(f.message());
            QVERIFY2(msg.contains("out of memory") && msg.contains("could not allocate") && msg.contains(" bytes") &&
                         msg.contains(" for "),
                     f.message().c_str());
        }
        FailingBackend enough(n_allocs, host_visible);
        QVERIFY(LlamaForward::create(m_model, enough, **kv, 8).is_ok());
    }

    // A runner on a shared backend that refuses the KV cache, or the forward pass after it.
    void runnerReportsBackendOutOfMemory() {
        RunnerOptions ro;
        ro.n_ctx = 64;
        auto r = SequenceRunner::create(m_model, ro, std::make_shared<FailingBackend>(0, false));
        QVERIFY(!r.is_ok());
        QVERIFY2(QString::fromStdString(r.message()).contains("KV cache"), r.message().c_str());
        r = SequenceRunner::create(m_model, ro, std::make_shared<FailingBackend>(2 * m_model->config.n_layer, false));
        QVERIFY(!r.is_ok());
        QVERIFY2(QString::fromStdString(r.message()).contains("could not allocate"), r.message().c_str());
        r = SequenceRunner::create(m_model, ro, std::make_shared<FailingBackend>(-1, false));
        QVERIFY2(r.is_ok(), r.message().c_str());
        std::vector<float> logits;
        QVERIFY((*r)->eval({1, 2, 3}, false, &logits).is_ok());
    }

    // A weight with an input permutation (GPTQ act-order) on a backend whose matmul does not
    // gather its input: refused by name before anything runs, never silently wrong.
    void permutedWeightsRefusedWhereNotRun() {
        auto m = std::make_shared<Model>(*m_model);
        std::vector<int32_t> perm(static_cast<size_t>(m->layers[1].w_down.n_in));
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = int32_t(perm.size() - 1 - i);
        m->layers[1].w_down.in_perm = perm.data();
        RunnerOptions ro;
        ro.n_ctx = 64;
        auto r = SequenceRunner::create(m, ro, std::make_shared<FailingBackend>(-1, true));
        QVERIFY(!r.is_ok());
        const QString msg = QString::fromStdString(r.message());
        QVERIFY2(msg.contains("failing-test-backend") && msg.contains("blk.1.ffn_down") && msg.contains("permuted") &&
                     msg.contains("CPU backend"),
                 r.message().c_str());
        ro.backend = "cpu";
        ro.n_threads = 1;
        auto cpu = SequenceRunner::create(m, ro);  // the CPU backend runs it
        QVERIFY2(cpu.is_ok(), cpu.message().c_str());
        std::vector<float> logits;
        QVERIFY((*cpu)->eval({1, 2, 3}, false, &logits).is_ok());
    }

    void quoteEscapesUnprintableBytes() {
        QCOMPARE(quote_untrusted(std::string("a\0b", 3)), std::string("'a\\x00b'"));
        QCOMPARE(quote_untrusted("tab\there"), std::string("'tab\\x09here'"));
        QCOMPARE(quote_untrusted("it's \\"), std::string("'it\\'s \\\\'"));
        QCOMPARE(quote_untrusted("\xff"), std::string("'\\xff'"));
        QCOMPARE(quote_untrusted(std::string(300, 'x'), 4), std::string("'xxxx'... (300 bytes)"));
    }

    // A damaged string in a GGUF file: the message shows every byte, escaped, and goes on
    // past the NUL.
    void ggufStringWithNulIsEscaped() {
        const std::string path = m_dir.filePath("nul_arch.gguf").toStdString();
        GgufWriter w;
        w.set_string("general.architecture", std::string("lla\0ma\x01", 7));
        QVERIFY(w.write(path).is_ok());
        auto m = load_model(path);
        QVERIFY(!m.is_ok());
        QVERIFY2(!has_nul(m.message()), "the message holds a NUL byte");
        QVERIFY2(QString::fromStdString(m.message()).contains("'lla\\x00ma\\x01'"), m.message().c_str());
        QVERIFY2(QString::fromStdString(m.message()).contains("supported: llama, qwen2"), m.message().c_str());

        const std::string path2 = m_dir.filePath("nul_tensor.gguf").toStdString();
        GgufWriter w2;
        const float x[4] = {1, 2, 3, 4};
        const std::string name("blk\0.weight", 11);
        w2.add_tensor(name, DType::F32, {4}, x, sizeof x);
        w2.add_tensor(name, DType::F32, {4}, x, sizeof x);
        QVERIFY(w2.write(path2).is_ok());
        auto f = GgufFile::open(path2);
        QVERIFY(!f.is_ok());
        QVERIFY2(!has_nul(f.message()), "the message holds a NUL byte");
        QVERIFY2(QString::fromStdString(f.message()).contains("duplicate tensor name 'blk\\x00.weight'"),
                 f.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestEngineErrors)
#include "tst_engine_errors.moc"
