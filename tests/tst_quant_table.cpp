// ctest-labels: unit model
// engine/quant/quant_table (the comparison table's JSON and CSV) and quant_table_run (its
// measurement) on a tiny model: the JSON round-trips (each speed's runs included), the
// reader refuses bad files naming the row and the field and still reads version 1 (no runs),
// the CSV quotes what needs quoting; a measured table has every
// scheme, the reference measured against itself at KL 0 and top-1 1, a scheme that cannot
// apply as a row that says why, and a run that can be cancelled.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/quant/eval.h"
#include "engine/quant/quant_table.h"
#include "engine/quant/quant_table_run.h"
#include "engine/quant/quantize.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

QuantTable sampleTable() {
    QuantTable t;
    t.model = "tiny";
    t.n_params = 123456;
    t.machine = "Test CPU (cpu-avx2, 2 threads)";
    QuantTableRow ref;
    ref.scheme = "ref";
    ref.label = "reference";
    ref.bits_per_weight = 32;
    ref.size_bytes = 1000000;
    ref.ppl = 10.5;
    ref.ppl_err = 0.25;
    ref.ln_ppl_vs_ref = 0;
    ref.ln_ppl_vs_ref_err = 0;
    ref.ln_ppl_vs_int4_rtn = -0.25;
    ref.ln_ppl_vs_int4_rtn_err = 0.03125;
    ref.mean_kl = 0;
    ref.top1 = 1;
    ref.first_divergence = 64;
    ref.prefill_tok_s = 500.5;
    ref.decode_tok_s = 50.25;
    ref.prefill_spread = QuantTableSpread{2, 0.5, 500.0, 501.0, {501.0, 500.0}};
    ref.decode_spread = QuantTableSpread{2, 0.25, 50.0, 50.5, {50.0, 50.5}};
    QuantTableRow q = ref;
    q.scheme = "int4-gptq";
    q.label = "GPTQ";
    q.bits_per_weight = 4.5;
    q.mean_kl = 0.0625;
    q.top1 = 0.875;
    q.ln_ppl_vs_ref = 0.125;
    q.ln_ppl_vs_ref_err = 0.015625;
    q.ln_ppl_vs_int4_rtn = -0.0625;
    q.ln_ppl_vs_int4_rtn_err = 0.0078125;
    QuantTableRow na;
    na.scheme = "q4_k";
    na.label = "Q4_K_M-style GGUF";
    na.note = "cannot be made: rows of 64, \"blocks\" of 256";  // a comma and quotes for the CSV
    t.rows = {ref, q, na};
    return t;
}

// The standard error of mean(a_i - b_i), two-pass: the sample sd of the differences / sqrt(n).
double pairedErr(const std::vector<double>& a, const std::vector<double>& b) {
    const size_t n = a.size();
    double m = 0, ss = 0;
    for (size_t i = 0; i < n; ++i) m += (a[i] - b[i]) / double(n);
    for (size_t i = 0; i < n; ++i) ss += (a[i] - b[i] - m) * (a[i] - b[i] - m);
    return std::sqrt(ss / double(n - 1) / double(n));
}

std::vector<int32_t> someTokens(int n, int n_vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 37 + 11) % n_vocab);
    return t;
}

}  // namespace

class TestQuantTable : public QObject {
    Q_OBJECT

