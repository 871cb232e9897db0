// ctest-labels: unit model
// The real `kvscope` program: `quant-fit` (a table, --json, bad input named with exit 1) and
// `quantize` progress and Ctrl+C: with stderr a pipe the progress comes as plain lines (no
// carriage return) ending at 100%; a SIGINT sent once the GPTQ progress has begun ends the
// run with exit code 130, "cancelled" on stderr, and neither the output nor a temporary
// file left in the folder.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>

#include "tests/support/run_kvscope.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using kvs::test::run_kvscope;

class TstQuantCli : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void quantFitJson() {
        const auto r = run_kvscope(
            {"quant-fit", "--preset", "Llama-2-7B", "--device", "gpu", "--memory", "8", "--ctx", "4096", "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j["format"].toString(), QString("kvscope-quant-fit"));
        const QJsonArray rows = j["rows"].toArray();
        QVERIFY(rows.size() >= 10);
        QCOMPARE(rows[0].toObject()["scheme"].toString(), QString("int4-awq"));
        QCOMPARE(rows[0].toObject()["rank"].toInt(), 1);
        bool sawF16 = false;
        for (const auto& v : rows) {
            const QJsonObject o = v.toObject();
            if (o["scheme"].toString() != "f16") continue;
            sawF16 = true;
            QCOMPARE(o["fits"].toBool(), false);
            QCOMPARE(o["rank"].toInt(), 0);
        }
        QVERIFY(sawF16);

        const auto table = run_kvscope({"quant-fit", "--preset", "Llama-2-7B", "--device", "gpu", "--memory", "8"});
        QCOMPARE(table.exit_code, 0);
        QVERIFY2(table.out.contains("int4-awq") && table.out.contains("2306.00978"), qPrintable(table.out));
    }

    void quantFitBadInput_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expected");
        QTest::newRow("gpu without memory") << QStringList{"--preset", "Llama-2-7B", "--device", "gpu"} << "--memory";
        QTest::newRow("context 0") << QStringList{"--preset", "Llama-2-7B", "--memory", "8", "--ctx", "-5"}
                                   << "context must be at least 1";
        QTest::newRow("unknown goal") << QStringList{"--preset", "Llama-2-7B", "--memory", "8", "--goal", "cheap"}
                                      << "unknown goal 'cheap'";
        QTest::newRow("unknown preset") << QStringList{"--preset", "GPT-5"} << "unknown model preset 'GPT-5'";
        QTest::newRow("two models") << QStringList{"--preset", "Llama-2-7B", "--params", "7e9"} << "give one model";
        QTest::newRow("params without shape")
            << QStringList{"--params", "7e9", "--memory", "8"} << "layers must be at least 1";
        QTest::newRow("missing table") << QStringList{"--preset", "Llama-2-7B", "--memory",
                                                      "8",        "--table",    "/nonexistent/table.json"}
                                       << "--table";
    }
    void quantFitBadInput() {
        QFETCH(QStringList, args);
        QFETCH(QString, expected);
        const auto r = run_kvscope(QStringList{"quant-fit"} + args);
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains(expected), qPrintable(r.err));
    }

    void quantizeProgressAndCtrlC() {
        QTemporaryDir dir;
        kvs::test::TinyModelSpec spec = kvs::test::slow_to_quantize_spec();
        spec.weight_type = kvs::DType::F16;
        const QString model = dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(model.toStdString(), spec).is_ok());

        // Plain lines on a pipe, the last at 100%, and the file written.
        const QString done = dir.filePath("q8.gguf");
        const auto ok = run_kvscope({"quantize", "-m", model, "-s", "q8_0", "-o", done});
        QCOMPARE(ok.exit_code, 0);
        QVERIFY2(!ok.err.contains('\r'), qPrintable(ok.err));
        QVERIFY2(ok.err.contains("100%"), qPrintable(ok.err));
        QVERIFY(QFile::exists(done));

        // kvscope eval: the quantization and the quality pass as plain lines too.
        const auto ev = run_kvscope({"eval", "-m", model, "-q", "q8_0", "--max-tokens", "512", "--ctx", "128",
                                     "--divergence-tokens", "4", "--no-speed"},
                                    300000);
        QCOMPARE(ev.exit_code, 0);
        QVERIFY2(!ev.err.contains('\r'), qPrintable(ev.err));
        QVERIFY2(ev.err.contains("quality  100%  evaluating chunk 4 / 4"), qPrintable(ev.err));

        // Ctrl+C once GPTQ reports: cancelled, nothing written.
        QProcess p;
        const QString out = dir.filePath("gptq.gguf");
        kvs::test::start_kvscope(p, {"quantize", "-m", model, "-s", "int4-gptq", "-o", out, "--calib-tokens", "1024"});
        QVERIFY(p.waitForStarted(30000));
        QByteArray err;
        QElapsedTimer t;
        t.start();
        while (!err.contains("GPTQ") && !err.contains("calibrating") && t.elapsed() < 120000 &&
               p.state() == QProcess::Running) {
            p.waitForReadyRead(200);
            err += p.readAllStandardError();
        }
        QVERIFY2(p.state() == QProcess::Running, err.constData());
        ::kill(pid_t(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(120000));
        err += p.readAllStandardError();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 130);
        QVERIFY2(err.contains("cancelled"), err.constData());
        const QStringList left = QDir(dir.path()).entryList({"gptq*"}, QDir::AllEntries | QDir::NoDotAndDotDot);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
    }
};

QTEST_MAIN(TstQuantCli)
#include "tst_quant_cli.moc"
