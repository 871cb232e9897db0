// ctest-labels: ui
// KV tiers in the window (app/kv_tiers_dialog, the Engine dock's "KV tiers…" button): a disk
// folder that cannot be written is refused, named, and nothing is saved; "Save and restart
// the engine" keeps the sizes in QSettings and starts the engine with them (after a chat the
// block map's tier data, EngineFrame::tiers, has the CPU and disk limits and the folder);
// Save alone changes the next engine only, and the dialog says what the running one has; a
// new window starts its engine with the saved tiers.
#include <QAction>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include "app/engine_bridge.h"
#include "app/kv_tiers_dialog.h"
#include "app/main_window.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"
#include "ui/view_types.h"

using kvs::app::KvTiersDialog;

class TestKvTiersGui : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;

    static QPointer<KvTiersDialog> openDialog(kvs::app::MainWindow& w) {
        QTest::mouseClick(w.findChild<QPushButton*>("kvTiersButton"), Qt::LeftButton);
        KvTiersDialog* d = nullptr;
        for (auto* c : w.findChildren<KvTiersDialog*>())
            if (c->isVisible()) d = c;
        return d;
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        QSettings().remove("kv_tiers");  // this test program's own settings file
        m_model = m_dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(m_model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
    }
    void cleanupTestCase() { QSettings().remove("kv_tiers"); }

    void dialogSavesAndTheEngineRestartsWithThem() {
        const QString store = m_dir.filePath("kvstore");
        {
            kvs::app::MainWindow w(m_model, nullptr, m_dir.filePath("chats.json"));
            w.resize(1400, 900);
            w.show();
            auto* send = w.chatView()->findChild<QPushButton*>("sendButton");
            QTRY_VERIFY_WITH_TIMEOUT(send->isEnabled(), 20000);
            QVERIFY(!w.bridge()->runningKvTiers().enabled());

            QPointer<KvTiersDialog> d = openDialog(w);
            QVERIFY(d);
            QVERIFY(d->findChild<QLabel*>("kvTiersRunning")->text().contains("no KV tiers"));
            QVERIFY(d->findChild<QLabel*>("kvTiersNote")->text().contains("starts again"));
            d->findChild<QSpinBox*>("kvCpuMiB")->setValue(8);
            d->findChild<QSpinBox*>("kvDiskMiB")->setValue(16);
            const QString bad = "/proc/kvscope-not-a-folder";
            d->findChild<QLineEdit*>("kvDiskDir")->setText(bad);
            QTest::mouseClick(d->findChild<QPushButton*>("kvTiersSave"), Qt::LeftButton);
            QVERIFY(d->isVisible());  // refused: the dialog stays
            QVERIFY2(d->error().contains(bad), qPrintable(d->error()));
            QVERIFY(!QSettings().contains("kv_tiers/cpu_mib"));
            QVERIFY(!w.bridge()->kvTiers().enabled());

            d->findChild<QLineEdit*>("kvDiskDir")->setText(store);
            QTest::mouseClick(d->findChild<QPushButton*>("kvTiersRestart"), Qt::LeftButton);
            QTRY_VERIFY(d.isNull() || !d->isVisible());  // closed (and deleted)
            QCOMPARE(QSettings().value("kv_tiers/cpu_mib").toLongLong(), 8);
            QCOMPARE(QSettings().value("kv_tiers/disk_mib").toLongLong(), 16);
            QCOMPARE(QSettings().value("kv_tiers/disk_dir").toString(), store);
            QTRY_VERIFY_WITH_TIMEOUT(w.bridge()->runningKvTiers().cpuMiB == 8, 20000);
            QCOMPARE(w.bridge()->runningKvTiers().diskMiB, qint64(16));

            // The engine's snapshots carry the tiers the block map's strip draws.
            QTRY_VERIFY_WITH_TIMEOUT(send->isEnabled(), 20000);
            w.chatView()->findChild<QPlainTextEdit*>("chatPrompt")->setPlainText("Hello tiers");
            QTest::mouseClick(send, Qt::LeftButton);
            QTRY_VERIFY_WITH_TIMEOUT(w.lastFrame().tiers.enabled, 60000);
            QCOMPARE(w.lastFrame().tiers.cpuLimitBytes, qint64(8) << 20);
            QCOMPARE(w.lastFrame().tiers.diskLimitBytes, qint64(16) << 20);
            QVERIFY2(w.lastFrame().tiers.diskFolder.startsWith(store), qPrintable(w.lastFrame().tiers.diskFolder));
            QTRY_VERIFY_WITH_TIMEOUT(send->isEnabled(), 60000);

            // Save alone: the next engine's, not the running one's.
            d = openDialog(w);
            QVERIFY(d);
            QCOMPARE(d->findChild<QSpinBox*>("kvCpuMiB")->value(), 8);
            QVERIFY2(d->findChild<QLabel*>("kvTiersRunning")->text().contains("CPU tier 8 MiB"),
                     qPrintable(d->findChild<QLabel*>("kvTiersRunning")->text()));
            d->findChild<QSpinBox*>("kvCpuMiB")->setValue(4);
            QTest::mouseClick(d->findChild<QPushButton*>("kvTiersSave"), Qt::LeftButton);
            QTRY_VERIFY(d.isNull() || !d->isVisible());
            QCOMPARE(w.bridge()->kvTiers().cpuMiB, qint64(4));
            QCOMPARE(w.bridge()->runningKvTiers().cpuMiB, qint64(8));
            QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("kv_tiers_gui.png"))));
            // Tools ▸ KV tiers… opens the same dialog, with the next engine's values.
            w.findChild<QAction*>("kvTiersAction")->trigger();
            QPointer<KvTiersDialog> fromMenu;
            for (auto* c : w.findChildren<KvTiersDialog*>())
                if (c->isVisible()) fromMenu = c;
            QVERIFY(fromMenu);
            QCOMPARE(fromMenu->findChild<QSpinBox*>("kvCpuMiB")->value(), 4);
            fromMenu->reject();
        }
        // A new window: its engine starts with the saved tiers.
        kvs::app::MainWindow w(m_model, nullptr, m_dir.filePath("chats.json"));
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        QCOMPARE(w.bridge()->runningKvTiers().cpuMiB, qint64(4));
        QCOMPARE(w.bridge()->runningKvTiers().diskMiB, qint64(16));
        QCOMPARE(w.bridge()->runningKvTiers().diskDir, store);
    }
};

QTEST_MAIN(TestKvTiersGui)
#include "tst_kv_tiers_gui.moc"
