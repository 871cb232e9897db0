// ctest-labels: ui
// The memory planner's attention variants and tensor parallelism (MemorySizing::parallel and
// the planner's "Attention variants · tensor parallel" box), fed the engine's KV bytes per
// token and checked against hand formulas: the course's worked example (LLaMA-7B, FP16, MHA,
// 2,048 tokens: 2 x 32 layers x 4096 x 2 bytes x 2048 = 1,073,741,824 bytes = 1.07 GB of KV
// per sequence), GQA and MQA dividing it by the group and by the heads, KV per GPU with
// replicated heads when there are fewer KV heads than GPUs, weights per GPU and the
// all-reduce bytes per token (2 x layers x hidden x 2 bytes; a ring sends 2 (tp-1)/tp of it).
// Saves the planner's screenshot for docs/screenshots/memory_planner_gqa_tp.png.
#include <QComboBox>
#include <QLabel>
#include <QSpinBox>
#include <QtTest>

#include "tests/support/engine_kv_bytes.h"
#include "tests/support/test_paths.h"
#include "ui/memory_planner.h"

using kvs::test::engine_kv_bytes_per_token;
using namespace kvs::ui;

namespace {
MemoryInputs llama7b(qint64 batch = 1) {
    MemoryInputs in;
    in.layers = 32;
    in.kvHeads = 32;
    in.headDim = 128;
    in.context = 2048;
    in.batch = batch;
    in.blockSize = 16;
    in.weightBytes = 6'738'415'616LL * 2;  // FP16
    in.availableBytes = 80LL << 30;
    return in;
}
}  // namespace

