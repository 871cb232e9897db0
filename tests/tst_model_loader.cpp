// ctest-labels: unit
// load_model(): tiny generated models in GGUF and safetensors form load with the right
// config and shapes; the same weights in both formats dequantize identically (up to
// the Q/K row permutation GGUF llama files carry); bad files give clear errors; the
// default model loads with the numbers gguf-py reports for it.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "engine/model/gguf_reader.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/llama_forward.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
namespace fs = std::filesystem;

Q_DECLARE_METATYPE(kvs::DType)

namespace {

std::vector<float> dequant(const WeightView& w) {
    std::vector<float> out(static_cast<size_t>(w.n_in * w.n_out));  // [n_out, n_in]
    const size_t rb = row_bytes(w.dtype, w.n_in);
    for (int64_t r = 0; r < w.n_out; ++r)
        cpu::dequantize_row(w.dtype, static_cast<const uint8_t*>(w.data) + r * rb, &out[r * w.n_in], w.n_in);
    return out;
}

// convert_hf_to_gguf.py LlamaModel.permute: reshape(n_head, 2, hd/2, n_in).swapaxes(1, 2).
std::vector<float> hf_to_gguf_rows(const std::vector<float>& hf, int64_t n_in, int64_t n_out, int n_heads) {
    std::vector<float> out(hf.size());
    const int64_t hd = n_out / n_heads;
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t half = 0; half < 2; ++half)
            for (int64_t i = 0; i < hd / 2; ++i)
                for (int64_t c = 0; c < n_in; ++c)
                    out[((h * hd) + 2 * i + half) * n_in + c] = hf[((h * hd) + half * (hd / 2) + i) * n_in + c];
    return out;
}

bool same(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0; }

// Largest |a - b| relative to the largest |b|.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, double(std::fabs(a[i] - b[i])));
        scale = std::max(scale, double(std::fabs(b[i])));
    }
    return diff / scale;
}

// Copies a GGUF file through GgufFile + GgufWriter, letting `edit` change metadata and
// tensors on the way (used to make broken files).
struct GgufCopy {
    std::vector<std::pair<std::string, GgufValue>> kv;
    struct T {
        std::string name;
        DType type;
        std::vector<int64_t> ne;
        const void* data;
        size_t n_bytes;
    };
    std::vector<T> tensors;
};
void rewrite_gguf(const std::string& src, const std::string& dst, const std::function<void(GgufCopy&)>& edit) {
    auto f = GgufFile::open(src);
    QVERIFY2(f.is_ok(), f.message().c_str());
    GgufCopy c;
    c.kv = f.value()->metadata();
    for (const auto& t : f.value()->tensors()) c.tensors.push_back({t.name, t.type, t.ne, t.data, t.n_bytes});
    edit(c);
    GgufWriter w;
    for (auto& [k, v] : c.kv) w.set(k, v);
    for (auto& t : c.tensors) w.add_tensor_view(t.name, t.type, t.ne, t.data, t.n_bytes);
    const Status s = w.write(dst);
    QVERIFY2(s.is_ok(), s.message().c_str());
}

void set_json_field(const std::string& path, const std::string& key, const nlohmann::json& value) {
    std::ifstream in(path);
    auto j = nlohmann::json::parse(in);
    in.close();
    j[key] = value;
    std::ofstream(path) << j.dump(2);
}

}  // namespace

class TstModelLoader : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void rope_scaling_is_reported();
    void tiny_gguf_loads_data();
    void tiny_gguf_loads();
    void quantized_close_to_f32_data();
    void quantized_close_to_f32();
    void gguf_and_safetensors_agree_data();
    void gguf_and_safetensors_agree();
    void formats_give_same_logits_data();
    void formats_give_same_logits();
    void tiny_vocab_matches_hf_tokenizers_data();
    void tiny_vocab_matches_hf_tokenizers();
    void errors_data();
    void errors();
    void default_model();
};

