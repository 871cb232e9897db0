// ctest-labels: ui
// Scripted lessons: every lesson shipped in resources/lessons parses; broken lesson files
// are refused with the field named; and playing one in the real window (tiny model)
// reconfigures the engine, injects its requests step by step and shows its captions.
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextDocument>
#include <QtTest>

#include "app/lesson.h"
#include "app/main_window.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"
#include "ui/draft_acceptance_view.h"
#include "ui/kv_block_map.h"

using kvs::app::Lesson;

class TestLessons : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
    }

    void shippedLessonsParse() {
        const QStringList names = kvs::app::builtin_lessons();
        QVERIFY2(names.size() >= 4, qPrintable(names.join(", ")));
        for (const QString& n : names) {
            Lesson l;
            QString err;
            QVERIFY2(kvs::app::load_builtin_lesson(n, &l, &err), qPrintable(err));
            QVERIFY(!l.title.isEmpty() && !l.events.isEmpty());
            int injected = 0;
            for (const auto& e : l.events) injected += e.inject.n;
            QVERIFY2(injected > 0, qPrintable(n + " injects nothing"));
        }
    }

    void brokenLessonsNameTheField_data() {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("expect");
        QTest::newRow("not json") << QByteArray("{oops") << "not a JSON object";
        QTest::newRow("no title") << QByteArray(R"({"events":[{"caption":"x"}]})") << "title";
        QTest::newRow("no events") << QByteArray(R"({"title":"t"})") << "events";
        QTest::newRow("bad block size") << QByteArray(
                                               R"({"title":"t","engine":{"block_size":12},"events":[{"caption":"x"}]})")
                                        << "engine.block_size";
        QTest::newRow("bad policy") << QByteArray(
                                           R"({"title":"t","engine":{"policy":"fifo"},"events":[{"caption":"x"}]})")
                                    << "engine.policy";
        QTest::newRow("negative n") << QByteArray(R"({"title":"t","events":[{"inject":{"n":-1}}]})")
                                    << "events[0].inject.n";
        QTest::newRow("bad spec proposer")
            << QByteArray(R"({"title":"t","events":[{"inject":{"n":1,"spec":{"proposer":"magic"}}}]})")
            << "events[0].inject.spec.proposer";
        QTest::newRow("spec k too big")
            << QByteArray(R"({"title":"t","events":[{"inject":{"n":1,"spec":{"proposer":"ngram","k":9}}}]})")
            << "events[0].inject.spec.k";
        QTest::newRow("empty text") << QByteArray(R"({"title":"t","events":[{"inject":{"n":1,"text":""}}]})")
                                    << "events[0].inject.text";
        QTest::newRow("empty event") << QByteArray(R"({"title":"t","events":[{"at_step":3}]})") << "events[0]";
    }
    void brokenLessonsNameTheField() {
        QFETCH(QByteArray, json);
        QFETCH(QString, expect);
        Lesson l;
        QString err;
        QVERIFY(!kvs::app::parse_lesson(json, &l, &err));
        QVERIFY2(err.contains(expect), qPrintable(err));
    }

    void playPreemptionLesson() {
        const QString model = m_dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        kvs::app::MainWindow w(model, nullptr, m_dir.filePath("chats.json"));
        w.resize(1400, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        QString err;
        QVERIFY2(w.playLesson("03_preemption.json", &err), qPrintable(err));
        // Paused with the lesson's requests queued: nothing ran yet.
        auto* pause = w.findChild<QPushButton*>("pauseButton");
        QTRY_VERIFY_WITH_TIMEOUT(pause->isChecked(), 10000);
        QVERIFY(w.lessonCaption().contains("8 requests"));
        // One step at a time: the first step prefills and the frame shows 8 requests.
        QTest::mouseClick(w.findChild<QPushButton*>("stepButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(int(w.lastFrame().requests.size()), 8, 10000);
        QCOMPARE(w.lastFrame().step.nBlocks, 24);  // the lesson's pool
        // Hovering a used block shows the text it holds (the request's tokens, decoded).
        auto* map = w.findChild<kvs::ui::KvBlockMapView*>();
        QVERIFY(map);
        int used = -1;
        for (const auto& b : w.lastFrame().blocks)
            if (b.state == kvs::ui::BlockState::Used) used = b.id;
        QVERIFY(used >= 0);
        QTRY_VERIFY_WITH_TIMEOUT(map->frame().step.step == w.lastFrame().step.step, 5000);
        QVERIFY2(map->tooltipForBlock(used).contains(QChar(0x201C)), qPrintable(map->tooltipForBlock(used)));
        QTest::mouseClick(pause, Qt::LeftButton);  // resume
        QTRY_VERIFY_WITH_TIMEOUT(w.lastFrame().totalPreemptions > 0, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(
            w.lastFrame().step.running == 0 && w.lastFrame().step.waiting == 0 && w.lastFrame().step.swapped == 0,
            60000);
        QVERIFY2(w.lessonCaption().contains("recompute"), qPrintable(w.lessonCaption()));  // the last caption
        QVERIFY(w.grab().save(m_dir.filePath("lesson.png")));
    }

    void playSpeculativeLesson() {
        // Its requests are chat messages with speculative decoding: the Draft acceptance dock
        // ends up with both, by their proposers, and every injected request finishes.
        const QString model = m_dir.filePath("tiny-spec.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        kvs::app::MainWindow w(model, nullptr, m_dir.filePath("chats-spec.json"));
        w.resize(1400, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        QString err;
        QVERIFY2(w.playLesson("05_speculative.json", &err), qPrintable(err));
        auto* pause = w.findChild<QPushButton*>("pauseButton");
        QTRY_VERIFY_WITH_TIMEOUT(pause->isChecked(), 10000);
        QVERIFY2(w.lessonCaption().contains("prompt lookup"), qPrintable(w.lessonCaption()));
        QTest::mouseClick(pause, Qt::LeftButton);  // resume
        auto* view = w.findChild<kvs::ui::DraftAcceptanceView*>();
        QVERIFY(view);
        QTRY_VERIFY_WITH_TIMEOUT(view->frame().requests.size() == 2 && view->frame().requests[0].finished &&
                                     view->frame().requests[1].finished,
                                 60000);
        QCOMPARE(view->frame().requests[0].proposer, QString("prompt lookup"));
        QCOMPARE(view->frame().requests[1].proposer, QString("layer-skip:1"));  // a third of 2 layers, at least 1
        QCOMPARE(view->frame().requests[1].k, 3);
        QVERIFY(view->frame().requests[1].verifySteps > 0);  // a draft model always proposes
        QVERIFY(!view->document()->isEmpty());
    }
};

QTEST_MAIN(TestLessons)
#include "tst_lessons.moc"
