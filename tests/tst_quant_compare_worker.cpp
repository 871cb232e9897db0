// ctest-labels: ui model
// app/quant_compare_worker on its own thread, through the quant lab's front door: a tiny
// model's reference and a q8_0 variant run side by side for the requested tokens, the
// sizes reported are the quant lab's, and an unknown scheme fails with its name.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include "app/quant_compare_worker.h"
#include "engine/runtime/session.h"
#include "tests/support/tiny_session.h"

using namespace kvs;

class TestQuantCompareWorker : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void comparesAndFailsByName() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("tiny.gguf").toStdString();
        auto session = test::open_tiny_session(path);
        QVERIFY2(session, session.message().c_str());

        QThread thread;
        auto* worker = new app::QuantCompareWorker(1);
        worker->moveToThread(&thread);
        connect(&thread, &QThread::finished, worker, &QObject::deleteLater);
        thread.start();
        worker->setModel((*session)->model_ptr());

        QSignalSpy started(worker, &app::QuantCompareWorker::started);
        QSignalSpy tokens(worker, &app::QuantCompareWorker::token);
        QSignalSpy finished(worker, &app::QuantCompareWorker::finished);
        QSignalSpy failed(worker, &app::QuantCompareWorker::failed);
        ui::QuantCompareRequest req;
        req.scheme = "q8_0";
        req.prompt = "hello";
        req.maxTokens = 5;
        const qint64 run = worker->requestCompare(req);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() > 0, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(1).toString()));
        QCOMPARE(finished.first().at(0).toLongLong(), run);
        QCOMPARE(started.count(), 1);
        const auto ref = started.first().at(1).value<ui::QuantSideInfo>();
        const auto var = started.first().at(2).value<ui::QuantSideInfo>();
        QVERIFY2(ref.label.contains("reference"), qPrintable(ref.label));
        QVERIFY(var.weightBytes > 0 && var.weightBytes < ref.weightBytes);  // q8_0 linears are smaller than F32
        QVERIFY(var.bitsPerWeight > 8 && var.bitsPerWeight < 9);            // 34 bytes per 32 weights
        QVERIFY(tokens.count() >= 1 && tokens.count() <= 5);

        req.scheme = "q9_9";
        worker->requestCompare(req);
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, 60000);
        QVERIFY2(failed.first().at(1).toString().contains("q9_9"), qPrintable(failed.first().at(1).toString()));
        thread.quit();
        thread.wait();
    }
};

QTEST_MAIN(TestQuantCompareWorker)
#include "tst_quant_compare_worker.moc"
