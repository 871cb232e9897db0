// ctest-labels: ui model
// The quantization table in the GUI (ui/quant_table_view, app/quant_table_dock / _worker):
// a table fed by hand sorts numerically (missing values last) and plots one labelled point
// per scheme with both values (the reference as a line on the log-KL axis, a point at ΔPPL 0
// on the other); a run on a tiny model from the Run button fills every scheme with a
// progress bar that ends full, Cancel stops a run, the CSV / JSON exports are the table's
// format and read back (every field, the speeds' runs too), Load JSON shows a saved table
// (version 1 too) and names a bad file; a speed shows "mean ± sd" with its runs as tooltip;
// ln PPL against the reference and against INT4 RTN shows "-0.087 ± 0.021", sorts by its
// number and says in its tooltip how many standard errors it is.
// The scatter's labels (placed by ui/label_placement) as drawn: no two boxes overlap, none
// covers a marker, each inside the axis rect and next to its point or joined to it by a
// leader line, on the hand table and the default model's (after a resize and on the other
// quality axis too).
// Screenshots: tests/output/quant_table_view.png (hand-fed), quant_table_run.png (the run),
// quant_table_default_model.png (docs/screenshots/quant_table.png) and _small.png (760 x 560).
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "app/engine_bridge.h"
#include "app/quant_table_dock.h"
#include "app/quant_table_worker.h"
#include "engine/quant/quant_table.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/qcp.h"
#include "ui/quant_table_view.h"

using namespace kvs;