void TstModelLoader::tiny_gguf_loads_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<kvs::DType>("type");
    QTest::addColumn<bool>("tied");
    QTest::addColumn<int>("n_embd");
    QTest::addColumn<uint32_t>("version");
    QTest::addColumn<uint32_t>("alignment");
    QTest::newRow("llama F32 tied") << "llama" << DType::F32 << true << 64 << 3u << 32u;
    QTest::newRow("llama Q8_0 untied") << "llama" << DType::Q8_0 << false << 64 << 3u << 32u;
    QTest::newRow("llama Q4_1 v2 align 64") << "llama" << DType::Q4_1 << true << 64 << 2u << 64u;
    QTest::newRow("qwen2 Q5_0 untied") << "qwen2" << DType::Q5_0 << false << 64 << 3u << 32u;
    QTest::newRow("llama Q4_K n_embd 256") << "llama" << DType::Q4_K << true << 256 << 3u << 32u;
    QTest::newRow("qwen2 Q6_K n_embd 256") << "qwen2" << DType::Q6_K << true << 256 << 3u << 16u;
}

void TstModelLoader::tiny_gguf_loads() {
    QFETCH(QString, arch);
    QFETCH(kvs::DType, type);
    QFETCH(bool, tied);
    QFETCH(int, n_embd);
    QFETCH(uint32_t, version);
    QFETCH(uint32_t, alignment);
    test::TinyModelSpec spec;
    spec.arch = arch.toStdString();
    spec.weight_type = type;
    spec.tied = tied;
    spec.n_embd = n_embd;
    spec.n_ff = 2 * n_embd;
    spec.gguf_version = version;
    spec.gguf_alignment = alignment;
    const std::string path = test::output_path("tiny_loads.gguf");
    const Status s = test::write_tiny_gguf(path, spec);
    QVERIFY2(s.is_ok(), s.message().c_str());
    auto r = load_model(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    const Model& m = *r.value();
    const ModelConfig& c = m.config;
    const int n_vocab = int(test::make_tiny_vocab(spec.n_merges).tokens.size());
    QCOMPARE(c.arch, spec.arch);
    QCOMPARE(m.format, std::string("gguf"));
    QCOMPARE(c.n_layer, 2);
    QCOMPARE(c.n_embd, n_embd);
    QCOMPARE(c.n_head, 4);
    QCOMPARE(c.n_kv_head, 2);
    QCOMPARE(c.head_dim, n_embd / 4);
    QCOMPARE(c.n_rot, n_embd / 4);
    QCOMPARE(c.n_ff, 2 * n_embd);
    QCOMPARE(c.n_vocab, n_vocab);
    QCOMPARE(c.n_ctx_train, spec.n_ctx_train);
    QCOMPARE(c.rms_eps, spec.rms_eps);
    QCOMPARE(c.rope_freq_base, spec.rope_freq_base);
    QCOMPARE(c.rope_style, spec.arch == "llama" ? RopeStyle::Normal : RopeStyle::Neox);
    QCOMPARE(c.tied_embeddings, tied);
    QCOMPARE(c.attn_bias, spec.arch == "qwen2");
    QCOMPARE(m.file_type, std::string(dtype_name(type)));
    QCOMPARE(m.layers.size(), size_t(2));
    QCOMPARE(m.token_embd.n_in, int64_t(n_embd));
    QCOMPARE(m.token_embd.n_out, int64_t(n_vocab));
    QCOMPARE(m.output.data == m.token_embd.data, tied);
    const LayerWeights& l = m.layers[1];
    QCOMPARE(l.wq.dtype, type);
    QCOMPARE(l.wk.n_out, int64_t(2 * n_embd / 4));
    QCOMPARE(l.wo.n_in, int64_t(n_embd));
    QCOMPARE(l.w_down.n_in, int64_t(2 * n_embd));
    QCOMPARE(l.w_down.n_out, int64_t(n_embd));
    QCOMPARE(l.bq != nullptr, spec.arch == "qwen2");
    QVERIFY(l.attn_norm && l.ffn_norm && m.output_norm);
    // Norms are ~1 (1 + N(0, 0.1)): a loader that pointed at the wrong bytes would not give that.
    double mean = 0;
    for (int i = 0; i < n_embd; ++i) mean += l.ffn_norm[i];
    QVERIFY(std::fabs(mean / n_embd - 1.0) < 0.1);
    // Every tensor counted: 2 + (tied ? 0 : 1) + per layer 9 (+3 biases).
    const int per_layer = spec.arch == "qwen2" ? 12 : 9;
    QCOMPARE(m.n_tensors, int64_t(2 + (tied ? 0 : 1) + 2 * per_layer));
    const int n_vectors = 1 + 2 * (per_layer - 7);  // norms (+ biases), stored F32
    QCOMPARE(m.tensor_types.at(std::string(dtype_name(type))),
             2 * 7 + 1 + (tied ? 0 : 1) + (type == DType::F32 ? n_vectors : 0));
    if (type != DType::F32) QCOMPARE(m.tensor_types.at("F32"), n_vectors);
    const int64_t embd = int64_t(n_vocab) * n_embd * (tied ? 1 : 2);
    const int64_t q = n_embd, kv = n_embd / 2;
    const int64_t layer = 2 * n_embd + n_embd * (q + 2 * kv) + q * n_embd + 3 * n_embd * 2 * n_embd +
                          (spec.arch == "qwen2" ? q + 2 * kv : 0);
    QCOMPARE(m.n_params, embd + n_embd + 2 * layer);
    // Vocabulary.
    const VocabData& v = m.vocab;
    QCOMPARE(int(v.tokens.size()), n_vocab);
    QCOMPARE(v.model, std::string("gpt2"));
    QCOMPARE(v.pre, std::string("smollm"));
    QCOMPARE(v.tokens[2], std::string("<|im_end|>"));
    QCOMPARE(v.eot_id, 2);
    QCOMPARE(v.bos_id, 1);
    QCOMPARE(v.eos_id, 2);
    QCOMPARE(v.token_types[0], TokenType::Control);
    QCOMPARE(v.token_types[3 + 'a'], TokenType::Normal);
    QCOMPARE(int(v.merges.size()), spec.n_merges);
    QCOMPARE(v.chat_template, std::string(test::tiny_chat_template()));
    QVERIFY(!v.add_bos);
}

void TstModelLoader::quantized_close_to_f32_data() {
    QTest::addColumn<kvs::DType>("type");
    QTest::addColumn<int>("n_embd");
    QTest::addColumn<double>("tolerance");  // largest error relative to the largest weight
    QTest::newRow("Q8_0") << DType::Q8_0 << 64 << 0.01;
    QTest::newRow("Q4_1") << DType::Q4_1 << 64 << 0.1;
    QTest::newRow("Q5_K") << DType::Q5_K << 256 << 0.06;
}

// The same seed quantized: dequantized weights are near the F32 ones, not equal to them.
void TstModelLoader::quantized_close_to_f32() {
    QFETCH(kvs::DType, type);
    QFETCH(int, n_embd);
    QFETCH(double, tolerance);
    test::TinyModelSpec spec;
    spec.n_embd = n_embd;
    spec.n_ff = 2 * n_embd;
    QVERIFY(test::write_tiny_gguf(test::output_path("ref_f32.gguf"), spec).is_ok());
    spec.weight_type = type;
    QVERIFY(test::write_tiny_gguf(test::output_path("quant.gguf"), spec).is_ok());
    auto a = load_model(test::output_path("ref_f32.gguf"));
    auto b = load_model(test::output_path("quant.gguf"));
    QVERIFY2(a.is_ok() && b.is_ok(), (a.message() + " / " + b.message()).c_str());
    for (const auto& pick : {&LayerWeights::wq, &LayerWeights::w_up, &LayerWeights::w_down}) {
        const auto ref = dequant(a.value()->layers[1].*pick);
        const auto got = dequant(b.value()->layers[1].*pick);
        const double err = rel_err(got, ref);
        QVERIFY2(err > 0 && err < tolerance, qPrintable(QString("relative error %1").arg(err)));
    }
    QVERIFY(same(a.value()->layers[0].attn_norm, b.value()->layers[0].attn_norm, n_embd));
}

void TstModelLoader::gguf_and_safetensors_agree_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<kvs::DType>("type");
    QTest::addColumn<bool>("tied");
    QTest::addColumn<int>("n_shards");
    QTest::newRow("llama F32 tied") << "llama" << DType::F32 << true << 1;
    QTest::newRow("llama F16 untied") << "llama" << DType::F16 << false << 1;
    QTest::newRow("llama BF16 3 shards") << "llama" << DType::BF16 << true << 3;
    QTest::newRow("qwen2 F32 untied 2 shards") << "qwen2" << DType::F32 << false << 2;
    QTest::newRow("qwen2 F16 tied") << "qwen2" << DType::F16 << true << 1;
}

