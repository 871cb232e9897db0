#include "ui/quant_table_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/label_placement.h"
#include "ui/qcp.h"

namespace kvs::ui {

namespace {

// A cell that sorts by its number (Qt::UserRole); a cell without one comes after every number
// in either order (it reads the order from the header, which sortByColumn sets first).
class NumberItem : public QTableWidgetItem {
public:
    NumberItem(const QString& text, std::optional<double> v) : QTableWidgetItem(text) {
        if (v) setData(Qt::UserRole, *v);
        setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        setFlags(flags() & ~Qt::ItemIsEditable);
    }
    bool operator<(const QTableWidgetItem& other) const override {
        const QVariant a = data(Qt::UserRole), b = other.data(Qt::UserRole);
        if (a.isValid() && b.isValid()) return a.toDouble() < b.toDouble();
        if (!a.isValid() && !b.isValid()) return false;
        const bool descending =
            tableWidget() && tableWidget()->horizontalHeader()->sortIndicatorOrder() == Qt::DescendingOrder;
        return descending ? !a.isValid() : !b.isValid();
    }
};

QTableWidgetItem* textItem(const QString& text) {
    auto* it = new QTableWidgetItem(text);
    it->setFlags(it->flags() & ~Qt::ItemIsEditable);
    return it;
}

// v x scale with `decimals`, "–" when v is missing.
QString num(const std::optional<double>& v, int decimals, const QString& suffix = {}, double scale = 1.0) {
    return v.has_value() ? QString::number(v.value() * scale, 'f', decimals) + suffix : QStringLiteral("–");
}
// v x scale, or nothing.
std::optional<double> scaled(const std::optional<double>& v, double scale) {
    std::optional<double> out;
    if (v.has_value()) out = v.value() * scale;
    return out;
}

// A mean speed: "733.4 ± 12.1" when its runs are known (more than one), and a tooltip
// listing them.
QTableWidgetItem* speedItem(const std::optional<double>& mean, const std::optional<QuantTableSpreadInfo>& spread) {
    QString text = num(mean, 1);
    if (mean && spread && spread->runs > 1) text += QStringLiteral(" ± ") + QString::number(spread->sd, 'f', 1);
    auto* it = new NumberItem(text, mean);
    if (mean && spread) {
        QStringList runs;
        for (double v : spread->values) runs << QString::number(v, 'f', 1);
        const QString list = runs.join(QStringLiteral(", "));
        QString tip = spread->runs == 1 ? QuantTableView::tr("1 run: %1 tok/s").arg(list)
                                        : QuantTableView::tr("%1 runs: %2 tok/s").arg(spread->runs).arg(list);
        tip += QuantTableView::tr("\nmean %1, sd %2, min %3, max %4")
                   .arg(QString::number(*mean, 'f', 1), QString::number(spread->sd, 'f', 1),
                        QString::number(spread->min, 'f', 1), QString::number(spread->max, 'f', 1));
        it->setToolTip(tip);
    } else if (mean) {
        it->setToolTip(QuantTableView::tr("One value; this table does not keep its runs"));
    }
    return it;
}

// A paired ln PPL difference against the row `other` names: "-0.087 ± 0.021", sorted by its
// value, with a tooltip that says how many standard errors it is; `self`: the row is `other`.
QTableWidgetItem* pairedItem(const std::optional<double>& v, const std::optional<double>& err, const QString& other,
                             bool self) {
    const bool set = v && err;
    auto* it =
        new NumberItem(set ? QString::asprintf("%+.3f ± %.3f", *v, *err) : QStringLiteral("–"), set ? v : std::nullopt);
    if (!set) {
        it->setToolTip(QuantTableView::tr("Not measured: no %1 row to pair with, or a table written before these "
                                          "values were kept (version 1 or 2)")
                           .arg(other));
    } else if (self) {
        it->setToolTip(QuantTableView::tr("This is %1 itself: 0 by definition").arg(other));
    } else {
        const double z = *err > 0 ? std::fabs(*v) / *err : (*v == 0 ? 0.0 : INFINITY);
        const QString verdict = z > 2 ? (*v < 0 ? QuantTableView::tr("really better than %1").arg(other)
                                                : QuantTableView::tr("really worse than %1").arg(other))
                                      : QuantTableView::tr("not a real difference from %1").arg(other);
        it->setToolTip(QuantTableView::tr("ln(PPL / PPL of %1) = %2 ± %3 on the same tokens: PPL × %4, %5 "
                                          "standard errors from 0, %6")
                           .arg(other, QString::asprintf("%+.4f", *v), QString::asprintf("%.4f", *err),
                                QString::number(std::exp(*v), 'f', 3),
                                std::isfinite(z) ? QString::number(z, 'f', 1) : QStringLiteral("∞"), verdict));
    }
    return it;
}

QColor pointColor() { return QColor(0x3D, 0x85, 0xC6); }
constexpr double kMarkerSize = 9;  // the scatter's disc, px

// A text item's box as QCustomPlot draws it (its corner anchors), pixels.
QRectF itemBox(const QCPItemText* t) {
    return QRectF(t->topLeft->pixelPosition(), t->bottomRight->pixelPosition()).normalized();
}

}  // namespace

QuantTableView::QuantTableView(QWidget* parent) : QWidget(parent) {
    setObjectName("quantTable");
    setAccessibleName(tr("Quantization table"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(buildControls());

    m_caption = new QLabel(this);
    m_caption->setObjectName("quantTableCaption");
    m_caption->setWordWrap(true);
    m_caption->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_caption);

    m_tableWidget = new QTableWidget(0, NColumns, this);
    m_tableWidget->setObjectName("quantTableRows");
    m_tableWidget->setHorizontalHeaderLabels(
        {tr("#"), tr("Scheme"), tr("Bits/weight"), tr("Size"), tr("PPL ± err"), tr("vs reference"), tr("vs INT4 RTN"),
         tr("Mean KL"), tr("Top-1"), tr("First divergence"), tr("Prefill tok/s"), tr("Decode tok/s"), tr("Note")});
    m_tableWidget->horizontalHeaderItem(ColVsRef)->setToolTip(
        tr("ln(PPL / PPL of the reference) on the same tokens, ± the standard error of the per-token differences; "
           "|value| > 2 × error = a real difference"));
    m_tableWidget->horizontalHeaderItem(ColVsRtn)->setToolTip(
        tr("ln(PPL / PPL of INT4 RTN) on the same tokens, ± the standard error of the per-token differences; "
           "negative = better than INT4 RTN; |value| > 2 × error = a real difference"));
    m_tableWidget->horizontalHeaderItem(ColDivergence)
        ->setToolTip(tr("Mean over the prompts of the first generated token where the greedy decode leaves the "
                        "reference's (a prompt that never left counts as all its tokens)"));
    m_tableWidget->horizontalHeaderItem(ColKl)->setToolTip(
        tr("Mean KL(reference || scheme) of the next-token distributions, nats"));
    m_tableWidget->verticalHeader()->setVisible(false);
    m_tableWidget->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_tableWidget->horizontalHeader()->setSortIndicator(ColOrder, Qt::AscendingOrder);
    m_tableWidget->setSortingEnabled(true);
    m_tableWidget->horizontalHeader()->setStretchLastSection(true);

    m_plot = new QCustomPlot(this);
    m_plot->setObjectName("quantTablePlot");
    m_plot->setMinimumHeight(220);
    // The labels are placed in pixels, so again on every replot once the layout is known:
    // after a resize, a change of axes or a new table alike.
    connect(m_plot, &QCustomPlot::afterLayout, this, &QuantTableView::layoutLabels);

    auto* plotBox = new QWidget(this);
    auto* pl = new QVBoxLayout(plotBox);
    pl->setContentsMargins(0, 0, 0, 0);
    auto* axisRow = new QHBoxLayout;
    axisRow->addWidget(new QLabel(tr("Quality axis:"), plotBox));
    m_axisBox = new QComboBox(plotBox);
    m_axisBox->setObjectName("quantTableAxis");
    m_axisBox->addItem(tr("mean KL (log)"));
    m_axisBox->addItem(tr("ΔPPL vs reference"));
    axisRow->addWidget(m_axisBox);
    axisRow->addStretch(1);
    pl->addLayout(axisRow);
    pl->addWidget(m_plot, 1);
    connect(m_axisBox, qOverload<int>(&QComboBox::currentIndexChanged), this,
            [this](int i) { setQualityAxis(i == 0 ? QualityAxis::MeanKl : QualityAxis::DeltaPpl); });

    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_tableWidget);
    split->addWidget(plotBox);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    layout->addWidget(split, 1);

    fillTable();
    rebuildPlot();
    setReady(false, tr("Waiting for a model…"));
}

QWidget* QuantTableView::buildControls() {
    auto* box = new QWidget(this);
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    m_run = new QPushButton(tr("Run table"), box);
    m_run->setObjectName("quantTableRun");
    m_run->setToolTip(tr("Make every scheme from the loaded model and measure it (minutes: GPTQ and AWQ calibrate)"));
    m_cancel = new QPushButton(tr("Cancel"), box);
    m_cancel->setObjectName("quantTableCancel");
    m_cancel->setEnabled(false);
    m_evalTokens = new QSpinBox(box);
    m_evalTokens->setObjectName("quantTableEvalTokens");
    m_evalTokens->setRange(64, 65536);
    m_evalTokens->setSingleStep(256);
    m_evalTokens->setValue(QuantTableRequest{}.evalTokens);
    m_evalTokens->setPrefix(tr("text "));
    m_evalTokens->setSuffix(tr(" tokens"));
    m_evalTokens->setToolTip(tr("Tokens of the evaluation text (GPL-3) scored for perplexity, KL and top-1"));
    m_calibTokens = new QSpinBox(box);
    m_calibTokens->setObjectName("quantTableCalibTokens");
    m_calibTokens->setRange(16, 65536);
    m_calibTokens->setSingleStep(128);
    m_calibTokens->setValue(QuantTableRequest{}.calibTokens);
    m_calibTokens->setPrefix(tr("calibration "));
    m_calibTokens->setSuffix(tr(" tokens"));
    m_calibTokens->setToolTip(tr("Tokens of the calibration text (Apache-2.0) for GPTQ and AWQ"));
    m_speed = new QCheckBox(tr("Speed"), box);
    m_speed->setObjectName("quantTableSpeed");
    m_speed->setChecked(true);
    m_speed->setToolTip(tr("Time prefill (pp512) and decode (tg128) of every scheme"));
    m_speedRuns = new QSpinBox(box);
    m_speedRuns->setObjectName("quantTableSpeedRuns");
    m_speedRuns->setRange(1, 20);
    m_speedRuns->setValue(QuantTableRequest{}.speedRuns);
    m_speedRuns->setSuffix(tr(" runs"));
    m_speedRuns->setToolTip(
        tr("Timed runs of each speed: the table shows their mean ± sd, the cell's tooltip each run"));
    connect(m_speed, &QCheckBox::toggled, m_speedRuns, &QWidget::setEnabled);
    auto* load = new QPushButton(tr("Load JSON…"), box);
    load->setObjectName("quantTableLoad");
    auto* csv = new QPushButton(tr("CSV…"), box);
    csv->setObjectName("quantTableExportCsv");
    csv->setToolTip(tr("Export the table as CSV"));
    auto* json = new QPushButton(tr("JSON…"), box);
    json->setObjectName("quantTableExportJson");
    json->setToolTip(tr("Export the table as JSON (kvscope-quant-table)"));
    auto* png = new QPushButton(tr("PNG…"), box);
    png->setObjectName("quantTableExportPng");
    png->setToolTip(tr("Save the view (table and plot) as a picture"));
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_run, m_cancel, m_evalTokens, m_calibTokens, m_speed, m_speedRuns})
        row->addWidget(w);
    row->addStretch(1);
    row->addWidget(new QLabel(tr("Export:"), box));
    for (QWidget* w : std::initializer_list<QWidget*>{csv, json, png, load}) row->addWidget(w);
    v->addLayout(row);

    auto* row2 = new QHBoxLayout;
    m_progress = new QProgressBar(box);
    m_progress->setObjectName("quantTableProgress");
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(false);
    m_progress->setMaximumWidth(fontMetrics().averageCharWidth() * 24);
    m_status = new QLabel(box);
    m_status->setObjectName("status");
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    row2->addWidget(m_progress);
    row2->addWidget(m_status, 1);
    v->addLayout(row2);

    connect(m_run, &QPushButton::clicked, this, [this] { Q_EMIT runRequested(request()); });
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        m_status->setText(tr("Cancelling at the next step…"));
        m_cancel->setEnabled(false);
        Q_EMIT cancelRequested();
    });
    connect(load, &QPushButton::clicked, this, [this] {
        const QString p = askPath(tr("Load a quantization table"), tr("JSON (*.json)"), false);
        if (!p.isEmpty()) Q_EMIT loadJsonRequested(p);
    });
    connect(csv, &QPushButton::clicked, this, [this] {
        const QString p = askPath(tr("Export the table as CSV"), tr("CSV (*.csv)"), true);
        if (!p.isEmpty()) Q_EMIT exportCsvRequested(p);
    });
    connect(json, &QPushButton::clicked, this, [this] {
        const QString p = askPath(tr("Export the table as JSON"), tr("JSON (*.json)"), true);
        if (!p.isEmpty()) Q_EMIT exportJsonRequested(p);
    });
    connect(png, &QPushButton::clicked, this, [this] { exportPngAsked(); });
    return box;
}

