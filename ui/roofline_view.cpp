#include "ui/roofline_view.h"

#include <QDateTime>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMouseEvent>
#include <QPushButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>

#include "ui/qcp.h"

namespace kvs::ui {

namespace {
const QStringList& opOrder() {
    static const QStringList ops = {"qkv",       "attn_out", "ffn_gate_up", "ffn_down",
                                    "attention", "lm_head",  "elementwise"};
    return ops;
}
QString si(double v, const QString& unit) {  // 1.23 G<unit>
    const char* p[] = {"", "k", "M", "G", "T"};
    int i = 0;
    while (std::abs(v) >= 1000 && i < 4) v /= 1000, ++i;
    return QString::number(v, 'g', 3) + " " + p[i] + unit;
}
}  // namespace

QColor RooflineView::opColor(const QString& op) {
    static const QHash<QString, QColor> c = {
        {"qkv", QColor(0x4e, 0x79, 0xa7)},       {"attn_out", QColor(0x76, 0xb7, 0xb2)},
        {"ffn_gate_up", QColor(0xe1, 0x57, 0x59)}, {"ffn_down", QColor(0xf2, 0x8e, 0x2b)},
        {"attention", QColor(0x59, 0xa1, 0x4f)}, {"lm_head", QColor(0xb0, 0x7a, 0xa1)},
        {"elementwise", QColor(0x9c, 0x75, 0x5f)}};
    return c.value(op, QColor(0x88, 0x88, 0x88));
}

RooflineView::RooflineView(QWidget* parent) : QWidget(parent) {
    m_plot = new QCustomPlot(this);
    m_plot->setObjectName("rooflinePlot");
    m_plot->setMinimumHeight(240);  // a dock squeezed by others still shows the plot
    m_roofLabel = new QLabel(this);
    m_roofLabel->setObjectName("roofText");
    m_roofLabel->setWordWrap(true);
    m_roofLabel->setTextFormat(Qt::RichText);
    m_measure = new QPushButton(tr("Measure again"), this);
    m_measure->setObjectName("remeasureButton");
    m_measure->setToolTip(tr("Run the roof micro-benchmark again (about a second): peak GFLOP/s of the best "
                             "matmul kernel on all threads, and a streaming read's GB/s"));
    connect(m_measure, &QPushButton::clicked, this, &RooflineView::remeasureRequested);
    auto* top = new QHBoxLayout;
    top->addWidget(m_roofLabel, 1);
    top->addWidget(m_measure, 0, Qt::AlignTop);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    lay->addLayout(top);
    lay->addWidget(m_plot, 1);
    for (QCPAxis* a : {m_plot->xAxis, m_plot->yAxis}) {
        a->setScaleType(QCPAxis::stLogarithmic);
        QSharedPointer<QCPAxisTickerLog> t(new QCPAxisTickerLog);
        a->setTicker(t);
        a->setNumberFormat("gb");
    }
    m_plot->xAxis->setLabel(tr("arithmetic intensity (FLOP / byte moved)"));
    m_plot->yAxis->setLabel(tr("achieved GFLOP/s"));
    // The legend in a row under the plot, so it hides no point.
    m_plot->legend->setVisible(true);
    auto* legendRow = new QCPLayoutGrid;
    m_plot->plotLayout()->addElement(1, 0, legendRow);
    legendRow->addElement(0, 0, m_plot->legend);
    m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    m_plot->legend->setWrap(4);
    m_plot->plotLayout()->setRowStretchFactor(1, 0.001);
    m_plot->setMouseTracking(true);
    m_plot->installEventFilter(this);
    rebuild();
}

void RooflineView::setFrame(const RooflineFrame& frame) {
    m_frame = frame;
    if (isVisible()) rebuild();
    else
        m_dirty = true;
}

void RooflineView::showEvent(QShowEvent* ev) {
    QWidget::showEvent(ev);
    if (m_dirty) rebuild();
    if (!m_roof.valid() && m_measuring.isEmpty()) Q_EMIT roofWanted();
}

void RooflineView::setRoof(const MachineRoofInfo& roof) {
    m_roof = roof;
    m_measuring.clear();
    rebuild();
}

void RooflineView::setMeasuring(const QString& what) {
    m_measuring = what;
    m_measure->setEnabled(what.isEmpty());
    m_roofLabel->setText(roofText());
}

QString RooflineView::roofText() const {
    QString s;
    if (m_roof.valid())
        s = tr("Roof measured on this machine: <b>%1 GFLOP/s</b> peak (%2 matmul, %3 threads), <b>%4 GB/s</b> "
               "streaming read; ridge at <b>%5 FLOP/byte</b>.")
                .arg(m_roof.peakGflops, 0, 'f', 1)
                .arg(m_roof.kernel.toHtmlEscaped())
                .arg(m_roof.threads)
                .arg(m_roof.memGbps, 0, 'f', 1)
                .arg(m_roof.ridge(), 0, 'f', 2);
    else
        s = tr("No roof measured yet.");
    if (!m_measuring.isEmpty()) s += " <i>" + m_measuring.toHtmlEscaped() + "</i>";
    s += "<br>" + tr("▲ prefill step · ● decode step (b = decode batch); hover a point for its numbers.");
    return s;
}

QVector<QPointF> RooflineView::roofLine() const {
    if (!m_roof.valid()) return {};
    const double r = m_roof.ridge();
    const double x0 = std::min(r / 1000, 0.01), x1 = std::max(r * 1000, 10000.0);
    return {{x0, m_roof.memGbps * x0}, {r, m_roof.peakGflops}, {x1, m_roof.peakGflops}};
}

QString RooflineView::pointToolTip(int i) const {
    if (i < 0 || i >= m_points.size()) return {};
    const Point& p = m_points[i];
    const RooflineOp& o = p.src;
    QString head = p.prefill ? tr("%1 · prefill step (%2 tokens)").arg(p.op).arg(p.batch)
                             : tr("%1 · decode step, batch %2").arg(p.op).arg(p.batch);
    QString s = head + "\n" +
                tr("FLOPs %1 · bytes %2\nAI %3 FLOP/byte · %4 ms · %5 GFLOP/s")
                    .arg(si(o.flops, ""), si(o.bytes, "B"))
                    .arg(o.intensity(), 0, 'g', 3)
                    .arg(o.ms, 0, 'f', 3)
                    .arg(o.gflops(), 0, 'f', 2);
    if (m_roof.valid()) {
        const double att = std::min(m_roof.peakGflops, o.intensity() * m_roof.memGbps);
        s += "\n" + tr("%1 % of the roof here (%2 GFLOP/s attainable, %3-bound)")
                        .arg(100 * o.gflops() / att, 0, 'f', 0)
                        .arg(att, 0, 'f', 1)
                        .arg(o.intensity() < m_roof.ridge() ? tr("memory") : tr("compute"));
    }
    return s;
}

void RooflineView::rebuild() {
    m_dirty = false;
    m_plot->clearGraphs();
    m_plot->clearItems();
    m_points.clear();
    const QPalette pal = palette();
    const QColor text = pal.color(QPalette::Text);
    m_plot->setBackground(pal.color(QPalette::Base));
    m_plot->legend->setBrush(pal.color(QPalette::Base));
    m_plot->legend->setTextColor(text);
    m_plot->legend->setFont(scaledFont(font(), 0.85));
    styleAxes(m_plot->axisRect(), pal, scaledFont(font(), 0.85));
    m_roofLabel->setText(roofText());

    double xmin = 1e30, xmax = 0, ymin = 1e30, ymax = 0;
    auto grow = [&](double x, double y) {
        xmin = std::min(xmin, x), xmax = std::max(xmax, x), ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    };
    for (const RooflineStep& s : m_frame.steps)
        for (const RooflineOp& o : s.ops) {
            if (o.flops <= 0 || o.bytes <= 0 || o.ms <= 0) continue;
            m_points.push_back({o.intensity(), o.gflops(), o.op, s.prefill, s.prefill ? s.tokens : s.decodeTokens, o});
            grow(o.intensity(), o.gflops());
        }
    if (m_roof.valid()) {
        grow(m_roof.ridge(), m_roof.peakGflops);
        auto* roof = m_plot->addGraph();
        roof->setName(tr("roof (measured)"));
        roof->setPen(QPen(text, 2));
        for (const QPointF& p : roofLine()) roof->addData(p.x(), p.y());
        auto* ridge = new QCPItemStraightLine(m_plot);
        ridge->point1->setCoords(m_roof.ridge(), 1e-9);
        ridge->point2->setCoords(m_roof.ridge(), 1e12);
        ridge->setPen(QPen(mixColors(pal.color(QPalette::Base), text, 0.5), 1, Qt::DashLine));
        auto* label = new QCPItemText(m_plot);
        label->position->setCoords(m_roof.ridge(), m_roof.peakGflops);
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
        label->setText(tr(" ridge %1 FLOP/B · %2 GFLOP/s").arg(m_roof.ridge(), 0, 'f', 2).arg(m_roof.peakGflops, 0, 'f', 0));
        label->setColor(text);
        label->setFont(scaledFont(font(), 0.85));
    }
    for (const QString& op : opOrder())
        for (bool prefill : {false, true}) {
            QCPGraph* g = nullptr;
            for (const Point& p : m_points) {
                if (p.op != op || p.prefill != prefill) continue;
                if (!g) {
                    g = m_plot->addGraph();
                    g->setName(op);
                    g->setLineStyle(QCPGraph::lsNone);
                    const QColor c = opColor(op);
                    g->setPen(QPen(c.darker(130), 1));
                    g->setScatterStyle(QCPScatterStyle(prefill ? QCPScatterStyle::ssTriangle : QCPScatterStyle::ssDisc,
                                                       c.darker(130), c, prefill ? 11 : 8));
                    if (prefill) g->removeFromLegend();
                }
                g->addData(p.x, p.y);
                if (!prefill && op == "ffn_gate_up") {
                    auto* t = new QCPItemText(m_plot);
                    t->position->setCoords(p.x, p.y);
                    t->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
                    t->setText(QString("b=%1").arg(p.batch));
                    t->setColor(text);
                    t->setFont(scaledFont(font(), 0.8));
                    t->setPadding(QMargins(0, 0, 0, 6));
                }
            }
        }
    if (xmax <= 0) xmin = 0.1, xmax = 100, ymin = 0.1, ymax = 100;
    m_plot->xAxis->setRange(xmin / 3, xmax * 3);
    m_plot->yAxis->setRange(ymin / 3, ymax * 3);
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

int RooflineView::pointNear(const QPoint& pixel) const {
    int best = -1;
    double bestD = 10 * 10;  // within 10 px
    for (int i = 0; i < m_points.size(); ++i) {
        const double px = m_plot->xAxis->coordToPixel(m_points[i].x), py = m_plot->yAxis->coordToPixel(m_points[i].y);
        const double d = (px - pixel.x()) * (px - pixel.x()) + (py - pixel.y()) * (py - pixel.y());
        if (d < bestD) bestD = d, best = i;
    }
    return best;
}

bool RooflineView::eventFilter(QObject* obj, QEvent* ev) {
    if (obj == m_plot && ev->type() == QEvent::MouseMove) {
        const auto* me = static_cast<QMouseEvent*>(ev);
        const int i = pointNear(me->position().toPoint());
        if (i >= 0) QToolTip::showText(me->globalPosition().toPoint(), pointToolTip(i), m_plot);
        else
            QToolTip::hideText();
    }
    return QWidget::eventFilter(obj, ev);
}

void RooflineView::changeEvent(QEvent* ev) {
    QWidget::changeEvent(ev);
    if (ev->type() == QEvent::PaletteChange || ev->type() == QEvent::FontChange) rebuild();
}

}  // namespace kvs::ui
