#include "ui/metrics_view.h"

#include <QEvent>
#include <QGridLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/qcp.h"
#include "ui/request_colors.h"

#include "ui/memory_bar.h"
#include "ui/memory_sizing.h"

namespace kvs::ui {

namespace {

double orNaN(double v) { return v > 0 ? v : qQNaN(); }

const QColor kRate(0x3E, 0xA8, 0x4F);
const QColor kTtft(0x3D, 0x85, 0xC6);
const QColor kTpot(0xB0, 0x7A, 0xA1);

}  // namespace

MetricsView::MetricsView(QWidget* parent) : QWidget(parent) {
    setObjectName("metricsView");
    setAccessibleName(tr("Serving metrics"));

    auto* tiles = new QGridLayout;
    const auto tile = [&](int col, const QString& caption, const char* name, const QString& tip) {
        auto* cap = new QLabel(caption, this);
        cap->setFont(scaledFont(font(), 0.85));
        cap->setForegroundRole(QPalette::PlaceholderText);
        m_captions << cap;
        auto* value = new QLabel(QStringLiteral("–"), this);
        value->setObjectName(QLatin1String(name));
        QFont big = scaledFont(font(), 1.35);
        big.setBold(true);
        value->setFont(big);
        value->setToolTip(tip);
        value->setAccessibleName(caption);
        value->setTextInteractionFlags(Qt::TextSelectableByMouse);
        tiles->addWidget(cap, 0, col);
        tiles->addWidget(value, 1, col);
        tiles->setColumnStretch(col, 1);
        return value;
    };
    m_rateValue = tile(0, tr("Throughput"), "metricsRate", tr("Output tokens per second over the engine's window"));
    m_ttftValue =
        tile(1, tr("Time to first token"), "metricsTtft", tr("TTFT: arrival to first output token, p50 / p99"));
    m_tpotValue =
        tile(2, tr("Time per output token"), "metricsTpot", tr("TPOT: mean gap between output tokens, p50 / p99"));
    m_memValue = tile(3, tr("Memory"), "metricsMemory", tr("Weights + KV cache + scratch"));

    m_bar = new MemoryBar(this);
    m_bar->setObjectName("metricsMemoryBar");
    m_plot = new QCustomPlot(this);
    m_plot->setObjectName("metricsPlots");
    m_plot->setAccessibleName(tr("Throughput, latency and memory over time"));
    buildPlots();

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(tiles);
    lay->addWidget(m_bar);
    lay->addWidget(m_plot, 1);
    updateTiles();
}

QSize MetricsView::sizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 90, fm.height() * 36};
}
QSize MetricsView::minimumSizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 40, fm.height() * 20};
}

QString MetricsView::formatMs(double ms) {
    if (!(ms > 0)) return QStringLiteral("–");
    if (ms < 10) return tr("%1 ms").arg(ms, 0, 'f', 1);
    if (ms < 10000) return tr("%1 ms").arg(ms, 0, 'f', 0);
    return tr("%1 s").arg(ms / 1000, 0, 'f', 1);
}

QString MetricsView::formatRate(double r) { return tr("%1 tok/s").arg(r, 0, 'f', r < 1000 ? 1 : 0); }