void TstModelLoader::gguf_and_safetensors_agree() {
    QFETCH(QString, arch);
    QFETCH(kvs::DType, type);
    QFETCH(bool, tied);
    QFETCH(int, n_shards);
    test::TinyModelSpec spec;
    spec.arch = arch.toStdString();
    spec.weight_type = type;
    spec.tied = tied;
    spec.n_shards = n_shards;
    spec.seed = 11;
    const std::string gguf = test::output_path("agree.gguf");
    const std::string dir = test::output_path("agree_hf");
    fs::remove_all(dir);
    QVERIFY(test::write_tiny_gguf(gguf, spec).is_ok());
    const Status s = test::write_tiny_safetensors_folder(dir, spec);
    QVERIFY2(s.is_ok(), s.message().c_str());
    QCOMPARE(fs::exists(fs::path(dir) / "model.safetensors.index.json"), n_shards > 1);
    auto a = load_model(gguf);
    QVERIFY2(a.is_ok(), a.message().c_str());
    auto b = load_model(dir);
    QVERIFY2(b.is_ok(), b.message().c_str());
    const Model& g = *a.value();
    const Model& h = *b.value();
    QCOMPARE(h.format, std::string("safetensors"));
    const ModelConfig& cg = g.config;
    const ModelConfig& ch = h.config;
    QCOMPARE(ch.arch, cg.arch);
    QCOMPARE(ch.n_layer, cg.n_layer);
    QCOMPARE(ch.n_embd, cg.n_embd);
    QCOMPARE(ch.n_ff, cg.n_ff);
    QCOMPARE(ch.n_head, cg.n_head);
    QCOMPARE(ch.n_kv_head, cg.n_kv_head);
    QCOMPARE(ch.head_dim, cg.head_dim);
    QCOMPARE(ch.n_vocab, cg.n_vocab);
    QCOMPARE(ch.n_ctx_train, cg.n_ctx_train);
    QCOMPARE(ch.rms_eps, cg.rms_eps);
    QCOMPARE(ch.rope_freq_base, cg.rope_freq_base);
    QCOMPARE(ch.tied_embeddings, tied);
    QCOMPARE(ch.attn_bias, cg.attn_bias);
    // HF checkpoints are unpermuted: always Neox; GGUF llama was permuted: Normal.
    QCOMPARE(ch.rope_style, RopeStyle::Neox);
    QCOMPARE(cg.rope_style, spec.arch == "llama" ? RopeStyle::Normal : RopeStyle::Neox);
    QCOMPARE(h.n_params, g.n_params);
    QCOMPARE(h.file_type, std::string(dtype_name(type)));

    const int64_t n = cg.n_embd;
    QVERIFY(same(g.output_norm, h.output_norm, n));
    QVERIFY(dequant(g.token_embd) == dequant(h.token_embd));
    QVERIFY(dequant(g.output) == dequant(h.output));
    const int n_q_heads = spec.arch == "llama" ? cg.n_head : 0, n_k_heads = spec.arch == "llama" ? cg.n_kv_head : 0;
    for (int il = 0; il < cg.n_layer; ++il) {
        const LayerWeights& lg = g.layers[il];
        const LayerWeights& lh = h.layers[il];
        QCOMPARE(lh.wq.dtype, type);
        QVERIFY(same(lg.attn_norm, lh.attn_norm, n));
        QVERIFY(same(lg.ffn_norm, lh.ffn_norm, n));
        auto hq = dequant(lh.wq), hk = dequant(lh.wk);
        if (n_q_heads) {
            QVERIFY2(dequant(lg.wq) != hq,
                     "Q must differ before the permutation (else the check below proves nothing)");
            hq = hf_to_gguf_rows(hq, lh.wq.n_in, lh.wq.n_out, n_q_heads);
            hk = hf_to_gguf_rows(hk, lh.wk.n_in, lh.wk.n_out, n_k_heads);
        }
        QVERIFY(dequant(lg.wq) == hq);
        QVERIFY(dequant(lg.wk) == hk);
        QVERIFY(dequant(lg.wv) == dequant(lh.wv));
        QVERIFY(dequant(lg.wo) == dequant(lh.wo));
        QVERIFY(dequant(lg.w_gate) == dequant(lh.w_gate));
        QVERIFY(dequant(lg.w_up) == dequant(lh.w_up));
        QVERIFY(dequant(lg.w_down) == dequant(lh.w_down));
        if (cg.attn_bias) {
            QVERIFY(same(lg.bq, lh.bq, lg.wq.n_out));
            QVERIFY(same(lg.bk, lh.bk, lg.wk.n_out));
            QVERIFY(same(lg.bv, lh.bv, lg.wv.n_out));
        }
    }
    // Vocabulary from tokenizer.json matches the GGUF one.
    QCOMPARE(h.vocab.tokens, g.vocab.tokens);
    QCOMPARE(h.vocab.merges, g.vocab.merges);
    QCOMPARE(h.vocab.bos_id, g.vocab.bos_id);
    QCOMPARE(h.vocab.eos_id, g.vocab.eos_id);
    QCOMPARE(h.vocab.eot_id, g.vocab.eot_id);
    QCOMPARE(h.vocab.chat_template, g.vocab.chat_template);
}

