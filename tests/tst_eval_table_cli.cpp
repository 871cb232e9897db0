// ctest-labels: unit model
// `kvscope eval --all` run as a user runs it, on a tiny model: the printed table has a row
// per scheme of the list, --json is the kvscope-quant-table format (read back
// through engine/quant/quant_table's reader), --csv has the same numbers, the values are
// within sane bounds, the reference row has KL 0 and top-1 100 %, a scheme that cannot
// apply to the model (Q4_K on 64-wide rows) is a row saying why; bad input is a clear error.
// Ctrl+C (SIGINT) once the table's progress has begun, or before it (the model loading, the
// texts tokenized), ends it with exit code 130, "cancelled: ..." on stderr, no table printed
// and neither the --json nor the --csv file (nor a temporary one) left behind. With
// --repeat 2 each speed keeps its two runs (mean, sample sd, min, max, values) in the JSON
// and the CSV, and the printed table shows "mean ± sd". Every measured row's ln PPL against
// the reference and against INT4 RTN (paired on the same tokens) is ln of the PPL ratio, its
// sign the PPL order, 0 ± 0 on the row itself, and the reference against INT4 RTN is INT4 RTN
// against the reference negated (mean and error); printed as "+0.062 ± 0.036".
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <csignal>

#include "engine/quant/quant_table.h"
#include "tests/support/run_kvscope.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using Run = kvs::test::KvscopeRun;
using kvs::test::run_kvscope;

namespace {

QString writeText(const QString& path, int n_lines = 40) {
    QFile t(path);
    if (!t.open(QIODevice::WriteOnly)) return {};
    for (int i = 0; i < n_lines; ++i)
        t.write(QByteArray("The quick brown fox jumps over the lazy dog number ") + QByteArray::number(i) + ".\n");
    return path;
}

// CSV cells of one line (the writer's quoting: "..." with "" for a quote).
QStringList csvCells(const QString& line) {
    QStringList out;
    QString cur;
    bool quoted = false;
    for (int i = 0; i < line.size(); ++i) {
        const QChar c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
            else if (c == '"')
                quoted = false;
            else
                cur += c;
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            out << cur;
            cur.clear();
        } else {
            cur += c;
        }
    }
    return out << cur;
}

// `kvscope eval --all` on a tiny model as these tests run it: the first 256 tokens of `text`
// in chunks of 64, calibration on the same text, 8 divergence tokens, one thread.
QStringList evalAllArgs(const QString& gguf, const QString& text, const QString& calibTokens, const QString& jsonPath,
                        const QString& csvPath) {
    const QStringList a{"eval", "-m", gguf, "--all", "--text", text, "--calib", text, "--calib-tokens", calibTokens};
    const QStringList b{"--ctx", "64", "--max-tokens", "256", "--divergence-tokens", "8", "--threads", "1"};
    return a + b + QStringList{"--json", jsonPath, "--csv", csvPath};
}

// The sample mean and standard deviation of values.
std::pair<double, double> meanSd(const std::vector<double>& v) {
    double m = 0, ss = 0;
    for (double x : v) m += x / double(v.size());
    for (double x : v) ss += (x - m) * (x - m);
    return {m, v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0.0};
}

}  // namespace

class TestEvalTableCli : public QObject {
    Q_OBJECT

