#include "ui/quant_compare_view.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBrowser>
#include <QTextCursor>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/qcp.h"
#include "ui/request_colors.h"

namespace kvs::ui {

namespace {

QFont scaled(const QFont& f, double k) {
    QFont s = f;
    if (f.pointSizeF() > 0) s.setPointSizeF(f.pointSizeF() * k);
    else if (f.pixelSize() > 0)
        s.setPixelSize(std::max(8, int(f.pixelSize() * k)));
    return s;
}

QColor klColor() { return QColor(0xE1, 0x3B, 0x3E); }
QColor top1Color() { return QColor(0x3D, 0x85, 0xC6); }

// Decode tokens per second from the single-token passes (index >= 1) of one side.
double decodeTokPerS(const QVector<QuantTokenEvent>& evs, bool variant) {
    double ms = 0;
    int n = 0;
    for (const QuantTokenEvent& e : evs) {
        if (e.index == 0) continue;  // the prompt's pass
        ms += variant ? e.variantMs : e.refMs;
        ++n;
    }
    return ms > 0 ? n * 1000.0 / ms : 0;
}

QString mib(qint64 bytes) { return QString::number(bytes / 1048576.0, 'f', 1) + QStringLiteral(" MiB"); }

}  // namespace

QuantCompareView::QuantCompareView(QWidget* parent) : QWidget(parent) {
    setObjectName("quantCompare");
    setAccessibleName(tr("Quantization compare"));
    buildControls();
    buildFigures();
    buildPlot();
    restyle();
    updateFigures();
    setReady(false, tr("Waiting for a model…"));
}

void QuantCompareView::buildControls() {
    m_scheme = new QComboBox(this);
    m_scheme->setObjectName("quantScheme");
    m_scheme->setToolTip(tr("The variant: the loaded model's linears re-quantized with this scheme"));
    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setObjectName("quantMaxTokens");
    m_maxTokens->setRange(1, 2048);
    m_maxTokens->setValue(64);
    m_maxTokens->setSuffix(tr(" tokens"));
    m_temperature = new QDoubleSpinBox(this);
    m_temperature->setObjectName("quantTemperature");
    m_temperature->setRange(0, 2);
    m_temperature->setSingleStep(0.1);
    m_temperature->setDecimals(2);
    m_temperature->setSpecialValueText(tr("greedy"));
    m_temperature->setPrefix(tr("T "));
    m_temperature->setToolTip(tr("0: greedy. Above 0 both models sample with the same seed"));
    m_seed = new QSpinBox(this);
    m_seed->setObjectName("quantSeed");
    m_seed->setRange(0, 1 << 30);
    m_seed->setValue(1);
    m_seed->setPrefix(tr("seed "));
    m_seed->setEnabled(false);
    m_compare = new QPushButton(tr("Compare"), this);
    m_compare->setObjectName("quantCompareButton");
    m_stop = new QPushButton(tr("Stop"), this);
    m_stop->setObjectName("quantStopButton");
    m_busy = new QProgressBar(this);
    m_busy->setObjectName("quantBusy");
    m_busy->setRange(0, 0);
    m_busy->setMaximumWidth(fontMetrics().averageCharWidth() * 12);
    m_busy->setVisible(false);
    m_prompt = new QPlainTextEdit(this);
    m_prompt->setObjectName("quantPrompt");
    m_prompt->setPlaceholderText(tr("A prompt for both models (sent as a chat message)"));
    m_prompt->setFixedHeight(fontMetrics().lineSpacing() * 3 + 12);
    m_status = new QLabel(this);
    m_status->setObjectName("status");
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

    connect(m_temperature, qOverload<double>(&QDoubleSpinBox::valueChanged), this,
            [this](double t) { m_seed->setEnabled(t > 0); });
    connect(m_compare, &QPushButton::clicked, this, [this] {
        if (m_prompt->toPlainText().trimmed().isEmpty()) {
            showError(tr("Type a prompt first."));
            return;
        }
        Q_EMIT compareRequested(request());
    });
    connect(m_stop, &QPushButton::clicked, this, [this] {
        setRunning(false);
        m_status->setText(tr("Stopped."));
        Q_EMIT stopRequested();
    });
}

QLabel* QuantCompareView::addFigure(const char* name) {
    auto* l = new QLabel(QStringLiteral("–"), this);
    l->setObjectName(QLatin1String(name));
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_figures << l;
    return l;
}

// One column per model: its label over its text, its figures under it.
QWidget* QuantCompareView::buildColumns(const QFont& bold) {
    m_refText = new QTextBrowser(this);
    m_refText->setObjectName("quantRefText");
    m_refText->setAccessibleName(tr("Reference model's text"));
    m_varText = new QTextBrowser(this);
    m_varText->setObjectName("quantVariantText");
    m_varText->setAccessibleName(tr("Variant model's text"));
    auto* columns = new QWidget(this);
    auto* cl = new QGridLayout(columns);
    cl->setContentsMargins(0, 0, 0, 0);
    cl->setVerticalSpacing(fontMetrics().height() / 6);
    const char* names[2][4] = {{"refLabel", "refWeights", "refBits", "refSpeed"},
                               {"variantLabel", "variantWeights", "variantBits", "variantSpeed"}};
    const char* captions[] = {QT_TR_NOOP("weights"), QT_TR_NOOP("bits/weight (linears)"),
                              QT_TR_NOOP("decode tok/s (this run)")};
    for (int c = 0; c < 2; ++c) {
        QLabel* title = addFigure(names[c][0]);
        title->setFont(bold);
        title->setWordWrap(true);
        title->setAlignment(Qt::AlignLeft | Qt::AlignBottom);
        cl->addWidget(title, 0, c);
        cl->addWidget(c == 0 ? m_refText : m_varText, 1, c);
        // Captions over values: narrow enough for a docked column.
        auto* figs = new QGridLayout;
        figs->setVerticalSpacing(0);
        figs->setHorizontalSpacing(fontMetrics().averageCharWidth() * 3);
        for (int f = 0; f < 3; ++f) {
            auto* cap = new QLabel(tr(captions[f]), this);
            cap->setForegroundRole(QPalette::PlaceholderText);
            cap->setFont(scaled(font(), 0.85));
            figs->addWidget(cap, 0, f);
            figs->addWidget(addFigure(names[c][f + 1]), 1, f);
        }
        figs->setColumnStretch(3, 1);
        cl->addLayout(figs, 2, c);
        cl->setColumnStretch(c, 1);
    }
    cl->setRowStretch(1, 1);
    return columns;
}

void QuantCompareView::buildFigures() {
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Variant:"), this));
    top->addWidget(m_scheme);
    top->addWidget(m_maxTokens);
    top->addWidget(m_temperature);
    top->addWidget(m_seed);
    top->addStretch(1);
    top->addWidget(m_compare);
    top->addWidget(m_stop);

    QFont bold = font();
    bold.setBold(true);
    auto* summary = new QHBoxLayout;
    for (const char* n : {"divergence", "top1", "kl"}) summary->addWidget(addFigure(n), 1);
    for (QLabel* l : m_figures) {
        l->setFont(bold);
        l->setWordWrap(true);  // long figures wrap instead of widening the dock
    }

    QWidget* columns = buildColumns(bold);
    m_forcedCaption = new QLabel(this);
    m_forcedCaption->setObjectName("teacherForcedCaption");
    m_forcedCaption->setWordWrap(true);
    m_forcedCaption->setFont(scaled(font(), 0.9));
    m_forcedCaption->setText(
        tr("After the first divergence the variant is fed the reference's tokens (teacher-forced): "
           "its column then shows, in italics, what it would pick at each position of the "
           "reference's text, each pick set off by a thin bar (it continues the reference's words, "
           "not the pick before it); tinted picks differ from the reference's token."));

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    lay->addWidget(m_prompt);
    auto* statusRow = new QHBoxLayout;
    statusRow->addWidget(m_busy);
    statusRow->addWidget(m_status, 1);
    lay->addLayout(statusRow);
    lay->addLayout(summary);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->setObjectName("quantSplit");
    auto* textPane = new QWidget(split);
    auto* tl = new QVBoxLayout(textPane);
    tl->setContentsMargins(0, 0, 0, 0);
    tl->addWidget(columns, 1);
    tl->addWidget(m_forcedCaption);
    split->addWidget(textPane);
    lay->addWidget(split, 1);
}

void QuantCompareView::buildPlot() {
    m_plot = new QCustomPlot(this);
    m_plot->setObjectName("quantPlot");
    m_plot->setAccessibleName(tr("KL divergence per token and running top-1 agreement"));
    m_plot->setMinimumHeight(fontMetrics().height() * 14);
    QCPAxisRect* rect = m_plot->axisRect();
    rect->axis(QCPAxis::atRight)->setVisible(true);
    m_kl = m_plot->addGraph(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    m_kl->setName(tr("KL(ref ‖ variant)"));
    m_top1 = m_plot->addGraph(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atRight));
    m_top1->setName(tr("top-1 agreement so far"));
    m_top1->setLineStyle(QCPGraph::lsStepLeft);
    rect->axis(QCPAxis::atBottom)->setLabel(tr("generated token"));
    rect->axis(QCPAxis::atLeft)->setLabel(tr("KL (nats)"));
    rect->axis(QCPAxis::atRight)->setLabel(tr("top-1 agree %"));
    rect->axis(QCPAxis::atRight)->setRange(0, 105);
    rect->axis(QCPAxis::atLeft)->setRange(0, 0.1);
    rect->axis(QCPAxis::atBottom)->setRange(-0.5, 8);
    m_divLine = new QCPItemStraightLine(m_plot);
    m_divLine->setVisible(false);
    // The legend in a row under the plot, where it hides no data.
    m_plot->legend->setVisible(true);
    m_plot->axisRect()->insetLayout()->take(m_plot->legend);
    auto* legendRow = new QCPLayoutGrid;
    m_plot->plotLayout()->addElement(1, 0, legendRow);
    legendRow->setMargins(QMargins(6, 0, 6, 4));
    legendRow->addElement(0, 0, m_plot->legend);
    m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    m_plot->plotLayout()->setRowStretchFactor(1, 0.001);
    m_plot->plotLayout()->setRowSpacing(0);
    auto* split = findChild<QSplitter*>("quantSplit");
    split->addWidget(m_plot);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    split->setChildrenCollapsible(false);
}

QSize QuantCompareView::sizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 100, fm.height() * 44};
}

