// ctest-labels: unit model
// LoRA adapters (engine/lora): the unmerged forward (y = W x + s B (A x), grouped per
// adapter) against the logits of the MERGED weights W + s B A that numpy computes
// independently from the adapter files (tests/tools/make_lora_fixture.py), for PEFT and
// GGUF adapters on llama and qwen2 bases in both file formats; several adapters and the
// base in one forward pass and in one engine batch (each request gets the tokens it gets
// alone, prefix caching on); broken adapters refused with a message that says why.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/lora/lora_adapter.h"
#include "engine/model/llama_forward.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/session.h"
#include "kernels/backend.h"
#include "tests/support/greedy_params.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::vector<int32_t> kTokens = {1, 120, 118, 291, 13, 119, 260, 35, 77, 200, 64, 5};

test::TinyModelSpec spec(const std::string& arch) {
    test::TinyModelSpec s;
    s.arch = arch;
    s.n_layer = 2;
    s.seed = arch == "llama" ? 11 : 12;
    return s;
}

struct Fixture {
    std::string dir;                                // adapters + reference.json
    std::shared_ptr<Model> gguf, hf;                // the same weights in both formats
    std::map<std::string, std::vector<float>> ref;  // name -> [T, n_vocab]
};

// Logits of every token of each sequence (one forward pass, sequence i with adapter i).
std::vector<std::vector<float>> forward_all(std::shared_ptr<const Model> m,
                                            const std::vector<const LoraAdapter*>& adapters, QString* error) {
    auto backend = make_cpu_backend(1);
    const int T = static_cast<int>(kTokens.size());
    const int n_seq = static_cast<int>(adapters.size());
    KvTensors kv(*backend, m->config, n_seq, 16);
    auto fw = LlamaForward::create(m, *backend, kv, T * n_seq);
    if (!fw) {
        *error = QString::fromStdString(fw.message());
        return {};
    }
    ForwardBatch b;
    b.n_seqs = n_seq;
    b.max_blocks_per_seq = 1;
    for (int s = 0; s < n_seq; ++s) {
        b.block_tables.push_back(s);
        if (adapters[static_cast<size_t>(s)]) b.adapters.push_back(adapters[static_cast<size_t>(s)]);
    }
    int next = 0;
    for (int s = 0; s < n_seq; ++s) {
        const int idx = adapters[static_cast<size_t>(s)] ? next++ : -1;
        for (int t = 0; t < T; ++t) {
            b.tokens.push_back(kTokens[static_cast<size_t>(t)]);
            b.positions.push_back(t);
            b.token_seq.push_back(s);
            b.token_adapter.push_back(idx);
            b.logit_rows.push_back(s * T + t);
        }
    }
    std::vector<float> logits;
    if (Status st = (*fw)->forward(b, &logits); !st) {
        *error = QString::fromStdString(st.message());
        return {};
    }
    const size_t per = static_cast<size_t>(T) * m->config.n_vocab;
    std::vector<std::vector<float>> out;
    for (int s = 0; s < n_seq; ++s)
        out.emplace_back(logits.begin() + static_cast<ptrdiff_t>(s * per),
                         logits.begin() + static_cast<ptrdiff_t>((s + 1) * per));
    return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
    return m;
}

std::vector<int32_t> prompt_of(int n, int salt) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(3 + (i * 37 + salt * 11) % 250);
    return p;
}

}  // namespace

class TstLora : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void unmerged_matches_merged_reference_data();
    void unmerged_matches_merged_reference();
    void scale_and_rank_as_configured();
    void batch_mixing_three_adapters_and_base();
    void bad_adapters_data();
    void bad_adapters();
    void adapter_for_another_model();
    void session_loads_and_unloads();
    void prefix_cache_salt();
    void default_model_demo_adapter_data();
    void default_model_demo_adapter();

private:
    std::map<std::string, Fixture> m_fx;  // by arch
    QString m_skip;
};