    // Runs `args` (writing table.json / table.csv into dir), sends SIGINT once stderr shows
    // `marker`, and checks the run ends cancelled: exit 130, "cancelled: " on stderr, no
    // table printed, no table file (nor a temporary one) left in dir. err: its stderr.
    void interruptAfter(const QStringList& args, const QByteArray& marker, const QString& dir, QByteArray& err) {
        QProcess p;
        kvs::test::start_kvscope(p, args);
        QVERIFY(p.waitForStarted(30000));
        QElapsedTimer t;
        t.start();
        // the progress line's plain lines (stderr is a pipe)
        while (!err.contains(marker) && t.elapsed() < 120000 && p.state() == QProcess::Running) {
            p.waitForReadyRead(200);
            err += p.readAllStandardError();
        }
        QVERIFY2(p.state() == QProcess::Running, err.constData());
        QVERIFY2(!err.contains('\r'), err.constData());  // a pipe gets plain lines
        ::kill(pid_t(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(300000));
        err += p.readAllStandardError();
        const QByteArray out = p.readAllStandardOutput();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QVERIFY2(p.exitCode() == 130, err.constData());
        QVERIFY2(err.contains("cancelled: "), err.constData());
        QVERIFY2(!err.contains("error: "), err.constData());
        QVERIFY2(!out.contains("| ref |"), out.constData());  // no table printed
        const QStringList left =
            QDir(dir).entryList({"table*"}, QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden);
        QVERIFY2(left.isEmpty(), qPrintable(left.join(", ")));
    }

    // The paired ln PPL columns of a measured table (the CLI keeps no per-token NLLs, so the
    // errors are checked by their symmetry; tst_quant_table checks them against its own sums).
    void checkPairedValues(const kvs::QuantTable& t, const QString& out) {
        const kvs::QuantTableRow &ref = *t.find("ref"), &rtn = *t.find("int4-rtn");
        QCOMPARE(rtn.ln_ppl_vs_int4_rtn.value_or(-1), 0.0);
        QCOMPARE(rtn.ln_ppl_vs_int4_rtn_err.value_or(-1), 0.0);
        QVERIFY(std::fabs(ref.ln_ppl_vs_ref.value_or(-1)) < 1e-12);
        QVERIFY(std::fabs(*ref.ln_ppl_vs_int4_rtn + *rtn.ln_ppl_vs_ref) < 1e-9);
        QVERIFY(std::fabs(*ref.ln_ppl_vs_int4_rtn_err - *rtn.ln_ppl_vs_ref_err) <= 1e-6 * *rtn.ln_ppl_vs_ref_err);
        int n_signed = 0;  // rows whose PPL differs from INT4 RTN's
        for (const kvs::QuantTableRow& row : t.rows) {
            const QString scheme = QString::fromStdString(row.scheme);
            if (!row.measured()) {
                QVERIFY2(!row.ln_ppl_vs_ref && !row.ln_ppl_vs_int4_rtn, qPrintable(scheme));
                continue;
            }
            QVERIFY2(row.ln_ppl_vs_ref && row.ln_ppl_vs_ref_err && row.ln_ppl_vs_int4_rtn && row.ln_ppl_vs_int4_rtn_err,
                     qPrintable(scheme));
            // the mean of the per-token differences is the log of the PPL ratio
            QVERIFY2(std::fabs(*row.ln_ppl_vs_ref - std::log(*row.ppl / *ref.ppl)) < 1e-9, qPrintable(scheme));
            QVERIFY2(std::fabs(*row.ln_ppl_vs_int4_rtn - std::log(*row.ppl / *rtn.ppl)) < 1e-9, qPrintable(scheme));
            if (row.scheme != "int4-rtn") {
                QVERIFY2(*row.ln_ppl_vs_int4_rtn_err > 0 && std::isfinite(*row.ln_ppl_vs_int4_rtn_err),
                         qPrintable(scheme));
                if (*row.ppl != *rtn.ppl) {
                    QVERIFY2((*row.ln_ppl_vs_int4_rtn > 0) == (*row.ppl > *rtn.ppl), qPrintable(scheme));
                    ++n_signed;
                }
            }
            const QString cell =
                QString::asprintf("%+.3f ± %.3f", *row.ln_ppl_vs_int4_rtn, *row.ln_ppl_vs_int4_rtn_err);
            QVERIFY2(out.contains(QRegularExpression("\\| " + QRegularExpression::escape(scheme) + " \\|[^\\n]*\\| " +
                                                     QRegularExpression::escape(cell) + " \\|")),
                     qPrintable(cell + "\n" + out));
        }
        QVERIFY(n_signed >= 5);
        QVERIFY2(out.contains("| vs reference | vs INT4 RTN |"), qPrintable(out));
        QVERIFY2(out.contains(QRegularExpression("\\| int4-rtn \\|[^\\n]*\\| \\+0\\.000 ± 0\\.000 \\|")),
                 qPrintable(out));
    }

private Q_SLOTS:
    void allSchemesOnATinyModel() {
        QTemporaryDir dir;
        const QString gguf = dir.filePath("tiny.gguf"), text = writeText(dir.filePath("text.txt")),
                      jsonPath = dir.filePath("table.json"), csvPath = dir.filePath("table.csv");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        const Run r =
            run_kvscope(evalAllArgs(gguf, text, "128", jsonPath, csvPath) + QStringList{"--repeat", "2"}, 600000);
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));

