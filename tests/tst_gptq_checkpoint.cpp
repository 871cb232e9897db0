// ctest-labels: unit
// AutoGPTQ / GPTQModel checkpoints (engine/model/gptq_checkpoint.h): folders written by
// tests/tools/make_gptq_checkpoint.py (numpy + safetensors, AutoGPTQ's QuantLinear.pack
// reimplemented) load with every linear in a kernel group format that dequantizes to the
// script's float reference (4-bit groups of 128 / 64 / 32 / whole rows, symmetric and
// asymmetric, the v1 "gptq" and "gptq_v2" zero layouts, settings in quantize_config.json or
// config.json, 8-bit symmetric, act-order with static groups); our own GptqMatrix packs and
// unpacks to itself; broken folders (bits 3, a missing g_idx, a wrong qweight shape, an
// unknown checkpoint_format, a g_idx out of range, a permuted act-order g_idx) give errors
// naming the field or tensor. The script rows skip when Python with numpy and safetensors
// is not installed.
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/gptq_checkpoint.h"
#include "engine/model/model.h"
#include "engine/quant/quantize.h"
#include "engine/quant/save_variant.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
namespace fs = std::filesystem;

namespace {

const std::string kScript = kvs::test::tool_path("make_gptq_checkpoint.py");

// [n_out, n_in] in the input's column order: a weight with an input permutation (GPTQ
// act-order) has stored column p at input column in_perm[p]
std::vector<float> dequant(const WeightView& w) {
    std::vector<float> out(static_cast<size_t>(w.n_in * w.n_out)), row(static_cast<size_t>(w.n_in));
    const size_t rb = row_bytes(w.dtype, w.n_in);
    for (int64_t r = 0; r < w.n_out; ++r) {
        cpu::dequantize_row(w.dtype, static_cast<const uint8_t*>(w.data) + r * rb, row.data(), w.n_in);
        for (int64_t p = 0; p < w.n_in; ++p) out[size_t(r * w.n_in + (w.in_perm ? w.in_perm[p] : p))] = row[size_t(p)];
    }
    return out;
}

std::array<const WeightView*, 7> linears(const LayerWeights& L) {
    return {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
}

}  // namespace

class TstGptqCheckpoint : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void weights_equal_reference_data();
    void weights_equal_reference();
    void permuted_matmul_equals_numpy();
    void pack_unpack_round_trip();
    void save_load_round_trip_data();
    void save_load_round_trip();
    void bad_checkpoints_data();
    void bad_checkpoints();

private:
    QString make(const std::string& out, const std::string& ref, const QStringList& extra);
    std::string m_src;
    QString m_skip;
};

QString TstGptqCheckpoint::make(const std::string& out, const std::string& ref, const QStringList& extra) {
    return test::run_python(QStringList{QString::fromStdString(kScript), QString::fromStdString(m_src),
                                        QString::fromStdString(out), QString::fromStdString(ref)} +
                            extra)
        .error;
}

void TstGptqCheckpoint::initTestCase() {
    test::TinyModelSpec s;
    s.n_embd = 128;
    s.n_head = 2;
    s.n_kv_head = 1;
    s.n_ff = 256;
    s.seed = 21;
    m_src = test::output_path("gptq_src");
    fs::remove_all(m_src);
    QVERIFY(test::write_tiny_safetensors_folder(m_src, s).is_ok());
    const auto probe = test::run_python({"-c", "import numpy, safetensors"});
    if (!probe.ok)
        m_skip = "needs Python with numpy and safetensors (installer/setup.sh makes the venv): " + probe.error;
}

void TstGptqCheckpoint::weights_equal_reference_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("type");  // the DType the linears load as
    QTest::newRow("g128 sym v1") << QStringList{"--group", "128"} << int(DType::I4_G128);
    QTest::newRow("g64 asym v2 in config.json")
        << QStringList{"--group", "64", "--asym", "--format", "gptq_v2", "--in-config"} << int(DType::I4_G64);
    QTest::newRow("g32 asym v1") << QStringList{"--group", "32", "--asym"} << int(DType::Q4_1);
    QTest::newRow("whole rows (-1) sym") << QStringList{"--group", "-1"} << int(DType::I4_G128);
    QTest::newRow("8-bit sym g128") << QStringList{"--group", "128", "--bits", "8"} << int(DType::Q8_0);
    QTest::newRow("act-order static groups")
        << QStringList{"--group", "64", "--asym", "--act-order", "static"} << int(DType::I4_G64);
    QTest::newRow("act-order permuted g_idx, g64 asym")
        << QStringList{"--group", "64", "--asym", "--act-order", "permuted"} << int(DType::I4_G64);
    QTest::newRow("act-order permuted g_idx, g32 asym v2")
        << QStringList{"--group", "32", "--asym", "--act-order", "permuted", "--format", "gptq_v2"} << int(DType::Q4_1);
    QTest::newRow("act-order permuted g_idx, g64 sym 8-bit")
        << QStringList{"--group", "64", "--bits", "8", "--act-order", "permuted"} << int(DType::Q8_0);
}

