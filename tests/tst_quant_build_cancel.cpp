// ctest-labels: ui model
// The Quantization compare dock's Stop during a variant build: the worker (app/
// quant_compare_worker) reports the build's progress (words and fraction) to the view's
// bar, and Stop - clicked on the view, wired as app/quant_compare_dock wires it - ends
// the build at its next checkpoint: no comparison starts, the run finishes "Stopped", the
// half-built variant is not kept (the next request builds it again, to the end, with
// fractions that never go down and reach 1). The worker is held inside its first progress
// report past 30% until Stop was clicked, so the click lands mid-build whatever the
// machine's speed.
// A screenshot of the view mid-build goes to the test output folder.
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include "app/quant_compare_worker.h"
#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_session.h"
#include "ui/quant_compare_view.h"

using namespace kvs;

class TestQuantBuildCancel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void stopEndsTheBuild() {
        QTemporaryDir dir;
        test::TinyModelSpec spec;
        spec.n_layer = 4;
        spec.n_embd = 128;
        spec.n_ff = 256;
        spec.n_head = 2;
        spec.n_kv_head = 1;
        spec.n_ctx_train = 2048;  // the worker calibrates on 1024 tokens
        auto session = test::open_tiny_session(dir.filePath("tiny.gguf").toStdString(), spec);
        QVERIFY2(session, session.message().c_str());

        QThread thread;
        auto* worker = new app::QuantCompareWorker(1);
        worker->moveToThread(&thread);
        connect(&thread, &QThread::finished, worker, &QObject::deleteLater);
        thread.start();
        worker->setModel((*session)->model_ptr());

        ui::QuantCompareView view;
        view.resize(900, 600);
        view.setSchemes(app::QuantCompareWorker::schemeChoices(), "int4-gptq");
        view.setPrompt("hello");
        view.setReady(true);
        view.show();
        qint64 run = 0;
        // As app/quant_compare_dock wires them.
        connect(
            &view, &ui::QuantCompareView::stopRequested, worker,
            [&] {
                worker->cancel();
                run = 0;
            },
            Qt::DirectConnection);
        connect(worker, &app::QuantCompareWorker::buildProgress, &view, [&](qint64 id, const QString& what, double f) {
            if (id == run) view.setBuildProgress(what, f);
        });
        QSemaphore clicked;
        std::atomic<bool> hold{true}, held{false};
        std::vector<double> fractions;  // the worker's thread writes, read after it finished
        connect(
            worker, &app::QuantCompareWorker::buildProgress, worker,
            [&](qint64, const QString&, double f) {
                fractions.push_back(f);
                if (f >= 0.3 && hold.exchange(false)) {  // a third built: wait for Stop
                    held = true;
                    clicked.acquire();
                }
            },
            Qt::DirectConnection);
        QSignalSpy started(worker, &app::QuantCompareWorker::started);
        QSignalSpy finished(worker, &app::QuantCompareWorker::finished);
        QSignalSpy failed(worker, &app::QuantCompareWorker::failed);

        ui::QuantCompareRequest req = view.request();
        QCOMPARE(req.scheme, QString("int4-gptq"));
        req.maxTokens = 3;
        view.clearResult();
        view.setBusy("Waiting for the worker…");
        run = worker->requestCompare(req);
        auto* bar = view.findChild<QProgressBar*>("quantBusy");
        auto* status = view.findChild<QLabel*>("status");
        auto* stop = view.findChild<QPushButton*>("quantStopButton");
        QVERIFY(bar && status && stop);
        QTRY_VERIFY_WITH_TIMEOUT(held.load(), 120000);
        QTRY_VERIFY_WITH_TIMEOUT(bar->value() >= 300, 10000);  // the held report reached the bar
        QVERIFY2(status->text().startsWith("Building int4-gptq"), qPrintable(status->text()));
        QCOMPARE(bar->maximum(), 1000);  // a fraction, not the busy animation
        QVERIFY(stop->isEnabled());
        const QString shot = QString::fromStdString(test::output_path("quant_build_progress.png"));
        QVERIFY(view.grab().save(shot));
        QTest::mouseClick(stop, Qt::LeftButton);
        clicked.release();
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() > 0, 120000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(1).toString()));
        const QString why = finished.first().at(1).toString();
        QVERIFY2(why.startsWith("Stopped") && why.contains("cancelled"), qPrintable(why));
        QCOMPARE(started.count(), 0);  // no comparison ran
        QVERIFY(!stop->isEnabled());
        QVERIFY(!fractions.empty() && fractions.back() < 1.0);

        // Built again from the start and to the end: the stopped build was not kept.
        fractions.clear();
        finished.clear();
        run = worker->requestCompare(req);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() > 0, 300000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(1).toString()));
        QCOMPARE(started.count(), 1);
        QVERIFY2(finished.first().at(1).toString().startsWith("Done"), qPrintable(finished.first().at(1).toString()));
        QVERIFY(fractions.size() >= 2);
        QVERIFY(fractions.front() < 0.5);
        QCOMPARE(fractions.back(), 1.0);
        for (size_t i = 1; i < fractions.size(); ++i) QVERIFY(fractions[i] >= fractions[i - 1]);
        thread.quit();
        thread.wait();
    }
};

QTEST_MAIN(TestQuantBuildCancel)
#include "tst_quant_build_cancel.moc"