void QuantCompareView::setSchemes(const QStringList& schemes, const QString& current) {
    m_scheme->clear();
    m_scheme->addItems(schemes);
    setScheme(current);
}

QString QuantCompareView::scheme() const { return m_scheme->currentText(); }

void QuantCompareView::setScheme(const QString& scheme) {
    const int i = m_scheme->findText(scheme);
    if (i >= 0) m_scheme->setCurrentIndex(i);
}

QString QuantCompareView::prompt() const { return m_prompt->toPlainText(); }
void QuantCompareView::setPrompt(const QString& prompt) { m_prompt->setPlainText(prompt); }

QuantCompareRequest QuantCompareView::request() const {
    QuantCompareRequest r;
    r.scheme = scheme();
    r.prompt = prompt().trimmed();
    r.maxTokens = m_maxTokens->value();
    r.temperature = m_temperature->value();
    r.seed = m_seed->value();
    return r;
}

void QuantCompareView::setReady(bool ready, const QString& why) {
    m_ready = ready;
    if (!ready && !why.isEmpty()) m_status->setText(why);
    if (ready && !m_running && m_events.isEmpty())
        m_status->setText(tr("Pick a scheme, type a prompt, press Compare."));
    setRunning(m_running && ready);
}

void QuantCompareView::setRunning(bool running) {
    m_running = running;
    m_compare->setEnabled(m_ready && !running);
    m_stop->setEnabled(running);
    m_busy->setVisible(running);
}

