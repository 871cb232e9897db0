// ctest-labels: unit model
// Progress and cancel of the long quantization work (engine/core/progress.h) on tiny
// models: quantize_model (RTN, AWQ, GPTQ), calibration, compare_quality and save_variant
// report fractions that never go down and end at 1; a cancel flag raised part-way (by
// the listener itself, so the point is deterministic) makes each return an error that
// Progress::is_cancelled recognizes, and a cancelled save leaves neither the output nor a
// temporary file behind. (The terminal side is tst_progress_line.)
#include <QtTest>

#include <filesystem>

#include "engine/core/progress.h"
#include "engine/model/model.h"
#include "engine/quant/calibration.h"
#include "engine/quant/eval.h"
#include "engine/quant/quantize.h"
#include "engine/quant/save_variant.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
namespace fs = std::filesystem;

namespace {

// What a listener heard; it raises the flag once the fraction reaches cancel_at (> 1: never).
struct Recorder {
    CancelFlag flag{false};
    double cancel_at = 2.0;
    std::vector<double> fractions;
    std::vector<std::string> stages;
    Progress progress() {
        return Progress(
            [this](const std::string& stage, double f) {
                fractions.push_back(f);
                stages.push_back(stage);
                if (f >= cancel_at) flag = true;
            },
            &flag);
    }
    bool monotone() const {
        for (size_t i = 1; i < fractions.size(); ++i)
            if (fractions[i] < fractions[i - 1]) return false;
        return true;
    }
};

std::vector<int32_t> calibration_tokens(int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(int32_t((i * 37 + 11) % 290));
    return t;
}

// Files in dir whose name starts with stem (the output and its temporaries).
QStringList files_named(const fs::path& dir, const std::string& stem) {
    QStringList out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().rfind(stem, 0) == 0) out << QString::fromStdString(e.path().string());
    return out;
}

}  // namespace

