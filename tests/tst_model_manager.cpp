// ctest-labels: ui
// File > Models: the dialog lists the models installed in the data dir and those added from
// elsewhere with their inspect facts, inspects the one picked on a worker thread (details and
// the memory planner follow it), refuses a broken file with its error and keeps Load disabled
// for it; adds a model (and refuses a dropped non-model or a truncated GGUF without adding
// anything), removes an added one from the list (its file stays), and says what the selected
// model will need at the chosen context and batch (Session's own KV figure), warning when it
// will not fit.
#include <QApplication>
#include <QFile>
#include <QLabel>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QTemporaryDir>
#include <QTimer>
#include <QTreeWidget>
#include <QUrl>
#include <QtTest>

#include "app/model_catalog.h"
#include "app/model_manager.h"
#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/memory_planner.h"
#include "ui/memory_sizing.h"

class TestModelManager : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_models;
    QString m_tiny;     // installed (in the models folder)
    QString m_outside;  // a model elsewhere, to add
    QString m_text;     // not a model
    QString m_truncated;

    static int rows(kvs::app::ModelManagerDialog& d) { return d.findChild<QTreeWidget*>("modelList")->topLevelItemCount(); }
    static QTreeWidgetItem* row(kvs::app::ModelManagerDialog& d, const QString& endsWith) {
        auto* list = d.findChild<QTreeWidget*>("modelList");
        for (int i = 0; i < list->topLevelItemCount(); ++i)
            if (list->topLevelItem(i)->data(0, Qt::UserRole).toString().endsWith(endsWith)) return list->topLevelItem(i);
        return nullptr;
    }
    // Drops local files on a widget, as a file manager does.
    static void drop(QWidget* w, const QStringList& paths) {
        QMimeData mime;
        QList<QUrl> urls;
        for (const QString& p : paths) urls << QUrl::fromLocalFile(p);
        mime.setUrls(urls);
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent ev(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w, &ev);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_CONFIG_HOME", m_dir.filePath("config").toUtf8());  // "models/added" stays in the test's folder
        QStandardPaths::setTestModeEnabled(true);
        QSettings().remove("models/added");
        m_models = m_dir.filePath("models");
        QVERIFY(QDir().mkpath(m_models));
        qputenv("KVSCOPE_MODELS_DIR", m_models.toUtf8());
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 3;
        m_tiny = m_models + "/tiny.gguf";
        QVERIFY(kvs::test::write_tiny_gguf(m_tiny.toStdString(), spec).is_ok());
        QFile bad(m_models + "/broken.gguf");
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("GGUF\x03\x00\x00\x00garbage", 15);
        bad.close();
        QVERIFY(QDir().mkpath(m_dir.filePath("elsewhere/deeper")));
        m_outside = m_dir.filePath("elsewhere/deeper/other.gguf");
        spec.n_layer = 2;
        QVERIFY(kvs::test::write_tiny_gguf(m_outside.toStdString(), spec).is_ok());
        m_text = m_dir.filePath("notes.txt");
        QFile t(m_text);
        QVERIFY(t.open(QIODevice::WriteOnly));
        t.write("this is not a model\n");
        t.close();
        // The first 60 % of a good GGUF: the header is there, the tensors are not.
        QFile whole(m_outside);
        QVERIFY(whole.open(QIODevice::ReadOnly));
        const QByteArray bytes = whole.readAll();
        m_truncated = m_dir.filePath("truncated.gguf");
        QFile cut(m_truncated);
        QVERIFY(cut.open(QIODevice::WriteOnly));
        cut.write(bytes.left(bytes.size() * 6 / 10));
    }

    void listsInspectsAndRefuses() {
        kvs::app::ModelManagerDialog d;
        d.show();
        auto* details = d.findChild<QLabel*>("modelDetails");
        auto* load = d.findChild<QPushButton*>("loadModelButton");
        auto* list = d.findChild<QTreeWidget*>("modelList");
        QVERIFY(details && load && list);
        QCOMPARE(rows(d), 2);
        // Every row gets its inspect facts (a worker thread reads them).
        QTRY_VERIFY_WITH_TIMEOUT(row(d, "tiny.gguf")->text(1) == "llama", 10000);
        QTRY_COMPARE_WITH_TIMEOUT(row(d, "broken.gguf")->text(1), QString("cannot load"), 10000);
        QCOMPARE(row(d, "tiny.gguf")->text(4), QString("512"));  // trained context
        QCOMPARE(row(d, "tiny.gguf")->text(6), QString("models folder"));
        QSignalSpy spy(&d, &kvs::app::ModelManagerDialog::inspected);
        for (const char* name : {"broken.gguf", "tiny.gguf"}) {
            const bool broken = QString(name).contains("broken");
            list->setCurrentItem(row(d, name));
            QTRY_VERIFY_WITH_TIMEOUT(spy.count() > 0 && spy.last().at(0).toString().endsWith(name), 10000);
            QCOMPARE(spy.last().at(1).toBool(), !broken);
            QCOMPARE(load->isEnabled(), !broken);
            QCOMPARE(d.selectedIsLoadable(), !broken);
            if (broken) {
                QVERIFY2(details->text().contains("Cannot load this model"), qPrintable(details->text()));
            } else {
                QVERIFY2(details->text().contains("3 layers"), qPrintable(details->text()));
                QVERIFY2(details->text().contains("trained context 512"), qPrintable(details->text()));
                auto* planner = d.findChild<kvs::ui::MemoryPlannerView*>();
                QVERIFY(planner);
                QCOMPARE(planner->inputs().layers, 3);
            }
        }
        QVERIFY(d.grab().save(m_dir.filePath("model_manager.png")));
    }

    // Add (as a drop does) a model from elsewhere, see it listed, remove it after the
    // confirmation: off the list, its file still there.
    void addListRemove() {
        kvs::app::ModelManagerDialog d;
        d.show();
        QSignalSpy added(&d, &kvs::app::ModelManagerDialog::modelsAdded);
        drop(&d, {m_outside});
        QTRY_COMPARE_WITH_TIMEOUT(added.count(), 1, 10000);
        QCOMPARE(added.last().at(0).toStringList(), QStringList{m_outside});
        QCOMPARE(rows(d), 3);
        QVERIFY(row(d, "other.gguf"));
        QCOMPARE(row(d, "other.gguf")->text(6), QString("added"));
        QCOMPARE(row(d, "other.gguf")->text(1), QString("llama"));
        QVERIFY(d.errorText().isEmpty());
        QTRY_VERIFY_WITH_TIMEOUT(d.selectedPath() == m_outside && d.selectedIsLoadable(), 10000);
        {  // a second dialog (the window opened again) lists it too
            kvs::app::ModelManagerDialog again;
            QCOMPARE(rows(again), 3);
        }
        // The confirmation says the file stays; Yes removes it from the list.
        QString asked;
        QTimer::singleShot(0, [&asked] {
            if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
                asked = box->text();
                box->button(QMessageBox::Yes)->click();
            }
        });
        QVERIFY(d.removeModel(m_outside, true));
        QVERIFY2(asked.contains("The file stays at"), qPrintable(asked));
        QCOMPARE(rows(d), 2);
        QVERIFY(!row(d, "other.gguf"));
        QVERIFY(QFile::exists(m_outside));
        // Cancel in the confirmation keeps it.
        d.addModels({m_outside});
        QTRY_COMPARE_WITH_TIMEOUT(rows(d), 3, 10000);
        QTimer::singleShot(0, [] {
            if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget()))
                box->button(QMessageBox::Cancel)->click();
        });
        QVERIFY(!d.removeModel(m_outside, true));
        QCOMPARE(rows(d), 3);
        QVERIFY(d.removeModel(m_outside, false));
        QCOMPARE(rows(d), 2);
    }

    void scanFindsModels() {
        const QStringList found = kvs::app::ModelCatalog::scan(m_dir.filePath("elsewhere"));
        QCOMPARE(found, QStringList{QFileInfo(m_outside).absoluteFilePath()});
        kvs::app::ModelManagerDialog d;
        QSignalSpy added(&d, &kvs::app::ModelManagerDialog::modelsAdded);
        d.scanFolder(m_dir.filePath("elsewhere"));
        QTRY_COMPARE_WITH_TIMEOUT(added.count(), 1, 10000);
        QCOMPARE(rows(d), 3);
        QVERIFY(d.removeModel(m_outside, false));
        d.scanFolder(m_dir.filePath("config"));
        QVERIFY2(d.errorText().contains("No models in"), qPrintable(d.errorText()));
    }

    // A dropped text file and a truncated GGUF: a message naming each, nothing added.
    void dropBadFiles() {
        kvs::app::ModelManagerDialog d;
        d.show();
        QSignalSpy failed(&d, &kvs::app::ModelManagerDialog::addFailed);
        drop(&d, {m_text});
        QCOMPARE(failed.count(), 1);
        QVERIFY2(d.errorText().contains("notes.txt is not a model"), qPrintable(d.errorText()));
        drop(&d, {m_truncated});
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 10000);
        QVERIFY2(d.errorText().contains("truncated.gguf was not added"), qPrintable(d.errorText()));
        QCOMPARE(rows(d), 2);
        QVERIFY(!kvs::app::ModelCatalog().contains(m_truncated));
        QVERIFY(d.grab().save(m_dir.filePath("model_manager_bad_drop.png")));
    }

    // The figure shown before loading is Session's: KV bytes per token x whole blocks x batch,
    // plus the weights; a batch that cannot fit in this machine's RAM warns and disables Load.
    void memoryEstimate() {
        kvs::app::ModelManagerDialog d;
        d.show();
        d.inspect(m_tiny);
        QTRY_VERIFY_WITH_TIMEOUT(d.selectedIsLoadable(), 10000);
        auto* planner = d.findChild<kvs::ui::MemoryPlannerView*>();
        auto in = planner->inputs();
        in.context = 300;
        in.batch = 3;
        planner->setInputs(in);
        auto session = kvs::Session::open(m_tiny.toStdString());
        QVERIFY(session.is_ok());
        const qint64 perToken = (*session)->kv_bytes_per_token();
        const qint64 blocks = 3 * ((300 + 15) / 16);
        QCOMPARE(planner->currentPlan().bytesPerToken, perToken);
        QCOMPARE(planner->currentPlan().kvBytes, blocks * 16 * perToken);
        const QString total = kvs::ui::MemorySizing::formatBytes(qint64((*session)->model().weight_bytes) +
                                                                 blocks * 16 * perToken);
        QVERIFY2(d.memoryText().startsWith("Needs " + total + ":"), qPrintable(d.memoryText()));
        QCOMPARE(d.chosenContext(), 300);
        QCOMPARE(d.chosenBatch(), 3);
        QVERIFY2(d.memoryText().contains("context 300 × batch 3"), qPrintable(d.memoryText()));
        // Where it goes: the GPU's VRAM when the CUDA backend loads, this machine's RAM otherwise.
        const kvs::Session::ComputeMemory mem = kvs::Session::compute_memory();
        const QString where = kvs::ui::MemorySizing::memoryTargetText(mem.gpu, QString::fromStdString(mem.device),
                                                                      mem.free_bytes, mem.total_bytes);
        QVERIFY2(d.memoryText().contains("in " + where.toHtmlEscaped() + "."), qPrintable(d.memoryText()));
        QVERIFY(where.startsWith(mem.gpu ? "GPU VRAM (" : "CPU RAM ("));
        QVERIFY(!d.memoryText().contains("Warning"));
        QVERIFY(d.selectedFits());
        QVERIFY(d.findChild<QPushButton*>("loadModelButton")->isEnabled());
        // Beyond the trained context: a warning, no Load.
        in.context = 1024;
        planner->setInputs(in);
        QVERIFY2(d.memoryText().contains("more than the 512"), qPrintable(d.memoryText()));
        QVERIFY(!d.findChild<QPushButton*>("loadModelButton")->isEnabled());
        // More KV than this machine has RAM: a model trained on 32768 tokens, at that context and
        // a batch whose KV alone passes the RAM.
        const qint64 ram = kvs::Session::machine_ram_bytes();
        if (ram <= 0) QSKIP("this machine's RAM is unknown");
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 3;
        spec.n_ctx_train = 32768;
        const QString wide = m_dir.filePath("wide.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(wide.toStdString(), spec).is_ok());
        d.inspect(wide);
        QTRY_VERIFY_WITH_TIMEOUT(d.selectedIsLoadable() && d.selectedPath() == wide, 10000);
        in = planner->inputs();
        in.context = 32768;
        in.batch = ram / (32768 * perToken) + 1;
        if (in.batch > 65536) QSKIP("this machine has more RAM than the planner's largest batch reaches");
        planner->setInputs(in);
        QCOMPARE(planner->inputs().batch, in.batch);
        QVERIFY2(d.memoryText().contains("will not fit"), qPrintable(d.memoryText()));
        QVERIFY(!d.selectedFits());
        QVERIFY(!d.findChild<QPushButton*>("loadModelButton")->isEnabled());
    }

    // The picture for docs/screenshots/models_in_window.png: the user's default model added
    // beside the tiny ones, at context 2048 x batch 4 (skipped when it is not installed).
    void screenshotWithDefaultModel() {
        const QString real = QDir::homePath() + "/.local/share/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf";
        if (!QFile::exists(real)) QSKIP("the default model is not installed");
        kvs::app::ModelManagerDialog d;
        d.show();
        QSignalSpy added(&d, &kvs::app::ModelManagerDialog::modelsAdded);
        d.addModels({real});
        QTRY_COMPARE_WITH_TIMEOUT(added.count(), 1, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(d.selectedPath() == real && d.selectedIsLoadable(), 30000);
        auto* planner = d.findChild<kvs::ui::MemoryPlannerView*>();
        auto in = planner->inputs();
        in.context = 2048;
        in.batch = 4;
        planner->setInputs(in);
        QTRY_VERIFY_WITH_TIMEOUT(row(d, "tiny.gguf")->text(1) == "llama", 30000);
        QVERIFY2(d.memoryText().contains("context 2048 × batch 4"), qPrintable(d.memoryText()));
        QVERIFY(d.grab().save(QString::fromStdString(kvs::test::output_path("models_in_window.png"))));
        QVERIFY(d.removeModel(real, false));  // off the list; the file stays
        QVERIFY(QFile::exists(real));
    }
};

QTEST_MAIN(TestModelManager)
#include "tst_model_manager.moc"