QString QuantTableView::askPath(const QString& title, const QString& filter, bool save) {
    return save ? QFileDialog::getSaveFileName(this, title, QString(), filter)
                : QFileDialog::getOpenFileName(this, title, QString(), filter);
}

void QuantTableView::exportPngAsked() {
    const QString p = askPath(tr("Save the view as PNG"), tr("PNG (*.png)"), true);
    if (p.isEmpty()) return;
    showStatus(savePng(p) ? tr("Saved %1").arg(p) : tr("Could not write %1").arg(p));
}

bool QuantTableView::savePng(const QString& path) { return grab().save(path, "PNG"); }

QuantTableRequest QuantTableView::request() const {
    QuantTableRequest r;
    r.evalTokens = m_evalTokens->value();
    r.calibTokens = m_calibTokens->value();
    r.speed = m_speed->isChecked();
    r.speedRuns = m_speedRuns->value();
    return r;
}

void QuantTableView::setTable(const QuantTableInfo& table) {
    m_table = table;
    fillTable();
    rebuildPlot();
}

void QuantTableView::fillTable() {
    QString cap;
    if (!m_table.rows.isEmpty()) {
        cap = tr("Model: %1").arg(m_table.model);
        if (m_table.nParams) cap += tr(" (%1 M parameters)").arg(double(*m_table.nParams) / 1e6, 0, 'f', 1);
        if (!m_table.machine.isEmpty()) cap += tr(" · measured on %1").arg(m_table.machine);
    } else {
        cap = tr("No table yet: Run table measures every scheme on the loaded model, or load a saved one.");
    }
    m_caption->setText(cap);

    m_tableWidget->setSortingEnabled(false);
    m_tableWidget->setRowCount(int(m_table.rows.size()));
    for (int i = 0; i < m_table.rows.size(); ++i) {
        const QuantTableRowInfo& r = m_table.rows[i];
        m_tableWidget->setItem(i, ColOrder, new NumberItem(QString::number(i + 1), double(i + 1)));
        auto* scheme = textItem(r.label.isEmpty() ? r.scheme : r.label);
        scheme->setToolTip(r.scheme);
        scheme->setData(Qt::UserRole, r.scheme);
        m_tableWidget->setItem(i, ColScheme, scheme);
        m_tableWidget->setItem(i, ColBits, new NumberItem(num(r.bitsPerWeight, 2), r.bitsPerWeight));
        std::optional<double> bytes;
        if (r.sizeBytes) bytes = double(*r.sizeBytes);
        m_tableWidget->setItem(i, ColSize, new NumberItem(num(bytes, 1, tr(" MiB"), 1.0 / 1048576.0), bytes));
        const QString ppl = r.ppl ? num(r.ppl, 3) + (r.pplErr ? QStringLiteral(" ± ") + num(r.pplErr, 3) : QString())
                                  : QStringLiteral("–");
        m_tableWidget->setItem(i, ColPpl, new NumberItem(ppl, r.ppl));
        m_tableWidget->setItem(i, ColVsRef,
                               pairedItem(r.lnPplVsRef, r.lnPplVsRefErr, tr("the reference"), r.scheme == "ref"));
        m_tableWidget->setItem(i, ColVsRtn,
                               pairedItem(r.lnPplVsRtn, r.lnPplVsRtnErr, tr("INT4 RTN"), r.scheme == "int4-rtn"));
        m_tableWidget->setItem(i, ColKl, new NumberItem(num(r.meanKl, 5), r.meanKl));
        m_tableWidget->setItem(i, ColTop1,
                               new NumberItem(num(r.top1, 2, QStringLiteral(" %"), 100.0), scaled(r.top1, 100.0)));
        m_tableWidget->setItem(i, ColDivergence, new NumberItem(num(r.firstDivergence, 1), r.firstDivergence));
        m_tableWidget->setItem(i, ColPrefill, speedItem(r.prefillTokS, r.prefillSpread));
        m_tableWidget->setItem(i, ColDecode, speedItem(r.decodeTokS, r.decodeSpread));
        auto* note = textItem(r.note);
        note->setToolTip(r.note);
        m_tableWidget->setItem(i, ColNote, note);
    }
    m_tableWidget->setSortingEnabled(true);
    m_tableWidget->resizeColumnsToContents();
}