void TstModelLoader::formats_give_same_logits_data() {
    QTest::addColumn<QString>("arch");
    QTest::newRow("llama") << "llama";
    QTest::newRow("qwen2") << "qwen2";
}

// GGUF llama stores Q/K permuted and rotates pairs (Normal); the HF checkpoint is
// unpermuted and rotates halves (Neox): both must give the same logits, and the other
// rope style must not.
void TstModelLoader::rope_scaling_is_reported() {
    test::TinyModelSpec spec;
    const std::string dir = test::output_path("rope_scaling_hf");
    fs::remove_all(dir);
    QVERIFY(test::write_tiny_safetensors_folder(dir, spec).is_ok());
    auto plain = load_model(dir);
    QVERIFY2(plain.is_ok(), plain.message().c_str());
    QVERIFY(plain.value()->warnings.empty());
    set_json_field(dir + "/config.json", "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}});
    auto scaled = load_model(dir);
    QVERIFY2(scaled.is_ok(), scaled.message().c_str());
    QCOMPARE(scaled.value()->warnings.size(), size_t(1));
    QVERIFY(scaled.value()->warnings[0].find("RoPE scaling (rope_scaling) is not applied") != std::string::npos);
}

void TstModelLoader::formats_give_same_logits() {
    QFETCH(QString, arch);
    test::TinyModelSpec spec;
    spec.arch = arch.toStdString();
    spec.tied = false;
    spec.seed = 5;
    const std::string gguf = test::output_path("logits.gguf"), dir = test::output_path("logits_hf");
    fs::remove_all(dir);
    QVERIFY(test::write_tiny_gguf(gguf, spec).is_ok());
    QVERIFY(test::write_tiny_safetensors_folder(dir, spec).is_ok());
    auto a = load_model(gguf);
    auto b = load_model(dir);
    QVERIFY2(a.is_ok() && b.is_ok(), (a.message() + " / " + b.message()).c_str());
    const auto la = kvs::test::last_logits(a.value()), lb = kvs::test::last_logits(b.value());
    QCOMPARE(la.size(), size_t(a.value()->config.n_vocab));
    QCOMPARE(lb.size(), la.size());
    QVERIFY2(rel_err(lb, la) < 1e-4, qPrintable(QString("relative difference %1").arg(rel_err(lb, la))));
    b.value()->config.rope_style = RopeStyle::Normal;
    const auto wrong = kvs::test::last_logits(b.value());
    QVERIFY2(rel_err(wrong, la) > 1e-3, "the rope style made no difference: the check above proves nothing");
}

void TstModelLoader::tiny_vocab_matches_hf_tokenizers_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QList<int>>("ids");
    // Ids from the Hugging Face `tokenizers` package (Tokenizer.from_file on the tiny
    // folder's tokenizer.json, n_merges 64), the independent reference.
    QTest::newRow("chatml") << "<|im_start|>user\nthe quick brown fox jumps over 12 lazy dogs!<|im_end|>\n"
                            << QList<int>{1,   120, 118, 291, 13,  119, 260, 35,  116, 120, 108, 102, 110, 284,
                                          117, 114, 122, 113, 315, 35,  109, 120, 299, 118, 309, 121, 291, 35,
                                          52,  53,  35,  111, 100, 125, 124, 286, 118, 36,  2,   13};
    QTest::newRow("unicode") << QString::fromUtf8("Hello, w\xc3\xb6rld: tests that can fail.")
                             << QList<int>{75, 276, 111, 114, 47,  263, 198, 185, 117, 111, 103,
                                           61, 317, 118, 259, 295, 313, 113, 267, 320, 111, 49};
}