void TstLora::initTestCase() {
    const QString probe = test::run_python({"-c", "import numpy, gguf"}).error;
    if (!probe.isEmpty()) {
        m_skip = "numpy and gguf are needed for the merged reference (installer/setup.sh's venv): " + probe;
        return;
    }
    for (const std::string arch : {"llama", "qwen2"}) {
        Fixture f;
        const std::string hf_dir = test::output_path("lora_tiny_" + arch);
        fs::remove_all(hf_dir);
        QVERIFY(test::write_tiny_safetensors_folder(hf_dir, spec(arch)).is_ok());
        auto g = test::write_and_load_tiny_gguf(test::output_path("lora_tiny_" + arch + ".gguf"), spec(arch));
        QVERIFY2(g.is_ok(), g.message().c_str());
        f.gguf = g.value();
        auto h = load_model(hf_dir);
        QVERIFY2(h.is_ok(), h.message().c_str());
        f.hf = h.value();
        f.dir = test::output_path("lora_fixture_" + arch);
        fs::remove_all(f.dir);
        QString toks;
        for (int32_t t : kTokens) toks += (toks.isEmpty() ? "" : ",") + QString::number(t);
        const auto run = test::run_python({QString::fromStdString(test::tool_path("make_lora_fixture.py")), "--model",
                                           QString::fromStdString(hf_dir), "--out", QString::fromStdString(f.dir),
                                           "--tokens", toks});
        QVERIFY2(run.ok, qPrintable(run.error));
        std::ifstream in(f.dir + "/reference.json");
        const json j = json::parse(in);
        QCOMPARE(j["tokens"].get<std::vector<int32_t>>(), kTokens);
        for (const auto& [name, rows] : j["logits"].items()) {
            std::vector<float> flat;
            for (const auto& row : rows)
                for (double x : row) flat.push_back(static_cast<float>(x));
            f.ref[name] = flat;
        }
        m_fx[arch] = f;
    }
}

void TstLora::unmerged_matches_merged_reference_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<QString>("base");     // gguf | hf
    QTest::addColumn<QString>("adapter");  // a path under the fixture folder
    QTest::addColumn<QString>("ref");      // its reference logits
    for (const char* arch : {"llama", "qwen2"})
        for (const char* base : {"gguf", "hf"}) {
            const QString tag = QString("%1 %2 base, ").arg(arch, base);
            QTest::newRow(qPrintable(tag + "PEFT")) << arch << base << "peft"
                                                    << "peft";
            QTest::newRow(qPrintable(tag + "GGUF adapter")) << arch << base << "adapter.gguf"
                                                            << "peft";
            QTest::newRow(qPrintable(tag + "GGUF adapter, F16")) << arch << base << "adapter_f16.gguf"
                                                                 << "f16";
            QTest::newRow(qPrintable(tag + "PEFT rsLoRA, q/v of layer 1")) << arch << base << "peft_rslora"
                                                                           << "peft_rslora";
        }
}

// The three sequences of one pass: the adapter, the base, the adapter again (grouping).
void TstLora::unmerged_matches_merged_reference() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    QFETCH(QString, arch);
    QFETCH(QString, base);
    QFETCH(QString, adapter);
    QFETCH(QString, ref);
    const Fixture& f = m_fx.at(arch.toStdString());
    auto model = base == "gguf" ? f.gguf : f.hf;
    auto a = load_lora_adapter(f.dir + "/" + adapter.toStdString(), model->config, "a");
    QVERIFY2(a.is_ok(), a.message().c_str());
    QString error;
    const auto got = forward_all(model, {a->get(), nullptr, a->get()}, &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    const auto& want = f.ref.at(ref.toStdString());
    const auto& want_base = f.ref.at("base");
    QCOMPARE(got[0].size(), want.size());
    // The KV cache holds fp16: the bound covers its rounding; the adapter moves the
    // logits far more than that (else the comparison would prove nothing).
    double scale = 1;
    for (float x : want) scale = std::max(scale, double(std::abs(x)));
    const double tol = 2e-3 * scale;
    const double effect = max_abs_diff(want, want_base);
    const double err0 = max_abs_diff(got[0], want), err1 = max_abs_diff(got[1], want_base),
                 err2 = max_abs_diff(got[2], want);
    qInfo("max |logit| %.3f, adapter effect %.4f, error adapter %.2e / base %.2e / adapter again %.2e", scale, effect,
          err0, err1, err2);
    QVERIFY2(effect > 20 * tol, "the adapter hardly changes the logits: the test could not fail");
    QVERIFY(err0 <= tol);
    QVERIFY(err1 <= tol);
    QCOMPARE(got[2], got[0]);  // the same bits in either place of the batch
}

