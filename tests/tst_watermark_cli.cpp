// ctest-labels: unit
// Watermarking through the program, end to end on the default model (skipped when it is not
// installed): `kvscope generate --watermark` writes 200 tokens that `kvscope watermark-detect`
// finds (z > 4) from the text alone, the same generation without the watermark is not
// flagged (|z| < 2), and a malformed id list is refused by name. The watermark's parts are
// checked in-process by tst_watermark.
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <cmath>

#include "tests/support/run_kvscope.h"
#include "tests/support/test_paths.h"

using namespace kvs;

class TestWatermarkCli : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // The program end to end: `generate --watermark` text, then `watermark-detect` on the
    // text alone (re-tokenized, first token unscored), and the same without the watermark.
    void cli_generate_then_detect() {
        const std::string path = test::default_model_path();
        if (path.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        for (bool marked : {true, false}) {
            QStringList args{"generate",
                             "-m",
                             QString::fromStdString(path),
                             "-p",
                             "Tell me a story about a lighthouse keeper and a storm.",
                             "--chat",
                             "-n",
                             "200",
                             "--ignore-eos",
                             "--temp",
                             "1",
                             "--top-k",
                             "0",
                             "--top-p",
                             "1",
                             "--min-p",
                             "0",
                             "--seed",
                             "7",
                             "--no-stats"};
            if (marked) args << "--watermark";
            const test::KvscopeRun gen = test::run_kvscope(args);
            QVERIFY2(gen.exit_code == 0, qPrintable(gen.err));
            QVERIFY(gen.out.size() > 200);
            const test::KvscopeRun det = test::run_kvscope(
                {"watermark-detect", "-m", QString::fromStdString(path), "--text", gen.out, "--json"});
            QVERIFY2(det.exit_code == 0, qPrintable(det.err));
            const QJsonObject j = QJsonDocument::fromJson(det.out.toUtf8()).object();
            const double z = j["z"].toDouble();
            qInfo("generate%s: %d tokens scored, z = %.2f", marked ? " --watermark" : "", j["scored"].toInt(), z);
            QVERIFY(j["scored"].toInt() >= 150);
            if (marked) {
                QVERIFY2(z > 4.0 && j["watermarked"].toBool(), qPrintable(det.out));
            } else {
                QVERIFY2(std::abs(z) < 2.0 && !j["watermarked"].toBool(), qPrintable(det.out));
            }
        }
        const test::KvscopeRun bad = test::run_kvscope({"watermark-detect", "--ids", "1,2,x", "--vocab", "100"});
        QCOMPARE(bad.exit_code, 1);
        QVERIFY2(bad.err.contains("'x' is not a token id"), qPrintable(bad.err));
    }
};

QTEST_GUILESS_MAIN(TestWatermarkCli)
#include "tst_watermark_cli.moc"