namespace {

ui::QuantTableRowInfo row(const char* scheme, const char* label, double bits, double ppl, double kl, double top1,
                          double decode) {
    ui::QuantTableRowInfo r;
    r.scheme = scheme;
    r.label = label;
    r.bitsPerWeight = bits;
    r.sizeBytes = qint64(bits * 1e6);
    r.ppl = ppl;
    r.pplErr = ppl * 0.02;
    r.lnPplVsRef = std::log(ppl / 10.0);  // the reference's PPL is 10
    r.lnPplVsRefErr = 0.004 + 0.1 * (top1 < 1 ? 1 - top1 : 0);
    r.meanKl = kl;
    r.top1 = top1;
    r.firstDivergence = 20 * top1;
    r.prefillTokS = decode * 8;
    r.decodeTokS = decode;
    // three decode runs around the mean (sample sd 1.8); prefill without its runs, as in a
    // version 1 file
    r.decodeSpread =
        ui::QuantTableSpreadInfo{3, 1.8, decode - 2, decode + 1.5, {decode - 2, decode + 1.5, decode + 0.5}};
    return r;
}

ui::QuantTableInfo handTable() {
    ui::QuantTableInfo t;
    t.model = "hand-made";
    t.nParams = 134515008;
    t.machine = "Test CPU (cpu-avx2, 2 threads)";
    t.rows = {row("ref", "reference", 32, 10.0, 0, 1, 20), row("int8", "INT8 RTN", 8.06, 10.02, 0.002, 0.98, 60),
              row("nf4", "NF4", 4.5, 10.6, 0.05, 0.90, 70), row("int4-gptq", "GPTQ", 4.5, 10.4, 0.03, 0.93, 75),
              row("q8_0", "Q8_0", 8.5, 10.01, 0.001, 0.99, 65)};
    ui::QuantTableRowInfo na;
    na.scheme = "q4_k";
    na.label = "Q4_K_M-style GGUF";
    na.note = "cannot be made for this model";
    t.rows.push_back(na);
    return t;
}

// The hand table with an INT4 RTN row and every row's ln PPL against it (±: made up, chosen
// so that sorting as text and as numbers differ: "+0.005" < "-0.020" < "-0.100" as text).
ui::QuantTableInfo pairedTable() {
    ui::QuantTableInfo t = handTable();
    t.rows.insert(5, row("int4-rtn", "INT4 RTN", 4.44, 10.5, 0.06, 0.89, 72));
    const std::pair<const char*, double> errs[] = {{"ref", 0.021},       {"int8", 0.02},  {"nf4", 0.036},
                                                   {"int4-gptq", 0.009}, {"int4-rtn", 0}, {"q8_0", 0.02}};
    for (ui::QuantTableRowInfo& r : t.rows)
        for (const auto& [scheme, err] : errs)
            if (r.scheme == scheme) {
                r.lnPplVsRtn = r.scheme == "int4-rtn" ? 0.0 : std::log(*r.ppl / 10.5);
                r.lnPplVsRtnErr = err;
            }
    return t;
}

// What the drawn labels must hold, "" when they do: one box per point, inside the axis
// rect, no two overlapping, none over a marker (the discs where QCustomPlot draws the points:
// the graph's scatter size around each point's pixel), each next to its own point unless a
// leader line joins them.
QString labelViolations(const ui::QuantTableView& v) {
    const QVector<ui::QuantTableView::LabelBox> boxes = v.labelBoxes();
    if (boxes.size() != v.points().size())
        return QStringLiteral("%1 labels for %2 points").arg(boxes.size()).arg(v.points().size());
    QCustomPlot* plot = v.plot();
    const double r = plot->graph(0)->scatterStyle().size() / 2;
    QVector<QRectF> markers;
    for (const auto& p : v.points())
        markers.push_back(QRectF(plot->xAxis->coordToPixel(p.x) - r, plot->yAxis->coordToPixel(p.y) - r, 2 * r, 2 * r));
    const QRectF area = plot->axisRect()->rect();
    for (int i = 0; i < boxes.size(); ++i) {
        const QRectF b = boxes[i].rect;
        const QString name = boxes[i].text;
        if (b.isEmpty()) return name + " has an empty box";
        if (!area.contains(b)) return name + " leaves the axis rect";
        for (int j = 0; j < i; ++j)
            if (b.intersects(boxes[j].rect)) return name + " overlaps " + boxes[j].text;
        for (const QRectF& m : markers)
            if (b.intersects(m)) return name + " covers a marker";
        const bool ownPoint =
            std::any_of(markers.begin(), markers.end(), [&](const QRectF& m) { return m.center() == boxes[i].point; });
        if (!ownPoint) return name + "'s point is not a drawn point";
        if (!boxes[i].leader && !b.adjusted(-3 * r, -3 * r, 3 * r, 3 * r).contains(boxes[i].point))
            return name + " is away from its point without a leader line";
    }
    return {};
}

}  // namespace

