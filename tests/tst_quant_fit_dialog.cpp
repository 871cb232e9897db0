// ctest-labels: ui
// Tools ▸ Which quantization fits? (app/quant_fit_dialog): Llama-2-7B on an 8 GiB GPU at 4096
// tokens names AWQ first with the AWQ paper as its source and FP16 as not fitting; the
// goal box reorders the rows; a loaded (tiny) model is offered and sized, its KV the same
// bytes as the memory planner's sizing (ui/memory_sizing) for that shape, context and
// batch; a context past the trained one is named in the error line; the parameter-count
// row takes typed sizes. A screenshot goes to the test output folder.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QSpinBox>
#include <QTableWidget>
#include <QtTest>

#include "app/quant_fit_dialog.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/model.h"
#include "engine/quant/quantize.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/memory_sizing.h"

using namespace kvs;
using app::QuantFitDialog;

namespace {
int rowOf(QTableWidget* t, const QString& scheme) {
    for (int r = 0; r < t->rowCount(); ++r)
        if (t->item(r, QuantFitDialog::Scheme)->text().endsWith("(" + scheme + ")")) return r;
    return -1;
}
QString cell(QTableWidget* t, int r, int c) { return t->item(r, c) ? t->item(r, c)->text() : QString(); }
}  // namespace

class TstQuantFitDialog : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void llama7BOnAnEightGiBGpu() {
        QuantFitDialog d([] { return std::shared_ptr<const Model>(); });
        d.show();
        auto* model = d.findChild<QComboBox*>("fitModel");
        auto* device = d.findChild<QComboBox*>("fitDevice");
        auto* memory = d.findChild<QDoubleSpinBox*>("fitMemory");
        auto* context = d.findChild<QSpinBox*>("fitContext");
        auto* goal = d.findChild<QComboBox*>("fitGoal");
        auto* table = d.findChild<QTableWidget*>("fitResult");
        auto* summary = d.findChild<QLabel*>("fitSummary");
        auto* error = d.findChild<QLabel*>("fitError");
        QVERIFY(model && device && memory && context && goal && table && summary && error);
        QVERIFY(model->findData("loaded") < 0);  // nothing loaded: not offered
        model->setCurrentIndex(model->findData("Llama-2-7B"));
        device->setCurrentIndex(device->findData("gpu"));
        memory->setValue(8.0);
        context->setValue(4096);
        QVERIFY2(error->text().isEmpty(), qPrintable(error->text()));
        QCOMPARE(cell(table, 0, QuantFitDialog::Rank), QString("1"));
        QCOMPARE(rowOf(table, "int4-awq"), 0);
        QVERIFY2(summary->text().contains("AWQ"), qPrintable(summary->text()));
        QVERIFY2(table->item(0, QuantFitDialog::Quality)->toolTip().contains("2306.00978"),
                 qPrintable(table->item(0, QuantFitDialog::Quality)->toolTip()));
        const int f16 = rowOf(table, "f16");
        QVERIFY(f16 > 0);
        QCOMPARE(cell(table, f16, QuantFitDialog::Fits), QString("no"));
        QCOMPARE(cell(table, f16, QuantFitDialog::Rank), QString("–"));
        QVERIFY(d.grab().save(QString::fromStdString(test::output_path("quant_fit_dialog.png"))));

        goal->setCurrentIndex(goal->findData("throughput"));  // the most sequences: more room first
        const int first = rowOf(table, "int4-awq");
        QVERIFY(first >= 0);
        for (int r = 1; r < table->rowCount() && cell(table, r, QuantFitDialog::Rank) != "–"; ++r)
            QVERIFY(cell(table, r, QuantFitDialog::MaxBatch).toLongLong() <=
                        cell(table, r - 1, QuantFitDialog::MaxBatch).toLongLong() ||
                    table->item(r, QuantFitDialog::Why)->text().contains("quality floor"));

        context->setValue(8192);  // past Llama-2's 4096
        QVERIFY2(error->text().contains("trained context of 4096"), qPrintable(error->text()));
        QCOMPARE(table->rowCount(), 0);
    }

    void loadedModelAndPlannerAgree() {
        test::TinyModelSpec spec;
        spec.n_embd = 128;
        spec.n_ff = 256;
        spec.n_head = 4;
        spec.n_kv_head = 2;
        spec.n_ctx_train = 2048;
        auto src = test::write_and_load_tiny_gguf(test::output_path("fit_dialog_tiny.gguf"), spec);
        QVERIFY2(src, src.message().c_str());
        std::shared_ptr<const Model> m = src.value();
        QuantFitDialog d([m] { return m; });
        auto* model = d.findChild<QComboBox*>("fitModel");
        auto* context = d.findChild<QSpinBox*>("fitContext");
        auto* batch = d.findChild<QSpinBox*>("fitBatch");
        auto* memory = d.findChild<QDoubleSpinBox*>("fitMemory");
        auto* table = d.findChild<QTableWidget*>("fitResult");
        auto* notes = d.findChild<QLabel*>("fitNotes");
        QCOMPARE(model->currentData().toString(), QString("loaded"));  // the loaded model comes first
        memory->setValue(1.0);
        context->setValue(1000);
        batch->setValue(3);
        QVERIFY(table->rowCount() > 0);
        // KV room of q8_0 = usable - weights; the KV the planner sizes for the same inputs
        ui::MemoryInputs in;
        in.layers = m->config.n_layer;
        in.kvHeads = m->config.n_kv_head;
        in.headDim = m->config.head_dim;
        in.context = 1000;
        in.batch = 3;
        in.blockSize = 16;
        const auto plan = ui::MemorySizing::plan(in, kv_cache_bytes_per_token(m->config, DType::F16));
        QVERIFY2(plan.valid, qPrintable(plan.error));
        QVERIFY2(notes->text().contains(QString::number(plan.bytesPerToken) + " bytes per token"),
                 qPrintable(notes->text()));
        const int q8 = rowOf(table, "q8_0");
        QVERIFY(q8 >= 0);
        // max batch = floor((usable - the q8_0 variant's weights) / one sequence's whole blocks)
        auto v = quantize_model(m, QuantScheme::parse("q8_0").value());
        QVERIFY(v);
        const qint64 room = qint64(double(qint64(1) << 30) * 0.9) - v.value()->weight_bytes;
        QCOMPARE(cell(table, q8, QuantFitDialog::MaxBatch).toLongLong(), room / plan.kvBytesPerSequence);
        QVERIFY(room / plan.kvBytesPerSequence > 3);
        QCOMPARE(cell(table, q8, QuantFitDialog::Fits), QString("yes"));

        model->setCurrentIndex(model->findData("params"));
        d.findChild<QDoubleSpinBox*>("fitParams")->setValue(70.0);
        d.findChild<QSpinBox*>("fitLayers")->setValue(80);
        d.findChild<QSpinBox*>("fitKvHeads")->setValue(8);
        memory->setValue(48.0);
        const int rtn = rowOf(table, "int4-rtn");
        QVERIFY(rtn >= 0);
        QVERIFY2(cell(table, rtn, QuantFitDialog::Weights).endsWith("est."), qPrintable(cell(table, rtn, 3)));
        QCOMPARE(cell(table, rtn, QuantFitDialog::Weights).left(5),
                 QString::number(70e9 * 68 / 128 / (1 << 30), 'f', 2).left(5));
    }
};

QTEST_MAIN(TstQuantFitDialog)
#include "tst_quant_fit_dialog.moc"
