// ctest-labels: ui
// File > Models: the dialog lists the models installed in the data dir, inspects the one
// picked on a worker thread (details and the memory planner follow it), refuses a broken
// file with its error and keeps Load disabled for it.
#include <QFile>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QTemporaryDir>
#include <QtTest>

#include "app/model_manager.h"
#include "tests/support/tiny_model.h"
#include "ui/memory_planner.h"

class TestModelManager : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        const QString models = m_dir.filePath("models");
        QVERIFY(QDir().mkpath(models));
        qputenv("KVSCOPE_MODELS_DIR", models.toUtf8());
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 3;
        QVERIFY(kvs::test::write_tiny_gguf((models + "/tiny.gguf").toStdString(), spec).is_ok());
        QFile bad(models + "/broken.gguf");
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("GGUF\x03\x00\x00\x00garbage", 15);
    }

    void listsInspectsAndRefuses() {
        kvs::app::ModelManagerDialog d;
        d.show();
        auto* list = d.findChild<QListWidget*>("modelList");
        auto* details = d.findChild<QLabel*>("modelDetails");
        auto* load = d.findChild<QPushButton*>("loadModelButton");
        QVERIFY(list && details && load);
        QCOMPARE(list->count(), 2);
        QSignalSpy spy(&d, &kvs::app::ModelManagerDialog::inspected);
        for (int i = 0; i < list->count(); ++i) {
            const bool broken = list->item(i)->text().contains("broken");
            list->setCurrentRow(i);
            QTRY_VERIFY_WITH_TIMEOUT(
                spy.count() > 0 && spy.last().at(0).toString().endsWith(broken ? "broken.gguf" : "tiny.gguf"), 10000);
            QCOMPARE(spy.last().at(1).toBool(), !broken);
            QCOMPARE(load->isEnabled(), !broken);
            QCOMPARE(d.selectedIsLoadable(), !broken);
            if (broken) {
                QVERIFY2(details->text().contains("Cannot load this model"), qPrintable(details->text()));
            } else {
                QVERIFY2(details->text().contains("3 layers"), qPrintable(details->text()));
                auto* planner = d.findChild<kvs::ui::MemoryPlannerView*>();
                QVERIFY(planner);
                QCOMPARE(planner->inputs().layers, 3);
            }
        }
        QVERIFY(d.grab().save(m_dir.filePath("model_manager.png")));
    }
};

QTEST_MAIN(TestModelManager)
#include "tst_model_manager.moc"
