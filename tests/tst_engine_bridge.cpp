// ctest-labels: ui model
// app/engine_bridge, where Qt meets the engine: a submit that cannot be queued returns its
// reason to the caller (no signal with id 0 to guess from); a reply without a fixed seed
// draws a fresh one each time (Regenerate gives a new sample) and names it; a fixed seed
// reproduces the reply; the metrics the window charts are the engine's RequestMetrics.
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "app/engine_bridge.h"
#include "engine/runtime/session.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
using namespace kvs::app;

namespace {
struct Reply {
    QString text, summary;
};
}  // namespace

class TestEngineBridge : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

    Reply ask(EngineBridge& b, const ChatSettings& s) {
        QString text;
        auto conn = connect(&b, &EngineBridge::tokenText, this, [&](qint64, const QString& piece) { text += piece; });
        QSignalSpy done(&b, &EngineBridge::requestFinished);
        const SubmitResult r = b.submitChat({{"user", "tell me a story"}}, s);
        [&] { QVERIFY2(r.ok(), qPrintable(r.error)); }();
        [&] { QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 60000); }();
        disconnect(conn);
        return {text, done.isEmpty() ? QString() : done.first().at(1).toString()};
    }
    static QString seedOf(const QString& summary) {
        const auto m = QRegularExpression("seed (\\d+)$").match(summary);
        return m.hasMatch() ? m.captured(1) : QString();
    }

private Q_SLOTS:
    void submitWithoutModelReturnsTheReason() {
        EngineBridge b;
        QSignalSpy failed(&b, &EngineBridge::requestFailed);
        const SubmitResult r = b.submitChat({{"user", "hi"}}, ChatSettings{});
        QVERIFY(!r.ok());
        QCOMPARE(r.id, 0);
        QVERIFY2(r.error.contains("no model"), qPrintable(r.error));
        QCOMPARE(failed.count(), 0);
    }

    // The memory planners' KV figure is the engine's: SmolLM2-135M's shape (30 layers, 3 KV
    // heads of 64) is 2 x 30 x 3 x 64 x 2 bytes in F16 and 34/32 of half that in INT8.
    void kvBytesPerTokenIsTheEngines() {
        QCOMPARE(EngineBridge::kvBytesPerToken(30, 3, 64, false), qint64(23040));
        QCOMPARE(EngineBridge::kvBytesPerToken(30, 3, 64, true), qint64(12240));
    }

    void seedsAreFreshUnlessFixed() {
        const QString path = m_dir.filePath("tiny.gguf");
        QVERIFY(test::write_tiny_gguf(path.toStdString(), test::TinyModelSpec{}).is_ok());
        EngineBridge b;
        QSignalSpy loaded(&b, &EngineBridge::modelLoaded);
        b.loadModel(path);
        QCOMPARE(loaded.count(), 1);

        ChatSettings s;
        s.temperature = 1.0;
        s.topK = 0;
        s.topP = 1.0;
        s.minP = 0;
        s.maxTokens = 24;
        const Reply a = ask(b, s), c = ask(b, s);
        QVERIFY2(!seedOf(a.summary).isEmpty(), qPrintable(a.summary));
        QVERIFY2(seedOf(a.summary) != seedOf(c.summary), qPrintable(a.summary + " / " + c.summary));

        s.seed = 42;
        const Reply f1 = ask(b, s), f2 = ask(b, s);
        QCOMPARE(seedOf(f1.summary), QString("42"));
        QCOMPARE(f1.text, f2.text);

        // a message over the context: refused at once, with the sizes, nothing queued
        const SubmitResult big = b.submitChat({{"user", QString("word ").repeated(4000)}}, s);
        QVERIFY(!big.ok());
        QVERIFY2(big.error.contains("context holds 511 tokens"), qPrintable(big.error));

        const LatencySummary lat = b.recentLatency();
        QCOMPARE(lat.n_requests, 4);
        QCOMPARE(lat.ttft_ms.count, int64_t{4});
        QVERIFY(lat.ttft_ms.p50 > 0);
    }
};

QTEST_MAIN(TestEngineBridge)
#include "tst_engine_bridge.moc"
