// ctest-labels: unit engine
// Lessons pause the engine and step it by hand. The engine's RequestMetrics (the one
// measurement of TTFT and TPOT the metrics view, the chat summary and bench report) must
// count the time the engine could run, not the seconds a paused lesson sat waiting for the
// user's next Step. Also: a cancel between steps publishes the state as it is now, so the
// views do not keep showing a request that is gone.
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <thread>

#include "engine/runtime/session.h"
#include "engine/telemetry/snapshot_ring.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {
constexpr int kPauseMs = 700;  // each wait the user takes between two steps

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
}  // namespace

class TestLessonTiming : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<Session> m_session;

    std::unique_ptr<EngineLoop> loop() {
        EngineOptions eo;
        eo.n_threads = 1;
        eo.kv_blocks = 64;
        auto l = m_session->start_loop(eo);
        if (!l) qFatal("%s", l.message().c_str());
        return std::move(l.value());
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        const std::string path = m_dir.filePath("tiny.gguf").toStdString();
        QVERIFY(test::write_tiny_gguf(path, test::TinyModelSpec{}).is_ok());
        auto s = Session::open(path);
        QVERIFY2(s, s.message().c_str());
        m_session = s.value();
    }

    // Submitted while paused, stepped by hand with pauses of 700 ms: the metrics hold the
    // steps' own time (a tiny model: a few ms each), not the 700 ms waits.
    void pausedTimeIsNotTheRequests() {
        auto l = loop();
        l->pause();
        RequestMetrics got;
        std::atomic<bool> done{false};
        GenerationRequest req;
        req.prompt = {40, 41, 42, 43, 44, 45, 46, 47};
        req.params.temperature = 0;
        req.params.max_tokens = 4;
        req.params.ignore_eos = true;
        req.on_event = [&](const TokenEvent& ev) {
            if (ev.finished && ev.metrics) {
                got = *ev.metrics;
                done = true;
            }
        };
        l->submit(std::move(req));
        sleep_ms(kPauseMs);  // the lesson shows its first caption; the user reads it
        for (int i = 0; i < 8 && !done; ++i) {
            l->single_step();
            l->wait_idle();
            sleep_ms(kPauseMs);
        }
        QVERIFY(done);
        QCOMPARE(got.n_output, 4);
        QVERIFY2(got.ttft_ms() >= 0 && got.ttft_ms() < kPauseMs / 2,
                 qPrintable(QString("TTFT %1 ms counts the paused time").arg(got.ttft_ms())));
        QVERIFY2(got.tpot_ms() > 0 && got.tpot_ms() < kPauseMs / 2,
                 qPrintable(QString("TPOT %1 ms counts the paused time").arg(got.tpot_ms())));
    }

    // Running, not paused: the clock runs as before (a request waiting for a busy engine is
    // still charged its queueing time).
    void runningClockStillRuns() {
        auto l = loop();
        std::atomic<bool> done{false};
        RequestMetrics got;
        GenerationRequest req;
        req.prompt = {50, 51, 52};
        req.params.temperature = 0;
        req.params.max_tokens = 2;
        req.params.ignore_eos = true;
        req.arrival_ms = 0;  // arrived when the engine started
        req.on_event = [&](const TokenEvent& ev) {
            if (ev.finished && ev.metrics) {
                got = *ev.metrics;
                done = true;
            }
        };
        sleep_ms(300);
        l->submit(std::move(req));
        l->wait_idle();
        QVERIFY(done);
        QVERIFY2(got.ttft_ms() >= 300, qPrintable(QString("TTFT %1 ms").arg(got.ttft_ms())));
    }

    // Stop: the engine is idle after a cancel, so no step follows it; the newest snapshot
    // must still say that nothing runs.
    void cancelPublishesTheStateNow() {
        auto l = loop();
        l->pause();
        GenerationRequest req;
        req.prompt = {60, 61, 62, 63};
        req.params.max_tokens = 200;
        req.params.ignore_eos = true;
        const RequestId id = l->submit(std::move(req));
        l->single_step();
        l->single_step();
        l->wait_idle();
        auto ring = std::shared_ptr<const SnapshotRing>();
        std::shared_ptr<const EngineSnapshot> before;
        l->post([&](Engine& e) { ring = e.telemetry(); });
        l->wait_idle();
        QVERIFY(ring);
        before = ring->latest();
        QVERIFY(before);
        QCOMPARE(before->step.n_running, 1);
        l->cancel(id);
        l->wait_idle();
        const auto after = ring->latest();
        QVERIFY(after && after != before);
        QCOMPARE(after->step.step, before->step.step);  // no step ran
        QCOMPARE(after->step.n_running, 0);
        QCOMPARE(after->step.blocks_used, 0);
        for (const auto& r : after->requests)
            if (r.id == id) QCOMPARE(int(r.status), int(RequestStatus::finished));
    }
};

QTEST_GUILESS_MAIN(TestLessonTiming)
#include "tst_lesson_timing.moc"
