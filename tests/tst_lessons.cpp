// ctest-labels: ui
// Scripted lessons: every lesson shipped in resources/lessons parses; broken lesson files
// are refused with the field named; playing one in the real window (tiny model)
// reconfigures the engine, injects its requests step by step and shows its captions; a
// lesson started from the menu brings its controls and views forward; End lesson gives the
// engine its earlier settings back and clears the caption. (tst_lesson_audit checks every
// caption's claim against the views.)
#include <QDockWidget>
#include <QElapsedTimer>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextDocument>
#include <QtTest>

#include <chrono>
#include <thread>

#include "app/engine_bridge.h"
#include "app/lesson.h"
#include "app/lesson_condition.h"
#include "app/lesson_player.h"
#include "app/main_window.h"
#include "app/view_convert.h"
#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"
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
        const QByteArray inject = R"("events":[{"inject":{"n":1}}])";
        QTest::newRow("caption in an event")
            << QByteArray(R"({"title":"t","events":[{"inject":{"n":1},"caption":"x"}]})") << "events[0].caption";
        QTest::newRow("no captions") << QByteArray(R"({"title":"t",)" + inject + "}") << "captions";
        QTest::newRow("caption without a condition")
            << QByteArray(R"({"title":"t",)" + inject + R"(,"captions":[{"text":"x"}]})") << "captions[0].when";
        QTest::newRow("unknown fact") << QByteArray(R"({"title":"t",)" + inject +
                                                    R"(,"captions":[{"text":"x","when":["blocs >= 1"]}]})")
                                      << "captions[0].when[0]: \"blocs >= 1\": unknown fact \"blocs\"";
        QTest::newRow("no operator") << QByteArray(R"({"title":"t",)" + inject +
                                                   R"(,"captions":[{"text":"x","when":["blocks 1"]}]})")
                                     << "captions[0].when[0]";
        QTest::newRow("unknown placeholder")
            << QByteArray(R"({"title":"t",)" + inject + R"(,"captions":[{"text":"{nope}","when":["blocks > 0"]}]})")
            << "captions[0].text: {nope}";
        QTest::newRow("unknown view") << QByteArray(R"({"title":"t","views":["kv"],)" + inject + "}") << "views[0]";
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
        QVERIFY(w.lessonCaption().contains("Eight requests"));  // the description: no step ran yet
        // One step at a time: the first step prefills and the frame shows 8 requests, and
        // with it comes the first caption.
        QTest::mouseClick(w.findChild<QPushButton*>("stepButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(int(w.lastFrame().requests.size()), 8, 10000);
        QTRY_VERIFY2_WITH_TIMEOUT(w.lessonCaption().contains("8 requests"), qPrintable(w.lessonCaption()), 5000);
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
        // The last caption: at full speed the lesson may end between two polls; the caption whose
        // conditions hold in the final frame follows the previous one after a reading pause.
        QTRY_VERIFY2_WITH_TIMEOUT(w.lessonCaption().contains("recompute"), qPrintable(w.lessonCaption()), 10000);
        QVERIFY(w.grab().save(m_dir.filePath("lesson.png")));
    }

    // Step clicks that land while a step runs queue steps that then run back to back; each
    // of their frames is drawn in turn, so a caption that waits for a state lasting one step
    // still comes with that step: lesson 4's first caption (four requests prefilling, the
    // rest waiting) with the first step, though three steps ran before the window looked.
    // (Drawing only the newest frame, the three-adapter lesson lost its prefill caption when
    // a fast machine ran the queued steps between two polls, and stalled.)
    void queuedStepsAreEachDrawn() {
        const QString model = m_dir.filePath("tiny-queued.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        kvs::app::MainWindow w(model, nullptr, m_dir.filePath("chats-queued.json"));
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        QSignalSpy shown(w.lessonPlayer(), &kvs::app::LessonPlayer::captionShown);
        QString err;
        QVERIFY2(w.playLesson("04_static_vs_continuous.json", &err), qPrintable(err));
        QTRY_VERIFY_WITH_TIMEOUT(w.findChild<QPushButton*>("pauseButton")->isChecked(), 10000);
        auto* step = w.findChild<QPushButton*>("stepButton");
        for (int i = 0; i < 3; ++i) QTest::mouseClick(step, Qt::LeftButton);
        // The engine runs the three steps while the window does not poll (no event loop here).
        QElapsedTimer t;
        t.start();
        while (w.bridge()->snapshotsAfter(-1).size() < 3 && t.elapsed() < 60000)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const auto snaps = w.bridge()->snapshotsAfter(-1);
        QCOMPARE(int(snaps.size()), 3);
        QCOMPARE(w.lessonCaptionIndex(), -1);  // nothing drawn yet
        // The claim holds on the first step only: the newest frame alone would have missed it.
        const auto first = kvs::app::lesson_facts(kvs::app::to_frame(*snaps[0]), {});
        const auto newest = kvs::app::lesson_facts(kvs::app::to_frame(*snaps[2]), {});
        QVERIFY(first.value("prefilling") >= 4 && first.value("waiting") >= 4);
        QCOMPARE(newest.value("prefilling"), qint64(0));
        QTRY_VERIFY_WITH_TIMEOUT(!shown.isEmpty(), 10000);
        QCOMPARE(shown[0][0].toInt(), 0);
        QCOMPARE(shown[0][1].toLongLong(), qint64(snaps[0]->step.step));  // with the prefill step's frame
        QTRY_COMPARE_WITH_TIMEOUT(w.lastFrame().step.step, qint64(snaps[2]->step.step), 5000);  // then the rest
        w.endLesson();
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

    // From the Lessons menu: the Engine dock (caption, Step, End lesson) and the views the
    // lesson talks about come forward, even when the user had closed them.
    void menuShowsTheLessonsViews() {
        const QString model = m_dir.filePath("tiny-menu.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        kvs::app::MainWindow w(model, nullptr, m_dir.filePath("chats-menu.json"));
        w.resize(1400, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        auto* slots = w.findChild<QDockWidget*>("slotTimelineDock");
        auto* engine = w.findChild<QDockWidget*>("engineDock");
        slots->hide();
        w.findChild<QDockWidget*>("metricsDock")->raise();  // the engine dock behind another tab
        QAction* lesson = nullptr;
        for (QAction* a : w.menuBar()->actions())
            if (a->menu())
                for (QAction* b : a->menu()->actions())
                    if (b->text() == "Static vs continuous batching") lesson = b;
        QVERIFY(lesson);
        lesson->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(w.findChild<QPushButton*>("pauseButton")->isChecked(), 10000);
        // Both on screen at once: the timeline, and the caption with Step and End lesson.
        QTRY_VERIFY(slots->isVisible() && !slots->widget()->visibleRegion().isEmpty());
        QVERIFY(engine->isVisible());
        w.grab().save(QString::fromStdString(kvs::test::output_path("lesson_from_menu.png")));
        for (const char* name : {"lessonCaption", "stepButton", "endLessonButton"}) {
            auto* x = w.findChild<QWidget*>(name);
            QTRY_VERIFY2(x->isVisible() && !x->visibleRegion().isEmpty(), name);
        }
        QVERIFY(w.findChild<QAction*>("endLessonAction")->isEnabled());
    }

    // End lesson: the engine gets back the settings it had before (not the lesson's 256
    // blocks and 4 seats), the caption goes, Inject afterwards runs on those settings.
    void endLessonRestoresTheEngine() {
        const QString model = m_dir.filePath("tiny-end.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        kvs::app::MainWindow w(model, nullptr, m_dir.filePath("chats-end.json"));
        w.resize(1400, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.chatView()->findChild<QPushButton*>("sendButton")->isEnabled(), 20000);
        const kvs::app::EngineSettings before = w.bridge()->engineSettings();
        QString err;
        QVERIFY2(w.playLesson("04_static_vs_continuous.json", &err), qPrintable(err));
        QTRY_VERIFY_WITH_TIMEOUT(w.findChild<QPushButton*>("pauseButton")->isChecked(), 10000);
        QCOMPARE(w.bridge()->engineSettings().kvBlocks, 256);
        QTest::mouseClick(w.findChild<QPushButton*>("stepButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(w.lastFrame().step.nBlocks, 256, 10000);
        QCOMPARE(w.lastFrame().step.maxSeqs, 4);
        w.findChild<QAction*>("endLessonAction")->trigger();
        QVERIFY(!w.lessonActive());
        QVERIFY(w.lessonCaption().isEmpty());
        QVERIFY(!w.findChild<QLabel*>("lessonCaption")->isVisible());
        QVERIFY(!w.findChild<QPushButton*>("endLessonButton")->isVisible());
        QVERIFY(!w.findChild<QAction*>("endLessonAction")->isEnabled());
        QTRY_VERIFY_WITH_TIMEOUT(w.bridge()->engineSettings().kvBlocks == before.kvBlocks &&
                                     w.bridge()->engineSettings().maxSeqs == before.maxSeqs,
                                 10000);
        QTRY_VERIFY_WITH_TIMEOUT(w.lastFrame().requests.isEmpty(), 10000);
        QVERIFY(!w.findChild<QPushButton*>("pauseButton")->isChecked());  // the user's engine runs
        QTest::mouseClick(w.findChild<QPushButton*>("injectButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!w.lastFrame().requests.isEmpty(), 10000);
        QVERIFY2(w.lastFrame().step.nBlocks != 256, qPrintable(QString::number(w.lastFrame().step.nBlocks)));
        QCOMPARE(w.lastFrame().step.maxSeqs, before.maxSeqs);
        QVERIFY(w.lessonCaption().isEmpty());  // no caption comes back with the user's requests
    }
};

QTEST_MAIN(TestLessons)
#include "tst_lessons.moc"
