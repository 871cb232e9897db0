// ctest-labels: unit
// save_variant(): GGML variants of a GGUF model saved as GGUF load back with identical
// weight bytes, the source's metadata and tensor order (and gguf-py, the reference
// reader llama.cpp ships, reads them when Python is installed); INT4 (I4_G128, I4_G64,
// or a mix, saved as group 64) variants of a safetensors model saved as AutoAWQ folders
// load back identical, and an AutoAWQ
// checkpoint re-saved keeps its packed tensors byte for byte; unsupported combinations
// give errors that say why.
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/model/gguf_reader.h"
#include "engine/model/model.h"
#include "engine/model/safetensors_reader.h"
#include "engine/quant/quantize.h"
#include "engine/quant/save_variant.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
namespace fs = std::filesystem;

namespace {

// What gguf-py (llama.cpp's own reader) sees in a GGUF file: line 0 "name=TYPE ..." for
// every tensor, line 1 general.file_type; nullopt (with *err) without Python and gguf.
std::optional<QStringList> gguf_py_types(const std::string& path, QString* err) {
    const QString code =
        "import sys\nfrom gguf import GGUFReader\nr = GGUFReader(sys.argv[1])\n"
        "print(' '.join(f'{t.name}={t.tensor_type.name}' for t in r.tensors))\n"
        "print(int(r.fields['general.file_type'].parts[-1][0]))";
    const auto py = test::run_python({"-c", code, QString::fromStdString(path)});
    if (!py.ok) {
        *err = py.error;
        return std::nullopt;
    }
    return py.out.trimmed().split('\n');
}

// Every linear of every layer, in a fixed order.
std::vector<const WeightView*> linears(const Model& m) {
    std::vector<const WeightView*> out;
    for (const LayerWeights& l : m.layers)
        for (const WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) out.push_back(w);
    return out;
}

bool same_bytes(const WeightView& a, const WeightView& b) {
    if (a.dtype != b.dtype || a.n_in != b.n_in || a.n_out != b.n_out) return false;
    return std::memcmp(a.data, b.data, row_bytes(a.dtype, a.n_in) * size_t(a.n_out)) == 0;
}

// A variant with every linear re-encoded as I4_G128 (the INT4 lab schemes' type), built
// here from the kernels' own quantize_row so this test does not depend on the schemes.
// `first_layer_type` re-encodes layer 0 in another type (a mixed model).
std::shared_ptr<Model> i4_variant(std::shared_ptr<Model> src, DType type = DType::I4_G128,
                                  std::optional<DType> first_layer_type = std::nullopt) {
    struct Keep {
        std::shared_ptr<Model> source;
        std::vector<std::vector<uint8_t>> buffers;
    };
    auto keep = std::make_shared<Keep>();
    keep->source = src;
    keep->buffers.reserve(src->layers.size() * 7);
    auto m = std::make_shared<Model>(*src);
    for (LayerWeights& l : m->layers)
        for (WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
            const DType t = &l == &m->layers[0] && first_layer_type ? *first_layer_type : type;
            const size_t rb = row_bytes(t, w->n_in), src_rb = row_bytes(w->dtype, w->n_in);
            std::vector<uint8_t> out(rb * size_t(w->n_out));  // [n_out, rb]
            std::vector<float> row(size_t(w->n_in));          // [n_in]
            for (int64_t r = 0; r < w->n_out; ++r) {
                cpu::dequantize_row(w->dtype, static_cast<const uint8_t*>(w->data) + size_t(r) * src_rb, row.data(),
                                    w->n_in);
                cpu::quantize_row(t, row.data(), out.data() + size_t(r) * rb, w->n_in);
            }
            keep->buffers.push_back(std::move(out));
            *w = WeightView{t, keep->buffers.back().data(), w->n_in, w->n_out};
        }
    m->storage = keep;
    return m;
}

test::TinyModelSpec spec_128() {
    test::TinyModelSpec s;
    s.n_embd = 256;  // K-quants need rows of 256
    s.n_head = 4;
    s.n_kv_head = 2;
    s.n_ff = 512;
    s.seed = 21;
    return s;
}

}  // namespace