void TstLora::scale_and_rank_as_configured() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    const Fixture& f = m_fx.at("llama");
    auto p = load_lora_adapter(f.dir + "/peft", f.gguf->config, "p", 0.5f);
    QVERIFY2(p.is_ok(), p.message().c_str());
    QCOMPARE((*p)->rank, 4);
    QCOMPARE((*p)->scale, 8.0f / 4 * 0.5f);  // alpha / r x user scale
    QCOMPARE(int((*p)->targets.size()), 7);
    auto r = load_lora_adapter(f.dir + "/peft_rslora", f.gguf->config, "r");
    QVERIFY2(r.is_ok(), r.message().c_str());
    QCOMPARE((*r)->rank, 8);
    QVERIFY(std::abs((*r)->scale - 4.0f / std::sqrt(8.0f)) < 1e-6f);  // alpha / sqrt(r)
    QCOMPARE((*r)->targets, (std::vector<std::string>{"q_proj", "v_proj"}));
    QVERIFY(!(*r)->pair(0, LoraTarget::q).present());  // layers_to_transform [1]
    QVERIFY((*r)->pair(1, LoraTarget::v).present());
    auto g = load_lora_adapter(f.dir + "/adapter.gguf", f.gguf->config, "g");
    QVERIFY2(g.is_ok(), g.message().c_str());
    QCOMPARE((*g)->scale, 8.0f / 4);
    // The same weights and scale give the same prefix-cache key, another scale another.
    QCOMPARE((*g)->cache_salt, load_lora_adapter(f.dir + "/peft", f.gguf->config, "p1").value()->cache_salt);
    QVERIFY((*g)->cache_salt != (*p)->cache_salt);
}