    // A measured table's ln PPL against the reference and against int4-rtn: each is
    // ln(PPL_row / PPL_other) (the mean of the per-token NLL differences), 0 ± 0 for the row
    // itself, and its error is the test's own two-pass standard error of the differences over
    // the per-token NLLs of the reference, int4-rtn and nf4 scored again here on the same chunks.
    void checkPairedValues(const std::shared_ptr<Model>& source, const QuantTableOptions& o, const QuantTable& t) {
        const QuantTableRow &ref = *t.find("ref"), &rtn = *t.find("int4-rtn");
        QCOMPARE(rtn.ln_ppl_vs_int4_rtn.value_or(-1), 0.0);
        QCOMPARE(rtn.ln_ppl_vs_int4_rtn_err.value_or(-1), 0.0);
        QVERIFY(std::fabs(ref.ln_ppl_vs_ref.value_or(-1)) < 1e-12);
        QVERIFY(ref.ln_ppl_vs_ref_err.value_or(-1) >= 0 && *ref.ln_ppl_vs_ref_err < 1e-6);
        for (const QuantTableRow& r : t.rows) {
            if (!r.measured()) {
                QVERIFY2(!r.ln_ppl_vs_ref && !r.ln_ppl_vs_ref_err && !r.ln_ppl_vs_int4_rtn && !r.ln_ppl_vs_int4_rtn_err,
                         r.scheme.c_str());
                continue;
            }
            QVERIFY2(r.ln_ppl_vs_ref && r.ln_ppl_vs_ref_err && r.ln_ppl_vs_int4_rtn && r.ln_ppl_vs_int4_rtn_err,
                     r.scheme.c_str());
            QVERIFY2(std::fabs(*r.ln_ppl_vs_ref - std::log(*r.ppl / *ref.ppl)) < 1e-9, r.scheme.c_str());
            QVERIFY2(std::fabs(*r.ln_ppl_vs_int4_rtn - std::log(*r.ppl / *rtn.ppl)) < 1e-9, r.scheme.c_str());
            if (r.scheme != "ref") QVERIFY2(*r.ln_ppl_vs_ref_err > 0, r.scheme.c_str());
            if (r.scheme != "int4-rtn") QVERIFY2(*r.ln_ppl_vs_int4_rtn_err > 0, r.scheme.c_str());
        }
        std::vector<std::shared_ptr<const Model>> models;  // ref, int4-rtn, nf4
        for (const char* s : {"ref", "int4-rtn", "nf4"}) {
            auto q = quantize_model(source, QuantScheme::parse(s).value());
            QVERIFY2(q, q.message().c_str());
            models.push_back(std::move(q.value()));
        }
        EvalOptions eo;
        eo.n_ctx = o.n_ctx;
        eo.bos = o.bos;
        eo.runner = o.runner;
        auto rep = compare_quality(models[0], models, o.eval_tokens, eo);
        QVERIFY2(rep, rep.message().c_str());
        const std::vector<double>&nll_ref = rep->variants[0].token_nll, &nll_rtn = rep->variants[1].token_nll,
              &nll_nf4 = rep->variants[2].token_nll;
        QCOMPARE(int64_t(nll_nf4.size()), rep->plan.n_scored());
        const QuantTableRow& nf4 = *t.find("nf4");
        const std::tuple<const char*, double, double> checks[] = {
            {"nf4 vs int4-rtn", *nf4.ln_ppl_vs_int4_rtn_err, pairedErr(nll_nf4, nll_rtn)},
            {"ref vs int4-rtn", *ref.ln_ppl_vs_int4_rtn_err, pairedErr(nll_ref, nll_rtn)},
            {"nf4 vs ref", *nf4.ln_ppl_vs_ref_err, pairedErr(nll_nf4, nll_ref)},
            {"int4-rtn vs ref", *rtn.ln_ppl_vs_ref_err, pairedErr(nll_rtn, nll_ref)}};
        for (const auto& [what, got, want] : checks)
            QVERIFY2(std::fabs(got - want) <= 1e-6 * want,
                     qPrintable(QString("%1: %2, own %3").arg(what).arg(got).arg(want)));
        // the reference against int4-rtn is int4-rtn against the reference, negated
        QVERIFY(std::fabs(*ref.ln_ppl_vs_int4_rtn + *rtn.ln_ppl_vs_ref) < 1e-9);
    }

private Q_SLOTS:
    void jsonHasTheAgreedShape() {
        const json j = quant_table_to_json(sampleTable());
        QCOMPARE(j["format"].get<std::string>(), std::string("kvscope-quant-table"));
        QCOMPARE(j["version"].get<int>(), 3);
        QCOMPARE(j["n_params"].get<int64_t>(), int64_t(123456));
        const json& r = j["rows"][1];
        for (const char* k :
             {"scheme",       "label",         "bits_per_weight",   "size_bytes",         "ppl",
              "ppl_err",      "ln_ppl_vs_ref", "ln_ppl_vs_ref_err", "ln_ppl_vs_int4_rtn", "ln_ppl_vs_int4_rtn_err",
              "mean_kl",      "top1",          "first_divergence",  "prefill_tok_s",      "decode_tok_s",
              "prefill_runs", "prefill_sd",    "prefill_min",       "prefill_max",        "prefill_values",
              "decode_runs",  "decode_sd",     "decode_min",        "decode_max",         "decode_values",
              "note"})
            QVERIFY2(r.contains(k), k);
        QCOMPARE(r.size(), size_t(26));
        QCOMPARE(r["top1"].get<double>(), 0.875);
        QCOMPARE(r["ln_ppl_vs_ref"].get<double>(), 0.125);
        QCOMPARE(r["ln_ppl_vs_ref_err"].get<double>(), 0.015625);
        QCOMPARE(r["ln_ppl_vs_int4_rtn"].get<double>(), -0.0625);
        QCOMPARE(r["ln_ppl_vs_int4_rtn_err"].get<double>(), 0.0078125);
        QCOMPARE(r["decode_runs"].get<int>(), 2);
        QCOMPARE(r["decode_sd"].get<double>(), 0.25);
        QCOMPARE(r["prefill_min"].get<double>(), 500.0);
        QCOMPARE(r["prefill_max"].get<double>(), 501.0);
        QCOMPARE(r["prefill_values"], json({501.0, 500.0}));  // in the order run
        const json& na = j["rows"][2];
        QVERIFY(na["ppl"].is_null() && na["size_bytes"].is_null() && na["decode_tok_s"].is_null());
        for (const char* k : {"decode_runs", "decode_sd", "decode_min", "decode_max", "decode_values", "ln_ppl_vs_ref",
                              "ln_ppl_vs_ref_err", "ln_ppl_vs_int4_rtn", "ln_ppl_vs_int4_rtn_err"})
            QVERIFY2(na[k].is_null(), k);
        // a paired value is written with its error or not at all (the reader refuses one alone)
        QuantTable half = sampleTable();
        half.rows[1].ln_ppl_vs_int4_rtn_err.reset();
        half.rows[0].ln_ppl_vs_ref = NAN;
        const json h = quant_table_to_json(half);
        QVERIFY(h["rows"][1]["ln_ppl_vs_int4_rtn"].is_null() && h["rows"][1]["ln_ppl_vs_int4_rtn_err"].is_null());
        QVERIFY(h["rows"][0]["ln_ppl_vs_ref"].is_null() && h["rows"][0]["ln_ppl_vs_ref_err"].is_null());
        QVERIFY2(quant_table_from_json(h), quant_table_from_json(h).message().c_str());
    }