class TstSaveVariant : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void gguf_round_trip_data();
    void gguf_round_trip();
    void gguf_int_types_as_ggml_blocks_data();
    void gguf_int_types_as_ggml_blocks();
    void awq_folder_round_trip_data();
    void awq_folder_round_trip();
    void awq_checkpoint_resaved_byte_for_byte();
    void refused_data();
    void refused();
};

void TstSaveVariant::gguf_round_trip_data() {
    QTest::addColumn<QString>("scheme");
    QTest::addColumn<bool>("tied");
    QTest::addColumn<int>("file_type");  // LLAMA_FTYPE_* expected in general.file_type
    QTest::newRow("ref (F32)") << "ref" << true << 0;
    QTest::newRow("f16") << "f16" << false << 1;
    QTest::newRow("q8_0") << "q8_0" << true << 7;
    QTest::newRow("q4_0") << "q4_0" << false << 2;
    QTest::newRow("q4_k") << "q4_k" << true << 14;
    QTest::newRow("q6_k") << "q6_k" << false << 18;
}

void TstSaveVariant::gguf_round_trip() {
    QFETCH(QString, scheme);
    QFETCH(bool, tied);
    QFETCH(int, file_type);
    test::TinyModelSpec spec = spec_128();
    spec.tied = tied;
    spec.embd_type = DType::Q8_0;
    const std::string src_path = test::output_path("save_src.gguf"), out = test::output_path("save_out.gguf");
    QVERIFY(test::write_tiny_gguf(src_path, spec).is_ok());
    auto src = load_model(src_path);
    QVERIFY2(src.is_ok(), src.message().c_str());
    auto s = QuantScheme::parse(scheme.toStdString());
    QVERIFY2(s.is_ok(), s.message().c_str());
    auto variant = quantize_model(src.value(), s.value());
    QVERIFY2(variant.is_ok(), variant.message().c_str());
    auto saved = save_variant(*variant.value(), out);
    QVERIFY2(saved.is_ok(), saved.message().c_str());
    QCOMPARE(saved.value().format, std::string("gguf"));
    QCOMPARE(saved.value().n_bytes, int64_t(fs::file_size(out)));

    auto back = load_model(out);
    QVERIFY2(back.is_ok(), back.message().c_str());
    const Model& v = *variant.value();
    const Model& b = *back.value();
    const auto lv = linears(v), lb = linears(b);
    QCOMPARE(lb.size(), lv.size());
    for (size_t i = 0; i < lv.size(); ++i)
        QVERIFY2(same_bytes(*lv[i], *lb[i]), qPrintable(QString("linear %1").arg(i)));
    QVERIFY(same_bytes(v.token_embd, b.token_embd));
    QVERIFY(same_bytes(v.output, b.output));
    QCOMPARE(b.config.tied_embeddings, tied);
    QCOMPARE(std::memcmp(v.output_norm, b.output_norm, size_t(v.config.n_embd) * 4), 0);
    for (size_t il = 0; il < v.layers.size(); ++il) {
        QCOMPARE(std::memcmp(v.layers[il].attn_norm, b.layers[il].attn_norm, size_t(v.config.n_embd) * 4), 0);
        QCOMPARE(std::memcmp(v.layers[il].ffn_norm, b.layers[il].ffn_norm, size_t(v.config.n_embd) * 4), 0);
    }
    QVERIFY(b.vocab.tokens == v.vocab.tokens);
    QVERIFY(b.vocab.merges == v.vocab.merges);
    QCOMPARE(b.vocab.chat_template, v.vocab.chat_template);
    QVERIFY(b.config.rope_style == v.config.rope_style);

    // Metadata: the source's keys with the same values, general.file_type the new one;
    // tensors in the source's order.
    auto fs_src = GgufFile::open(src_path);
    auto fs_out = GgufFile::open(out);
    QVERIFY(fs_src.is_ok() && fs_out.is_ok());
    for (const auto& [key, value] : fs_src.value()->metadata()) {
        if (key == "general.file_type") continue;
        const GgufValue* o = fs_out.value()->find(key);
        QVERIFY2(o, key.c_str());
        QVERIFY2(o->type == value.type && o->str == value.str && o->raw == value.raw && o->strings == value.strings &&
                     std::memcmp(o->scalar, value.scalar, sizeof(value.scalar)) == 0,
                 key.c_str());
    }
    QCOMPARE(fs_out.value()->get_int("general.file_type").value().value_or(-1), int64_t(file_type));
    QCOMPARE(fs_out.value()->tensors().size(), fs_src.value()->tensors().size());
    for (size_t i = 0; i < fs_src.value()->tensors().size(); ++i)
        QCOMPARE(fs_out.value()->tensors()[i].name, fs_src.value()->tensors()[i].name);

    // gguf-py (llama.cpp's own reader) sees the same tensor types.
    QString err;
    const auto lines = gguf_py_types(out, &err);
    if (!lines) QSKIP(qPrintable("gguf-py check skipped (needs Python with the gguf package): " + err));
    QCOMPARE(lines->size(), 2);
    QCOMPARE((*lines)[1].toInt(), file_type);
    const QString want_linear = QString::fromStdString(std::string(dtype_name(lv[0]->dtype)));
    const QString& types = (*lines)[0];
    QVERIFY2(types.contains("blk.0.attn_q.weight=" + want_linear), qPrintable(types));
    QVERIFY2(types.contains("blk.1.ffn_down.weight=" + want_linear), qPrintable(types));
    QVERIFY2(types.contains("token_embd.weight=Q8_0"), qPrintable(types));
}