// Three adapters and the base in the same batches (prefix caching on, the same long
// prompt for all: an adapter's cached blocks must never serve another) give each request
// the greedy tokens it gets alone.
void TstLora::batch_mixing_three_adapters_and_base() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    const Fixture& f = m_fx.at("llama");
    std::vector<std::shared_ptr<const LoraAdapter>> ads = {nullptr};
    for (auto [path, s] :
         std::vector<std::pair<std::string, float>>{{"/peft", 1.0f}, {"/peft_rslora", 1.0f}, {"/adapter.gguf", 0.5f}}) {
        auto a = load_lora_adapter(f.dir + path, f.gguf->config, path.substr(1), s);
        QVERIFY2(a.is_ok(), a.message().c_str());
        ads.push_back(a.value());
    }
    EngineOptions opt;
    opt.kv_blocks = 64;
    opt.block_size = 16;
    opt.backend = "cpu";
    opt.n_threads = 1;
    opt.scheduler.max_num_batched_tokens = 64;
    const auto prompt = prompt_of(40, 1);
    const int n = 12;
    auto alone = [&](const std::shared_ptr<const LoraAdapter>& a) {
        auto e = Engine::create(f.gguf, nullptr, opt);
        if (!e) qFatal("%s", e.message().c_str());
        GenerationRequest g;
        g.prompt = prompt;
        g.params = test::greedy(n);
        g.adapter = a;
        auto id = (*e)->submit(g);
        if (!id || !(*e)->run_until_idle()) qFatal("alone run failed");
        return (*e)->output_tokens(*id);
    };
    std::vector<std::vector<int32_t>> want;
    for (const auto& a : ads) want.push_back(alone(a));
    for (size_t i = 1; i < want.size(); ++i) QVERIFY2(want[i] != want[0], "an adapter does not change greedy tokens");

    auto e = Engine::create(f.gguf, nullptr, opt);
    QVERIFY2(e.is_ok(), e.message().c_str());
    // The first request fills the prefix cache with its adapter's KV, then all four share batches.
    GenerationRequest first;
    first.prompt = prompt;
    first.params = test::greedy(n);
    first.adapter = ads[1];
    auto id0 = (*e)->submit(first);
    QVERIFY(id0.is_ok());
    QVERIFY((*e)->run_until_idle().is_ok());
    QCOMPARE((*e)->output_tokens(*id0), want[1]);
    std::vector<RequestId> ids;
    for (const auto& a : ads) {
        GenerationRequest g;
        g.prompt = prompt;
        g.params = test::greedy(n);
        g.adapter = a;
        auto id = (*e)->submit(g);
        QVERIFY2(id.is_ok(), id.message().c_str());
        ids.push_back(*id);
    }
    int max_seqs = 0;
    while ((*e)->has_work()) {
        auto st = (*e)->step();
        QVERIFY2(st.is_ok(), st.message().c_str());
        max_seqs = std::max(max_seqs, static_cast<int>(st->out.chunks.size()));
    }
    QCOMPARE(max_seqs, 4);  // all four really ran in the same steps
    // The snapshot names each request's adapter (what the views colour by).
    std::map<RequestId, std::string> named;
    for (const RequestView& v : (*e)->snapshot(StepRecord{}).requests) named[v.id] = v.adapter;
    for (size_t i = 0; i < ads.size(); ++i) QCOMPARE(named[ids[i]], ads[i] ? ads[i]->name : std::string());
    for (size_t i = 0; i < ads.size(); ++i) QCOMPARE((*e)->output_tokens(ids[i]), want[i]);
    // Only the request with the first one's adapter found its blocks cached.
    QCOMPARE((*e)->kv_cache().stats().hit_tokens, int64_t{32});
}

void TstLora::bad_adapters_data() {
    QTest::addColumn<QString>("path");   // under the llama fixture folder ("!trunc:" truncates a copy)
    QTest::addColumn<QString>("error");  // a piece of the expected message
    QTest::newRow("rank mismatch") << "bad_rank"
                                   << "its rank differs from r = 8";
    QTest::newRow("missing tensor") << "bad_missing"
                                    << "missing tensor base_model.model.model.layers.1.mlp.down_proj.lora_B";
    QTest::newRow("another architecture's modules") << "bad_target"
                                                    << "target module 'c_attn' is not a projection";
    QTest::newRow("GGUF for another architecture") << "bad_arch.gguf"
                                                   << "the adapter is for a gpt2 model";
    QTest::newRow("truncated safetensors") << "!trunc:peft/adapter_model.safetensors"
                                           << "adapter_model.safetensors";
    QTest::newRow("truncated GGUF") << "!trunc:adapter.gguf"
                                    << "adapter.gguf";
    QTest::newRow("no such path") << "nope"
                                  << "no such file or folder";
    QTest::newRow("a model, not an adapter") << "!model"
                                             << "not a LoRA adapter";
}

