// ctest-labels: unit model
// Runs the real `kvscope` executable the way a user does: bad input must give a clear
// error and a non-zero exit (never a crash or a hang); good input must work.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "tests/support/run_kvscope.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using Run = kvs::test::KvscopeRun;
using kvs::test::run_kvscope;

class TestCli : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void noDisplayPointsToGenerate() {
        const Run r = run_kvscope({});
        QCOMPARE(r.status, QProcess::NormalExit);
        QVERIFY2(r.err.contains("no display") && r.err.contains("kvscope generate"), qPrintable(r.err));
    }

    void badModelFiles_data() {
        QTest::addColumn<QByteArray>("content");
        QTest::addColumn<QString>("expect");
        QTest::newRow("zero-length") << QByteArray() << "gguf";
        QTest::newRow("foreign") << QByteArray("\x89PNG\r\n\x1a\n this is not a model at all", 34) << "gguf";
        QTest::newRow("truncated header") << QByteArray("GGUF\x03\x00\x00\x00\x01", 9) << "gguf";
    }
    void badModelFiles() {
        QFETCH(QByteArray, content);
        QFETCH(QString, expect);
        QTemporaryDir dir;
        const QString path = dir.filePath("bad.gguf");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(content);
        f.close();
        for (const QStringList& args :
             {QStringList{"generate", "-m", path, "-p", "hi"}, QStringList{"inspect", path}}) {
            const Run r = run_kvscope(args);
            QCOMPARE(r.status, QProcess::NormalExit);
            QCOMPARE(r.exit_code, 1);
            QVERIFY2(
                r.err.contains("error:") && r.err.contains("bad.gguf") && r.err.contains(expect, Qt::CaseInsensitive),
                qPrintable(r.err));
        }
    }

    void tinyModelsRunFromBothFormats() {
        QTemporaryDir dir;
        kvs::test::TinyModelSpec spec;
        const QString gguf = dir.filePath("tiny.gguf"), hf = dir.filePath("tiny_hf");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), spec).is_ok());
        QVERIFY(kvs::test::write_tiny_safetensors_folder(hf.toStdString(), spec).is_ok());
        for (const QString& m : {gguf, hf}) {
            const Run ins = run_kvscope({"inspect", m});
            QCOMPARE(ins.exit_code, 0);
            // 2 layers x 2 KV heads x head dim 16 -> 2*2*2*16*2 = 256 bytes per token
            QVERIFY2(ins.out.contains("KV per token   256 bytes"), qPrintable(ins.out + ins.err));
            const Run gen = run_kvscope({"generate", "-m", m, "-p", "hello", "-n", "8", "--temp", "0"});
            QCOMPARE(gen.exit_code, 0);
            QVERIFY2(gen.err.contains("decode 8 tok") || gen.err.contains("stop: eos"), qPrintable(gen.err));
        }
    }

    void benchWritesJson() {
        QTemporaryDir dir;
        kvs::test::TinyModelSpec spec;
        const QString gguf = dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), spec).is_ok());
        const Run r = run_kvscope({"bench", gguf, "-p", "32", "-n", "8", "-r", "2", "--json"});
        QCOMPARE(r.exit_code, 0);
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QVERIFY2(!j.isEmpty(), qPrintable(r.out));
        QCOMPARE(j["pp"].toObject()["n_prompt"].toInt(), 32);
        QCOMPARE(j["tg"].toObject()["n_gen"].toInt(), 8);
        QCOMPARE(j["tg"].toObject()["samples_ts"].toArray().size(), 2);
        QVERIFY(j["pp"].toObject()["avg_ts"].toDouble() > 0);
        QVERIFY(j["memory_read_bandwidth_gbs"].toDouble() > 0);
    }

    void benchWorkloadBothPoliciesAndTrace() {
        QTemporaryDir dir;
        kvs::test::TinyModelSpec spec;
        const QString gguf = dir.filePath("tiny.gguf"), trace = dir.filePath("trace.json");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), spec).is_ok());
        const Run r = run_kvscope({"bench", gguf, "--workload", "mixed:n=6,prompt=4..20,output=2..6", "--max-seqs", "3",
                                   "--ctx", "256", "--json", "--trace", trace});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        const QJsonArray runs = j["runs"].toArray();
        QCOMPARE(runs.size(), 2);
        QCOMPARE(runs[0].toObject()["policy"].toString(), QString("continuous"));
        QCOMPARE(runs[1].toObject()["policy"].toString(), QString("static"));
        for (const auto& v : runs) {
            const QJsonObject o = v.toObject();
            QCOMPARE(o["latency"].toObject()["n_finished"].toInt(), 6);
            QVERIFY(o["output_tok_per_s"].toDouble() > 0);
            QVERIFY(o["kv_waste_paged"].toDouble() >= 0 && o["kv_waste_paged"].toDouble() < 1);
        }
        QVERIFY(runs[1].toObject()["padding_tokens"].toInt() > 0);  // static batches pay for finished seats
        QVERIFY(j["continuous_vs_static"].toDouble() > 0);
        QFile f(trace);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject t = QJsonDocument::fromJson(f.readAll()).object();
        QCOMPARE(t["format"].toString(), QString("kvscope-trace"));
        QVERIFY(t["steps"].toArray().size() > 0);
        QCOMPARE(t["requests"].toArray().size(), 6);
        QCOMPARE(t["snapshots"].toArray().size(), 1);
    }

    void benchSweepAndBadWorkload() {
        QTemporaryDir dir;
        kvs::test::TinyModelSpec spec;
        const QString gguf = dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), spec).is_ok());
        const Run r =
            run_kvscope({"bench", gguf, "--sweep", "1,2,4", "--sweep-prompt", "4", "--sweep-gen", "3", "--json"});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QJsonArray rows = QJsonDocument::fromJson(r.out.toUtf8()).object()["sweep"].toArray();
        QCOMPARE(rows.size(), 3);
        QCOMPARE(rows[2].toObject()["batch"].toInt(), 4);
        QVERIFY(rows[2].toObject()["decode_tok_per_s"].toDouble() > 0);
        const Run bad = run_kvscope({"bench", gguf, "--workload", "mixed:bogus=3"});
        QCOMPARE(bad.exit_code, 1);
        QVERIFY2(bad.err.contains("bogus"), qPrintable(bad.err));
        const Run bad2 = run_kvscope({"bench", gguf, "--sweep", "1,x"});
        QCOMPARE(bad2.exit_code, 1);
        QVERIFY2(bad2.err.contains("1,x"), qPrintable(bad2.err));
    }

    // kvscope eval on a tiny model: the table, and the JSON report's numbers hang together.
    void evalTinyModel() {
        QTemporaryDir dir;
        kvs::test::TinyModelSpec spec;
        const QString gguf = dir.filePath("tiny.gguf"), text = dir.filePath("text.txt"),
                      out = dir.filePath("eval.json");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), spec).is_ok());
        QFile t(text);
        QVERIFY(t.open(QIODevice::WriteOnly));
        for (int i = 0; i < 40; ++i)
            t.write(QByteArray("The quick brown fox jumps over the lazy dog number ") + QByteArray::number(i) + ".\n");
        t.close();
        const QString prompts = dir.filePath("prompts.txt");
        QFile pf(prompts);
        QVERIFY(pf.open(QIODevice::WriteOnly));
        pf.write("Hello there\n\nThe lazy dog\n");  // two prompts, the empty line skipped
        pf.close();
        const Run r =
            run_kvscope({"eval", "-m", gguf, "--quant", "q8_0,q4_0", "--text", text, "--ctx", "64", "--max-tokens",
                         "256", "--prompts", prompts, "--divergence-tokens", "8", "--json", out});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("| scheme | label |") && r.out.contains("| q4_0 |") && r.out.contains(text) &&
                     r.out.contains("reference:"),
                 qPrintable(r.out));
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject j = QJsonDocument::fromJson(f.readAll()).object();
        QCOMPARE(j["text"].toObject()["file"].toString(), text);
        QCOMPARE(j["chunking"].toObject()["n_chunks"].toInt(), 4);       // 256 tokens / 64
        QCOMPARE(j["chunking"].toObject()["n_scored"].toInt(), 4 * 31);  // rows 32..62 of each chunk
        const QJsonArray rows = j["rows"].toArray();
        QCOMPARE(rows.size(), 3);
        QVERIFY(rows[0].toObject()["is_reference"].toBool());
        QCOMPARE(rows[1].toObject()["scheme"].toString(), QString("q8_0"));
        const double kl8 = rows[1].toObject()["kl"].toObject()["mean"].toDouble();
        const double kl4 = rows[2].toObject()["kl"].toObject()["mean"].toDouble();
        QVERIFY2(kl8 > 0 && kl8 < kl4, qPrintable(QString("%1 %2").arg(kl8).arg(kl4)));
        QCOMPARE(rows[2].toObject()["first_divergence"].toArray().size(), 2);
        QCOMPARE(j["divergence"].toObject()["prompts"].toArray().size(), 2);
        QVERIFY(rows[2].toObject()["speed"].toObject()["tg"].toObject()["mean_tps"].toDouble() > 0);
        QCOMPARE(rows[2].toObject()["linear_bits_per_weight"].toDouble(), 4.5);
    }

    // eval with both INT4 schemes reports AWQ against RTN (share of the PPL gap, KL), in the
    // table's footer and the JSON, consistent with the rows; without both it is null.
    void evalAwqVsRtn() {
        QTemporaryDir dir;
        const QString gguf = dir.filePath("tiny.gguf"), text = dir.filePath("text.txt"),
                      out = dir.filePath("eval.json");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        QFile t(text);
        QVERIFY(t.open(QIODevice::WriteOnly));
        for (int i = 0; i < 40; ++i)
            t.write(QByteArray("A small tree grows by the river, number ") + QByteArray::number(i) + ".\n");
        t.close();
        const Run r =
            run_kvscope({"eval", "-m", gguf, "--quant", "int4-rtn,int4-awq", "--text", text, "--calib", text,
                         "--calib-tokens", "64", "--ctx", "64", "--max-tokens", "256", "--no-speed", "--json", out});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("int4-awq vs RTN: ") && r.out.contains("it lowers the mean KL by"), qPrintable(r.out));
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonObject j = QJsonDocument::fromJson(f.readAll()).object();
        const QJsonArray rows = j["rows"].toArray();
        QCOMPARE(rows.size(), 3);
        const double d_rtn = rows[1].toObject()["delta_ppl"].toDouble(),
                     d_awq = rows[2].toObject()["delta_ppl"].toDouble();
        const QJsonObject a = j["awq_vs_rtn"].toObject();
        QVERIFY(!a.isEmpty());
        QCOMPARE(a["delta_ppl_rtn"].toDouble(), d_rtn);
        const double kl_rtn = rows[1].toObject()["kl"].toObject()["mean"].toDouble();
        const double kl_awq = rows[2].toObject()["kl"].toObject()["mean"].toDouble();
        QVERIFY(std::fabs(a["mean_kl_reduced"].toDouble() - (1.0 - kl_awq / kl_rtn)) < 1e-9);
        if (d_rtn > 0) QVERIFY(std::fabs(a["ppl_gap_closed"].toDouble() - (1.0 - d_awq / d_rtn)) < 1e-9);
        else
            QVERIFY(a["ppl_gap_closed"].isNull());  // a gap share means nothing when RTN did not raise PPL

        const Run q = run_kvscope({"eval", "-m", gguf, "--quant", "q8_0", "--text", text, "--ctx", "64", "--max-tokens",
                                   "128", "--no-speed", "--json", out});
        QVERIFY2(q.exit_code == 0, qPrintable(q.err));
        QVERIFY(!q.out.contains("vs RTN"));
        QFile g(out);
        QVERIFY(g.open(QIODevice::ReadOnly));
        QVERIFY(QJsonDocument::fromJson(g.readAll()).object()["awq_vs_rtn"].isNull());
    }

    void evalBadInput_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expect");
        QTest::newRow("missing text") << QStringList{"--text", "/no/such/text.txt"} << "/no/such/text.txt";
        QTest::newRow("unknown scheme") << QStringList{"--quant", "q4_0,bogus"}
                                        << "unknown quantization scheme 'bogus'";
        QTest::newRow("text shorter than a chunk")
            << QStringList{"--ctx", "100000", "--max-tokens", "100000"} << "fewer than one chunk";
        QTest::newRow("only the reference") << QStringList{"--quant", "ref"} << "no scheme besides the reference";
        QTest::newRow("empty prompts file") << QStringList{"--prompts", "/dev/null"} << "/dev/null";
    }
    void evalBadInput() {
        QFETCH(QStringList, args);
        QFETCH(QString, expect);
        QTemporaryDir dir;
        kvs::test::TinyModelSpec spec;
        const QString gguf = dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), spec).is_ok());
        const Run r = run_kvscope(QStringList{"eval", "-m", gguf, "--no-speed"} + args);
        QCOMPARE(r.status, QProcess::NormalExit);
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("error:") && r.err.contains(expect), qPrintable(r.err));
    }

    // Every numeric option refuses a value outside its range with a message naming the
    // range, before any model loads (found by hand: -n -5 ran "unlimited", --threads 999
    // ran 999 threads, --simd avx512 silently ran AVX2, --batch 0 named 1.8e308).
    void numericOptionsNameTheirRange_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expect");
        QTest::newRow("negative max tokens")
            << QStringList{"generate", "-p", "hi", "-n", "-5"} << "--max-tokens: Value -5 not in range -1 to";
        QTest::newRow("threads over cores")
            << QStringList{"generate", "-p", "hi", "--threads", "999"} << "--threads: Value 999 not in range 0 to";
        QTest::newRow("no avx512 kernels")
            << QStringList{"generate", "-p", "hi", "--simd", "avx512"} << "no AVX-512 kernels";
        QTest::newRow("unknown simd") << QStringList{"bench", "--simd", "sse9"} << "sse9";
        QTest::newRow("zero batch") << QStringList{"bench", "--batch", "0"}
                                    << "--batch: Value 0 not in range 1 to 65536";
        QTest::newRow("huge ctx") << QStringList{"generate", "-p", "hi", "--ctx", "70000000"}
                                  << "--ctx: Value 70000000 not in range 1 to 1048576";
        QTest::newRow("inspect ctx") << QStringList{"inspect", "--ctx", "2000000000", "--batch", "2000000000"}
                                     << "not in range 1 to 16777216";
        QTest::newRow("eval threads") << QStringList{"eval", "--threads", "-1"}
                                      << "--threads: Value -1 not in range 0 to";
    }
    void numericOptionsNameTheirRange() {
        QFETCH(QStringList, args);
        QFETCH(QString, expect);
        const Run r = run_kvscope(args);
        QCOMPARE(r.status, QProcess::NormalExit);
        QVERIFY2(r.exit_code != 0, qPrintable(r.out + r.err));
        QVERIFY2(r.err.contains(expect) || r.out.contains(expect), qPrintable(r.err + r.out));
    }

    // A context that passes the range check but not the machine's memory: a clean error
    // naming the size, never a crash in kv_store (the runner checks its KV allocation).
    void contextOverMemoryIsAnError() {
        QTemporaryDir dir;
        const QString gguf = dir.filePath("tiny.gguf");
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 128;
        spec.n_embd = 128;
        spec.n_head = 2;
        spec.n_kv_head = 2;
        spec.n_ff = 32;
        spec.weight_type = kvs::DType::F16;
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), spec).is_ok());
        // 128 layers x 128 x 2 (K, V) x 2 bytes = 64 KiB per token: 1M tokens = 64 GiB
        for (const QStringList& args :
             {QStringList{"generate", "-m", gguf, "-p", "hi", "--ctx", "1000000", "-n", "4"},
              QStringList{"bench", gguf, "--ctx", "1000000", "-p", "8", "-n", "4", "-r", "1"}}) {
            const Run r = run_kvscope(args);
            QCOMPARE(r.status, QProcess::NormalExit);
            QCOMPARE(r.exit_code, 1);
            QVERIFY2(r.err.contains("error:") && r.err.contains("KV cache") && r.err.contains("GiB"),
                     qPrintable(r.err));
        }
    }

    void missingModelNamesWhatExists() {
        const Run r = run_kvscope({"generate", "-m", "no-such-model", "-p", "hi"});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("no-such-model"), qPrintable(r.err));
    }

    void inspectDefaultModel() {
        if (kvs::test::default_model_path().empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        const Run r = run_kvscope({"inspect", "--ctx", "1024", "--batch", "2"});
        QCOMPARE(r.exit_code, 0);
        // SmolLM2-135M: 30 layers, 3 KV heads of 64 -> 2*30*3*64*2 = 23040 bytes per token.
        QVERIFY2(r.out.contains("KV per token   23040 bytes"), qPrintable(r.out));
        QVERIFY2(r.out.contains("45.0 MiB for context 1024 x batch 2"), qPrintable(r.out));
        QVERIFY2(r.out.contains("Q4_1"), qPrintable(r.out));
    }

    void promptOverContext() {
        if (kvs::test::default_model_path().empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        const Run r = run_kvscope({"generate", "--ctx", "8", "-p",
                                   "This prompt is certainly longer than eight tokens of context, by a wide margin."});
        QCOMPARE(r.status, QProcess::NormalExit);
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("context"), qPrintable(r.err));
    }

    void generateGreedyStreamsText() {
        if (kvs::test::default_model_path().empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        const Run r =
            run_kvscope({"generate", "--chat", "-p", "What is the capital of Australia?", "-n", "24", "--temp", "0"});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.contains("Canberra"), qPrintable(r.out + r.err));
        QVERIFY2(r.err.contains("decode") && r.err.contains("tok/s") && r.err.contains("peak memory"),
                 qPrintable(r.err));
    }

    // generate --spec: greedy output identical to plain generate, acceptance statistics
    // printed; on the tiny model (every proposer kind) and, when installed, the default model.
    void generateSpeculativeMatchesPlain_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("spec");
        QTest::addColumn<QString>("prompt");
        QTest::newRow("tiny ngram") << "tiny"
                                    << "ngram"
                                    << "a b c a b c a b c a b";
        QTest::newRow("tiny int4") << "tiny"
                                   << "int4"
                                   << "hello there";
        QTest::newRow("tiny layer-skip:1@256") << "tiny"
                                               << "layer-skip:1@256"
                                               << "hello there";
        QTest::newRow("default ngram") << "default"
                                       << "ngram"
                                       << "Repeat exactly: the quick brown fox jumps over the lazy dog. "
                                          "The quick brown fox jumps over the lazy dog.";
        QTest::newRow("default int4") << "default"
                                      << "int4"
                                      << "Write one sentence about the sea.";
    }
    void generateSpeculativeMatchesPlain() {
        QFETCH(QString, model);
        QFETCH(QString, spec);
        QFETCH(QString, prompt);
        QTemporaryDir dir;
        QString m;
        if (model == "tiny") {
            m = dir.filePath("tiny.gguf");
            QVERIFY(kvs::test::write_tiny_gguf(m.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        } else {
            if (kvs::test::default_model_path().empty())
                QSKIP("default model not installed (installer/fetch_model.sh)");
            m = QString::fromStdString(kvs::test::default_model_path());
        }
        const QStringList common{"generate", "-m", m, "-p", prompt, "-n", "24", "--temp", "0", "--ignore-eos"};
        const Run plain = run_kvscope(common);
        const Run sp = run_kvscope(common + QStringList{"--spec", spec, "--spec-k", "3"});
        QCOMPARE(plain.exit_code, 0);
        QCOMPARE(sp.exit_code, 0);
        QVERIFY2(!plain.out.trimmed().isEmpty(), qPrintable(plain.err));
        QCOMPARE(sp.out, plain.out);
        QVERIFY2(sp.err.contains("speculative: ") && sp.err.contains("alpha") && sp.err.contains("decode 24 tok"),
                 qPrintable(sp.err));
    }

    // quantize int4-rtn / int4-awq (default calibration text) / int8 of a GGUF model to .gguf:
    // the file loads and generates; a missing calibration text is a clear error.
    void quantizeIntSchemesToGguf() {
        QTemporaryDir dir;
        const QString m = dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(m.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        for (const QString& scheme : {QString("int4-rtn"), QString("int4-awq"), QString("int8")}) {
            const QString out = dir.filePath(scheme + ".gguf");
            const Run q = run_kvscope({"quantize", "-m", m, "-s", scheme, "-o", out, "--calib-tokens", "48"});
            QVERIFY2(q.exit_code == 0, qPrintable(scheme + ": " + q.out + q.err));
            QVERIFY2(q.out.contains("(gguf,"), qPrintable(q.out));
            if (scheme == "int4-awq") QVERIFY2(q.out.contains("Apache-2.0"), qPrintable(q.out));
            const Run gen =
                run_kvscope({"generate", "-m", out, "-p", "hello", "-n", "4", "--temp", "0", "--ignore-eos"});
            QVERIFY2(gen.exit_code == 0 && gen.err.contains("decode 4 tok"), qPrintable(scheme + ": " + gen.err));
        }
        const Run bad = run_kvscope({"quantize", "-m", m, "-s", "int4-awq", "-o", dir.filePath("x.gguf"), "--calib",
                                     dir.filePath("missing.txt")});
        QCOMPARE(bad.exit_code, 1);
        QVERIFY2(bad.err.contains("missing.txt"), qPrintable(bad.err));
    }

    // bench --spec writes per-token fates whose counts agree with the row's statistics.
    void benchSpecJsonHasTokenFates() {
        if (kvs::test::default_model_path().empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        QTemporaryDir dir;
        const QString out = dir.filePath("spec.json");
        const Run r = run_kvscope({"bench", "--spec", "ngram", "--spec-k", "3", "--spec-gen", "12", "--spec-workload",
                                   "repetitive", "--json-out", out});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QJsonArray rows = QJsonDocument::fromJson(f.readAll()).object()["rows"].toArray();
        QCOMPARE(rows.size(), 2);  // plain, ngram k 3
        for (const auto& v : rows) {
            const QJsonObject row = v.toObject();
            int accepted = 0, bonus = 0, streamed = 0;
            for (const auto& req : row["token_fates"].toArray())
                for (const auto& e : req.toArray()) {
                    const QString fate = e.toArray()[1].toString();
                    accepted += fate == "accepted";
                    bonus += fate == "bonus";
                    streamed += fate != "rejected" && fate != "discarded";
                }
            QCOMPARE(row["token_fates"].toArray().size(), 3);  // three prompts
            QCOMPARE(accepted, row["accepted"].toInt());
            QCOMPARE(bonus, row["bonus"].toInt());
            if (row["proposer"].toString() == "plain") {  // fates are kept for speculative requests
                QCOMPARE(streamed, 0);
                continue;
            }
            QCOMPARE(streamed, row["tokens"].toInt() + 3);  // "tokens" counts decode tokens after each first
            QVERIFY(accepted > 0);
        }
    }

    void generateSpeculativeBadDraft() {
        QTemporaryDir dir;
        const QString m = dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(m.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        for (const QString& spec : {QString("layer-skip:99"), QString("int4@5"), dir.filePath("missing.gguf")}) {
            const Run r = run_kvscope({"generate", "-m", m, "-p", "hi", "-n", "4", "--spec", spec});
            QCOMPARE(r.status, QProcess::NormalExit);
            QCOMPARE(r.exit_code, 1);
            QVERIFY2(r.err.contains("error:") && r.err.contains("draft"), qPrintable(spec + ": " + r.err));
        }
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