void MetricsView::buildPlots() {
    m_plot->plotLayout()->clear();
    m_plot->plotLayout()->setRowSpacing(0);
    auto* margins = new QCPMarginGroup(m_plot);
    const QStringList labels = {tr("tok/s"), tr("TTFT, ms"), tr("TPOT, ms"), tr("memory, MiB")};
    QCPAxisRect* rects[4];
    for (int i = 0; i < 4; ++i) {
        auto* r = new QCPAxisRect(m_plot, true);
        m_plot->plotLayout()->addElement(i, 0, r);
        r->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
        r->axis(QCPAxis::atBottom)->setTickLabels(i == 3);
        r->axis(QCPAxis::atLeft)->setLabel(labels[i]);
        r->axis(QCPAxis::atLeft)->ticker()->setTickCount(3);
        r->setRangeDrag(Qt::Horizontal);
        r->setRangeZoom(Qt::Horizontal);
        r->setRangeDragAxes(r->axis(QCPAxis::atBottom), nullptr);
        r->setRangeZoomAxes(r->axis(QCPAxis::atBottom), nullptr);
        rects[i] = r;
    }
    rects[3]->axis(QCPAxis::atBottom)->setLabel(tr("time since engine start, s"));
    const auto graph = [&](int rect, const QString& name) {
        auto* g = new QCPGraph(rects[rect]->axis(QCPAxis::atBottom), rects[rect]->axis(QCPAxis::atLeft));
        g->setName(name);
        return g;
    };
    m_tok = graph(0, tr("tok/s"));
    m_ttft50 = graph(1, tr("p50"));
    m_ttft99 = graph(1, tr("p99"));
    m_tpot50 = graph(2, tr("p50"));
    m_tpot99 = graph(2, tr("p99"));
    m_memWeights = graph(3, tr("weights"));
    m_memKv = graph(3, tr("KV"));
    m_memScratch = graph(3, tr("scratch"));
    m_memKv->setChannelFillGraph(m_memWeights);
    m_memScratch->setChannelFillGraph(m_memKv);
    for (QCPGraph* g : {m_memWeights, m_memKv, m_memScratch}) g->setLineStyle(QCPGraph::lsStepLeft);

    const std::pair<int, QList<QCPGraph*>> legendsOf[] = {
        {1, {m_ttft50, m_ttft99}}, {2, {m_tpot50, m_tpot99}}, {3, {m_memScratch, m_memKv, m_memWeights}}};
    for (const auto& [rect, items] : legendsOf) {
        auto* leg = new QCPLegend;
        rects[rect]->insetLayout()->addElement(leg, Qt::AlignTop | Qt::AlignLeft);
        leg->setLayer("legend");
        leg->setFillOrder(QCPLayoutGrid::foColumnsFirst);
        leg->setWrap(items.size());
        leg->setMargins(QMargins(4, 1, 4, 1));
        for (QCPGraph* g : items) g->addToLegend(leg);
    }
    // One time axis: moving any plot moves all; a user move stops following.
    for (int i = 0; i < 4; ++i) {
        connect(rects[i]->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
                [this, rects, i](const QCPRange& r) {
                    for (int j = 0; j < 4; ++j)
                        if (j != i) rects[j]->axis(QCPAxis::atBottom)->setRange(r);
                    if (!m_settingRange) setFollowing(false);
                });
    }
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    m_plot->setNotAntialiasedElements(QCP::aeFills);  // filled areas cost most of a replot
    m_plot->setPlottingHint(QCP::phFastPolylines, true);
    connect(m_plot, &QCustomPlot::mouseDoubleClick, this, [this] { setFollowing(true); });
    m_plot->installEventFilter(this);
    m_replotTimer = new QTimer(this);
    m_replotTimer->setSingleShot(true);
    m_replotTimer->setInterval(100);
    connect(m_replotTimer, &QTimer::timeout, this, [this] { m_plot->replot(QCustomPlot::rpQueuedReplot); });
    stylePlots();
}

