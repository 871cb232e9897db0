// ctest-labels: ui
// Views that must not go stale (issue 16, item 10), in the real window with a tiny model:
// after Stop the KV map and the status bar no longer count the stopped request as running
// (the engine is idle after a cancel, so no step follows it); after End lesson the Engine
// dock's request table keeps no rows of the lesson's engine; a deleted chat's reply leaves
// the Draft acceptance view (and Undo brings it back).
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "app/chat_store.h"
#include "app/main_window.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"
#include "ui/draft_acceptance_view.h"
#include "ui/kv_block_map.h"

class TestStaleViews : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;

    static void send(kvs::app::MainWindow& w, const QString& text) {
        auto* prompt = w.chatView()->findChild<QPlainTextEdit*>("chatPrompt");
        auto* button = w.chatView()->findChild<QPushButton*>("sendButton");
        QVERIFY(prompt && button);
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled(), 20000);
        prompt->setPlainText(text);
        QTest::mouseClick(button, Qt::LeftButton);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        m_model = m_dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(m_model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
    }

    void stopLeavesNothingRunning() {
        kvs::app::MainWindow w(m_model, nullptr, m_dir.filePath("stop.json"));
        w.resize(1400, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        // Paused, one step: the reply is running, mid-way, when Stop comes.
        auto* pause = w.findChild<QPushButton*>("pauseButton");
        QTest::mouseClick(pause, Qt::LeftButton);
        QVERIFY(pause->isChecked());
        send(w, "Tell me a very long story");
        QTest::qWait(100);
        QTest::mouseClick(w.findChild<QPushButton*>("stepButton"), Qt::LeftButton);
        auto* map = w.findChild<kvs::ui::KvBlockMapView*>();
        auto* live = w.findChild<QLabel*>("liveFigures");
        QTRY_COMPARE_WITH_TIMEOUT(map->frame().step.running, 1, 10000);
        QVERIFY2(live->text().contains("1 running"), qPrintable(live->text()));
        QTest::mouseClick(w.chatView()->findChild<QPushButton*>("stopButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(map->frame().step.running, 0, 5000);
        QCOMPARE(map->frame().step.blocksUsed, 0);
        QVERIFY2(live->text().contains("0 running"), qPrintable(live->text()));
        QCOMPARE(w.lastFrame().step.running, 0);
    }

    void deletedChatLeavesTheDraftView() {
        kvs::app::MainWindow w(m_model, nullptr, m_dir.filePath("delete.json"));
        w.resize(1400, 900);
        w.show();
        w.findChild<QDoubleSpinBox*>("temperature")->setValue(0);
        auto* mode = w.findChild<QComboBox*>("speculativeMode");
        mode->setCurrentIndex(mode->findData("ngram"));
        send(w, "Repeat after me: one two three four, one two three four.");
        auto* view = w.draftView();
        QTRY_VERIFY_WITH_TIMEOUT(!view->frame().requests.isEmpty() && view->frame().requests.back().finished, 60000);
        const qint64 id = view->frame().requests.back().id;
        const QString chat = w.store().conversations()[0].id;
        w.deleteChat(chat);
        QTRY_VERIFY_WITH_TIMEOUT(view->frame().requests.isEmpty(), 5000);
        QVERIFY(view->shownRequest() != id);
        w.undoDeleteChat();
        QTRY_VERIFY_WITH_TIMEOUT(!view->frame().requests.isEmpty() && view->frame().requests.back().id == id, 5000);
    }

    void endedLessonLeavesNoRows() {
        kvs::app::MainWindow w(m_model, nullptr, m_dir.filePath("lesson.json"));
        w.resize(1400, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        QString err;
        QVERIFY2(w.playLesson("04_static_vs_continuous.json", &err), qPrintable(err));
        QTRY_VERIFY_WITH_TIMEOUT(w.findChild<QPushButton*>("pauseButton")->isChecked(), 10000);
        auto* step = w.findChild<QPushButton*>("stepButton");
        auto* table = w.findChild<QTableWidget*>("requestTable");
        for (int i = 0; i < 3; ++i) {
            const qint64 before = w.lastFrame().requests.isEmpty() ? -1 : w.lastFrame().step.step;
            QTest::mouseClick(step, Qt::LeftButton);
            QTRY_VERIFY_WITH_TIMEOUT(!w.lastFrame().requests.isEmpty() && w.lastFrame().step.step > before, 5000);
        }
        QTRY_VERIFY_WITH_TIMEOUT(table->rowCount() == 8, 2000);
        QVERIFY(!table->findItems("decode", Qt::MatchExactly).isEmpty());
        QTest::mouseClick(w.findChild<QPushButton*>("endLessonButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(w.lastFrame().requests.isEmpty() && table->rowCount() == 0, 10000);
        QVERIFY(w.findChild<kvs::ui::KvBlockMapView*>()->frame().requests.isEmpty());
    }
};

QTEST_MAIN(TestStaleViews)
#include "tst_stale_views.moc"
