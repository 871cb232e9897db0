#include "ui/remote_metrics_view.h"

#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/qcp.h"

namespace kvs::ui {

namespace {

constexpr size_t kMaxPoints = 3600;

QCPAxisRect* addRect(QCustomPlot* plot, int row, const QString& yLabel) {
    auto* r = row == 0 ? plot->axisRect() : new QCPAxisRect(plot);
    if (row > 0) plot->plotLayout()->addElement(row, 0, r);
    r->axis(QCPAxis::atLeft)->setLabel(yLabel);
    r->axis(QCPAxis::atBottom)->setTickLabels(true);
    r->setRangeDrag(Qt::Horizontal);
    r->setRangeZoom(Qt::Horizontal);
    return r;
}

QCPGraph* addGraph(QCustomPlot* plot, QCPAxisRect* r, const QColor& c, const QString& name, bool dashed = false) {
    auto* g = plot->addGraph(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
    QPen pen(c, 1.6);
    if (dashed) pen.setStyle(Qt::DashLine);
    g->setPen(pen);
    g->setName(name);
    g->setLineStyle(QCPGraph::lsLine);
    return g;
}

QString num(double v, int decimals = 0) {
    return std::isfinite(v) ? QString::number(v, 'f', decimals) : QStringLiteral("–");
}
QString ms(double s) {
    return std::isfinite(s) ? QStringLiteral("%1 ms").arg(s * 1000.0, 0, 'f', s < 0.1 ? 1 : 0) : QStringLiteral("–");
}
QString pct(double f) {
    return std::isfinite(f) ? QStringLiteral("%1%").arg(f * 100.0, 0, 'f', 1) : QStringLiteral("–");
}

}  // namespace

RemoteMetricsView::RemoteMetricsView(QWidget* parent) : QWidget(parent) {
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    m_caption = new QLabel(this);
    m_caption->setWordWrap(true);
    m_caption->setObjectName(QStringLiteral("remoteMetricsCaption"));
    m_tiles = new QLabel(this);
    m_tiles->setWordWrap(true);
    m_tiles->setTextFormat(Qt::RichText);
    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #e07070;"));
    m_error->hide();
    m_slots = new QLabel(this);
    m_slots->setTextFormat(Qt::RichText);
    m_slots->setObjectName(QStringLiteral("remoteSlots"));
    m_slots->hide();
    m_plot = new QCustomPlot(this);
    m_plot->setMinimumHeight(360);
    m_plot->plotLayout()->clear();
    m_plot->plotLayout()->addElement(0, 0, new QCPAxisRect(m_plot));
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);