        auto t = kvs::read_quant_table(jsonPath.toStdString());
        QVERIFY2(t, t.message().c_str());
        QCOMPARE(t->model, std::string("tiny"));
        QVERIFY(t->n_params && *t->n_params > 0);
        QVERIFY2(t->machine.find("thread") != std::string::npos, t->machine.c_str());
        const auto& schemes = kvs::quant_table_schemes();
        QCOMPARE(t->rows.size(), schemes.size());
        for (size_t i = 0; i < schemes.size(); ++i) {
            const kvs::QuantTableRow& row = t->rows[i];
            QCOMPARE(row.scheme, std::string(schemes[i].scheme));
            QCOMPARE(row.label, std::string(schemes[i].label));
            QVERIFY2(r.out.contains("| " + QString(schemes[i].scheme) + " | " + QString(schemes[i].label) + " |"),
                     qPrintable(r.out));
            if (row.scheme == "q4_k") {  // 64-wide rows: K-quant blocks of 256 cannot apply
                QVERIFY2(!row.measured() && !row.size_bytes && !row.decode_tok_s &&
                             row.note.find("cannot be made for this model") != std::string::npos,
                         row.note.c_str());
                QVERIFY(r.out.contains(QString::fromStdString(row.note)));
                continue;
            }
            QVERIFY2(row.measured() && row.note.empty(), row.scheme.c_str());
            QVERIFY(*row.ppl > 1 && *row.ppl < 1e4 && *row.ppl_err > 0 && *row.ppl_err < *row.ppl);
            QVERIFY(*row.mean_kl >= 0 && *row.mean_kl < 20);
            QVERIFY(*row.top1 >= 0 && *row.top1 <= 1);
            QVERIFY(*row.first_divergence >= 0 && *row.first_divergence <= 8);
            QVERIFY(*row.prefill_tok_s > 0 && *row.decode_tok_s > 0);
            // --repeat 2: each speed is the mean of its two runs, kept with their spread, and
            // printed as "mean ± sd"
            for (const auto& [mean, spread] :
                 {std::pair{row.prefill_tok_s, row.prefill_spread}, std::pair{row.decode_tok_s, row.decode_spread}}) {
                QVERIFY2(spread && spread->runs == 2 && spread->values.size() == 2, row.scheme.c_str());
                const auto [m, sd] = meanSd(spread->values);
                QVERIFY(std::fabs(*mean - m) <= 1e-9 * m);
                QVERIFY(std::fabs(spread->sd - sd) <= 1e-9 * m);
                QCOMPARE(spread->min, std::min(spread->values[0], spread->values[1]));
                QCOMPARE(spread->max, std::max(spread->values[0], spread->values[1]));
                const QString cell = QString::asprintf("%.1f ± %.1f", *mean, spread->sd);
                QVERIFY2(r.out.contains(QRegularExpression("\\| " + QString(schemes[i].scheme) + " \\|[^\\n]*\\| " +
                                                           QRegularExpression::escape(cell) + " \\|")),
                         qPrintable(cell + "\n" + r.out));
            }
            QVERIFY(*row.bits_per_weight >= 4 && *row.bits_per_weight <= 32);
            QVERIFY(*row.size_bytes > 0 && *row.size_bytes <= *t->rows[0].size_bytes);
        }
        checkPairedValues(t.value(), r.out);
        const kvs::QuantTableRow& ref = t->rows[0];
        QCOMPARE(*ref.mean_kl, 0.0);
        QCOMPARE(*ref.top1, 1.0);
        QCOMPARE(*ref.bits_per_weight, 32.0);  // the reference's linears are F32
        QVERIFY(*t->find("int8")->mean_kl < *t->find("int4-rtn")->mean_kl);
        QVERIFY(*t->find("q8_0")->size_bytes < *ref.size_bytes);