void TstLora::bad_adapters() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    QFETCH(QString, path);
    QFETCH(QString, error);
    const Fixture& f = m_fx.at("llama");
    std::string p = f.dir + "/" + path.toStdString();
    if (path.startsWith("!trunc:")) {
        const std::string src = f.dir + "/" + path.mid(7).toStdString();
        const std::string dst_dir = test::output_path("lora_trunc");
        fs::remove_all(dst_dir);
        fs::create_directories(dst_dir);
        const bool peft = path.contains("peft/");
        if (peft) fs::copy_file(f.dir + "/peft/adapter_config.json", dst_dir + "/adapter_config.json");
        const std::string dst = dst_dir + "/" + fs::path(src).filename().string();
        fs::copy_file(src, dst);
        fs::resize_file(dst, fs::file_size(dst) * 2 / 3);
        p = peft ? dst_dir : dst;
    } else if (path == "!model") {
        p = test::output_path("lora_tiny_llama.gguf");
    }
    auto a = load_lora_adapter(p, f.gguf->config, "bad");
    QVERIFY(!a.is_ok());
    qInfo("%s", a.message().c_str());
    QVERIFY2(QString::fromStdString(a.message()).contains(error), a.message().c_str());
}

// An adapter loaded for one model is refused by an engine of another shape, at submit.
void TstLora::adapter_for_another_model() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    const Fixture& f = m_fx.at("llama");
    auto a = load_lora_adapter(f.dir + "/peft", f.gguf->config, "a");
    QVERIFY(a.is_ok());
    // Loading it against a model of another width fails on the shapes.
    test::TinyModelSpec wide = spec("llama");
    wide.n_embd = 96;
    wide.n_head = 6;
    wide.n_kv_head = 3;
    auto other = test::write_and_load_tiny_gguf(test::output_path("lora_tiny_wide.gguf"), wide);
    QVERIFY(other.is_ok());
    auto b = load_lora_adapter(f.dir + "/peft", (*other)->config, "b");
    QVERIFY(!b.is_ok());
    QVERIFY2(QString::fromStdString(b.message()).contains("another base model"), b.message().c_str());
    EngineOptions opt;
    opt.kv_blocks = 16;
    opt.backend = "cpu";
    opt.n_threads = 1;
    auto e = Engine::create(*other, nullptr, opt);
    QVERIFY(e.is_ok());
    GenerationRequest g;
    g.prompt = {1, 2, 3};
    g.params = test::greedy(2);
    g.adapter = *a;
    auto id = (*e)->submit(g);
    QVERIFY(!id.is_ok());
    QVERIFY2(QString::fromStdString(id.message()).contains("was loaded for a llama model of 2 layers, width 64"),
             id.message().c_str());
    QVERIFY(!(*e)->has_work());
}

// The Session serves adapters by name: a bad load changes nothing, a taken name is
// refused, a request holds its adapter past an unload.
void TstLora::session_loads_and_unloads() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    const Fixture& f = m_fx.at("llama");
    auto s = Session::from_model(f.gguf);
    QVERIFY2(s.is_ok(), s.message().c_str());
    Session& session = **s;
    QVERIFY(session.adapters().empty());
    auto info = session.load_adapter("style", f.dir + "/peft", 0.5f);
    QVERIFY2(info.is_ok(), info.message().c_str());
    QCOMPARE(info->rank, 4);
    QCOMPARE(info->scale, 1.0f);
    QCOMPARE(info->format, std::string("peft"));
    for (const auto& [name, path] :
         std::vector<std::pair<std::string, std::string>>{{"style", f.dir + "/peft_rslora"},  // name taken
                                                          {"broken", f.dir + "/bad_rank"},    // bad adapter
                                                          {"bad name!", f.dir + "/peft"}}) {  // bad name
        auto bad = session.load_adapter(name, path);
        QVERIFY(!bad.is_ok());
        qInfo("%s", bad.message().c_str());
        QCOMPARE(int(session.adapters().size()), 1);
        QCOMPARE(session.adapters()[0].path, f.dir + "/peft");
    }
    QVERIFY(session.load_adapter("gguf", f.dir + "/adapter.gguf").is_ok());
    QCOMPARE(int(session.adapters().size()), 2);
    auto none = session.adapter("");
    QVERIFY(none.is_ok() && !none.value());
    auto unknown = session.adapter("nope");
    QVERIFY(!unknown.is_ok());
    QVERIFY2(QString::fromStdString(unknown.message()).contains("loaded: gguf, style"), unknown.message().c_str());

    EngineOptions opt;
    opt.kv_blocks = 32;
    opt.backend = "cpu";
    opt.n_threads = 1;
    auto e = session.make_engine(opt, false);
    QVERIFY(e.is_ok());
    GenerationRequest g;
    g.prompt = prompt_of(20, 3);
    g.params = test::greedy(6);
    g.adapter = session.adapter("style").value();
    auto with = (*e)->submit(g);
    QVERIFY(with.is_ok());
    QVERIFY(session.unload_adapter("style"));
    QVERIFY(!session.unload_adapter("style"));
    QVERIFY((*e)->run_until_idle().is_ok());  // the request kept its adapter
    // The same adapter loaded afresh gives the same tokens.
    QVERIFY(session.load_adapter("style", f.dir + "/peft", 0.5f).is_ok());
    g.adapter = session.adapter("style").value();
    auto again = (*e)->submit(g);
    QVERIFY(again.is_ok());
    QVERIFY((*e)->run_until_idle().is_ok());
    QCOMPARE((*e)->output_tokens(*again), (*e)->output_tokens(*with));
    g.adapter = nullptr;
    auto base = (*e)->submit(g);
    QVERIFY((*e)->run_until_idle().is_ok());
    QVERIFY((*e)->output_tokens(*base) != (*e)->output_tokens(*with));
}