class TestQuantTableView : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void sortsAndPlots() {
        ui::QuantTableView v;
        v.resize(1100, 760);
        v.setTable(handTable());
        QTableWidget* tw = v.tableWidget();
        QCOMPARE(tw->rowCount(), 6);
        QCOMPARE(v.schemeOrder(), QStringList({"ref", "int8", "nf4", "int4-gptq", "q8_0", "q4_k"}));  // as given
        // numbers sort as numbers; q4_k (no values) comes last in either order
        tw->sortByColumn(ui::QuantTableView::ColDecode, Qt::DescendingOrder);
        QCOMPARE(v.schemeOrder(), QStringList({"int4-gptq", "nf4", "q8_0", "int8", "ref", "q4_k"}));
        tw->sortByColumn(ui::QuantTableView::ColKl, Qt::AscendingOrder);
        QCOMPARE(v.schemeOrder(), QStringList({"ref", "q8_0", "int8", "int4-gptq", "nf4", "q4_k"}));
        tw->sortByColumn(ui::QuantTableView::ColBits, Qt::AscendingOrder);  // 4.5 < 8.06 < 8.5 < 32, not as text
        QCOMPARE(v.schemeOrder().mid(2), QStringList({"int8", "q8_0", "ref", "q4_k"}));
        tw->sortByColumn(ui::QuantTableView::ColOrder, Qt::AscendingOrder);
        QCOMPARE(v.schemeOrder().first(), QString("ref"));
        // a speed with its runs: "mean ± sd", the runs in the tooltip; without them the mean alone
        const QTableWidgetItem* decode = tw->item(1, ui::QuantTableView::ColDecode);  // int8, 60 tok/s
        QCOMPARE(decode->text(), QString("60.0 ± 1.8"));
        QVERIFY2(decode->toolTip().contains("3 runs: 58.0, 61.5, 60.5 tok/s") &&
                     decode->toolTip().contains("min 58.0, max 61.5"),
                 qPrintable(decode->toolTip()));
        QCOMPARE(tw->item(1, ui::QuantTableView::ColPrefill)->text(), QString("480.0"));
        QCOMPARE(tw->item(5, ui::QuantTableView::ColDecode)->text(), QString("–"));  // q4_k
        // ln PPL vs the reference; vs INT4 RTN: no such row in this table
        QCOMPARE(tw->item(2, ui::QuantTableView::ColVsRef)->text(), QString("+0.058 ± 0.014"));  // nf4: ln 1.06
        QCOMPARE(tw->item(2, ui::QuantTableView::ColVsRtn)->text(), QString("–"));
        QVERIFY2(tw->item(2, ui::QuantTableView::ColVsRtn)->toolTip().contains("no INT4 RTN row"),
                 qPrintable(tw->item(2, ui::QuantTableView::ColVsRtn)->toolTip()));

