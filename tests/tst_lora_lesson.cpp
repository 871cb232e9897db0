// ctest-labels: ui model
// The lesson "One base model, three adapters" on the default model with the real demo
// adapters (tests/data/lora_pirate, lora_cowboy, lora_robot, made by tests/tools/train_lora.py),
// stepped with the Engine dock's Step button: the lesson loads the three adapters into the
// session, its four first requests (base, pirate, cowboy, robot) prefill in one step, and when
// the second pirate request shares the first one's prompt blocks the block map's adapter
// legend counts base 1, cowboy 1, pirate 2, robot 1; every caption is reached. The window at
// that caption is saved as lora_three_adapters.png in the test output folder (the picture in
// docs/screenshots). A lesson whose adapters cannot load (made for another model) does not
// start and says why.
#include <QApplication>
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "app/engine_bridge.h"
#include "app/main_window.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/adapter_legend.h"
#include "ui/chat_view.h"
#include "ui/kv_block_map.h"

class TestLoraLesson : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_model = QString::fromStdString(kvs::test::default_model_path());  // before XDG_DATA_HOME moves
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        qunsetenv("KVSCOPE_DEMO_ADAPTERS");  // the source tree's demo adapters
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setQuitOnLastWindowClosed(false);
    }

    void threeAdaptersOnTheDefaultModel() {
        const QString model = m_model;
        if (model.isEmpty()) QSKIP("the default model is not installed (installer/setup.sh)");
        kvs::app::MainWindow w(model, nullptr, m_dir.filePath("chats.json"));
        w.resize(1600, 1000);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 60000);
        QString err;
        QVERIFY2(w.playLesson("07_lora_adapters.json", &err), qPrintable(err));
        auto* map = w.findChild<kvs::ui::KvBlockMapView*>();
        auto* legend = w.findChild<kvs::ui::AdapterLegend*>();
        auto* step = w.findChild<QPushButton*>("stepButton");
        QVERIFY(map && legend && step);
        QTRY_VERIFY_WITH_TIMEOUT(w.findChild<QPushButton*>("pauseButton")->isChecked(), 20000);
        QString legendAtShare;
        bool grabbed = false;
        for (int i = 0; i < 200 && w.lessonCaptionIndex() < 3; ++i) {
            const qint64 before = map->frame().step.step;
            const bool hadFrame = !map->frame().requests.isEmpty();
            QTest::mouseClick(step, Qt::LeftButton);
            (void)QTest::qWaitFor([&] { return !hadFrame || map->frame().step.step > before; }, 20000);
            QTest::qWait(60);
            if (w.lessonCaptionIndex() == 2 && !grabbed) {
                legendAtShare = legend->text();
                QTest::qWait(400);  // the request table redraws at most 5 times a second
                w.grab().save(QString::fromStdString(kvs::test::output_path("lora_three_adapters.png")));
                grabbed = true;
            }
        }
        QCOMPARE(w.lessonCaptionIndex(), 3);
        QVERIFY(grabbed);
        QCOMPARE(legendAtShare, QString("base 1, cowboy 1, pirate 2, robot 1"));
        w.endLesson();
    }

    void adaptersForAnotherModelStopTheLesson() {
        const QString tiny = m_dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(tiny.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        kvs::app::MainWindow w(tiny, nullptr, m_dir.filePath("tiny-chats.json"));
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        QString err;
        QVERIFY(!w.playLesson("07_lora_adapters.json", &err));
        QVERIFY2(err.contains("needs the LoRA adapter 'pirate'") && err.contains("SmolLM2-135M-Instruct"),
                 qPrintable(err));
        QVERIFY(w.lessonCaption().isEmpty());  // nothing started
    }
};

QTEST_MAIN(TestLoraLesson)
#include "tst_lora_lesson.moc"