// The demo adapter (tests/data/lora_pirate, trained by tests/tools/train_lora.py) on the
// default model: KV Scope's unmerged forward on the Q4_1 model against numpy's float64
// forward of the dequantized weights with the adapter merged, at the last prompt position of
// two held-out chats. The quantized path rounds activations (Q8_1), so the adapter's effect
// (adapted - base logits) is compared, and the top token with and without it.
void TstLora::default_model_demo_adapter_data() {
    QTest::addColumn<QString>("format");
    QTest::newRow("PEFT") << "peft";
    QTest::newRow("GGUF (converted here)") << "gguf";
}

void TstLora::default_model_demo_adapter() {
    QFETCH(QString, format);
    const std::string model_path = test::default_model_path();
    if (model_path.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
    const std::string dir = test::source_root() + "/tests/data/lora_pirate";
    std::ifstream in(dir + "/reference.json");
    QVERIFY2(in, "tests/data/lora_pirate/reference.json is missing");
    const json ref = json::parse(in);
    auto s = Session::open(model_path);
    QVERIFY2(s.is_ok(), s.message().c_str());
    std::string path = dir;
    if (format == "gguf") {
        if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
        path = test::output_path("lora_pirate.gguf");
        const auto run = test::run_python({QString::fromStdString(test::tool_path("make_lora_fixture.py")),
                                           "--peft-to-gguf", QString::fromStdString(dir), "--out",
                                           QString::fromStdString(path), "--arch", "llama", "--heads", "9,3"});
        QVERIFY2(run.ok, qPrintable(run.error));
    }
    auto info = (*s)->load_adapter("pirate", path);
    QVERIFY2(info.is_ok(), info.message().c_str());
    QCOMPARE(info->format, format.toStdString());
    const LoraAdapter* a = (*s)->adapter("pirate").value().get();
    auto backend = make_cpu_backend(2);
    KvTensors kv(*backend, (*s)->model().config, 8, 16);
    auto fw = LlamaForward::create((*s)->model_ptr(), *backend, kv, 128);
    QVERIFY2(fw.is_ok(), fw.message().c_str());
    for (const auto& c : ref["cases"]) {
        const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
        QVERIFY(ids.size() <= 128);
        std::vector<float> rows[2];  // base, adapted: [n_vocab] at the last position
        for (int with = 0; with < 2; ++with) {
            ForwardBatch b;
            b.tokens = ids;
            for (size_t t = 0; t < ids.size(); ++t) b.positions.push_back(int32_t(t)), b.token_seq.push_back(0);
            b.n_seqs = 1;
            b.max_blocks_per_seq = 8;
            b.block_tables = {0, 1, 2, 3, 4, 5, 6, 7};
            b.logit_rows = {int32_t(ids.size()) - 1};
            if (with) b.adapters = {a}, b.token_adapter.assign(ids.size(), 0);
            QVERIFY((*fw)->forward(b, &rows[with]).is_ok());
        }
        const auto top = c["top_ids"].get<std::vector<int32_t>>();
        const auto base = c["base"].get<std::vector<double>>(), merged = c["merged"].get<std::vector<double>>();
        double effect = 0, err = 0;
        for (size_t i = 0; i < top.size(); ++i) {
            const double want = merged[i] - base[i];
            const double got = double(rows[1][size_t(top[i])]) - double(rows[0][size_t(top[i])]);
            effect = std::max(effect, std::abs(want));
            err = std::max(err, std::abs(got - want));
        }
        const auto argmax = [](const std::vector<float>& v) {
            return int(std::max_element(v.begin(), v.end()) - v.begin());
        };
        qInfo("%s: adapter effect up to %.3f logits, |ours - numpy| up to %.3f; top token %d -> %d (numpy %d -> %d)",
              c["question"].get<std::string>().c_str(), effect, err, argmax(rows[0]), argmax(rows[1]),
              c["base_argmax"].get<int>(), c["merged_argmax"].get<int>());
        QVERIFY2(effect > 2.0, "the demo adapter hardly changes the logits");
        QVERIFY(err < 0.03 * effect);  // measured: 0.39 and 0.21 of 27.8 and 26.8
        QCOMPARE(argmax(rows[0]), c["base_argmax"].get<int>());
        QCOMPARE(argmax(rows[1]), c["merged_argmax"].get<int>());
        QCOMPARE(argmax(rows[1]), ref["greeting_ids"][0].get<int>());  // the answer opens with the greeting
    }
}

// The adapter's salt keys the prefix cache: the same tokens under another salt (or none)
// never hit; under the same salt they do, also after a preemption freed the blocks and for
// a fork.
void TstLora::prefix_cache_salt() {
    KVCacheManager kv(32, 4, true);
    std::vector<int32_t> tokens(13);
    for (int i = 0; i < 13; ++i) tokens[size_t(i)] = 100 + i;
    auto run = [&](RequestId id, uint64_t salt) {
        kv.set_cache_salt(id, salt);
        auto hit = kv.get_computed_blocks(id, tokens);
        if (!hit) qFatal("%s", hit.message().c_str());
        auto a = kv.allocate_slots(id, tokens, 13 - *hit);
        if (!a || a->no_room) qFatal("allocate_slots failed");
        return *hit;
    };
    QCOMPARE(run(1, 0xA), 0);
    QCOMPARE(run(2, 0xB), 0);        // another adapter
    QVERIFY(kv.fork(1, 5).is_ok());  // a beam of request 1 keeps 1's salt: after a preemption
    kv.free(5);                      // it finds 1's blocks again (unsalted, nothing is cached yet)
    auto forked = kv.get_computed_blocks(5, tokens);
    QVERIFY(forked.is_ok());
    QCOMPARE(*forked, 12);
    kv.free(5);
    kv.forget_salt(5);
    QCOMPARE(run(3, 0), 0);     // the base model
    QCOMPARE(run(4, 0xA), 12);  // the same adapter: 3 full blocks
    kv.free(4);                 // preempted (recompute): the salt stays
    auto again = kv.get_computed_blocks(4, tokens);
    QVERIFY(again.is_ok());
    QCOMPARE(*again, 12);
    QVERIFY(kv.allocate_slots(4, tokens, 1).is_ok());
    QCOMPARE(run(6, 0), 12);  // the base request's blocks are there for the base
}

QTEST_GUILESS_MAIN(TstLora)
#include "tst_lora.moc"