// INT4 (I4_G128, I4_G64, mixed) and INT8 per-channel variants of a GGUF model saved as
// GGUF: the file holds Q4_1 / Q8_0 blocks (general.file_type 3 / 7, as gguf-py reads it);
// loaded back, every weight equals the variant's within the fp16 rounding of m = -d * z
// (INT4) or of the row scale (INT8), and the next-token logits agree closely.
void TstSaveVariant::gguf_int_types_as_ggml_blocks_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("first_layer");
    QTest::addColumn<int>("ggml");
    QTest::addColumn<int>("file_type");
    QTest::newRow("I4_G128 -> Q4_1") << int(DType::I4_G128) << int(DType::I4_G128) << int(DType::Q4_1) << 3;
    QTest::newRow("I4_G64 -> Q4_1") << int(DType::I4_G64) << int(DType::I4_G64) << int(DType::Q4_1) << 3;
    QTest::newRow("mixed I4 -> Q4_1") << int(DType::I4_G128) << int(DType::I4_G64) << int(DType::Q4_1) << 3;
    QTest::newRow("I8_ROW -> Q8_0") << int(DType::I8_ROW) << int(DType::I8_ROW) << int(DType::Q8_0) << 7;
}

void TstSaveVariant::gguf_int_types_as_ggml_blocks() {
    QFETCH(int, type);
    QFETCH(int, first_layer);
    QFETCH(int, ggml);
    QFETCH(int, file_type);
    const std::string src_path = test::output_path("save_int_src.gguf"), out = test::output_path("save_int_out.gguf");
    QVERIFY(test::write_tiny_gguf(src_path, spec_128()).is_ok());
    auto src = load_model(src_path);
    QVERIFY2(src.is_ok(), src.message().c_str());
    auto v = i4_variant(src.value(), DType(type), DType(first_layer));
    auto saved = save_variant(*v, out);
    QVERIFY2(saved.is_ok(), saved.message().c_str());
    auto back = load_model(out);
    QVERIFY2(back.is_ok(), back.message().c_str());
    const auto lv = linears(*v), lb = linears(*back.value());
    QCOMPARE(lb.size(), lv.size());
    double worst = 0.0;
    for (size_t i = 0; i < lv.size(); ++i) {
        QCOMPARE(int(lb[i]->dtype), ggml);
        const int64_t n_in = lv[i]->n_in;
        std::vector<float> a(static_cast<size_t>(n_in)), b(static_cast<size_t>(n_in));  // [n_in] each
        for (int64_t r = 0; r < lv[i]->n_out; ++r) {
            cpu::dequantize_row(lv[i]->dtype,
                                static_cast<const uint8_t*>(lv[i]->data) + size_t(r) * row_bytes(lv[i]->dtype, n_in),
                                a.data(), n_in);
            cpu::dequantize_row(lb[i]->dtype,
                                static_cast<const uint8_t*>(lb[i]->data) + size_t(r) * row_bytes(lb[i]->dtype, n_in),
                                b.data(), n_in);
            float amax = 0.0f;
            for (float x : a) amax = std::max(amax, std::fabs(x));
            // INT4: |m error| <= 2^-11 |d z| <= 2^-11 * 2 max|w|; INT8: 2^-11 relative
            for (int64_t k = 0; k < n_in; ++k) {
                const double err = std::fabs(double(a[size_t(k)]) - b[size_t(k)]);
                worst = std::max(worst, amax > 0 ? err / amax : err);
                QVERIFY2(err <= amax * 1.0e-3 + 1e-12,
                         qPrintable(
                             QString("linear %1 row %2: %3 vs %4").arg(i).arg(r).arg(a[size_t(k)]).arg(b[size_t(k)])));
            }
        }
    }
    qInfo("largest |w_saved - w_variant| / max|w| of its row: %.2e", worst);
    // the saving error must stay well below the quantization's own effect on the logits
    // (INT4: 0.65-0.9 here, the file 0.03-0.05; INT8 per channel: 0.09, the file 0.03)
    const auto lg_v = test::last_logits(v), lg_b = test::last_logits(back.value()),
               lg_s = test::last_logits(src.value());
    QVERIFY(!lg_v.empty() && lg_v.size() == lg_b.size() && lg_v.size() == lg_s.size());
    double d_saved = 0.0, d_quant = 0.0;
    for (size_t i = 0; i < lg_v.size(); ++i) {
        d_saved = std::max(d_saved, std::fabs(double(lg_v[i]) - lg_b[i]));
        d_quant = std::max(d_quant, std::fabs(double(lg_v[i]) - lg_s[i]));
    }
    qInfo("next-token logits: max |delta| variant vs saved file %.2e, variant vs source %.2e", d_saved, d_quant);
    QVERIFY2(d_saved < 0.4 * d_quant, qPrintable(QString("%1 vs %2").arg(d_saved).arg(d_quant)));

    QString err;
    const auto lines = gguf_py_types(out, &err);
    if (!lines) QSKIP(qPrintable("gguf-py check skipped (needs Python with the gguf package): " + err));
    QCOMPARE(lines->size(), 2);
    QCOMPARE((*lines)[1].toInt(), file_type);
    const QString want = QString::fromStdString(std::string(dtype_name(DType(ggml))));
    const QString& types = (*lines)[0];
    QVERIFY2(types.contains("blk.0.attn_q.weight=" + want) && types.contains("blk.1.ffn_down.weight=" + want),
             qPrintable(types));
}