    // Version 2 (before the paired values) still reads: its rows have none.
    void readsVersion2() {
        json j = quant_table_to_json(sampleTable());
        j["version"] = 2;
        for (json& r : j["rows"])
            for (const char* k : {"ln_ppl_vs_ref", "ln_ppl_vs_ref_err", "ln_ppl_vs_int4_rtn", "ln_ppl_vs_int4_rtn_err"})
                r.erase(k);
        auto t = quant_table_from_json(j, "v2.json");
        QVERIFY2(t, t.message().c_str());
        QCOMPARE(*t->rows[1].ppl, 10.5);
        QVERIFY(t->rows[1].decode_spread && t->rows[1].decode_spread->runs == 2);
        for (const QuantTableRow& r : t->rows)
            QVERIFY(!r.ln_ppl_vs_ref && !r.ln_ppl_vs_ref_err && !r.ln_ppl_vs_int4_rtn && !r.ln_ppl_vs_int4_rtn_err);
        // version 3 needs them: a missing one is named
        j["version"] = 3;
        auto v3 = quant_table_from_json(j, "v3.json");
        QVERIFY(!v3);
        QVERIFY2(v3.message().find("rows[0]: the key \"ln_ppl_vs_ref\" is missing") != std::string::npos,
                 v3.message().c_str());
    }

    // Version 1 (before the spreads) still reads: its rows have no runs.
    void readsVersion1() {
        json j = quant_table_to_json(sampleTable());
        j["version"] = 1;
        for (json& r : j["rows"])
            for (const char* p : {"prefill", "decode"})
                for (const char* k : {"_runs", "_sd", "_min", "_max", "_values"}) r.erase(std::string(p) + k);
        auto t = quant_table_from_json(j, "v1.json");
        QVERIFY2(t, t.message().c_str());
        QCOMPARE(*t->rows[0].decode_tok_s, 50.25);
        QVERIFY(!t->rows[0].decode_spread && !t->rows[0].prefill_spread);
        // the table in docs/bench/ was written as version 1
        const std::string doc = test::source_root() + "/docs/bench/quant_table_default_model.json";
        if (!QFile::exists(QString::fromStdString(doc)))
            QSKIP("docs/bench/quant_table_default_model.json is not there");
        auto d = read_quant_table(doc);
        QVERIFY2(d, d.message().c_str());
        QVERIFY(d->find("int4-rtn") && d->find("int4-rtn")->decode_tok_s);
    }