void QuantCompareView::setBusy(const QString& what) {
    setRunning(true);
    m_busy->setRange(0, 0);  // busy, no fraction known
    m_status->setText(what);
}

void QuantCompareView::setBuildProgress(const QString& what, double fraction) {
    setRunning(true);
    m_busy->setRange(0, 1000);
    m_busy->setValue(int(std::lround(std::clamp(fraction, 0.0, 1.0) * 1000.0)));
    m_busy->setFormat(QStringLiteral("%1%").arg(int(std::floor(std::clamp(fraction, 0.0, 1.0) * 100.0))));
    m_status->setText(what);
}

void QuantCompareView::clearResult() {
    m_ref = {};
    m_var = {};
    m_events.clear();
    m_firstDivergence = -1;
    m_refText->clear();
    m_varText->clear();
    updateFigures();
    updatePlot();
}

void QuantCompareView::begin(const QuantSideInfo& reference, const QuantSideInfo& variant) {
    clearResult();
    m_ref = reference;
    m_var = variant;
    setRunning(true);
    m_busy->setRange(0, 0);
    m_status->setText(tr("Comparing %1 with %2…").arg(variant.label, reference.label));
    updateFigures();
    updatePlot();
}

void QuantCompareView::appendEvent(const QuantTokenEvent& ev) {
    const bool first = ev.diverged && m_firstDivergence < 0;
    if (first) m_firstDivergence = ev.index;
    m_events.push_back(ev);
    appendPiece(m_refText, ev.refPiece, ev, false);
    appendPiece(m_varText, ev.variantPiece, ev, true);
    updateFigures();
    updatePlot();
}