void TstSaveVariant::awq_folder_round_trip_data() {
    QTest::addColumn<int>("type");         // every linear's type
    QTest::addColumn<int>("layer0_type");  // layer 0's linears' type
    QTest::addColumn<int>("group");        // group_size the folder must say
    QTest::newRow("I4_G128") << int(DType::I4_G128) << int(DType::I4_G128) << 128;
    QTest::newRow("I4_G64") << int(DType::I4_G64) << int(DType::I4_G64) << 64;
    QTest::newRow("mixed: layer 0 I4_G64, rest I4_G128") << int(DType::I4_G128) << int(DType::I4_G64) << 64;
}

// Saved and loaded back: the same bytes when every linear has the folder's group size;
// I4_G128 linears saved in a group-64 folder load as I4_G64 with the same weights.
void TstSaveVariant::awq_folder_round_trip() {
    QFETCH(int, type);
    QFETCH(int, layer0_type);
    QFETCH(int, group);
    test::TinyModelSpec spec = spec_128();
    spec.tied = false;
    spec.arch = "qwen2";  // biases too
    const std::string src_dir = test::output_path("save_awq_src"), out = test::output_path("save_awq_out");
    fs::remove_all(src_dir);
    fs::remove_all(out);
    QVERIFY(test::write_tiny_safetensors_folder(src_dir, spec).is_ok());
    auto src = load_model(src_dir);
    QVERIFY2(src.is_ok(), src.message().c_str());
    auto v = i4_variant(src.value(), DType(type), DType(layer0_type));
    auto saved = save_variant(*v, out);
    QVERIFY2(saved.is_ok(), saved.message().c_str());
    QCOMPARE(saved.value().format, std::string("awq"));
    QVERIFY(fs::exists(out + "/tokenizer.json"));
    QVERIFY(fs::exists(out + "/tokenizer_config.json"));
    std::ifstream cfg(out + "/config.json");
    const auto j = nlohmann::json::parse(cfg);
    QCOMPARE(j["quantization_config"]["quant_method"].get<std::string>(), std::string("awq"));
    QCOMPARE(j["quantization_config"]["group_size"].get<int>(), group);
    QCOMPARE(j["quantization_config"]["version"].get<std::string>(), std::string("gemm"));

    auto back = load_model(out);
    QVERIFY2(back.is_ok(), back.message().c_str());
    const Model& b = *back.value();
    QCOMPARE(b.format, std::string("safetensors (AWQ)"));
    const auto lv = linears(*v), lb = linears(b);
    QCOMPARE(lb.size(), lv.size());
    for (size_t i = 0; i < lv.size(); ++i) {
        QCOMPARE(int(lb[i]->dtype), int(*i4_type_for_group(group)));
        if (lv[i]->dtype == lb[i]->dtype) {
            QVERIFY2(same_bytes(*lv[i], *lb[i]), qPrintable(QString("linear %1").arg(i)));
            continue;
        }
        const size_t rv = row_bytes(lv[i]->dtype, lv[i]->n_in), rb = row_bytes(lb[i]->dtype, lb[i]->n_in);
        std::vector<float> row_v(size_t(lv[i]->n_in)), row_b(row_v.size());  // [n_in]
        for (int64_t r = 0; r < lv[i]->n_out; ++r) {
            cpu::dequantize_row(lv[i]->dtype, static_cast<const uint8_t*>(lv[i]->data) + r * rv, row_v.data(),
                                lv[i]->n_in);
            cpu::dequantize_row(lb[i]->dtype, static_cast<const uint8_t*>(lb[i]->data) + r * rb, row_b.data(),
                                lb[i]->n_in);
            QVERIFY2(row_v == row_b, qPrintable(QString("linear %1 row %2").arg(i).arg(r)));
        }
    }
    QVERIFY(same_bytes(v->token_embd, b.token_embd));
    QVERIFY(same_bytes(v->output, b.output));
    QVERIFY(b.config.attn_bias);
    const int64_t kv_dim = int64_t(spec.n_kv_head) * (spec.n_embd / spec.n_head);
    QCOMPARE(std::memcmp(v->layers[1].bk, b.layers[1].bk, size_t(kv_dim) * 4), 0);
    QVERIFY(b.vocab.tokens == v->vocab.tokens);
}

