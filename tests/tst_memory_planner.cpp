// ctest-labels: ui
// The memory planner: its sizing maths (ui/memory_sizing.h) as pure functions, fed the
// engine's own KV bytes per token (kv_cache_bytes_per_token, the one definition; the app
// hands the planner the same function) and checked against hand-computed numbers and
// known model figures (Llama-3-8B holds 128 KiB of FP16 KV per token, 1 GiB for an 8K
// context); then the calculator: presets fill the inputs, the verdict turns red when the
// plan does not fit and green when it does, the loaded model becomes a preset, and
// without a KV source it says the number is missing. Screenshots go to tests/output/.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest>

#include "ui/dark_palette.h"
#include "tests/support/engine_kv_bytes.h"
#include "tests/support/test_paths.h"
#include "tests/support/widget_probe.h"
#include "ui/memory_bar.h"
#include "ui/memory_planner.h"

using kvs::test::engine_kv_bytes_per_token;
using kvs::ui::MemoryBar;
using kvs::ui::MemoryInputs;
using kvs::ui::MemoryPlan;
using kvs::ui::MemoryPlannerView;
using kvs::ui::MemorySizing;

namespace {
constexpr qint64 MiB = qint64(1) << 20;
constexpr qint64 GiB = qint64(1) << 30;

MemoryInputs smol(qint64 context, qint64 batch, qint64 available = 8 * GiB) {
    MemoryInputs in;
    in.layers = 30;
    in.kvHeads = 3;
    in.headDim = 64;
    in.context = context;
    in.batch = batch;
    in.blockSize = 16;
    in.weightBytes = qint64(92.1 * MiB);
    in.availableBytes = available;
    return in;
}

// The plan with the engine's KV bytes per token for in's shape and type.
MemoryPlan planOf(const MemoryInputs& in) {
    return MemorySizing::plan(in, engine_kv_bytes_per_token(in.layers, in.kvHeads, in.headDim, in.kvInt8));
}

// A calculator wired as the app wires it.
void wire(MemoryPlannerView& w) { w.setKvBytesPerTokenFn(engine_kv_bytes_per_token); }

QColor centreColor(QWidget* top, QWidget* w) {
    const QImage img = top->grab().toImage();
    // Left edge of the label's box, halfway down: background, not text.
    const QPoint p = w->mapTo(top, QPoint(3, w->height() / 2));
    return img.pixelColor(p * img.devicePixelRatio());
}
}  // namespace