void MetricsView::stylePlots() {
    const QPalette pal = palette();
    const QColor text = pal.color(QPalette::Text), base = pal.color(QPalette::Base);
    const QFont small = scaledFont(font(), 0.85);
    m_plot->setBackground(base);
    for (QCPAxisRect* r : m_plot->axisRects()) {
        styleAxes(r, pal, small);
        for (QCPAxis* a : r->axes()) a->setLabelFont(small);
        QColor legendBg = base;
        legendBg.setAlpha(210);
        for (int i = 0; i < r->insetLayout()->elementCount(); ++i) {
            if (auto* l = qobject_cast<QCPLegend*>(r->insetLayout()->elementAt(i))) {
                l->setBrush(legendBg);
                l->setBorderPen(Qt::NoPen);
                l->setFont(small);
                l->setTextColor(text);
                const int h = QFontMetrics(small).height();
                l->setIconSize(h, h * 2 / 3);
            }
        }
    }
    QColor fill = kRate;
    fill.setAlpha(50);
    m_tok->setPen(QPen(kRate, 1.6));
    m_tok->setBrush(fill);
    m_ttft50->setPen(QPen(kTtft, 1.6));
    m_ttft99->setPen(QPen(kTtft, 1.3, Qt::DashLine));
    m_tpot50->setPen(QPen(kTpot, 1.6));
    m_tpot99->setPen(QPen(kTpot, 1.3, Qt::DashLine));
    const std::pair<QCPGraph*, QColor> mem[] = {{m_memWeights, MemoryBar::weightsColor()},
                                                {m_memKv, MemoryBar::kvColor()},
                                                {m_memScratch, MemoryBar::scratchColor()}};
    for (const auto& [g, c] : mem) {
        g->setPen(QPen(c.darker(115), 1));
        QColor f = c;
        f.setAlpha(170);
        g->setBrush(f);
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void MetricsView::appendPoint(const MetricsPoint& p) {
    if (!m_points.empty() && p.tMs <= m_points.back().tMs) clear();
    m_points.push_back(p);
    const double total = double(p.weightBytes + p.kvBytes + p.scratchBytes);
    if (m_memUnit < double(1 << 30) && total > 8.0 * (1 << 30)) {
        m_memUnit = double(1 << 30);
        rebuildMemorySeries();
    } else {
        addToPlots(p);
    }
    if (int(m_points.size()) > m_maxPoints) {
        m_points.pop_front();
        const double before = m_points.front().tMs / 1000.0;
        for (int i = 0; i < m_plot->graphCount(); ++i) m_plot->graph(i)->data()->removeBefore(before);
    }
    updateTiles();
    if (m_following) followRange();
    if (!m_replotTimer->isActive()) m_replotTimer->start();  // at most 10 replots a second
    emitStatus();
}

void MetricsView::addToPlots(const MetricsPoint& p) {
    const double t = p.tMs / 1000.0;
    m_tok->addData(t, p.tokPerS);
    m_ttft50->addData(t, orNaN(p.ttftP50Ms));
    m_ttft99->addData(t, orNaN(p.ttftP99Ms));
    m_tpot50->addData(t, orNaN(p.tpotP50Ms));
    m_tpot99->addData(t, orNaN(p.tpotP99Ms));
    m_memWeights->addData(t, p.weightBytes / m_memUnit);
    m_memKv->addData(t, (p.weightBytes + p.kvBytes) / m_memUnit);
    m_memScratch->addData(t, (p.weightBytes + p.kvBytes + p.scratchBytes) / m_memUnit);
}

void MetricsView::rebuildMemorySeries() {
    for (int i = 0; i < m_plot->graphCount(); ++i) m_plot->graph(i)->data()->clear();
    for (const MetricsPoint& p : m_points) addToPlots(p);
    m_memWeights->keyAxis()
        ->axisRect()
        ->axis(QCPAxis::atLeft)
        ->setLabel(m_memUnit >= double(1 << 30) ? tr("memory, GiB") : tr("memory, MiB"));
}

void MetricsView::clear() {
    m_points.clear();
    for (int i = 0; i < m_plot->graphCount(); ++i) m_plot->graph(i)->data()->clear();
    m_memUnit = double(1 << 20);
    rebuildMemorySeries();
    setFollowing(true);
    updateTiles();
    m_plot->replot(QCustomPlot::rpQueuedReplot);
    emitStatus();
}

void MetricsView::setKvUsage(double fraction) {
    m_kvUsage = fraction;
    emitStatus();
}

void MetricsView::setMemoryCapacity(qint64 bytes) {
    m_capacity = bytes;
    m_bar->setCapacity(bytes);
}

void MetricsView::setMaxPoints(int n) { m_maxPoints = std::max(2, n); }

void MetricsView::setFollowing(bool follow) {
    if (m_following == follow) return;
    m_following = follow;
    if (follow) {
        followRange();
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }
}

void MetricsView::followRange() {
    m_settingRange = true;
    const auto rects = m_plot->axisRects();
    if (!m_points.empty()) {
        const double first = m_points.front().tMs / 1000.0, last = m_points.back().tMs / 1000.0;
        rects[0]->axis(QCPAxis::atBottom)->setRange(first, std::max(last, first + 1));
    }
    // y ranges from what is kept: from zero, with room for the legends.
    const auto fit = [](QCPGraph* a, QCPGraph* b, double room) {
        bool found = false;
        QCPRange r = a->data()->valueRange(found);
        double hi = found ? r.upper : 1;
        if (b) {
            r = b->data()->valueRange(found);
            if (found) hi = std::max(hi, r.upper);
        }
        a->valueAxis()->setRange(0, std::max(hi, 1e-9) * room);
    };
    fit(m_tok, nullptr, 1.15);
    fit(m_ttft50, m_ttft99, 1.3);
    fit(m_tpot50, m_tpot99, 1.3);
    fit(m_memScratch, nullptr, 1.35);
    m_settingRange = false;
}

void MetricsView::updateTiles() {
    const MetricsPoint* p = lastPoint();
    if (!p) {
        for (QLabel* l : {m_rateValue, m_ttftValue, m_tpotValue, m_memValue}) l->setText(QStringLiteral("–"));
        m_bar->setSegments({});
        return;
    }
    m_rateValue->setText(formatRate(p->tokPerS));
    m_ttftValue->setText(tr("%1 · p99 %2").arg(formatMs(p->ttftP50Ms), formatMs(p->ttftP99Ms)));
    m_tpotValue->setText(tr("%1 · p99 %2").arg(formatMs(p->tpotP50Ms), formatMs(p->tpotP99Ms)));
    m_memValue->setText(MemorySizing::formatBytes(p->weightBytes + p->kvBytes + p->scratchBytes));
    m_bar->setSegments({{tr("weights"), p->weightBytes, MemoryBar::weightsColor()},
                        {tr("KV"), p->kvBytes, MemoryBar::kvColor()},
                        {tr("scratch"), p->scratchBytes, MemoryBar::scratchColor()}});
}

QString MetricsView::statusText() const {
    const MetricsPoint* p = lastPoint();
    if (!p) return {};
    QStringList parts;
    parts << formatRate(p->tokPerS);
    if (p->ttftP50Ms > 0) parts << tr("TTFT p50 %1").arg(formatMs(p->ttftP50Ms));
    if (m_kvUsage >= 0) parts << tr("KV %1%").arg(std::lround(m_kvUsage * 100));
    else
        parts << tr("KV %1").arg(MemorySizing::formatBytes(p->kvBytes));
    return parts.join(QStringLiteral(" · "));
}

void MetricsView::emitStatus() {
    const QString s = statusText();
    if (s == m_lastStatus) return;
    m_lastStatus = s;
    Q_EMIT statusTextChanged(s);
}

QString MetricsView::toolTipAtTime(double seconds) const {
    if (m_points.empty()) return {};
    auto it = std::lower_bound(m_points.begin(), m_points.end(), seconds * 1000.0,
                               [](const MetricsPoint& p, double ms) { return p.tMs < ms; });
    if (it == m_points.end()) --it;
    else if (it != m_points.begin() && seconds * 1000.0 - std::prev(it)->tMs < it->tMs - seconds * 1000.0)
        --it;
    const MetricsPoint& p = *it;
    return tr("t = %1 s\n%2\nTTFT p50 %3 · p99 %4\nTPOT p50 %5 · p99 %6\nweights %7 · KV %8 · scratch %9")
               .arg(p.tMs / 1000.0, 0, 'f', 1)
               .arg(formatRate(p.tokPerS), formatMs(p.ttftP50Ms), formatMs(p.ttftP99Ms), formatMs(p.tpotP50Ms),
                    formatMs(p.tpotP99Ms), MemorySizing::formatBytes(p.weightBytes),
                    MemorySizing::formatBytes(p.kvBytes), MemorySizing::formatBytes(p.scratchBytes)) +
           tr("\n(drag or wheel to look back, double-click to follow)");
}

bool MetricsView::eventFilter(QObject* obj, QEvent* ev) {
    if (obj == m_plot && ev->type() == QEvent::ToolTip) {
        auto* he = static_cast<QHelpEvent*>(ev);
        const QCPAxisRect* r = m_plot->axisRectAt(he->pos());
        const QString text = r ? toolTipAtTime(r->axis(QCPAxis::atBottom)->pixelToCoord(he->pos().x())) : QString();
        if (text.isEmpty()) QToolTip::hideText();
        else
            QToolTip::showText(he->globalPos(), text, m_plot);
        return true;
    }
    return QWidget::eventFilter(obj, ev);
}

void MetricsView::changeEvent(QEvent* ev) {
    if (ev->type() == QEvent::PaletteChange || ev->type() == QEvent::FontChange) {
        if (m_plot) stylePlots();
    }
    QWidget::changeEvent(ev);
}

}  // namespace kvs::ui