// An AutoAWQ checkpoint made by tests/tools/make_awq_checkpoint.py, loaded and saved
// again: qweight, qzeros and scales come out byte for byte as the script packed them.
void TstSaveVariant::awq_checkpoint_resaved_byte_for_byte() {
    test::TinyModelSpec spec = spec_128();
    spec.n_embd = 128;
    spec.n_head = 2;
    spec.n_kv_head = 1;
    spec.n_ff = 256;
    const std::string src_dir = test::output_path("resave_src"), awq = test::output_path("resave_awq"),
                      ref = test::output_path("resave_ref"), out = test::output_path("resave_out");
    fs::remove_all(src_dir);
    fs::remove_all(out);
    QVERIFY(test::write_tiny_safetensors_folder(src_dir, spec).is_ok());
    const QString script = QString::fromStdString(test::tool_path("make_awq_checkpoint.py"));
    const auto py = test::run_python(
        {script, QString::fromStdString(src_dir), QString::fromStdString(awq), QString::fromStdString(ref)});
    if (!py.ok) QSKIP(qPrintable("needs Python with numpy and safetensors: " + py.error));
    auto m = load_model(awq);
    QVERIFY2(m.is_ok(), m.message().c_str());
    auto saved = save_variant(*m.value(), out);
    QVERIFY2(saved.is_ok(), saved.message().c_str());
    auto a = SafetensorsSet::open_folder(awq);
    auto b = SafetensorsSet::open_folder(out);
    QVERIFY(a.is_ok() && b.is_ok());
    int n_packed = 0;
    for (const auto& [name, t] : a.value()->tensors()) {
        const SafetensorsTensor* o = b.value()->find(name);
        QVERIFY2(o, name.c_str());
        if (t.integer || name.find(".scales") != std::string::npos) {
            QCOMPARE(o->dtype, t.dtype);
            QVERIFY(o->shape == t.shape);
            QVERIFY2(std::memcmp(o->data, t.data, t.n_bytes) == 0, name.c_str());
            ++n_packed;
        }
    }
    QCOMPARE(n_packed, 3 * 7 * spec.n_layer);
}