        // log KL across: the reference (KL 0) is the dashed line, not a point; q4_k has nothing
        QCOMPARE(v.points().size(), 4);
        for (const auto& p : v.points()) QVERIFY(p.x > 0 && p.y > 0 && !p.label.isEmpty());
        QCOMPARE(v.plot()->xAxis->scaleType(), QCPAxis::stLogarithmic);
        v.setQualityAxis(ui::QuantTableView::QualityAxis::DeltaPpl);
        QCOMPARE(v.points().size(), 5);
        for (const auto& p : v.points())
            if (p.label == "reference") QCOMPARE(p.x, 0.0);
            else if (p.label == "GPTQ")
                QVERIFY(std::fabs(p.x - 0.4) < 1e-9 && p.y == 75);
        v.setQualityAxis(ui::QuantTableView::QualityAxis::MeanKl);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.plot()->replot();
        QVERIFY2(labelViolations(v).isEmpty(), qPrintable(labelViolations(v)));
        QVERIFY(v.savePng(QString::fromStdString(test::output_path("quant_table_view.png"))));
    }

    // Ten schemes within 5 % of each other in KL and speed (their markers touch): every label
    // still finds a free place, those with no room beside their point at the end of a leader
    // line. Screenshot: tests/output/quant_table_crowded.png.
    void crowdedLabels() {
        ui::QuantTableInfo t;
        t.model = "crowded";
        t.rows = {row("ref", "reference", 32, 10.0, 0, 1, 20)};
        const char* names[] = {"INT8 RTN", "LLM.int8()",        "NF4", "FP4", "INT4 RTN", "GPTQ", "GPTQ act-order",
                               "AWQ",      "Q4_K_M-style GGUF", "Q8_0"};
        for (int i = 0; i < 10; ++i)
            t.rows.push_back(row("s", names[i], 4.5, 10.5, 0.1 * (1 + 0.005 * i), 0.9, 100 + 0.5 * (i % 4)));
        ui::QuantTableView v;
        v.resize(900, 640);
        v.setTable(t);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.plot()->replot();
        QVERIFY2(labelViolations(v).isEmpty(), qPrintable(labelViolations(v)));
        const auto boxes = v.labelBoxes();
        QVERIFY(std::any_of(boxes.begin(), boxes.end(), [](const auto& b) { return b.leader; }));
        QVERIFY(v.savePng(QString::fromStdString(test::output_path("quant_table_crowded.png"))));
    }

    // ln(PPL / PPL of INT4 RTN): the cell, its tooltip (how many standard errors, which way),
    // the header's tooltip, and sorting by the number (missing values last).
    void pairedColumns() {
        ui::QuantTableView v;
        v.resize(1300, 760);
        v.setTable(pairedTable());
        QTableWidget* tw = v.tableWidget();
        QCOMPARE(v.schemeOrder(), QStringList({"ref", "int8", "nf4", "int4-gptq", "q8_0", "int4-rtn", "q4_k"}));
        QCOMPARE(tw->horizontalHeaderItem(ui::QuantTableView::ColVsRtn)->text(), QString("vs INT4 RTN"));
        const QString head = tw->horizontalHeaderItem(ui::QuantTableView::ColVsRtn)->toolTip();
        for (const char* words :
             {"ln(PPL / PPL of INT4 RTN) on the same tokens", "± the standard error of the per-token differences",
              "negative = better than INT4 RTN", "|value| > 2 × error = a real difference"})
            QVERIFY2(head.contains(words), qPrintable(head));
        QVERIFY(tw->horizontalHeaderItem(ui::QuantTableView::ColVsRef)->toolTip().contains("PPL of the reference"));
        auto cell = [&](const char* scheme) {
            return tw->item(int(v.schemeOrder().indexOf(scheme)), ui::QuantTableView::ColVsRtn);
        };
        // nf4: ln(10.6 / 10.5) = +0.0095 ± 0.036: 0.3 errors; GPTQ ln(10.4 / 10.5) = -0.0096 ± 0.009: 1.1;
        // int8 ln(10.02 / 10.5) = -0.047 ± 0.02: 2.3, a real difference
        QCOMPARE(cell("nf4")->text(), QString("+0.009 ± 0.036"));
        QCOMPARE(cell("int8")->text(), QString("-0.047 ± 0.020"));
        QCOMPARE(cell("int4-rtn")->text(), QString("+0.000 ± 0.000"));
        QCOMPARE(cell("q4_k")->text(), QString("–"));
        QVERIFY2(cell("nf4")->toolTip().contains("0.3 standard errors from 0, not a real difference from INT4 RTN"),
                 qPrintable(cell("nf4")->toolTip()));
        QVERIFY2(cell("int8")->toolTip().contains("2.3 standard errors from 0, really better than INT4 RTN"),
                 qPrintable(cell("int8")->toolTip()));
        QVERIFY2(cell("int4-rtn")->toolTip().contains("INT4 RTN itself"), qPrintable(cell("int4-rtn")->toolTip()));
        // by the number, not the text; q4_k (none) last in either order
        const QStringList ascending{"ref", "q8_0", "int8", "int4-gptq", "int4-rtn", "nf4", "q4_k"};
        tw->sortByColumn(ui::QuantTableView::ColVsRtn, Qt::AscendingOrder);
        QCOMPARE(v.schemeOrder(), ascending);
        tw->sortByColumn(ui::QuantTableView::ColVsRtn, Qt::DescendingOrder);
        QStringList descending(ascending.rbegin() + 1, ascending.rend());
        QCOMPARE(v.schemeOrder(), descending << "q4_k");
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.plot()->replot();
        QVERIFY(v.savePng(QString::fromStdString(test::output_path("quant_table_paired.png"))));
    }

    // The view's table exported as JSON by the dock and loaded back is the same table, every
    // field (the speeds' runs too) carried both ways by app/quant_table_convert.
    void exportLoadKeepsEveryField() {
        QTemporaryDir dir;
        ui::QuantTableView v, w;
        app::QuantTableDock dock(nullptr, &v), other(nullptr, &w);
        v.setTable(pairedTable());
        const QString json = dir.filePath("hand.json");
        dock.exportJson(json);
        other.loadJson(json);
        QVERIFY2(w.statusText().startsWith("Loaded"), qPrintable(w.statusText()));
        const ui::QuantTableInfo& a = v.table();
        const ui::QuantTableInfo& b = w.table();
        QCOMPARE(b.model, a.model);
        QCOMPARE(b.nParams, a.nParams);
        QCOMPARE(b.machine, a.machine);
        QCOMPARE(b.rows.size(), a.rows.size());
        for (int i = 0; i < a.rows.size(); ++i) {
            const ui::QuantTableRowInfo &x = a.rows[i], &y = b.rows[i];
            QCOMPARE(y.scheme, x.scheme);
            QCOMPARE(y.label, x.label);
            QCOMPARE(y.bitsPerWeight, x.bitsPerWeight);
            QCOMPARE(y.sizeBytes, x.sizeBytes);
            QCOMPARE(y.ppl, x.ppl);
            QCOMPARE(y.pplErr, x.pplErr);
            QCOMPARE(y.lnPplVsRef, x.lnPplVsRef);
            QCOMPARE(y.lnPplVsRefErr, x.lnPplVsRefErr);
            QCOMPARE(y.lnPplVsRtn, x.lnPplVsRtn);
            QCOMPARE(y.lnPplVsRtnErr, x.lnPplVsRtnErr);
            QCOMPARE(y.meanKl, x.meanKl);
            QCOMPARE(y.top1, x.top1);
            QCOMPARE(y.firstDivergence, x.firstDivergence);
            QCOMPARE(y.prefillTokS, x.prefillTokS);
            QCOMPARE(y.decodeTokS, x.decodeTokS);
            QCOMPARE(y.prefillSpread.has_value(), x.prefillSpread.has_value());
            QCOMPARE(y.decodeSpread.has_value(), x.decodeSpread.has_value());
            if (x.decodeSpread) {
                QCOMPARE(y.decodeSpread->runs, x.decodeSpread->runs);
                QCOMPARE(y.decodeSpread->sd, x.decodeSpread->sd);
                QCOMPARE(y.decodeSpread->min, x.decodeSpread->min);
                QCOMPARE(y.decodeSpread->max, x.decodeSpread->max);
                QCOMPARE(y.decodeSpread->values, x.decodeSpread->values);
            }
            QCOMPARE(y.note, x.note);
        }
    }

    void runCancelExportLoad() {
        QTemporaryDir dir;
        const QString gguf = dir.filePath("tiny.gguf");
        QVERIFY(test::write_tiny_gguf(gguf.toStdString(), test::TinyModelSpec{}).is_ok());
        app::EngineBridge bridge;
        QSignalSpy loaded(&bridge, &app::EngineBridge::modelLoaded);
        bridge.loadModel(gguf);
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, 60000);

        ui::QuantTableView v;
        v.resize(1100, 760);
        app::QuantTableDock dock(&bridge, &v);
        auto* run = v.findChild<QPushButton*>("quantTableRun");
        auto* cancel = v.findChild<QPushButton*>("quantTableCancel");
        QVERIFY(run && cancel);
        QTRY_VERIFY(run->isEnabled());
        v.findChild<QSpinBox*>("quantTableEvalTokens")->setValue(256);
        v.findChild<QSpinBox*>("quantTableCalibTokens")->setValue(64);
        v.findChild<QSpinBox*>("quantTableSpeedRuns")->setValue(2);
        QSignalSpy progress(dock.worker(), &app::QuantTableWorker::progress);
        QSignalSpy finished(dock.worker(), &app::QuantTableWorker::finished);
        QSignalSpy failed(dock.worker(), &app::QuantTableWorker::failed);

        // Cancel at the first progress step: the run fails as cancelled, Run comes back.
        run->click();
        QVERIFY(!run->isEnabled() && cancel->isEnabled());
        QTRY_VERIFY_WITH_TIMEOUT(progress.count() > 0 || failed.count() > 0, 60000);
        cancel->click();
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, 120000);
        QVERIFY2(failed.first().at(0).toString().contains("cancelled"), qPrintable(failed.first().at(0).toString()));
        QVERIFY(finished.isEmpty());
        // the spies hear the worker's thread; the view hears the queued signal a moment later
        QTRY_VERIFY2(v.statusText().contains("cancelled"), qPrintable(v.statusText()));
        QVERIFY(run->isEnabled() && !cancel->isEnabled());

        // The whole run.
        progress.clear();
        run->click();
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() > 1, 600000);
        QVERIFY2(failed.count() == 1, qPrintable(failed.last().at(0).toString()));
        QTRY_VERIFY2(v.statusText().startsWith("Done"), qPrintable(v.statusText()));
        QCOMPARE(v.progressBar()->value(), 1000);
        QVERIFY(progress.count() > 11);
        double last = -1;
        for (const QList<QVariant>& p : progress) {
            QVERIFY(p.at(1).toDouble() >= last);
            last = p.at(1).toDouble();
        }
        const ui::QuantTableInfo& t = v.table();
        QCOMPARE(t.rows.size(), int(quant_table_schemes().size()));
        QCOMPARE(t.model, QString("tiny"));
        QCOMPARE(v.tableWidget()->rowCount(), t.rows.size());
        const ui::QuantTableRowInfo* ref = t.reference();
        QVERIFY(ref && ref->meanKl && *ref->meanKl == 0 && ref->top1 && *ref->top1 == 1);
        int measured = 0;
        for (const auto& r : t.rows) measured += r.decodeTokS && r.meanKl ? 1 : 0;
        QCOMPARE(measured, t.rows.size() - 1);      // all but Q4_K (64-wide rows)
        QCOMPARE(v.points().size(), measured - 1);  // the reference is the line
        // two timed runs of each speed: the cells say "mean ± sd", the tooltips list both runs
        for (int i = 0; i < t.rows.size(); ++i) {
            if (!t.rows[i].decodeTokS) continue;
            QVERIFY(t.rows[i].decodeSpread && t.rows[i].decodeSpread->runs == 2 && t.rows[i].prefillSpread);
            const int at = v.schemeOrder().indexOf(t.rows[i].scheme);
            const QTableWidgetItem* cell = v.tableWidget()->item(at, ui::QuantTableView::ColDecode);
            QVERIFY2(cell->text().contains(" ± ") && cell->toolTip().startsWith("2 runs: "),
                     qPrintable(cell->text() + " / " + cell->toolTip()));
        }
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.plot()->replot();
        QVERIFY(v.savePng(QString::fromStdString(test::output_path("quant_table_run.png"))));

        // Exports in the table's formats; the JSON loads back into another view unchanged.
        const QString json = dir.filePath("t.json"), csv = dir.filePath("t.csv");
        dock.exportJson(json);
        QVERIFY2(v.statusText().contains("Saved"), qPrintable(v.statusText()));
        dock.exportCsv(csv);
        auto back = read_quant_table(json.toStdString());
        QVERIFY2(back, back.message().c_str());
        QCOMPARE(back->rows.size(), quant_table_schemes().size());
        QFile c(csv);
        QVERIFY(c.open(QIODevice::ReadOnly));
        QCOMPARE(QString::fromUtf8(c.readAll()).toStdString(), quant_table_csv(back.value()));
        ui::QuantTableView other;
        app::QuantTableDock otherDock(nullptr, &other);
        otherDock.loadJson(json);
        QCOMPARE(other.tableWidget()->rowCount(), t.rows.size());
        otherDock.exportJson(dir.filePath("again.json"));
        auto again = read_quant_table(dir.filePath("again.json").toStdString());
        QVERIFY(again);
        QCOMPARE(quant_table_to_json(again.value()).dump(), quant_table_to_json(back.value()).dump());
        QFile bad(dir.filePath("bad.json"));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write(R"({"format": "kvscope-quant-table", "version": 1, "model": "m", "n_params": 1, "machine": "x",
                      "rows": [{"scheme": "int8"}]})");
        bad.close();
        otherDock.loadJson(bad.fileName());
        QVERIFY2(other.statusText().contains("rows[0]") && other.statusText().contains("\"label\""),
                 qPrintable(other.statusText()));
        QCOMPARE(other.tableWidget()->rowCount(), t.rows.size());  // the shown table stays
    }

    // The default model's table as `kvscope eval --all` measured it (docs/bench/), loaded from
    // its JSON: tests/output/quant_table_default_model.png is docs/screenshots/quant_table.png.
    // KVS_QUANT_TABLE_JSON names another table to show instead (e.g. a fresh `kvscope eval --all
    // --json`, to see it in the dock before it replaces docs/bench's).
    void defaultModelTable() {
        const QString other = qEnvironmentVariable("KVS_QUANT_TABLE_JSON");
        const QString json =
            !other.isEmpty()
                ? other
                : QString::fromStdString(test::source_root() + "/docs/bench/quant_table_default_model.json");
        if (!QFile::exists(json)) QSKIP(qPrintable(json + " is not there"));
        ui::QuantTableView v;
        v.resize(1300, 760);  // wide enough for every column
        app::QuantTableDock dock(nullptr, &v);
        dock.loadJson(json);
        QVERIFY2(v.statusText().startsWith("Loaded"), qPrintable(v.statusText()));
        QCOMPARE(v.table().rows.size(), int(quant_table_schemes().size()));
        // a file written before the runs were kept (version 1) shows the means alone
        const QTableWidgetItem* decode = v.tableWidget()->item(0, ui::QuantTableView::ColDecode);
        const auto& spread = v.table().rows[0].decodeSpread;
        if (spread && spread->runs > 1) QVERIFY2(decode->text().contains(" ± "), qPrintable(decode->text()));
        else if (!spread && v.table().rows[0].decodeTokS)  // (a --no-speed table has no speeds)
            QVERIFY2(!decode->text().contains("±") && decode->toolTip().contains("One value"),
                     qPrintable(decode->text()));
        // ln PPL vs INT4 RTN where the file has it (version 3), "–" where not (versions 1, 2)
        for (int i = 0; i < v.table().rows.size(); ++i) {
            const ui::QuantTableRowInfo& r = v.table().rows[i];
            const QString want =
                r.lnPplVsRtn ? QString::asprintf("%+.3f ± %.3f", *r.lnPplVsRtn, *r.lnPplVsRtnErr) : QStringLiteral("–");
            QCOMPARE(v.tableWidget()->item(i, ui::QuantTableView::ColVsRtn)->text(), want);
            if (r.scheme == "int4-rtn" && r.lnPplVsRtn) QCOMPARE(want, QString("+0.000 ± 0.000"));
        }
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.plot()->replot();
        QVERIFY2(labelViolations(v).isEmpty(), qPrintable(labelViolations(v)));
        QVERIFY(v.savePng(QString::fromStdString(test::output_path("quant_table_default_model.png"))));
        // placed again on a smaller plot (afterLayout), and on the other quality axis
        const int wide = v.plot()->width();
        v.resize(760, 560);
        QTRY_VERIFY(v.plot()->width() < wide);
        v.plot()->replot();
        QVERIFY2(labelViolations(v).isEmpty(), qPrintable("760 x 560: " + labelViolations(v)));
        QVERIFY(v.savePng(QString::fromStdString(test::output_path("quant_table_default_model_small.png"))));
        v.setQualityAxis(ui::QuantTableView::QualityAxis::DeltaPpl);
        v.plot()->replot();
        QVERIFY2(labelViolations(v).isEmpty(), qPrintable("ΔPPL axis: " + labelViolations(v)));
    }
};

QTEST_MAIN(TestQuantTableView)
#include "tst_quant_table_view.moc"