    auto* kv = addRect(m_plot, 0, tr("KV blocks"));
    auto* req = addRect(m_plot, 1, tr("requests"));
    auto* lat = addRect(m_plot, 2, tr("latency (ms)"));
    auto* iter = addRect(m_plot, 3, tr("tokens / step"));
    auto* spec = addRect(m_plot, 4, tr("accepted"));
    spec->axis(QCPAxis::atBottom)->setLabel(tr("draft position"));
    iter->axis(QCPAxis::atBottom)->setLabel(tr("seconds"));
    m_used = addGraph(m_plot, kv, QColor(80, 160, 240), tr("used"));
    m_used->setBrush(QColor(80, 160, 240, 60));
    m_total = addGraph(m_plot, kv, QColor(160, 160, 160), tr("total"), true);
    m_running = addGraph(m_plot, req, QColor(90, 200, 120), tr("running"));
    m_waiting = addGraph(m_plot, req, QColor(230, 170, 60), tr("waiting"));
    m_ttft50 = addGraph(m_plot, lat, QColor(200, 110, 220), tr("TTFT p50"));
    m_ttft99 = addGraph(m_plot, lat, QColor(200, 110, 220), tr("TTFT p99"), true);
    m_tpot50 = addGraph(m_plot, lat, QColor(90, 200, 200), tr("TPOT p50"));
    m_tpot99 = addGraph(m_plot, lat, QColor(90, 200, 200), tr("TPOT p99"), true);
    // Latency points exist only for readings after which requests finished: drawn as dots too.
    for (QCPGraph* g : {m_ttft50, m_ttft99, m_tpot50, m_tpot99})
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
    m_iterTokens = addGraph(m_plot, iter, QColor(240, 120, 90), tr("tokens per iteration"));
    m_specBars = new QCPBars(spec->axis(QCPAxis::atBottom), spec->axis(QCPAxis::atLeft));
    m_specBars->setBrush(QColor(120, 200, 120, 160));
    m_specBars->setPen(QPen(QColor(120, 200, 120)));
    m_specBars->setWidth(0.6);
    spec->axis(QCPAxis::atLeft)->setRange(0, 1);
    for (QCPAxisRect* r : {kv, req, lat, iter}) {
        auto* legend = new QCPLegend;
        r->insetLayout()->addElement(legend, Qt::AlignTop | Qt::AlignLeft);
        legend->setLayer(QStringLiteral("legend"));
        legend->setFont(scaledFont(font(), 0.8));
        legend->setBrush(QColor(255, 255, 255, 20));
        for (int i = 0; i < m_plot->graphCount(); ++i)
            if (m_plot->graph(i)->valueAxis()->axisRect() == r)
                legend->addItem(new QCPPlottableLegendItem(legend, m_plot->graph(i)));
    }
    // The time axes move together.
    for (QCPAxisRect* r : {kv, req, lat})
        connect(r->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged),
                iter->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::setRange));
    connect(iter->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [kv, req, lat](const QCPRange& rg) {
                for (QCPAxisRect* r : {kv, req, lat}) r->axis(QCPAxis::atBottom)->setRange(rg);
            });
    lay->addWidget(m_caption);
    lay->addWidget(m_tiles);
    lay->addWidget(m_error);
    lay->addWidget(m_slots);
    lay->addWidget(m_plot, 1);
    setSource(QString());
}

void RemoteMetricsView::setSource(const QString& source) {
    m_source = source;
    m_caption->setText(captionText());
}

QString RemoteMetricsView::captionText() const {
    if (m_source.isEmpty()) return tr("Remote engine: no remote connection is being watched.");
    return tr("Remote engine (%1): aggregates read from its /metrics every second, not a per-block map; "
              "latency quantiles are of the requests finished between readings.")
        .arg(m_source);
}

void RemoteMetricsView::setError(const QString& message) {
    m_error->setText(message);
    m_error->setVisible(!message.isEmpty());
}

void RemoteMetricsView::clear() {
    m_points.clear();
    setError({});
    redraw();
}

void RemoteMetricsView::appendPoint(const RemoteMetricsPoint& p) {
    if (!m_points.empty() && p.tS <= m_points.back().tS) m_points.clear();
    m_points.push_back(p);
    while (m_points.size() > kMaxPoints) m_points.pop_front();
    setError({});
    redraw();
}

QString RemoteMetricsView::tilesText() const {
    if (m_points.empty()) return tr("waiting for the first reading…");
    const RemoteMetricsPoint& p = m_points.back();
    const QString kv = std::isfinite(p.blocksTotal)
                           ? tr("%1 of %2 blocks (%3)").arg(num(p.blocksUsed), num(p.blocksTotal), pct(p.kvUsage))
                           : pct(p.kvUsage);
    const QString spec =
        std::isfinite(p.specAcceptance)
            ? tr("spec acceptance <b>%1</b> (mean length %2)").arg(pct(p.specAcceptance), num(p.specMeanLength, 2))
            : tr("no speculative decoding reported");
    return tr("KV <b>%1</b> · running <b>%2</b> · waiting <b>%3</b> · prefix hit rate <b>%4</b> (since start %5) · "
              "preemptions <b>%6</b> · generation <b>%7</b> tok/s · since start: TTFT p50 <b>%8</b>, TPOT p50 "
              "<b>%9</b> · "
              "%10")
        .arg(kv, num(p.running), num(p.waiting), pct(p.prefixHitRate), pct(p.prefixHitRateTotal), num(p.preemptions),
             num(p.generationTokPerS, 1), ms(p.ttftP50All), ms(p.tpotP50All))
        .arg(spec);
}