// The tiny vocabulary is a working byte-level BPE: our tokenizer, built from the GGUF the
// loader read, splits text exactly as Hugging Face's does from the folder's tokenizer.json.
void TstModelLoader::tiny_vocab_matches_hf_tokenizers() {
    QFETCH(QString, text);
    QFETCH(QList<int>, ids);
    const std::string path = test::output_path("tiny_vocab.gguf");
    auto m = test::write_and_load_tiny_gguf(path, test::TinyModelSpec{});
    QVERIFY2(m.is_ok(), m.message().c_str());
    auto tok = Tokenizer::create(m.value()->vocab);
    QVERIFY2(tok.is_ok(), tok.message().c_str());
    const std::string utf8 = text.toStdString();
    const auto got = tok->encode(utf8, /*add_special=*/false, /*parse_special=*/true);
    QCOMPARE(QList<int>(got.begin(), got.end()), ids);
    QCOMPARE(tok->decode(got), utf8);
}

namespace {

// Makes a broken model from a good tiny one; returns the path to load.
std::string make_broken(const QString& kind) {
    test::TinyModelSpec spec;
    const std::string good = test::output_path("broken_src.gguf");
    const std::string bad = test::output_path("broken.gguf");
    if (!test::write_tiny_gguf(good, spec).is_ok()) return "";
    auto set_kv = [](GgufCopy& c, const std::string& key, GgufValue v) {
        for (auto& kv : c.kv)
            if (kv.first == key) kv.second = std::move(v);
    };
    if (kind == "arch") {
        rewrite_gguf(good, bad, [&](GgufCopy& c) { set_kv(c, "general.architecture", GgufValue::of_string("gptj")); });
    } else if (kind == "missing tensor") {
        rewrite_gguf(good, bad, [](GgufCopy& c) {
            std::erase_if(c.tensors, [](const GgufCopy::T& t) { return t.name == "blk.1.ffn_down.weight"; });
        });
    } else if (kind == "wrong shape") {
        rewrite_gguf(good, bad, [](GgufCopy& c) {
            for (auto& t : c.tensors)
                if (t.name == "blk.0.ffn_up.weight") t.ne = {128, 64};  // same bytes, transposed shape
        });
    } else if (kind == "missing key") {
        rewrite_gguf(good, bad, [](GgufCopy& c) {
            std::erase_if(c.kv, [](const auto& kv) { return kv.first == "llama.block_count"; });
        });
    } else if (kind == "bad head count") {
        rewrite_gguf(good, bad,
                     [&](GgufCopy& c) { set_kv(c, "llama.attention.head_count_kv", GgufValue::of<uint32_t>(3)); });
    } else if (kind == "bos out of range") {
        rewrite_gguf(good, bad,
                     [&](GgufCopy& c) { set_kv(c, "tokenizer.ggml.bos_token_id", GgufValue::of<uint32_t>(100000)); });
    } else if (kind == "key wrong type") {
        rewrite_gguf(good, bad, [&](GgufCopy& c) { set_kv(c, "llama.embedding_length", GgufValue::of_string("64")); });
    } else if (kind == "activation type") {
        rewrite_gguf(good, bad, [](GgufCopy& c) {
            for (auto& t : c.tensors)  // Q8_K is an activation format: 64 elements are not even one block
                if (t.name == "blk.0.attn_q.weight") t.type = DType::Q8_1, t.n_bytes = row_bytes(DType::Q8_1, 64) * 64;
        });
    } else if (kind == "unknown type id") {
        // Patch the type field of one tensor info in place: name, n_dims, ne[2], then type.
        std::ifstream in(good, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const std::string name = "blk.0.attn_v.weight";
        const size_t at = bytes.find(name);
        if (at == std::string::npos) return "";
        const uint32_t type_id = 99;
        std::memcpy(&bytes[at + name.size() + 4 + 16], &type_id, 4);
        std::ofstream(bad, std::ios::binary) << bytes;
    } else if (kind.startsWith("hf")) {
        const std::string dir = test::output_path("broken_hf");
        fs::remove_all(dir);
        if (!test::write_tiny_safetensors_folder(dir, spec).is_ok()) return "";
        if (kind == "hf model_type") set_json_field(dir + "/config.json", "model_type", "gpt2");
        if (kind == "hf config mismatch") set_json_field(dir + "/config.json", "hidden_size", 32);
        if (kind == "hf missing tokenizer") fs::remove(dir + "/tokenizer.json");
        if (kind == "hf truncated")
            fs::resize_file(dir + "/model.safetensors", fs::file_size(dir + "/model.safetensors") / 2);
        if (kind == "hf header length") {
            std::fstream f(dir + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
            const uint64_t huge = 1ull << 50;
            f.write(reinterpret_cast<const char*>(&huge), 8);
        }
        if (kind == "hf dtype") {
            std::fstream f(dir + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
            std::string head(4096, '\0');
            f.read(head.data(), 4096);
            const size_t at = head.find("\"F32\"");
            if (at == std::string::npos) return "";
            f.clear();
            f.seekp(static_cast<std::streamoff>(at));
            f.write("\"U32\"", 5);  // same length: the header stays valid JSON
        }
        return dir;
    } else if (kind == "no such path") {
        return test::output_path("does_not_exist.gguf");
    }
    return bad;
}

}  // namespace

void TstModelLoader::errors_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown architecture") << "arch"
                                          << "unsupported architecture 'gptj'";
    QTest::newRow("unknown tensor type id") << "unknown type id"
                                            << "tensor 'blk.0.attn_v.weight' has GGML type id 99";
    QTest::newRow("missing tensor") << "missing tensor"
                                    << "missing tensor 'blk.1.ffn_down.weight' (expected shape [128, 64])";
    QTest::newRow("wrong shape") << "wrong shape"
                                 << "'blk.0.ffn_up.weight' has shape [128, 64], expected [64, 128]";
    QTest::newRow("missing key") << "missing key"
                                 << "missing metadata key 'llama.block_count'";
    QTest::newRow("kv heads not dividing") << "bad head count"
                                           << "kv head count 3";
    QTest::newRow("bos out of range") << "bos out of range"
                                      << "tokenizer.ggml.bos_token_id' = 100000 is outside";
    QTest::newRow("key of wrong type") << "key wrong type"
                                       << "'llama.embedding_length' is a string";
    QTest::newRow("activation-only type") << "activation type"
                                          << "'blk.0.attn_q.weight' has type Q8_1, which is not a weight type";
    QTest::newRow("hf unknown model_type") << "hf model_type"
                                           << "unsupported model_type 'gpt2'";
    QTest::newRow("hf config/shape mismatch") << "hf config mismatch"
                                              << "'model.embed_tokens.weight' has shape [64,";
    QTest::newRow("hf missing tokenizer.json") << "hf missing tokenizer"
                                               << "missing tokenizer.json";
    QTest::newRow("hf truncated shard") << "hf truncated"
                                        << "are not inside the";
    QTest::newRow("hf huge header length") << "hf header length"
                                           << "header length 1125899906842624 does not fit";
    QTest::newRow("hf unsupported dtype") << "hf dtype"
                                          << "has dtype U32, which KV Scope does not support";
    QTest::newRow("no such path") << "no such path"
                                  << "no such file";
}

void TstModelLoader::errors() {
    QFETCH(QString, kind);
    QFETCH(QString, expected);
    const std::string path = make_broken(kind);
    QVERIFY(!path.empty());
    auto r = load_model(path);
    QVERIFY2(!r.is_ok(), "a broken model loaded");
    const QString msg = QString::fromStdString(r.message());
    QVERIFY2(msg.startsWith(QString::fromStdString(path)), qPrintable("message does not name the file: " + msg));
    QVERIFY2(msg.contains(expected), qPrintable("message: " + msg));
}

void TstModelLoader::default_model() {
    const std::string path = test::default_model_path();
    if (path.empty()) QSKIP("default model not installed (run the set-up script)");
    auto r = load_model(path);
    QVERIFY2(r.is_ok(), r.message().c_str());
    const Model& m = *r.value();
    // Expected numbers from gguf-py's GGUFReader on this file.
    QCOMPARE(m.config.arch, std::string("llama"));
    QCOMPARE(m.config.n_layer, 30);
    QCOMPARE(m.config.n_embd, 576);
    QCOMPARE(m.config.n_head, 9);
    QCOMPARE(m.config.n_kv_head, 3);
    QCOMPARE(m.config.n_ff, 1536);
    QCOMPARE(m.config.n_vocab, 49152);
    QCOMPARE(m.config.rope_freq_base, 100000.0f);
    QVERIFY(m.config.tied_embeddings);
    QVERIFY(!m.config.attn_bias);
    QCOMPARE(m.n_tensors, int64_t(272));
    QCOMPARE(m.n_params, int64_t(134515008));
    QCOMPARE(m.weight_bytes, int64_t(96576768));
    QCOMPARE(m.file_type, std::string("Q4_1"));
    QCOMPARE(m.tensor_types.at("Q4_1"), 210);
    QCOMPARE(m.tensor_types.at("F32"), 61);
    QCOMPARE(m.tensor_types.at("Q8_0"), 1);
    QCOMPARE(m.token_embd.dtype, DType::Q8_0);
    QCOMPARE(m.output.data, m.token_embd.data);
    QCOMPARE(m.layers[29].w_down.dtype, DType::Q4_1);
    QCOMPARE(m.vocab.tokens.size(), size_t(49152));
    QCOMPARE(m.vocab.merges.size(), size_t(48900));
    QCOMPARE(m.vocab.model, std::string("gpt2"));
    QCOMPARE(m.vocab.pre, std::string("smollm"));
    QCOMPARE(m.vocab.bos_id, 1);
    QCOMPARE(m.vocab.eos_id, 2);
    QCOMPARE(m.vocab.eot_id, 2);
    QCOMPARE(m.vocab.unk_id, 0);
    QCOMPARE(m.vocab.pad_id, 2);
    QVERIFY(!m.vocab.add_bos);
    QVERIFY(m.vocab.chat_template.find("<|im_start|>") != std::string::npos);
}

QTEST_GUILESS_MAIN(TstModelLoader)
#include "tst_model_loader.moc"
