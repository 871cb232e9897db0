// ctest-labels: unit engine
// The INT8 KV cache option through the program (`kvscope generate` / `kvscope bench`
// --kv-type) on tiny generated models: an unknown type and a head_dim the INT8 cache cannot
// take are refused by name, generate runs with it, the single-sequence bench reports its
// bytes per token (272, the size tst_kv_int8 works out by hand) and
// the batching bench fits more blocks into the same MiB than the F16 cache. The engine
// side: tst_kv_int8.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <utility>

#include "tests/support/run_kvscope.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
using test::run_kvscope;
using Run = test::KvscopeRun;

class TestKvInt8Cli : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_path, m_path_hd16;

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_path = m_dir.filePath("tiny_hd32.gguf");
        auto m = test::write_and_load_tiny_gguf(m_path.toStdString(), test::head_dim_32_spec());
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_path_hd16 = m_dir.filePath("tiny_hd16.gguf");
        auto m16 = test::write_and_load_tiny_gguf(m_path_hd16.toStdString(), test::TinyModelSpec{});
        QVERIFY2(m16.is_ok(), m16.message().c_str());
    }

    void cliKvType() {
        Run r = run_kvscope({"generate", "-m", m_path, "-p", "hello", "-n", "4", "--kv-type", "int4"});
        QVERIFY(r.exit_code > 0);
        QVERIFY2(r.err.contains("--kv-type") && r.err.contains("int4"), qPrintable(r.err));
        r = run_kvscope({"generate", "-m", m_path_hd16, "-p", "hello", "-n", "4", "--kv-type", "int8"});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("head_dim 16"), qPrintable(r.err));
        r = run_kvscope(
            {"generate", "-m", m_path, "-p", "hello", "-n", "4", "--temp", "0", "--kv-type", "int8", "--ignore-eos"});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("decode 4 tok"), qPrintable(r.err));

        r = run_kvscope({"bench", m_path, "-p", "16", "-n", "4", "-d", "40", "-r", "1", "--kv-type", "int8", "--json"});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(j["kv_type"].toString(), QString("int8"));
        QCOMPARE(j["kv_bytes_per_token"].toInt(), 272);
        QCOMPARE(j["depth"].toInt(), 40);
        QVERIFY(j["tg"].toObject()["avg_ts"].toDouble() > 0);

        for (auto [type, blocks] : {std::pair{"f16", 128}, {"int8", 240}}) {
            r = run_kvscope({"bench", m_path, "--workload", "uniform:n=3,prompt=8..8,output=3..3", "--policy",
                             "continuous", "--ctx", "128", "--kv-mib", "1", "--kv-type", type, "--json"});
            QVERIFY2(r.exit_code == 0, qPrintable(r.err));
            j = QJsonDocument::fromJson(r.out.toUtf8()).object();
            QCOMPARE(j["kv_type"].toString(), QString(type));
            const QJsonObject run = j["runs"].toArray()[0].toObject();
            QCOMPARE(run["kv_blocks"].toInt(), blocks);
            QCOMPARE(run["latency"].toObject()["n_finished"].toInt(), 3);
        }
    }
};

QTEST_GUILESS_MAIN(TestKvInt8Cli)
#include "tst_kv_int8_cli.moc"