void TstSaveVariant::refused_data() {
    QTest::addColumn<QString>("source");   // gguf or safetensors
    QTest::addColumn<QString>("variant");  // ref, i4 or i8
    QTest::addColumn<QString>("out");
    QTest::addColumn<QString>("expected");
    QTest::newRow("gguf source, INT4 to a folder") << "gguf"
                                                   << "i4"
                                                   << "x_out"
                                                   << "save a GGUF model's INT4 variant to a path ending in .gguf";
    QTest::newRow("INT8 to a folder") << "gguf"
                                      << "i8"
                                      << "x_out"
                                      << "give a path ending in .gguf";
    QTest::newRow("float to a folder") << "gguf"
                                       << "ref"
                                       << "x_out"
                                       << "give a path ending in .gguf";
    QTest::newRow("safetensors to GGUF") << "safetensors"
                                         << "ref"
                                         << "x_out.gguf"
                                         << "saving as GGUF needs a model loaded from a GGUF file";
}

void TstSaveVariant::refused() {
    QFETCH(QString, source);
    QFETCH(QString, variant);
    QFETCH(QString, out);
    QFETCH(QString, expected);
    test::TinyModelSpec spec = spec_128();
    const std::string path = source == "gguf" ? test::output_path("refuse_src.gguf") : test::output_path("refuse_src");
    if (source == "gguf") QVERIFY(test::write_tiny_gguf(path, spec).is_ok());
    else {
        fs::remove_all(path);
        QVERIFY(test::write_tiny_safetensors_folder(path, spec).is_ok());
    }
    auto m = load_model(path);
    QVERIFY2(m.is_ok(), m.message().c_str());
    std::shared_ptr<Model> v = variant == "i4"   ? i4_variant(m.value())
                               : variant == "i8" ? i4_variant(m.value(), DType::I8_ROW)
                                                 : m.value();
    const std::string out_path = test::output_path(out.toStdString());
    auto r = save_variant(*v, out_path);
    QVERIFY(!r.is_ok());
    QVERIFY2(r.message().find(expected.toStdString()) != std::string::npos, r.message().c_str());
    QVERIFY(!fs::exists(out_path + "/model.safetensors"));
}

QTEST_GUILESS_MAIN(TstSaveVariant)
#include "tst_save_variant.moc"