class TestMemoryPlanner : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void presetShapes_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("kvHeads");
        QTest::addColumn<int>("headDim");
        QTest::addColumn<qint64>("fp16BytesPerToken");
        // config.json: num_hidden_layers, num_key_value_heads, hidden_size / num_attention_heads
        QTest::newRow("SmolLM2-135M") << "SmolLM2-135M" << 30 << 3 << 64 << qint64(23040);
        QTest::newRow("Qwen2-0.5B") << "Qwen2-0.5B" << 24 << 2 << 64 << qint64(12288);
        QTest::newRow("TinyLlama-1.1B") << "TinyLlama-1.1B" << 22 << 4 << 64 << qint64(22528);
        QTest::newRow("Mistral-7B") << "Mistral-7B" << 32 << 8 << 128 << qint64(131072);
        QTest::newRow("Llama-3-8B") << "Llama-3-8B" << 32 << 8 << 128 << qint64(131072);
    }
    void presetShapes() {
        QFETCH(QString, name);
        QFETCH(int, layers);
        QFETCH(int, kvHeads);
        QFETCH(int, headDim);
        QFETCH(qint64, fp16BytesPerToken);
        const auto presets = MemorySizing::presets();
        const auto it = std::find_if(presets.begin(), presets.end(), [&](const auto& p) { return p.name == name; });
        QVERIFY(it != presets.end());
        QCOMPARE(it->layers, layers);
        QCOMPARE(it->kvHeads, kvHeads);
        QCOMPARE(it->headDim, headDim);
        QCOMPARE(engine_kv_bytes_per_token(layers, kvHeads, headDim, false), fp16BytesPerToken);
        // INT8 = the engine's Q8_0 cache: 34 bytes per 32 values
        QCOMPARE(engine_kv_bytes_per_token(layers, kvHeads, headDim, true), fp16BytesPerToken / 2 / 32 * 34);
        // The calculator shows the engine's number for the preset.
        MemoryPlannerView w;
        wire(w);
        QVERIFY(w.selectPreset(name));
        QCOMPARE(w.currentPlan().bytesPerToken, fp16BytesPerToken);
    }

    void planArithmetic() {
        const MemoryInputs in = smol(2048, 4);
        const MemoryPlan p = planOf(in);
        QVERIFY(p.valid);
        QCOMPARE(p.bytesPerToken, qint64(23040));
        QCOMPARE(p.bytesPerBlock, qint64(368640));  // 360 KiB
        QCOMPARE(p.blocksPerSequence, qint64(128));
        QCOMPARE(p.kvBytesPerSequence, qint64(45 * MiB));
        QCOMPARE(p.kvBytes, qint64(180 * MiB));
        QCOMPARE(p.kvBytesUnpaged, p.kvBytes);  // 2048 is a whole number of blocks
        QCOMPARE(p.totalBytes, in.weightBytes + 180 * MiB);
        QVERIFY(p.fits);
        QCOMPARE(p.headroomBytes, 8 * GiB - p.totalBytes);
        const qint64 room = 8 * GiB - in.weightBytes;
        QCOMPARE(p.maxBlocks, room / 368640);
        QCOMPARE(p.maxBatch, p.maxBlocks / 128);
        QCOMPARE(p.maxContext, (p.maxBlocks / 4) * 16);
        // The limits are tight: one more sequence / one more block does not fit.
        QVERIFY(planOf(smol(2048, p.maxBatch)).fits);
        QVERIFY(!planOf(smol(2048, p.maxBatch + 1)).fits);
        QVERIFY(planOf(smol(p.maxContext, 4)).fits);
        QVERIFY(!planOf(smol(p.maxContext + 16, 4)).fits);
    }

    void pagedBlocksRoundUp() {
        const MemoryPlan p = planOf(smol(100, 3));
        QCOMPARE(p.blocksPerSequence, qint64(7));  // ceil(100 / 16)
        QCOMPARE(p.kvBytes, 3 * 7 * qint64(368640));
        QCOMPARE(p.kvBytesUnpaged, 3 * 100 * qint64(23040));
        QCOMPARE(p.kvBytes - p.kvBytesUnpaged, 3 * 12 * qint64(23040));  // 12 empty slots per last block
    }

    void llama3KnownFigure() {
        MemoryInputs in;
        in.layers = 32;
        in.kvHeads = 8;
        in.headDim = 128;
        in.context = 8192;
        in.batch = 1;
        in.blockSize = 16;
        in.weightBytes = 16 * GiB;
        in.availableBytes = 24 * GiB;
        MemoryPlan p = planOf(in);
        QCOMPARE(p.bytesPerToken, qint64(128 * 1024));
        QCOMPARE(p.kvBytes, GiB);
        QVERIFY(p.fits);
        QCOMPARE(p.maxBatch, qint64(8));  // 8 GiB left / 1 GiB per sequence
        in.kvInt8 = true;
        p = planOf(in);
        QCOMPARE(p.kvBytes, GiB / 2 / 32 * 34);  // 544 MiB
        QCOMPARE(p.maxBatch, qint64(15));        // 8 GiB / 544 MiB
        // SmolLM2-135M in INT8: the 12 240 bytes per token `kvscope bench --kv-type int8` reports
        QCOMPARE(engine_kv_bytes_per_token(30, 3, 64, true), qint64(12240));
    }

    void weightsAloneTooBig() {
        MemoryInputs in = smol(2048, 1, 8 * GiB);
        in.weightBytes = 16 * GiB;
        const MemoryPlan p = planOf(in);
        QVERIFY(p.valid);
        QVERIFY(!p.fits);
        QVERIFY(p.headroomBytes < 0);
        QCOMPARE(p.maxBlocks, qint64(0));
        QCOMPARE(p.maxBatch, qint64(0));
        QCOMPARE(p.maxContext, qint64(0));
    }

    void badInputsSayWhich() {
        MemoryInputs in = smol(2048, 1);
        in.layers = 0;
        MemoryPlan p = planOf(in);
        QVERIFY(!p.valid);
        QVERIFY2(p.error.contains("layers"), qPrintable(p.error));
        in = smol(2048, 1);
        in.blockSize = 0;
        p = planOf(in);
        QVERIFY(!p.valid && p.error.contains("block size"));
        in = smol(2048, 1);
        in.weightBytes = -5;
        p = planOf(in);
        QVERIFY(!p.valid && p.error.contains("weight bytes"));
        // No KV bytes per token: the plan says the number is missing rather than guess it.
        p = MemorySizing::plan(smol(2048, 1), 0);
        QVERIFY(!p.valid);
        QVERIFY2(p.error.contains("KV bytes per token"), qPrintable(p.error));
    }

    void kvSourceAskedForTheShapeOnScreen() {
        // Without a source the calculator shows no plan and says why.
        MemoryPlannerView w;
        QVERIFY(!w.currentPlan().valid);
        QVERIFY2(w.resultText().contains("KV bytes per token"), qPrintable(w.resultText()));
        // The source gets the shape and the KV type on screen; its number is the plan's.
        struct Ask {
            int layers, kvHeads, headDim;
            bool int8;
        };
        QVector<Ask> asked;
        w.setKvBytesPerTokenFn([&asked](int nLayer, int nKvHead, int headDim, bool int8) {
            asked.push_back({nLayer, nKvHead, headDim, int8});
            return qint64(1000);
        });
        QVERIFY(!asked.isEmpty());
        QCOMPARE(asked.back().layers, 30);  // SmolLM2, the first preset
        QCOMPARE(asked.back().kvHeads, 3);
        QCOMPARE(asked.back().headDim, 64);
        QVERIFY(!asked.back().int8);
        QCOMPARE(w.currentPlan().bytesPerToken, qint64(1000));
        QCOMPARE(w.currentPlan().bytesPerBlock, qint64(16000));
        w.findChild<QComboBox*>("plannerDtype")->setCurrentIndex(1);
        QVERIFY(asked.back().int8);
        w.findChild<QSpinBox*>("plannerKvHeads")->setValue(5);
        QCOMPARE(asked.back().kvHeads, 5);
        MemoryInputs in = w.inputs();
        QVERIFY(in.kvInt8);
        in.kvInt8 = false;
        w.setInputs(in);
        QVERIFY(!asked.back().int8);
    }

    void hugeInputsSaturate() {
        MemoryInputs in;
        in.layers = 1024;
        in.kvHeads = 1024;
        in.headDim = 4096;
        in.context = qint64(1) << 40;
        in.batch = qint64(1) << 30;
        in.availableBytes = 1024 * GiB;
        const MemoryPlan p = planOf(in);
        QVERIFY(p.valid);
        QVERIFY(!p.fits);
        QCOMPARE(p.totalBytes, std::numeric_limits<qint64>::max());
        QVERIFY(p.kvBytes > 0);
    }

    void formatBytes() {
        QCOMPARE(MemorySizing::formatBytes(512), QString("512 B"));
        QCOMPARE(MemorySizing::formatBytes(23040), QString("22.5 KiB"));
        QCOMPARE(MemorySizing::formatBytes(368640), QString("360 KiB"));
        QCOMPARE(MemorySizing::formatBytes(45 * MiB), QString("45 MiB"));
        QCOMPARE(MemorySizing::formatBytes(3 * GiB / 2), QString("1.5 GiB"));
        QCOMPARE(MemorySizing::formatBytes(qint64(92.1 * MiB)), QString("92.1 MiB"));
    }

    void weightsFromFormats() {
        // Parameters × bits / 8: Llama-3-8B in F16 is ~16 GB, Q4_K_M ~4.9 GB.
        QCOMPARE(MemorySizing::weightBytes(8'030'261'248, 16), qint64(16'060'522'496));
        QVERIFY(std::abs(MemorySizing::weightBytes(8'030'261'248, 4.85) - 4.87e9) < 0.02e9);
    }

    void calculatorWidget() {
        MemoryPlannerView w;
        wire(w);
        w.resize(1100, 560);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QCOMPARE(w.objectName(), QString("memoryPlanner"));
        QSignalSpy spy(&w, &MemoryPlannerView::planChanged);
        // The default: SmolLM2 with its installed Q4_1 file.
        QCOMPARE(w.currentPlan().bytesPerToken, qint64(23040));
        QVERIFY(std::abs(w.inputs().weightBytes - qint64(92.1 * MiB)) < MiB / 10);

        QVERIFY(w.selectPreset("Llama-3-8B"));
        QCOMPARE(w.findChild<QSpinBox*>("plannerLayers")->value(), 32);
        QCOMPARE(w.findChild<QSpinBox*>("plannerKvHeads")->value(), 8);
        QCOMPARE(w.findChild<QSpinBox*>("plannerHeadDim")->value(), 128);
        QCOMPARE(w.findChild<QComboBox*>("plannerWeightFormat")->currentData().toString(), QString("Q4_K_M"));
        QVERIFY(spy.count() > 0);
        w.findChild<QSpinBox*>("plannerContext")->setValue(8192);
        w.findChild<QSpinBox*>("plannerBatch")->setValue(4);
        w.setAvailableMemory(8 * GiB);
        MemoryPlan p = w.currentPlan();
        QCOMPARE(p.bytesPerToken, qint64(131072));
        QCOMPARE(p.kvBytes, 4 * GiB);
        QVERIFY(!p.fits);  // 4.5 GiB of weights + 4 GiB of KV
        auto* verdict = w.findChild<QLabel*>("plannerVerdict");
        QVERIFY(verdict);
        QCOMPARE(verdict->property("fits").toBool(), false);
        QVERIFY2(verdict->text().contains("Does not fit"), qPrintable(verdict->text()));
        QApplication::processEvents();
        QVERIFY(kvs::test::colors_near(centreColor(&w, verdict), MemoryBar::overColor(), 8));
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("memory_planner_too_big.png"))));
        QCOMPARE(p.maxBatch, qint64(3));
        QVERIFY(w.findChild<QLabel*>("plannerLimits")->text().contains("<b>3 sequences</b>"));

        w.setAvailableMemory(24 * GiB);
        p = w.currentPlan();
        QVERIFY(p.fits);
        QCOMPARE(verdict->property("fits").toBool(), true);
        QApplication::processEvents();
        QVERIFY(kvs::test::colors_near(centreColor(&w, verdict), MemoryBar::fitColor(), 8));
        auto* bar = w.findChild<MemoryBar*>("plannerMemoryBar");
        QCOMPARE(bar->capacity(), 24 * GiB);
        QCOMPARE(bar->total(), p.totalBytes);

        // INT8 about halves the cache (1.0625 bytes a value); F16 weights are bigger than Q4_K_M.
        w.findChild<QComboBox*>("plannerDtype")->setCurrentIndex(1);
        QCOMPARE(w.currentPlan().kvBytes, 2 * GiB / 32 * 34);  // INT8: 34 bytes per 32 values
        const qint64 q4 = w.inputs().weightBytes;
        auto* fmt = w.findChild<QComboBox*>("plannerWeightFormat");
        fmt->setCurrentIndex(fmt->findData("F16"));
        QVERIFY(w.inputs().weightBytes > 3 * q4);
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("memory_planner.png"))));

        // Editing the shape by hand leaves the preset.
        w.findChild<QSpinBox*>("plannerLayers")->setValue(40);
        QCOMPARE(w.findChild<QComboBox*>("plannerPreset")->currentText(), QString("Custom"));
        QCOMPARE(w.currentPlan().bytesPerToken, qint64(2 * 40 * (8 * 128 / 32) * 34));  // still INT8
        QVERIFY(w.resultText().contains("Per token"));
    }

    void loadedModelPreset() {
        MemoryPlannerView w;
        wire(w);
        w.resize(1100, 560);
        w.show();
        w.setLoadedModel("SmolLM2-135M-Instruct.Q4_1", 30, 3, 64, 96'573'030, 9);
        QVERIFY(w.presetNames().first().startsWith("Loaded: SmolLM2-135M-Instruct.Q4_1"));
        // the attention-variants box starts from the model's own 9 query heads (GQA group 3)
        QCOMPARE(w.findChild<QSpinBox*>("plannerHeads")->value(), 9);
        QCOMPARE(w.findChild<QSpinBox*>("plannerGroup")->value(), 3);
        QCOMPARE(w.findChild<QComboBox*>("plannerPreset")->currentIndex(), 0);
        QCOMPARE(w.currentPlan().bytesPerToken, qint64(23040));
        QVERIFY(std::abs(w.inputs().weightBytes - 96'573'030) < MiB / 10);
        const int n = w.presetNames().size();
        w.setLoadedModel("tiny", 2, 2, 16, 4 * MiB);
        QCOMPARE(w.presetNames().size(), n);  // replaced, not added
        QCOMPARE(w.currentPlan().bytesPerToken, qint64(2 * 2 * 2 * 16 * 2));
        QVERIFY(w.selectPreset("Qwen2-0.5B"));
        QCOMPARE(w.currentPlan().bytesPerToken, qint64(12288));
    }

    void darkTheme() {
        MemoryPlannerView w;
        wire(w);
        w.setPalette(kvs::ui::dark_palette());
        w.resize(1100, 560);
        w.show();
        w.selectPreset("TinyLlama-1.1B");
        w.setAvailableMemory(2 * GiB);
        QApplication::processEvents();
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("memory_planner_dark.png"))));
    }
};

QTEST_MAIN(TestMemoryPlanner)
#include "tst_memory_planner.moc"