        // The CSV says what the JSON says.
        QFile c(csvPath);
        QVERIFY(c.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(c.readAll()).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), int(schemes.size()) + 1);
        const QStringList head = csvCells(lines[0]);
        QCOMPARE(head.size(), 26);
        for (size_t i = 0; i < t->rows.size(); ++i) {
            const QStringList cells = csvCells(lines[int(i) + 1]);
            QCOMPARE(cells.size(), 26);
            QCOMPARE(cells[head.indexOf("scheme")].toStdString(), t->rows[i].scheme);
            const QString ppl = cells[head.indexOf("ppl")], kl = cells[head.indexOf("mean_kl")];
            if (!t->rows[i].measured()) {
                QVERIFY(ppl.isEmpty() && kl.isEmpty());
                QCOMPARE(cells[head.indexOf("note")].toStdString(), t->rows[i].note);
                continue;
            }
            QVERIFY(std::fabs(ppl.toDouble() - *t->rows[i].ppl) <= 1e-8 * *t->rows[i].ppl);
            QVERIFY(std::fabs(kl.toDouble() - *t->rows[i].mean_kl) <= 1e-8 * (1 + *t->rows[i].mean_kl));
            QCOMPARE(cells[head.indexOf("size_bytes")].toLongLong(), qint64(*t->rows[i].size_bytes));
            for (const auto& [key, v] : {std::pair{"ln_ppl_vs_ref", *t->rows[i].ln_ppl_vs_ref},
                                         std::pair{"ln_ppl_vs_ref_err", *t->rows[i].ln_ppl_vs_ref_err},
                                         std::pair{"ln_ppl_vs_int4_rtn", *t->rows[i].ln_ppl_vs_int4_rtn},
                                         std::pair{"ln_ppl_vs_int4_rtn_err", *t->rows[i].ln_ppl_vs_int4_rtn_err}}) {
                const QString cellText = cells[head.indexOf(key)];
                QVERIFY2(!cellText.isEmpty() && std::fabs(cellText.toDouble() - v) <= 1e-8 * (1e-6 + std::fabs(v)),
                         key);
            }
            const kvs::QuantTableSpread& decode = *t->rows[i].decode_spread;
            QCOMPARE(cells[head.indexOf("decode_runs")].toInt(), decode.runs);
            QVERIFY(std::fabs(cells[head.indexOf("decode_sd")].toDouble() - decode.sd) <= 1e-8 * (1 + decode.sd));
            const QStringList runs = cells[head.indexOf("decode_values")].split(';');
            QCOMPARE(runs.size(), decode.runs);
            for (int k = 0; k < runs.size(); ++k)
                QVERIFY(std::fabs(runs[k].toDouble() - decode.values[size_t(k)]) <= 1e-8 * decode.values[size_t(k)]);
        }
    }

    // The table's reference perplexity is the one plain `kvscope eval` reports on the same chunks.
    void agreesWithPlainEval() {
        QTemporaryDir dir;
        const QString gguf = dir.filePath("tiny.gguf"), text = writeText(dir.filePath("text.txt")),
                      tableJson = dir.filePath("table.json");
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        const QStringList common{"eval",  "-m", gguf,           "--text", text,
                                 "--ctx", "64", "--max-tokens", "128",    "--no-speed"};
        const Run plain = run_kvscope(common + QStringList{"--quant", "q8_0"});
        QVERIFY2(plain.exit_code == 0, qPrintable(plain.err));
        const Run all = run_kvscope(
            common + QStringList{"--all", "--calib", text, "--calib-tokens", "64", "--json", tableJson}, 600000);
        QVERIFY2(all.exit_code == 0, qPrintable(all.err));
        auto t = kvs::read_quant_table(tableJson.toStdString());
        QVERIFY2(t, t.message().c_str());
        QVERIFY(!t->rows[0].decode_tok_s);  // --no-speed: null speeds
        for (const char* s : {"ref", "q8_0"}) {
            const QString cell = QString::number(*t->find(s)->ppl, 'f', 3);
            const QRegularExpression row(
                QString("\\| %1 \\|[^\\n]*\\| %2 ± ").arg(s, QRegularExpression::escape(cell)));
            QVERIFY2(row.match(plain.out).hasMatch(), qPrintable(cell + "\n" + plain.out));
        }
    }

    // Ctrl+C at each stage of a run: before the table begins (the model loading, the texts
    // tokenized and the calibration tokens drawn: a 23 MB text makes that last a second or
    // two), at its first scheme, and inside GPTQ (its layer-by-layer calibration and search):
    // exit 130, nothing written; the first never starts the table.
    void ctrlCWritesNothing_data() {
        QTest::addColumn<QByteArray>("marker");  // SIGINT once stderr shows it
        QTest::addColumn<int>("textLines");
        QTest::newRow("loading the model and texts") << QByteArray("Loading") << 400000;
        QTest::newRow("the first scheme") << QByteArray("Quantizing") << 40;
        QTest::newRow("GPTQ calibration") << QByteArray("GPTQ: layer") << 40;
    }
    void ctrlCWritesNothing() {
        QFETCH(QByteArray, marker);
        QFETCH(int, textLines);
        QTemporaryDir dir;
        const QString gguf = dir.filePath("tiny.gguf"), text = writeText(dir.filePath("text.txt"), textLines);
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), kvs::test::slow_to_quantize_spec()).is_ok());
        QByteArray err;
        interruptAfter(evalAllArgs(gguf, text, "512", dir.filePath("table.json"), dir.filePath("table.csv")), marker,
                       dir.path(), err);
        if (QTest::currentTestFailed() || marker != "Loading") return;
        QVERIFY2(err.contains("cancelled: kvscope eval, after "), err.constData());
        QVERIFY2(!err.contains("Quantizing"), err.constData());
    }

    void badInput_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expect");
        QTest::newRow("--all with --quant") << QStringList{"--all", "--quant", "q8_0"} << "excludes";
        QTest::newRow("--csv without --all") << QStringList{"--csv", "/tmp/x.csv"} << "requires --all";
        QTest::newRow("missing model") << QStringList{"--all", "-m", "/no/such/model.gguf"} << "/no/such/model.gguf";
        QTest::newRow("unreadable calibration")
            << QStringList{"--all", "--calib", "/no/such/calib.txt"} << "/no/such/calib.txt";
        QTest::newRow("text shorter than a chunk")
            << QStringList{"--all", "--ctx", "100000", "--max-tokens", "100000"} << "fewer than one chunk";
        QTest::newRow("unwritable json")
            << QStringList{"--all",          "--json", "/no/such/dir/t.json", "--max-tokens", "64", "--ctx", "32",
                           "--calib-tokens", "32"}
            << "/no/such/dir/t.json";
    }
    void badInput() {
        QFETCH(QStringList, args);
        QFETCH(QString, expect);
        QTemporaryDir dir;
        const QString gguf = dir.filePath("tiny.gguf"), text = writeText(dir.filePath("text.txt"));
        QVERIFY(kvs::test::write_tiny_gguf(gguf.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
        QStringList a{"eval", "--no-speed", "--text", text};
        if (!args.contains("-m")) a << "-m" << gguf;
        if (!args.contains("--calib")) a << "--calib" << text;
        const Run r = run_kvscope(a + args, 600000);
        QCOMPARE(r.status, QProcess::NormalExit);
        QVERIFY2(r.exit_code != 0, qPrintable(r.out));
        QVERIFY2(r.err.contains(expect), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestEvalTableCli)
#include "tst_eval_table_cli.moc"