void TstGptqCheckpoint::weights_equal_reference() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    QFETCH(QStringList, args);
    QFETCH(int, type);
    const std::string out = test::output_path("gptq_ckpt"), ref = test::output_path("gptq_ckpt_ref");
    const QString err = make(out, ref, args);
    QVERIFY2(err.isEmpty(), qPrintable(err));
    auto g = load_model(out);
    QVERIFY2(g, g.message().c_str());
    auto r = load_model(ref);
    QVERIFY2(r, r.message().c_str());
    QCOMPARE(g.value()->format, std::string("safetensors (GPTQ)"));
    const auto t = static_cast<DType>(type);
    int n_checked = 0;
    for (size_t il = 0; il < g.value()->layers.size(); ++il) {
        const auto wg = linears(g.value()->layers[il]), wr = linears(r.value()->layers[il]);
        for (size_t k = 0; k < 7; ++k) {
            QCOMPARE(int(wg[k]->dtype), int(t));
            QCOMPARE(wg[k]->in_perm != nullptr, args.contains("permuted"));  // act-order: the input permutation
            QVERIFY(wr[k]->in_perm == nullptr);
            QCOMPARE(wg[k]->n_in, wr[k]->n_in);
            QCOMPARE(wg[k]->n_out, wr[k]->n_out);
            const auto a = dequant(*wg[k]), b = dequant(*wr[k]);
            float worst = 0.0f, scale = 0.0f;
            for (size_t i = 0; i < a.size(); ++i) {
                worst = std::max(worst, std::fabs(a[i] - b[i]));
                scale = std::max(scale, std::fabs(b[i]));
            }
            // exact, except Q4_1's m = fp16(-d * z): within 2^-11 of d * z <= the row's range
            const float tol = t == DType::Q4_1 ? scale * std::ldexp(1.0f, -10) : 0.0f;
            QVERIFY2(worst <= tol, qPrintable(QString("layer %1 linear %2: max |loaded - reference| = %3 (allowed %4)")
                                                  .arg(il)
                                                  .arg(k)
                                                  .arg(worst)
                                                  .arg(tol)));
            ++n_checked;
        }
    }
    QCOMPARE(n_checked, 7 * g.value()->config.n_layer);
    // the model runs: its next-token logits are those of the float reference folder (the
    // 4-bit weights multiply int8-quantized activations, hence the tolerance), and without
    // the input permutations they are not
    const auto lg = test::last_logits(g.value()), lr = test::last_logits(r.value());
    QVERIFY(!lg.empty() && lg.size() == lr.size());
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < lg.size(); ++i) diff += (lg[i] - lr[i]) * (lg[i] - lr[i]), norm += lr[i] * lr[i];
    qInfo("relative logit difference to the reference folder: %.2e", std::sqrt(diff / norm));
    QVERIFY(std::sqrt(diff / norm) < 0.03);
    if (args.contains("permuted")) {
        auto stripped = std::make_shared<Model>(*g.value());
        for (LayerWeights& L : stripped->layers)
            for (WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) w->in_perm = nullptr;
        const auto ls = test::last_logits(stripped);
        double d0 = 0.0;
        for (size_t i = 0; i < ls.size(); ++i) d0 += (ls[i] - lr[i]) * (ls[i] - lr[i]);
        qInfo("without the permutations: %.2e", std::sqrt(d0 / norm));
        QVERIFY(std::sqrt(d0 / norm) > 0.1);
    }
}