    void jsonRoundTrips() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("t.json").toStdString();
        const QuantTable t = sampleTable();
        QVERIFY(write_quant_table_json(t, path).is_ok());
        auto back = read_quant_table(path);
        QVERIFY2(back, back.message().c_str());
        QCOMPARE(quant_table_to_json(back.value()).dump(), quant_table_to_json(t).dump());
        QVERIFY(back->find("q4_k") && !back->find("q4_k")->measured());
        QVERIFY(!back->find("nf4"));
        QVERIFY(!QFile::exists(dir.filePath("t.json.tmp")));
    }

    void readerRefusesBadFiles_data() {
        QTest::addColumn<QString>("patch");  // a JSON merge patch applied to the sample
        QTest::addColumn<QString>("expect");
        QTest::newRow("format") << R"({"format": "something-else"})"
                                << "\"format\" is \"something-else\"";
        QTest::newRow("version") << R"({"version": 4})"
                                 << "version 4 is not supported (this reads 1 .. 3)";
        QTest::newRow("rows not an array") << R"({"rows": {}})"
                                           << "\"rows\" is not an array";
        QTest::newRow("model missing") << R"({"model": null})"
                                       << "the key \"model\" is missing";
        QTest::newRow("n_params negative") << R"({"n_params": -5})"
                                           << "\"n_params\" is -5";
    }
    void readerRefusesBadFiles() {
        QFETCH(QString, patch);
        QFETCH(QString, expect);
        json j = quant_table_to_json(sampleTable());
        j.merge_patch(json::parse(patch.toStdString()));
        auto t = quant_table_from_json(j, "x.json");
        QVERIFY(!t);
        QVERIFY2(QString::fromStdString(t.message()).contains(expect), t.message().c_str());
        QVERIFY2(t.message().rfind("x.json", 0) == 0, t.message().c_str());
    }

    void readerNamesTheRowAndField_data() {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("expect");
        QTest::newRow("top1 over 1") << "top1"
                                     << "1.5"
                                     << "rows[1]: \"top1\" is 1.5, expected 0 .. 1";
        QTest::newRow("ppl a string") << "ppl"
                                      << "\"high\""
                                      << "rows[1]: \"ppl\" is string, expected a number";
        QTest::newRow("size fractional") << "size_bytes"
                                         << "1.5"
                                         << "rows[1]: \"size_bytes\" is number";
        QTest::newRow("negative speed") << "decode_tok_s"
                                        << "-3"
                                        << "rows[1]: \"decode_tok_s\" is -3";
        QTest::newRow("scheme empty") << "scheme"
                                      << "\"\""
                                      << "rows[1]: \"scheme\" is empty";
        QTest::newRow("runs zero") << "decode_runs"
                                   << "0"
                                   << "rows[1]: \"decode_runs\" is 0, expected 1 .. 1000000";
        QTest::newRow("values not the runs") << "decode_values"
                                             << "[50.0]"
                                             << "rows[1]: \"decode_values\" has 1 values, \"decode_runs\" says 2";
        QTest::newRow("a negative run") << "prefill_values"
                                        << "[-1, 500]"
                                        << "rows[1]: \"prefill_values\"[0] is -1, expected a number >= 0";
        QTest::newRow("min above max") << "prefill_min"
                                       << "600"
                                       << "rows[1]: \"prefill_min\" 600 is above \"prefill_max\" 501";
        QTest::newRow("spread in part") << "decode_sd"
                                        << "null"
                                        << "rows[1]: \"decode_sd\" is null while other decode_ spread keys are set";
        QTest::newRow("values a number") << "decode_values"
                                         << "3"
                                         << "rows[1]: \"decode_values\" is number, expected an array";
        QTest::newRow("paired value without its error")
            << "ln_ppl_vs_int4_rtn_err"
            << "null"
            << "rows[1]: \"ln_ppl_vs_int4_rtn\" is set but \"ln_ppl_vs_int4_rtn_err\" is null";
        QTest::newRow("error without its value")
            << "ln_ppl_vs_ref"
            << "null"
            << "rows[1]: \"ln_ppl_vs_ref_err\" is set but \"ln_ppl_vs_ref\" is null";
        QTest::newRow("negative paired error") << "ln_ppl_vs_ref_err"
                                               << "-0.5"
                                               << "rows[1]: \"ln_ppl_vs_ref_err\" is -0.5, expected 0 .. inf";
        QTest::newRow("paired value not finite") << "ln_ppl_vs_int4_rtn"
                                                 << "-inf"
                                                 << "rows[1]: \"ln_ppl_vs_int4_rtn\" is -inf, expected a finite number";
        QTest::newRow("paired error not finite")
            << "ln_ppl_vs_int4_rtn_err"
            << "inf"
            << "rows[1]: \"ln_ppl_vs_int4_rtn_err\" is inf, expected a finite number";
        QTest::newRow("paired value a string") << "ln_ppl_vs_int4_rtn"
                                               << "\"-0.1\""
                                               << "rows[1]: \"ln_ppl_vs_int4_rtn\" is string, expected a number";
        QTest::newRow("note a number") << "note"
                                       << "7"
                                       << "rows[1]: \"note\" is number, expected a string";
    }
    void readerNamesTheRowAndField() {
        QFETCH(QString, key);
        QFETCH(QString, value);
        QFETCH(QString, expect);
        json j = quant_table_to_json(sampleTable());
        // "inf" / "-inf": a json built in memory (JSON text cannot hold one: readerRefusesOverflow)
        j["rows"][1][key.toStdString()] = value == "inf"    ? json(INFINITY)
                                          : value == "-inf" ? json(-INFINITY)
                                                            : json::parse(value.toStdString());
        auto t = quant_table_from_json(j, "x.json");
        QVERIFY(!t);
        QVERIFY2(QString::fromStdString(t.message()).contains(expect), t.message().c_str());
        j = quant_table_to_json(sampleTable());
        j["rows"][1].erase(key.toStdString());
        auto m = quant_table_from_json(j, "x.json");
        QVERIFY(!m);
        QVERIFY2(QString::fromStdString(m.message()).contains("rows[1]: the key \"" + key + "\" is missing"),
                 m.message().c_str());
    }

    // A number too large for a double in the file: the reader says which, not a crash.
    void readerRefusesOverflow() {
        QTemporaryDir dir;
        const QString path = dir.filePath("big.json");
        std::string text = quant_table_to_json(sampleTable()).dump();
        const std::string key = "\"ln_ppl_vs_int4_rtn\":-0.0625";
        QVERIFY(text.find(key) != std::string::npos);
        text.replace(text.find(key), key.size(), "\"ln_ppl_vs_int4_rtn\":-1e999");
        std::ofstream(path.toStdString()) << text;
        auto t = read_quant_table(path.toStdString());
        QVERIFY(!t);
        QVERIFY2(t.message().find(path.toStdString() + ": not valid JSON") == 0 &&
                     t.message().find("1e999") != std::string::npos,
                 t.message().c_str());
    }

    void readerIgnoresUnknownKeys() {
        json j = quant_table_to_json(sampleTable());
        j["later"] = {1, 2};
        j["rows"][0]["kl_p99"] = 0.5;
        QVERIFY(quant_table_from_json(j));
        auto bad = read_quant_table("/no/such/table.json");
        QVERIFY(!bad);
        QVERIFY2(bad.message().find("/no/such/table.json") != std::string::npos, bad.message().c_str());
    }

    void csvQuotesAndNulls() {
        const std::string csv = quant_table_csv(sampleTable());
        const QStringList lines = QString::fromStdString(csv).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 4);
        QCOMPARE(lines[0],
                 QString("scheme,label,bits_per_weight,size_bytes,ppl,ppl_err,ln_ppl_vs_ref,ln_ppl_vs_ref_err,"
                         "ln_ppl_vs_int4_rtn,ln_ppl_vs_int4_rtn_err,mean_kl,top1,first_divergence,"
                         "prefill_tok_s,decode_tok_s,prefill_runs,prefill_sd,prefill_min,prefill_max,"
                         "prefill_values,decode_runs,decode_sd,decode_min,decode_max,decode_values,note"));
        QCOMPARE(lines[1].section(',', 0, 9), QString("ref,reference,32,1000000,10.5,0.25,0,0,-0.25,0.03125"));
        QCOMPARE(lines[2], QString("int4-gptq,GPTQ,4.5,1000000,10.5,0.25,0.125,0.015625,-0.0625,0.0078125,0.0625,0.875,"
                                   "64,500.5,50.25,2,0.5,500,501,501;500,2,0.25,50,50.5,50;50.5,"));
        QCOMPARE(lines[3], QString("q4_k,Q4_K_M-style GGUF,,,,,,,,,,,,,,,,,,,,,,,,"
                                   "\"cannot be made: rows of 64, \"\"blocks\"\" of 256\""));
    }

    void schemeListIsTheIssues() {
        QStringList names;
        for (const QuantTableScheme& s : quant_table_schemes()) names << s.scheme;
        QCOMPARE(names, QStringList({"ref", "int8", "llm-int8", "nf4", "fp4", "int4-rtn", "int4-gptq", "int4-gptq-act",
                                     "int4-awq", "q4_k", "q8_0"}));
        QCOMPARE(quant_table_label("int4-gptq-act"), std::string("GPTQ act-order"));
        QCOMPARE(quant_table_label("q5_k"), std::string("q5_k"));
    }

    // The whole table on a tiny model (64-wide rows: Q4_K's blocks of 256 cannot apply).
    void measuresEveryScheme() {
        QTemporaryDir dir;
        test::TinyModelSpec spec;
        auto m = test::write_and_load_tiny_gguf(dir.filePath("tiny.gguf").toStdString(), spec);
        QVERIFY2(m, m.message().c_str());
        const int n_vocab = (*m)->config.n_vocab;
        QuantTableOptions o;
        o.eval_tokens = someTokens(256, n_vocab);
        o.n_ctx = 64;
        o.calibration_tokens = someTokens(128, n_vocab);
        o.n_prompt = 32;
        o.n_gen = 8;
        o.repeat = 2;
        o.runner.n_threads = 1;
        std::vector<double> fractions;
        std::vector<std::string> stages;
        o.progress = Progress([&](const std::string& stage, double f) {
            fractions.push_back(f);
            if (stages.empty() || stages.back() != stage) stages.push_back(stage);
        });
        auto t = measure_quant_table(*m, o);
        QVERIFY2(t, t.message().c_str());
        QCOMPARE(t->rows.size(), quant_table_schemes().size());
        for (size_t i = 0; i < t->rows.size(); ++i)
            QCOMPARE(t->rows[i].scheme, std::string(quant_table_schemes()[i].scheme));
        QCOMPARE(t->n_params.value_or(0), (*m)->n_params);
        QVERIFY(!t->machine.empty());
        const QuantTableRow& ref = t->rows[0];
        QCOMPARE(ref.mean_kl.value_or(-1), 0.0);  // measured: the reference against itself
        QCOMPARE(ref.top1.value_or(-1), 1.0);
        QVERIFY(!ref.first_divergence);  // no prompts given: not measured
        for (const QuantTableRow& r : t->rows) {
            if (r.scheme == "q4_k") {
                QVERIFY2(!r.measured() && r.note.find("cannot be made") != std::string::npos, r.note.c_str());
                continue;
            }
            QVERIFY2(r.measured() && r.note.empty(), r.scheme.c_str());
            QVERIFY(*r.ppl > 1 && *r.ppl<10 * n_vocab&& * r.ppl_err> 0);
            QVERIFY(*r.mean_kl >= 0 && *r.top1 >= 0 && *r.top1 <= 1);
            QVERIFY(*r.prefill_tok_s > 0 && *r.decode_tok_s > 0);
            // each speed keeps its two runs: the mean is theirs, sd the sample one
            for (const auto& [mean, spread] :
                 {std::pair{r.prefill_tok_s, r.prefill_spread}, std::pair{r.decode_tok_s, r.decode_spread}}) {
                QVERIFY2(spread && spread->runs == 2 && spread->values.size() == 2, r.scheme.c_str());
                const double a = spread->values[0], b = spread->values[1];
                QVERIFY(std::fabs(*mean - (a + b) / 2) <= 1e-12 * *mean);
                QVERIFY(std::fabs(spread->sd - std::fabs(a - b) / std::sqrt(2.0)) <= 1e-9 * *mean);
                QCOMPARE(spread->min, std::min(a, b));
                QCOMPARE(spread->max, std::max(a, b));
            }
            QVERIFY(*r.size_bytes > 0 && *r.bits_per_weight > 3 && *r.bits_per_weight <= 32);
            if (r.scheme != "ref") QVERIFY2(*r.mean_kl > 0, r.scheme.c_str());
        }
        // the formats' storage by hand: Q8_0 34 bytes per 32, NF4 / FP4 4 bits + a float absmax per 64
        QCOMPARE(*t->find("q8_0")->bits_per_weight, 8.5);
        QCOMPARE(*t->find("nf4")->bits_per_weight, 4.5);
        QCOMPARE(*t->find("fp4")->bits_per_weight, 4.5);
        QVERIFY(*t->find("int8")->mean_kl < *t->find("int4-rtn")->mean_kl);
        checkPairedValues(*m, o, t.value());
        QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
        QCOMPARE(fractions.back(), 1.0);
        // every phase is heard through the one Progress: quantizing (GPTQ per layer), scoring
        // per chunk, timing per run
        auto heard = [&](const std::string& words) {
            return std::any_of(stages.begin(), stages.end(),
                               [&](const std::string& s) { return s.find(words) != std::string::npos; });
        };
        for (const char* words : {"Quantizing to int4-gptq", "GPTQ: layer 1 / ", "evaluating chunk 1 / 4",
                                  "Timing int8: pp32", "Timing int8: tg8"})
            QVERIFY2(heard(words), words);
    }

    void cancelsAndRefusesBadInput() {
        QTemporaryDir dir;
        auto m = test::write_and_load_tiny_gguf(dir.filePath("tiny.gguf").toStdString(), test::TinyModelSpec{});
        QVERIFY2(m, m.message().c_str());
        QuantTableOptions o;
        o.eval_tokens = someTokens(128, (*m)->config.n_vocab);
        o.n_ctx = 64;
        o.speed = false;
        o.schemes = {"q8_0", "int8"};
        int full_calls = 0;  // a whole run's reports
        o.progress = Progress([&](const std::string&, double) { ++full_calls; });
        auto full = measure_quant_table(*m, o);
        QVERIFY2(full, full.message().c_str());
        for (const QuantTableRow& r : full->rows) {  // no int4-rtn row: nothing to pair with
            QVERIFY2(r.ln_ppl_vs_ref && !r.ln_ppl_vs_int4_rtn && !r.ln_ppl_vs_int4_rtn_err, r.scheme.c_str());
            QVERIFY(std::fabs(*r.ln_ppl_vs_ref - std::log(*r.ppl / *full->rows[0].ppl)) < 1e-9);
        }
        // the flag raised by the third report stops the run at its next check: no table
        CancelFlag stop{false};
        int calls = 0, calls_at_stop = 0;
        o.progress = Progress(
            [&](const std::string&, double) {
                if (++calls == 3) stop = true, calls_at_stop = calls;
            },
            &stop);
        auto t = measure_quant_table(*m, o);
        QVERIFY(!t);
        QVERIFY2(Progress::is_cancelled(t.status()), t.message().c_str());
        QVERIFY2(t.message().find("quantization table") != std::string::npos, t.message().c_str());
        QCOMPARE(calls_at_stop, 3);
        QVERIFY2(calls < full_calls, qPrintable(QString("%1 of %2").arg(calls).arg(full_calls)));

        o.progress = Progress();
        o.schemes = {"q8_0", "bogus"};
        auto u = measure_quant_table(*m, o);
        QVERIFY(!u);
        QVERIFY2(u.message().find("bogus") != std::string::npos, u.message().c_str());
        o.schemes = {"int4-awq"};  // no calibration tokens: a row that says so
        auto a = measure_quant_table(*m, o);
        QVERIFY2(a, a.message().c_str());
        QVERIFY2(a->rows[1].note.find("calibration") != std::string::npos, a->rows[1].note.c_str());
        o.eval_tokens.resize(10);
        auto s = measure_quant_table(*m, o);
        QVERIFY(!s);
        QVERIFY2(s.message().find("fewer than one chunk") != std::string::npos, s.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestQuantTable)
#include "tst_quant_table.moc"