// One position's text in a column: the first divergence tinted in both columns; the
// variant's teacher-forced picks in italics, tinted where they are not the reference's.
void QuantCompareView::appendPiece(QTextBrowser* column, const QString& text, const QuantTokenEvent& ev, bool variant) {
    if (text.isEmpty()) return;
    const QPalette pal = palette();
    QTextCharFormat fmt;
    QString tip = tr("token %1 · id %2").arg(ev.index).arg(variant ? ev.variantToken : ev.refToken);
    if (ev.index == m_firstDivergence) {
        fmt.setBackground(divergenceColor(pal));
        tip += tr(" · first divergence");
    } else if (variant && ev.teacherForced) {
        fmt.setFontItalic(true);
        if (ev.variantToken != ev.refToken) fmt.setBackground(disagreeColor(pal));
        tip += ev.variantToken == ev.refToken ? tr(" · teacher-forced, same pick as the reference")
                                              : tr(" · teacher-forced, the reference picked id %1").arg(ev.refToken);
    }
    fmt.setToolTip(tip + tr(" · KL %1").arg(ev.kl, 0, 'g', 3));
    QScrollBar* bar = column->verticalScrollBar();
    const bool atEnd = bar->value() >= bar->maximum() - 2;
    QTextCursor cur(column->document());
    cur.movePosition(QTextCursor::End);
    if (variant && ev.teacherForced && ev.index != m_firstDivergence) {
        // A teacher-forced pick continues the reference's text, not the pick before it:
        // a boundary mark keeps "scattered" + "lected" from reading as one word.
        QTextCharFormat mark;
        mark.setForeground(pal.color(QPalette::PlaceholderText));
        mark.setToolTip(tr("token boundary: each teacher-forced pick is its own guess"));
        cur.insertText(QStringLiteral("\u2502"), mark);
    }
    cur.insertText(text, fmt);
    if (atEnd) bar->setValue(bar->maximum());
}

double QuantCompareView::top1Percent() const {
    if (m_events.isEmpty()) return 0;
    const auto n =
        std::count_if(m_events.begin(), m_events.end(), [](const QuantTokenEvent& e) { return e.top1Agree; });
    return 100.0 * double(n) / double(m_events.size());
}

void QuantCompareView::updateFigures() {
    auto set = [this](const char* name, const QString& text) {
        for (QLabel* l : m_figures)
            if (l->objectName() == QLatin1String(name)) l->setText(text);
    };
    set("refLabel", m_ref.label.isEmpty() ? tr("reference") : m_ref.label);
    set("variantLabel", m_var.label.isEmpty() ? tr("variant") : m_var.label);
    set("refWeights", m_ref.weightBytes > 0 ? mib(m_ref.weightBytes) : QStringLiteral("–"));
    set("variantWeights", m_var.weightBytes > 0 ? mib(m_var.weightBytes) : QStringLiteral("–"));
    set("refBits", m_ref.bitsPerWeight > 0 ? QString::number(m_ref.bitsPerWeight, 'f', 2) : QStringLiteral("–"));
    set("variantBits", m_var.bitsPerWeight > 0 ? QString::number(m_var.bitsPerWeight, 'f', 2) : QStringLiteral("–"));
    const double rs = decodeTokPerS(m_events, false), vs = decodeTokPerS(m_events, true);
    set("refSpeed", rs > 0 ? QString::number(rs, 'f', 1) : QStringLiteral("–"));
    set("variantSpeed", vs > 0 ? QString::number(vs, 'f', 1) : QStringLiteral("–"));
    const int n = m_events.size();
    if (n == 0) {
        set("divergence", QString());
        set("top1", QString());
        set("kl", QString());
        return;
    }
    set("divergence", m_firstDivergence >= 0
                          ? tr("first divergence at token %1").arg(m_firstDivergence)
                          : (n == 1 ? tr("no divergence in 1 token") : tr("no divergence in %1 tokens").arg(n)));
    const auto agree =
        std::count_if(m_events.begin(), m_events.end(), [](const QuantTokenEvent& e) { return e.top1Agree; });
    set("top1", tr("top-1 agree %1% (%2/%3)").arg(top1Percent(), 0, 'f', 1).arg(agree).arg(n));
    double sum = 0, mx = 0;
    for (const auto& e : m_events) {
        sum += e.kl;
        mx = std::max(mx, e.kl);
    }
    set("kl", tr("KL mean %1 · max %2 nats").arg(sum / n, 0, 'g', 3).arg(mx, 0, 'g', 3));
}