QString RemoteMetricsView::slotsText() const {
    if (m_points.empty() || !m_points.back().hasSlots) return {};
    QString out = tr("<b>slots</b> (llama-server /slots: tokens each slot's task holds of its context)");
    for (const RemoteSlot& s : m_points.back().slots) {
        const int cells = 30;
        const int full = s.nCtx > 0 ? std::clamp(int(std::lround(double(s.used) / s.nCtx * cells)), 0, cells) : 0;
        out += QStringLiteral("<br><tt>#%1 %2%3</tt> %4 / %5 %6")
                   .arg(s.id)
                   .arg(QString(full, QChar(0x2588)), QString(cells - full, QChar(0x2591)))
                   .arg(s.used)
                   .arg(s.nCtx)
                   .arg(s.processing ? tr("processing") : tr("idle"));
    }
    return out;
}

void RemoteMetricsView::redraw() {
    m_tiles->setText(tilesText());
    m_slots->setText(slotsText());
    m_slots->setVisible(!m_slots->text().isEmpty());
    auto fill = [this](QCPGraph* g, auto get, double scale) {
        QVector<double> x, y;
        for (const RemoteMetricsPoint& p : m_points) {
            const double v = get(p);
            x.push_back(p.tS);
            y.push_back(std::isfinite(v) ? v * scale : std::numeric_limits<double>::quiet_NaN());
        }
        g->setData(x, y, true);
    };
    const bool blocks = !m_points.empty() && std::isfinite(m_points.back().blocksTotal);
    m_used->valueAxis()->setLabel(blocks ? tr("KV blocks") : tr("KV used (%)"));
    fill(
        m_used, [blocks](const RemoteMetricsPoint& p) { return blocks ? p.blocksUsed : p.kvUsage * 100.0; }, 1.0);
    fill(
        m_total, [blocks](const RemoteMetricsPoint& p) { return blocks ? p.blocksTotal : 100.0; }, 1.0);
    fill(
        m_running, [](const RemoteMetricsPoint& p) { return p.running; }, 1.0);
    fill(
        m_waiting, [](const RemoteMetricsPoint& p) { return p.waiting; }, 1.0);
    fill(
        m_ttft50, [](const RemoteMetricsPoint& p) { return p.ttftP50; }, 1000.0);
    fill(
        m_ttft99, [](const RemoteMetricsPoint& p) { return p.ttftP99; }, 1000.0);
    fill(
        m_tpot50, [](const RemoteMetricsPoint& p) { return p.tpotP50; }, 1000.0);
    fill(
        m_tpot99, [](const RemoteMetricsPoint& p) { return p.tpotP99; }, 1000.0);
    fill(
        m_iterTokens, [](const RemoteMetricsPoint& p) { return p.tokensPerIteration; }, 1.0);
    QVector<double> pos, rate;
    if (!m_points.empty())
        for (int i = 0; i < m_points.back().specPerPosition.size(); ++i) {
            pos.push_back(i);
            rate.push_back(m_points.back().specPerPosition[i]);
        }
    m_specBars->setData(pos, rate, true);
    m_specBars->keyAxis()->setRange(-0.5, std::max<double>(3.5, double(pos.size()) - 0.5));
    for (QCPGraph* g : {m_used, m_running, m_ttft50, m_iterTokens}) {
        bool found = false;
        QCPRange r = g->getValueRange(found);
        for (int i = 0; i < m_plot->graphCount(); ++i) {
            QCPGraph* o = m_plot->graph(i);
            if (o == g || o->valueAxis() != g->valueAxis()) continue;
            bool f2 = false;
            QCPRange r2 = o->getValueRange(f2);
            if (f2) r = found ? QCPRange(std::min(r.lower, r2.lower), std::max(r.upper, r2.upper)) : r2;
            found = found || f2;
        }
        g->valueAxis()->setRange(0, found ? std::max(1.0, r.upper * 1.15) : 1.0);
    }
    if (!m_points.empty()) {
        const double t1 = m_points.back().tS, t0 = std::max(0.0, t1 - 120.0);
        m_iterTokens->keyAxis()->setRange(t0, std::max(t0 + 10.0, t1 + 1.0));
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace kvs::ui