QStringList QuantTableView::schemeOrder() const {
    QStringList out;
    for (int i = 0; i < m_tableWidget->rowCount(); ++i)
        if (const QTableWidgetItem* it = m_tableWidget->item(i, ColScheme)) out << it->data(Qt::UserRole).toString();
    return out;
}

void QuantTableView::setQualityAxis(QualityAxis axis) {
    if (m_axis == axis) return;
    m_axis = axis;
    const int idx = axis == QualityAxis::MeanKl ? 0 : 1;
    if (m_axisBox->currentIndex() != idx) m_axisBox->setCurrentIndex(idx);
    rebuildPlot();
}

void QuantTableView::rebuildPlot() {
    m_plot->clearGraphs();
    m_plot->clearItems();
    m_labels.clear();
    m_refCaption = nullptr;
    m_points.clear();
    const QPalette pal = palette();
    const QFont small = scaledFont(font(), 0.9);
    styleAxes(m_plot->axisRect(), pal, small);
    m_plot->setBackground(pal.color(QPalette::Base));
    const bool kl = m_axis == QualityAxis::MeanKl;
    const QuantTableRowInfo* ref = m_table.reference();
    const bool hasRefPpl = ref && ref->ppl;
    const double refPpl = hasRefPpl ? *ref->ppl : 0.0;
    for (const QuantTableRowInfo& r : m_table.rows) {
        if (!r.decodeTokS) continue;
        std::optional<double> x;
        if (kl) {
            if (r.meanKl && *r.meanKl > 0) x = r.meanKl;  // the log axis has no 0: the reference is a line
        } else if (r.ppl && hasRefPpl) {
            x = *r.ppl - refPpl;
        }
        if (x) m_points.push_back({*x, *r.decodeTokS, r.label.isEmpty() ? r.scheme : r.label});
    }
    QCPAxis* xa = m_plot->xAxis;
    QCPAxis* ya = m_plot->yAxis;
    if (kl) {
        xa->setScaleType(QCPAxis::stLogarithmic);
        xa->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
        xa->setLabel(tr("mean KL(reference ‖ scheme), nats (log)"));
    } else {
        xa->setScaleType(QCPAxis::stLinear);
        xa->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
        xa->setLabel(tr("ΔPPL vs the reference"));
    }
    ya->setLabel(tr("decode tok/s"));

    QCPGraph* g = m_plot->addGraph();
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, pointColor(), pointColor(), kMarkerSize));
    // sorted by x: QCPGraph keeps its data in key order anyway
    QVector<Point> sorted = m_points;
    std::sort(sorted.begin(), sorted.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    for (const Point& p : sorted) g->addData(p.x, p.y);
    const QColor text = pal.color(QPalette::Text);
    // Each label's place is found in pixels at the next replot (layoutLabels).
    for (const Point& p : sorted) {
        PointLabel l{new QCPItemText(m_plot), new QCPItemLine(m_plot), p.x, p.y};
        l.text->position->setType(QCPItemPosition::ptAbsolute);
        l.text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        l.text->setPadding(QMargins());
        l.text->setText(p.label);
        l.text->setFont(small);
        l.text->setColor(text);
        l.leader->start->setType(QCPItemPosition::ptAbsolute);
        l.leader->end->setType(QCPItemPosition::ptAbsolute);
        l.leader->setPen(QPen(mixColors(pal.color(QPalette::Base), text, 0.5), 1));
        l.leader->setVisible(false);
        m_labels.push_back(l);
    }

    double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    if (!sorted.isEmpty()) {
        xlo = sorted.front().x, xhi = sorted.back().x;
        yhi = 0;
        for (const Point& p : sorted) yhi = std::max(yhi, p.y);
    }
    if (ref && ref->decodeTokS) yhi = std::max(yhi, *ref->decodeTokS);
    if (kl) {
        if (sorted.isEmpty()) xlo = 1e-4, xhi = 1;
        xa->setRange(xlo / 2.5, xhi * 2.5);
    } else {
        const double pad = std::max(1e-3, (xhi - xlo) * 0.12);
        xa->setRange(std::min(xlo, 0.0) - pad, std::max(xhi, 0.0) + pad);
    }
    ya->setRange(ylo, yhi > 0 ? yhi * 1.2 : 1);
    if (kl && ref && ref->decodeTokS) {
        auto* line = new QCPItemStraightLine(m_plot);
        line->point1->setCoords(xa->range().lower, *ref->decodeTokS);
        line->point2->setCoords(xa->range().upper, *ref->decodeTokS);
        QPen pen(mixColors(pal.color(QPalette::Base), text, 0.6), 1, Qt::DashLine);
        line->setPen(pen);
        auto* t = new QCPItemText(m_plot);
        t->position->setType(QCPItemPosition::ptPlotCoords);
        t->position->setCoords(xa->range().lower, *ref->decodeTokS);
        t->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
        t->setPadding(QMargins(4, 0, 0, 3));
        t->setText(tr("reference (KL 0)"));
        t->setFont(small);
        t->setColor(text);
        m_refCaption = t;
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void QuantTableView::layoutLabels() {
    if (m_labels.isEmpty()) return;
    LabelPlacementInput in;
    for (const PointLabel& l : m_labels) {
        in.points.push_back({m_plot->xAxis->coordToPixel(l.x), m_plot->yAxis->coordToPixel(l.y)});
        // measured as QCPItemText measures the text it draws
        const QRect box = QFontMetrics(l.text->font())
                              .boundingRect(0, 0, 0, 0, Qt::TextDontClip | l.text->textAlignment(), l.text->text());
        in.sizes.push_back(QSizeF(box.size()));
    }
    in.markerRadius = kMarkerSize / 2 + 0.5;
    in.gap = 4;
    in.bounds = QRectF(m_plot->axisRect()->rect()).adjusted(1, 1, -1, -1);
    if (m_refCaption) in.obstacles.push_back(itemBox(m_refCaption));
    const QVector<PlacedLabel> placed = kvs::ui::placeLabels(in);
    for (int i = 0; i < m_labels.size() && i < placed.size(); ++i) {
        const PointLabel& l = m_labels[i];
        l.text->position->setCoords(placed[i].rect.topLeft());
        l.leader->setVisible(placed[i].leader);
        if (placed[i].leader) {
            // from the marker's edge to the box's nearest point
            const QPointF p = in.points[i], q = nearestPointOn(placed[i].rect, p);
            const double len = std::hypot(q.x() - p.x(), q.y() - p.y());
            const double k = len > 0 ? std::min(1.0, in.markerRadius / len) : 0.0;
            l.leader->start->setCoords(p + (q - p) * k);
            l.leader->end->setCoords(q);
        }
    }
}

QVector<QuantTableView::LabelBox> QuantTableView::labelBoxes() const {
    QVector<LabelBox> out;
    for (const PointLabel& l : m_labels)
        out.push_back({l.text->text(), itemBox(l.text),
                       QPointF(m_plot->xAxis->coordToPixel(l.x), m_plot->yAxis->coordToPixel(l.y)),
                       l.leader->visible()});
    return out;
}

void QuantTableView::setReady(bool ready, const QString& why) {
    m_ready = ready;
    if (!m_running) m_run->setEnabled(ready);
    if (!ready && !why.isEmpty()) m_status->setText(why);
    else if (ready && !m_running && m_status->text() == tr("Waiting for a model…"))
        m_status->clear();
}

void QuantTableView::setRunning(bool running) {
    m_running = running;
    m_run->setEnabled(!running && m_ready);
    m_cancel->setEnabled(running);
}

void QuantTableView::setProgress(const QString& stage, double fraction) {
    if (!m_running) setRunning(true);
    m_progress->setValue(int(std::lround(std::clamp(fraction, 0.0, 1.0) * 1000)));
    m_status->setText(QStringLiteral("%1 % · %2").arg(int(std::floor(fraction * 100))).arg(stage));
}

void QuantTableView::finish(const QString& message) {
    setRunning(false);
    m_progress->setValue(1000);
    m_status->setText(message);
}

void QuantTableView::showError(const QString& message) {
    setRunning(false);
    m_status->setText(message);
}

void QuantTableView::showStatus(const QString& message) { m_status->setText(message); }

QString QuantTableView::statusText() const { return m_status->text(); }

void QuantTableView::changeEvent(QEvent* ev) {
    QWidget::changeEvent(ev);
    if (ev->type() == QEvent::PaletteChange || ev->type() == QEvent::FontChange) rebuildPlot();
}

}  // namespace kvs::ui
