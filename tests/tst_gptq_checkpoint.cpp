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

std::vector<float> dequant(const WeightView& w) {
    std::vector<float> out(static_cast<size_t>(w.n_in * w.n_out));  // [n_out, n_in]
    const size_t rb = row_bytes(w.dtype, w.n_in);
    for (int64_t r = 0; r < w.n_out; ++r)
        cpu::dequantize_row(w.dtype, static_cast<const uint8_t*>(w.data) + r * rb, &out[size_t(r * w.n_in)], w.n_in);
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
    QTest::newRow("int4-gptq-act (act-order, static groups)") << "int4-gptq-act";
}

void TstGptqCheckpoint::save_load_round_trip() {
    // GPTQ of a Hugging Face folder, saved as a GPTQ folder and loaded back: the same weights
    QFETCH(QString, scheme);
    auto src = load_model(m_src);
    QVERIFY2(src, src.message().c_str());
    QuantOptions qo;
    for (int i = 0; i < 128; ++i) qo.calibration_tokens.push_back(int32_t((i * 53 + 7) % 280));
    auto v = quantize_model(src.value(), QuantScheme::parse(scheme.toStdString()).value(), qo);
    QVERIFY2(v, v.message().c_str());
    const std::string out = test::output_path("gptq_saved_" + scheme.toStdString());
    fs::remove_all(out);
    auto saved = save_variant(*v.value(), out);
    QVERIFY2(saved, saved.message().c_str());
    QCOMPARE(saved.value().format, std::string("gptq"));
    auto cfg = read_gptq_config(out);
    QVERIFY(cfg && cfg.value());
    QCOMPARE(cfg.value()->desc_act, scheme == "int4-gptq-act");
    QCOMPARE(cfg.value()->sym, false);
    auto back = load_model(out);
    QVERIFY2(back, back.message().c_str());
    QCOMPARE(back.value()->format, std::string("safetensors (GPTQ)"));
    for (size_t il = 0; il < back.value()->layers.size(); ++il) {
        const auto a = linears(v.value()->layers[il]), b = linears(back.value()->layers[il]);
        for (size_t k = 0; k < 7; ++k) {
            QCOMPARE(int(b[k]->dtype), int(a[k]->dtype));
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
    QTest::newRow("act-order permutation") << QStringList{"--act-order", "permuted"} << "act-order permutation";
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