class TstQuantCancel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        test::TinyModelSpec spec;
        spec.n_layer = 4;
        spec.n_embd = 128;
        spec.n_ff = 256;
        spec.n_head = 2;
        spec.n_kv_head = 1;
        spec.seed = 9;
        auto m = test::write_and_load_tiny_gguf(test::output_path("cancel_tiny.gguf"), spec);
        QVERIFY2(m, m.message().c_str());
        m_model = m.value();
    }

    void quantizeReportsAndCancels_data() {
        QTest::addColumn<QString>("scheme");
        QTest::newRow("int4-rtn") << "int4-rtn";
        QTest::newRow("int4-gptq") << "int4-gptq";
        QTest::newRow("int4-gptq-act") << "int4-gptq-act";
        QTest::newRow("int4-awq") << "int4-awq";
    }
    void quantizeReportsAndCancels() {
        QFETCH(QString, scheme);
        const QuantScheme s = QuantScheme::parse(scheme.toStdString()).value();
        QuantOptions qo;
        qo.calibration_tokens = calibration_tokens(256);

        Recorder whole;  // the full run: monotone, ends at 1
        qo.progress = whole.progress();
        auto m = quantize_model(m_model, s, qo);
        QVERIFY2(m, m.message().c_str());
        QVERIFY(whole.fractions.size() >= 4);  // at least one report per layer
        QVERIFY(whole.monotone());
        QCOMPARE(whole.fractions.back(), 1.0);
        QVERIFY(whole.fractions.front() < 0.5);

        Recorder part;  // cancelled once a third is done
        part.cancel_at = 0.3;
        qo.progress = part.progress();
        auto c = quantize_model(m_model, s, qo);
        QVERIFY(!c);
        QVERIFY2(Progress::is_cancelled(c.status()), c.message().c_str());
        QVERIFY(part.monotone());
        QVERIFY2(part.fractions.back() < 1.0, qPrintable(QString::number(part.fractions.back())));
    }

    void calibrationCancels() {
        Recorder r;
        r.cancel_at = 0.25;
        CalibrationOptions co;
        co.seq_len = 64;
        co.chunk = 32;
        co.progress = r.progress();
        auto d = collect_activations(m_model, calibration_tokens(256), co);
        QVERIFY(!d);
        QVERIFY2(Progress::is_cancelled(d.status()), d.message().c_str());
        QVERIFY(r.monotone());
        Recorder full;
        co.progress = full.progress();
        QVERIFY(collect_activations(m_model, calibration_tokens(256), co));
        QCOMPARE(full.fractions.back(), 1.0);
        QCOMPARE(int(full.fractions.size()), 8);  // 256 tokens in chunks of 32
    }

    void evaluationReportsAndCancels() {
        auto v = quantize_model(m_model, QuantScheme::parse("q8_0").value());
        QVERIFY(v);
        std::vector<int32_t> text = calibration_tokens(64 * 4);
        EvalOptions eo;
        eo.n_ctx = 64;
        Recorder full;
        eo.progress = full.progress();
        auto rep = compare_quality(m_model, {v.value()}, text, eo);
        QVERIFY2(rep, rep.message().c_str());
        QVERIFY(full.monotone());
        QCOMPARE(full.fractions.back(), 1.0);
        QCOMPARE(int(full.fractions.size()), 4 * 2 + 1);  // per chunk: reference, variant; then done

        Recorder part;
        part.cancel_at = 0.5;
        eo.progress = part.progress();
        auto c = compare_quality(m_model, {v.value()}, text, eo);
        QVERIFY(!c);
        QVERIFY2(Progress::is_cancelled(c.status()), c.message().c_str());
        QVERIFY(part.fractions.back() < 1.0);
    }

    void cancelledSaveLeavesNothing() {
        auto v = quantize_model(m_model, QuantScheme::parse("q4_0").value());
        QVERIFY(v);
        const fs::path dir = test::output_path("cancel_save");
        fs::remove_all(dir);
        fs::create_directories(dir);
        CancelFlag raised{true};
        auto s = save_variant(*v.value(), (dir / "out.gguf").string(), Progress({}, &raised));
        QVERIFY(!s);
        QVERIFY2(Progress::is_cancelled(s.status()), s.message().c_str());
        QCOMPARE(files_named(dir, "out"), QStringList());
        Recorder r;
        auto ok = save_variant(*v.value(), (dir / "out.gguf").string(), r.progress());
        QVERIFY2(ok, ok.message().c_str());
        QCOMPARE(files_named(dir, "out"), QStringList{QString::fromStdString((dir / "out.gguf").string())});
        QCOMPARE(r.fractions.back(), 1.0);
    }

    void cancelledFolderSaveLeavesNothing() {
        // A GPTQ folder from a Hugging Face tiny model: a save cancelled before it starts
        // leaves no folder and no temporary folder; an uncancelled one leaves only `out`.
        test::TinyModelSpec spec;
        spec.n_embd = 128;
        spec.n_ff = 256;
        spec.n_head = 2;
        spec.n_kv_head = 1;
        const fs::path dir = test::output_path("cancel_folder");
        fs::remove_all(dir);
        fs::create_directories(dir);
        QVERIFY(test::write_tiny_safetensors_folder((dir / "src").string(), spec).is_ok());
        auto src = load_model((dir / "src").string());
        QVERIFY2(src, src.message().c_str());
        QuantOptions qo;
        qo.calibration_tokens = calibration_tokens(128);
        auto v = quantize_model(src.value(), QuantScheme::parse("int4-gptq").value(), qo);
        QVERIFY2(v, v.message().c_str());
        CancelFlag raised{true};
        auto s = save_variant(*v.value(), (dir / "gptq").string(), Progress({}, &raised));
        QVERIFY(!s);
        QVERIFY(Progress::is_cancelled(s.status()));
        QCOMPARE(files_named(dir, "gptq"), QStringList());
        auto ok = save_variant(*v.value(), (dir / "gptq").string());
        QVERIFY2(ok, ok.message().c_str());
        QCOMPARE(files_named(dir, "gptq"), QStringList{QString::fromStdString((dir / "gptq").string())});
        QVERIFY(fs::exists(dir / "gptq" / "model.safetensors"));
        QVERIFY(fs::exists(dir / "gptq" / "quantize_config.json"));
    }

private:
    std::shared_ptr<Model> m_model;
};

QTEST_APPLESS_MAIN(TstQuantCancel)
#include "tst_quant_cancel.moc"