class TestMemoryParallel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void workedExampleLlama7b() {
        ParallelInputs p;  // 32 query heads, GQA-8, one GPU
        const ParallelPlan r = MemorySizing::parallel(llama7b(), p, engine_kv_bytes_per_token);
        QVERIFY2(r.valid, qPrintable(r.error));
        QCOMPARE(int(r.variants.size()), 3);
        const qint64 hand = 2LL * 32 * 4096 * 2 * 2048;  // K and V x layers x hidden x FP16 x tokens
        QCOMPARE(hand, 1'073'741'824LL);
        QCOMPARE(r.variants[0].name, QString("MHA"));
        QCOMPARE(r.variants[0].kvHeads, 32);
        QCOMPARE(r.variants[0].bytesPerToken, 2LL * 32 * 4096 * 2);  // 512 KiB per token
        QCOMPARE(r.variants[0].kvBytesPerSequence, hand);
        QCOMPARE(MemorySizing::formatDecimalBytes(r.variants[0].kvBytesPerSequence), QString("1.07 GB"));
        // GQA-8: 4 KV heads, an eighth; MQA: one head, a 32nd
        QCOMPARE(r.variants[1].name, QString("GQA-8"));
        QCOMPARE(r.variants[1].kvHeads, 4);
        QCOMPARE(r.variants[1].kvBytesPerSequence, hand / 8);
        QCOMPARE(r.variants[2].name, QString("MQA"));
        QCOMPARE(r.variants[2].kvHeads, 1);
        QCOMPARE(r.variants[2].kvBytesPerSequence, hand / 32);
        // one GPU holds everything; nothing to all-reduce over a ring of one
        QCOMPARE(r.variants[0].kvBytesPerGpu, hand);
        QCOMPARE(r.weightBytesPerGpu, 6'738'415'616LL * 2);
        QCOMPARE(r.hidden, 4096LL);
        QCOMPARE(r.allReduceBytesPerToken, 2LL * 32 * 4096 * 2);
        QCOMPARE(r.ringBytesPerGpuPerToken, 0LL);
    }

    void tensorParallelSplitsWeightsAndHeads() {
        ParallelInputs p;
        p.tp = 4;
        const MemoryInputs in = llama7b(8);
        const ParallelPlan r = MemorySizing::parallel(in, p, engine_kv_bytes_per_token);
        QVERIFY2(r.valid, qPrintable(r.error));
        const qint64 perSeq = 2LL * 32 * 4096 * 2 * 2048;
        QCOMPARE(r.variants[0].kvBytes, 8 * perSeq);
        QCOMPARE(r.variants[0].kvHeadsPerGpu, 8);  // 32 heads over 4 GPUs
        QCOMPARE(r.variants[0].kvBytesPerGpu, 8 * perSeq / 4);
        QCOMPARE(r.variants[1].kvHeadsPerGpu, 1);  // GQA-8: 4 heads, one per GPU
        QCOMPARE(r.variants[1].kvBytesPerGpu, 8 * perSeq / 8 / 4);
        QCOMPARE(r.variants[2].kvHeadsPerGpu, 1);  // MQA: the one head is replicated on every GPU
        QCOMPARE(r.variants[2].kvBytesPerGpu, 8 * perSeq / 32);
        QCOMPARE(r.weightBytesPerGpu, 6'738'415'616LL * 2 / 4);
        QCOMPARE(r.allReduceBytesPerToken, 524'288LL);               // 2 x 32 x 4096 x 2
        QCOMPARE(r.ringBytesPerGpuPerToken, 524'288LL * 2 * 3 / 4);  // 786,432
        // INT8 KV: the engine's Q8_0 blocks, 34 bytes per 32 values
        MemoryInputs i8 = in;
        i8.kvInt8 = true;
        QCOMPARE(MemorySizing::parallel(i8, p, engine_kv_bytes_per_token).variants[0].kvBytesPerSequence,
                 2LL * 32 * 4096 / 32 * 34 * 2048);
    }

    void badInputsAreNamed() {
        ParallelInputs p;
        p.group = 5;
        const ParallelPlan r = MemorySizing::parallel(llama7b(), p, engine_kv_bytes_per_token);
        QVERIFY(!r.valid);
        QVERIFY(r.error.contains("group"));
        p.group = 8;
        QVERIFY(!MemorySizing::parallel(llama7b(), p, {}).valid);
    }

    void plannerShowsTheVariants() {
        MemoryPlannerView w;
        w.setKvBytesPerTokenFn(engine_kv_bytes_per_token);
        QVERIFY(w.selectPreset("LLaMA-7B"));
        QCOMPARE(w.parallelInputs().heads, 32);
        QCOMPARE(w.parallelInputs().group, 8);
        MemoryInputs in = w.inputs();
        in.context = 2048;
        in.batch = 1;
        w.setInputs(in);
        QCOMPARE(w.currentPlan().kvBytesPerSequence, 1'073'741'824LL);
        QVERIFY2(w.parallelText().contains("1.07 GB"), qPrintable(w.parallelText()));
        ParallelInputs p = w.parallelInputs();
        p.tp = 4;
        w.setParallelInputs(p);
        QCOMPARE(w.parallelPlan().variants[2].kvHeadsPerGpu, 1);
        QCOMPARE(w.parallelPlan().weightBytesPerGpu, (w.inputs().weightBytes + 3) / 4);
        QVERIFY(w.parallelText().contains("786 kB"));  // ring bytes per GPU per token
        // a preset with GQA of its own: Llama-3-8B has 8 KV heads for 32 query heads, group 4
        QVERIFY(w.selectPreset("Llama-3-8B"));
        QCOMPARE(w.parallelInputs().group, 4);
        QCOMPARE(w.parallelPlan().variants[1].kvHeads, 8);

        QVERIFY(w.selectPreset("LLaMA-7B"));
        in = w.inputs();
        in.batch = 8;
        in.availableBytes = 80LL << 30;  // one 80 GB GPU
        w.setInputs(in);
        w.setParallelInputs(p);
        w.resize(1180, 760);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QTest::qWait(100);
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("memory_planner_gqa_tp.png"))));
    }
};

QTEST_MAIN(TestMemoryParallel)
#include "tst_memory_parallel.moc"