void TstGptqCheckpoint::permuted_matmul_equals_numpy() {
    // numpy's x . W^T for every linear of layer 0 of an act-order folder (permuted g_idx)
    // against the CPU matmul of the loaded weight, scalar and AVX2
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    const std::string out = test::output_path("gptq_perm"), ref = test::output_path("gptq_perm_ref"),
                      check = test::output_path("gptq_perm_matmul.json");
    const QString err =
        make(out, ref,
             {"--group", "64", "--asym", "--act-order", "permuted", "--matmul-check", QString::fromStdString(check)});
    QVERIFY2(err.isEmpty(), qPrintable(err));
    auto g = load_model(out);
    QVERIFY2(g, g.message().c_str());
    std::ifstream in(check);
    const nlohmann::json j = nlohmann::json::parse(in);
    QCOMPARE(int(j["checks"].size()), 7);
    const char* names[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                            "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    const auto ws = linears(g.value()->layers[0]);
    for (const char* level : {"scalar", "avx2"}) {
        std::string why;
        auto be = make_cpu_backend(1, level, &why);
        if (!be) {
            qInfo("CPU level %s not available: %s", level, why.c_str());
            continue;
        }
        for (const auto& c : j["checks"]) {
            const std::string module = c["module"];
            int k = 0;
            while (k < 7 && module.find(names[k]) == std::string::npos) ++k;
            QVERIFY2(k < 7, module.c_str());
            const WeightView& w = *ws[size_t(k)];
            QVERIFY(w.in_perm);
            const auto x = c["x"].get<std::vector<std::vector<float>>>();
            const auto yref = c["y"].get<std::vector<std::vector<double>>>();
            std::vector<float> xf, y(size_t(3 * w.n_out));  // [3, n_in], [3, n_out]
            for (const auto& r : x) xf.insert(xf.end(), r.begin(), r.end());
            QCOMPARE(int64_t(xf.size()), 3 * w.n_in);
            be->matmul(w, xf.data(), y.data(), 3);
            double diff = 0.0, norm = 0.0;
            for (int t = 0; t < 3; ++t)
                for (int64_t o = 0; o < w.n_out; ++o) {
                    const double d = y[size_t(t * w.n_out + o)] - yref[size_t(t)][size_t(o)];
                    diff += d * d, norm += yref[size_t(t)][size_t(o)] * yref[size_t(t)][size_t(o)];
                }
            const double rel = std::sqrt(diff / norm);
            QVERIFY2(rel < 1e-2, qPrintable(QString("%1 %2: relative error %3 against numpy")
                                                .arg(level)
                                                .arg(QString::fromStdString(module))
                                                .arg(rel)));
        }
    }
}

void TstGptqCheckpoint::pack_unpack_round_trip() {
    // a GptqMatrix with act-order-style static groups packs to the checkpoint tensors and
    // back to itself, in both zero layouts and both bit widths
    for (int bits : {4, 8})
        for (bool v1 : {true, false}) {
            GptqMatrix m;
            m.n_in = 64, m.n_out = 16, m.group = 32, m.bits = bits;
            const int maxq = (1 << bits) - 1;
            m.q.resize(size_t(m.n_in * m.n_out));
            for (size_t i = 0; i < m.q.size(); ++i) m.q[i] = uint8_t((i * 7 + 3) % (maxq + 1));
            m.zeros.resize(size_t(2 * m.n_out));
            m.scales.resize(m.zeros.size());
            for (size_t i = 0; i < m.zeros.size(); ++i) {
                m.zeros[i] = int32_t(1 + (i * 5) % maxq);
                m.scales[i] = cpu::fp16_to_fp32(cpu::fp32_to_fp16(0.01f * float(i + 1)));
            }
            m.g_idx.resize(size_t(m.n_in));
            for (int64_t i = 0; i < m.n_in; ++i) m.g_idx[size_t(i)] = int32_t(i / 32);
            const GptqPacked p = pack_gptq_linear(m, v1);
            QCOMPARE(int64_t(p.qweight.size()), m.n_in * bits / 32 * m.n_out);
            QCOMPARE(int64_t(p.qzeros.size()), 2 * m.n_out * bits / 32);
            // word 0 of qweight holds inputs 0..(32/bits - 1) of output 0, input 0 in the low bits
            QCOMPARE(int(uint32_t(p.qweight[0]) & uint32_t(maxq)), int(m.q[0]));
            QCOMPARE(int((uint32_t(p.qweight[0]) >> bits) & uint32_t(maxq)), int(m.q[1]));
            QCOMPARE(int(uint32_t(p.qzeros[0]) & uint32_t(maxq)), m.zeros[0] - (v1 ? 1 : 0));
        }
}

void TstGptqCheckpoint::save_load_round_trip_data() {
    QTest::addColumn<QString>("scheme");
    QTest::newRow("int4-gptq") << "int4-gptq";
    QTest::newRow("int4-gptq-act (act-order, permuted g_idx)") << "int4-gptq-act";
    QTest::newRow("int4-gptq-act in groups of 64 (every linear permuted)") << "int4-gptq-act g64";
    QTest::newRow("int4-gptq-act in groups of 32 (Q4_1, permuted)") << "int4-gptq-act g32";
}

void TstGptqCheckpoint::save_load_round_trip() {
    // GPTQ of a Hugging Face folder, saved as a GPTQ folder and loaded back: the same weights
    QFETCH(QString, scheme);
    auto src = load_model(m_src);
    QVERIFY2(src, src.message().c_str());
    QuantOptions qo;
    for (int i = 0; i < 128; ++i) qo.calibration_tokens.push_back(int32_t((i * 53 + 7) % 280));
    const QStringList words = scheme.split(' ');
    const auto parsed = QuantScheme::parse(words[0].toStdString()).value();
    if (words.size() > 1) {
        qo.gptq = gptq_defaults(parsed);
        qo.gptq->group_size = words[1].mid(1).toInt();
    }
    auto v = quantize_model(src.value(), parsed, qo);
    QVERIFY2(v, v.message().c_str());
    const bool act = words[0] == "int4-gptq-act";
    int n_permuted = 0;
    for (const LayerWeights& L : v.value()->layers)
        for (const WeightView* w : linears(L)) n_permuted += w->in_perm ? 1 : 0;
    if (act) QVERIFY(n_permuted > 0);
    else
        QCOMPARE(n_permuted, 0);
    const std::string out = test::output_path("gptq_saved_" + QString(scheme).replace(' ', '_').toStdString());
    fs::remove_all(out);
    if (act) {  // GGUF has no input permutation: refused, naming the linear
        auto gguf = save_variant(*v.value(), out + ".gguf");
        QVERIFY(!gguf);
        QVERIFY2(gguf.message().find("permuted input columns") != std::string::npos, gguf.message().c_str());
        QVERIFY(!fs::exists(out + ".gguf"));
    }
    auto saved = save_variant(*v.value(), out);
    QVERIFY2(saved, saved.message().c_str());
    QCOMPARE(saved.value().format, std::string("gptq"));
    auto cfg = read_gptq_config(out);
    QVERIFY(cfg && cfg.value());
    QCOMPARE(cfg.value()->desc_act, act);
    QCOMPARE(cfg.value()->static_groups, false);
    QCOMPARE(cfg.value()->sym, false);
    auto back = load_model(out);
    QVERIFY2(back, back.message().c_str());
    QCOMPARE(back.value()->format, std::string("safetensors (GPTQ)"));
    for (size_t il = 0; il < back.value()->layers.size(); ++il) {
        const auto a = linears(v.value()->layers[il]), b = linears(back.value()->layers[il]);
        for (size_t k = 0; k < 7; ++k) {
            QCOMPARE(int(b[k]->dtype), int(a[k]->dtype));
            QCOMPARE(b[k]->in_perm != nullptr, a[k]->in_perm != nullptr);
            if (a[k]->in_perm) QVERIFY(std::equal(a[k]->in_perm, a[k]->in_perm + a[k]->n_in, b[k]->in_perm));
            QVERIFY(dequant(*a[k]) == dequant(*b[k]));
        }
    }
}

void TstGptqCheckpoint::bad_checkpoints_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expect");  // the message names this
    QTest::newRow("bits 3") << QStringList{"--defect", "bits3"} << "bits = 3";
    QTest::newRow("missing g_idx") << QStringList{"--defect", "missing_g_idx"} << ".g_idx";
    QTest::newRow("qweight shape") << QStringList{"--defect", "qweight_shape"} << ".qweight' has shape";
    QTest::newRow("checkpoint_format marlin")
        << QStringList{"--defect", "format_marlin"} << "checkpoint_format 'marlin'";
    QTest::newRow("g_idx out of range") << QStringList{"--defect", "g_idx_range"} << ".g_idx' entry 5";
    QTest::newRow("act-order g_idx with an uneven group")
        << QStringList{"--group", "64", "--act-order", "permuted", "--defect", "g_idx_uneven"}
        << ".g_idx'): GPTQ: g_idx gives group 0 65 input columns, expected group_size = 64";
}

void TstGptqCheckpoint::bad_checkpoints() {
    if (!m_skip.isEmpty()) QSKIP(qPrintable(m_skip));
    QFETCH(QStringList, args);
    QFETCH(QString, expect);
    const std::string out = test::output_path("gptq_bad"), ref = test::output_path("gptq_bad_ref");
    const QString err = make(out, ref, args);
    QVERIFY2(err.isEmpty(), qPrintable(err));
    auto g = load_model(out);
    QVERIFY(!g);
    QVERIFY2(QString::fromStdString(g.message()).contains(expect), g.message().c_str());
}

QTEST_GUILESS_MAIN(TstGptqCheckpoint)
#include "tst_gptq_checkpoint.moc"
