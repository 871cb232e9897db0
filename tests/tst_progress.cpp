// ctest-labels: unit
// engine/core/progress.h: parts map into the whole job's [0, 1], the fraction the listener
// hears never goes down (also when threads report out of order), it is clamped, a default
// Progress is silent, the cancel flag is seen by every copy and part, and a cancelled
// status is recognized through the prefixes callers add.
#include <QtTest>

#include <thread>
#include <vector>

#include "engine/core/progress.h"

using namespace kvs;

namespace {
struct Heard {
    std::vector<std::string> stages;
    std::vector<double> fractions;
};
Progress listening(Heard& h, const CancelFlag* flag = nullptr) {
    return Progress(
        [&h](const std::string& stage, double f) {
            h.stages.push_back(stage);
            h.fractions.push_back(f);
        },
        flag);
}
}  // namespace

class TstProgress : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void partsMapIntoTheWhole() {
        Heard h;
        Progress p = listening(h);
        Progress calib = p.part(0.0, 0.25);
        Progress layers = p.part(0.25, 1.0);
        calib.report("calibrating", 1, 2);
        QCOMPARE(h.fractions.back(), 0.125);
        calib.report("calibrating", 1.0);
        QCOMPARE(h.fractions.back(), 0.25);
        layers.step(1, 3).report("layer 2 / 3", 0.5);  // [0.5, 0.75] of the whole, half done
        QCOMPARE(h.fractions.back(), 0.625);
        layers.report("done", 1.0);
        QCOMPARE(h.fractions.back(), 1.0);
        QCOMPARE(h.stages.back(), std::string("done"));
        QCOMPARE(p.last_fraction(), 1.0);
    }
    void neverGoesDownAndIsClamped() {
        Heard h;
        Progress p = listening(h);
        p.report("a", 0.6);
        p.report("b", 0.2);  // a late report from another part
        QCOMPARE(h.fractions.back(), 0.6);
        QCOMPARE(h.stages.back(), std::string("b"));
        p.report("c", 7.0);
        QCOMPARE(h.fractions.back(), 1.0);
        p.report("d", -3.0);
        QCOMPARE(h.fractions.back(), 1.0);
        p.report("e", int64_t(3), int64_t(0));  // no total: 0, raised to the last
        QCOMPARE(h.fractions.back(), 1.0);
    }
    void monotoneFromThreads() {
        Heard h;
        Progress p = listening(h);
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([p, t] {
                for (int i = 0; i <= 100; ++i) p.step(t, 4).report("layer", i, 100);
            });
        for (auto& t : threads) t.join();
        QCOMPARE(int(h.fractions.size()), 4 * 101);
        for (size_t i = 1; i < h.fractions.size(); ++i) QVERIFY(h.fractions[i] >= h.fractions[i - 1]);
        QCOMPARE(h.fractions.back(), 1.0);
    }
    void silentByDefault() {
        Progress p;
        p.report("nobody hears this", 0.5);
        QVERIFY(!p.cancelled());
        QVERIFY(p.check("x").is_ok());
        QCOMPARE(p.last_fraction(), 0.0);
    }
    void cancelSeenByEveryPart() {
        CancelFlag flag{false};
        Heard h;
        Progress p = listening(h, &flag);
        Progress inner = p.part(0.5, 1.0).step(2, 7);
        QVERIFY(!inner.cancelled());
        flag = true;
        QVERIFY(p.cancelled());
        QVERIFY(inner.cancelled());
        const Status s = inner.check("GPTQ at layer 3 of 30");
        QVERIFY(!s.is_ok());
        QCOMPARE(s.message(), std::string("GPTQ at layer 3 of 30: cancelled"));
        QVERIFY(Progress::is_cancelled(s));
        QVERIFY(Progress::is_cancelled(Status::error("quantizing to int4-gptq: " + s.message())));
        QVERIFY(!Progress::is_cancelled(Status::error("model.gguf: truncated tensor data")));
        QVERIFY(!Progress::is_cancelled(Status::ok()));
    }
};

QTEST_APPLESS_MAIN(TstProgress)
#include "tst_progress.moc"