void QuantCompareView::updatePlot() {
    QVector<double> x, kl, top1;
    int agree = 0;
    double mx = 0;
    for (const auto& e : m_events) {
        x << e.index;
        kl << e.kl;
        agree += e.top1Agree ? 1 : 0;
        top1 << 100.0 * agree / double(x.size());
        mx = std::max(mx, e.kl);
    }
    m_kl->setData(x, kl, true);
    m_top1->setData(x, top1, true);
    QCPAxisRect* rect = m_plot->axisRect();
    rect->axis(QCPAxis::atBottom)->setRange(-0.5, std::max(8.0, x.isEmpty() ? 0.0 : x.back() + 0.5));
    rect->axis(QCPAxis::atLeft)->setRange(0, std::max(0.01, mx * 1.15));
    m_divLine->setVisible(m_firstDivergence >= 0);
    if (m_firstDivergence >= 0) {
        m_divLine->point1->setCoords(m_firstDivergence, 0);
        m_divLine->point2->setCoords(m_firstDivergence, 1);
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void QuantCompareView::finish(const QString& summary) {
    setRunning(false);
    m_status->setText(summary);
}

void QuantCompareView::showError(const QString& message) {
    setRunning(false);
    m_status->setText(tr("<span style=\"color:%1\">%2</span>").arg(klColor().name(), message.toHtmlEscaped()));
}

QTextDocument* QuantCompareView::referenceDocument() const { return m_refText->document(); }
QTextDocument* QuantCompareView::variantDocument() const { return m_varText->document(); }

QString QuantCompareView::figure(const QString& name) const {
    if (name == QLatin1String("status")) return m_status->text();
    for (QLabel* l : m_figures)
        if (l->objectName() == name) return l->text();
    return {};
}

QColor QuantCompareView::divergenceColor(const QPalette& pal) {
    return mixColors(pal.color(QPalette::Base), QColor(0xF2, 0x8E, 0x2B), 0.55);
}

QColor QuantCompareView::disagreeColor(const QPalette& pal) {
    return mixColors(pal.color(QPalette::Base), klColor(), 0.25);
}

void QuantCompareView::restyle() {
    const QPalette pal = palette();
    const QFont small = scaled(font(), 0.85);
    m_plot->setBackground(pal.color(QPalette::Base));
    styleAxes(m_plot->axisRect(), pal, small);
    for (QCPAxis* a : m_plot->axisRect()->axes()) a->setLabelFont(small);
    m_plot->axisRect()->axis(QCPAxis::atRight)->grid()->setVisible(false);
    m_kl->setPen(QPen(klColor(), 1.6));
    QColor fill = klColor();
    fill.setAlpha(40);
    m_kl->setBrush(fill);
    m_kl->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
    m_top1->setPen(QPen(top1Color(), 1.6));
    m_divLine->setPen(QPen(QColor(0xF2, 0x8E, 0x2B), 1.2, Qt::DashLine));
    m_plot->legend->setFont(small);
    m_plot->legend->setTextColor(pal.color(QPalette::Text));
    m_plot->legend->setBrush(pal.color(QPalette::Base));
    m_plot->legend->setBorderPen(Qt::NoPen);
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void QuantCompareView::changeEvent(QEvent* ev) {
    if ((ev->type() == QEvent::PaletteChange || ev->type() == QEvent::StyleChange) && m_divLine) restyle();
    QWidget::changeEvent(ev);
}

}  // namespace kvs::ui
