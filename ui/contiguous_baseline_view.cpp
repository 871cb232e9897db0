#include "ui/contiguous_baseline_view.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "ui/kv_block_paint.h"
#include "ui/request_colors.h"

namespace kvs::ui {

using namespace blockpaint;

ContiguousBaselineView::ContiguousBaselineView(QWidget* parent) : QWidget(parent) {
    setObjectName("contiguousBaseline");
    setAccessibleName(tr("Contiguous reservation baseline"));
    setAccessibleDescription(tr("The same requests if each reserved the maximum model length contiguously"));
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

QSize ContiguousBaselineView::sizeHint() const {
    const int h = fontMetrics().height();
    return {h * 18, h * 20};
}

QSize ContiguousBaselineView::minimumSizeHint() const {
    const int h = fontMetrics().height();
    return {h * 5, h * 4};
}

void ContiguousBaselineView::setFrame(const EngineFrame& frame, const KvMapStats& stats) {
    const bool shape = frame.blocks.size() != m_frame.blocks.size();
    m_frame = frame;
    m_stats = stats;
    if (shape) relayout();
    update();
}

void ContiguousBaselineView::setSelectedRequest(qint64 id) {
    if (id == m_selected) return;
    m_selected = id;
    update();
}

void ContiguousBaselineView::relayout() {
    const int fh = fontMetrics().height();
    m_geo = BlockGridGeometry::fit(static_cast<int>(m_frame.blocks.size()), 0, width(), height(), 0, 2, fh * 3);
    m_background = QPixmap();
}

void ContiguousBaselineView::resizeEvent(QResizeEvent* e) {
    relayout();
    QWidget::resizeEvent(e);
}

QVector<QRectF> ContiguousBaselineView::tokenSpan(qint64 a, qint64 b) const {
    QVector<QRectF> out;
    const double bs = std::max(1, m_frame.blockSize);
    const int cols = m_geo.cols, pitch = m_geo.pitch();
    double u = a / bs;
    const double end = b / bs;
    while (u < end - 1e-9) {
        const int row = static_cast<int>(std::floor(u / cols + 1e-9));
        const double rowEnd = std::min(end, double(row + 1) * cols);
        const double x0 = m_geo.margin + (u - double(row) * cols) * pitch;
        double x1 = m_geo.margin + (rowEnd - double(row) * cols) * pitch;
        if (rowEnd >= double(row + 1) * cols - 1e-9) x1 -= m_geo.gap;
        out.push_back(QRectF(x0, m_geo.margin + row * pitch, std::max(0.5, x1 - x0), m_geo.cell));
        u = rowEnd;
    }
    return out;
}

qint64 ContiguousBaselineView::requestAt(QPoint p) const {
    const qint64 len = m_stats.maxModelLen;
    for (int k = 0; k < m_stats.contiguousFit; ++k)
        for (const QRectF& r : tokenSpan(k * len, (k + 1) * len))
            if (r.adjusted(0, 0, m_geo.gap, m_geo.gap).contains(p)) return m_stats.holders[k];
    return kNoRequest;
}

QRectF ContiguousBaselineView::reservationRect(qint64 id) const {
    const int k = static_cast<int>(m_stats.holders.indexOf(id));
    if (k < 0 || k >= m_stats.contiguousFit) return {};
    const QVector<QRectF> s = tokenSpan(k * qint64(m_stats.maxModelLen), (k + 1) * qint64(m_stats.maxModelLen));
    return s.isEmpty() ? QRectF() : s.first();
}

QString ContiguousBaselineView::tooltipAt(QPoint p) const {
    const qint64 id = requestAt(p);
    const qint64 len = m_stats.maxModelLen;
    if (id != kNoRequest) {
        const int k = static_cast<int>(m_stats.holders.indexOf(id));
        const qint64 used = std::min<qint64>(m_stats.holderTokens[k], len);
        QString name = tr("req %1").arg(id);
        for (const RequestRow& r : m_frame.requests)
            if (r.id == id && !r.label.isEmpty()) name = r.label.toHtmlEscaped();
        return tr("<qt><b>%1</b> · contiguous reservation of %2 token slots<br>holds %3 tokens · "
                  "%4 reserved but unused (%5)</qt>")
            .arg(name, numberText(len), numberText(used), numberText(len - used),
                 percentText(len > 0 ? 1.0 - double(used) / len : 0));
    }
    if (m_geo.cellAt(p, m_stats.nBlocks) < 0 || len <= 0) return {};
    const qint64 capacity = qint64(m_stats.nBlocks) * std::max(1, m_stats.blockSize);
    const qint64 left = capacity - m_stats.contiguousFit * len;
    QString s = left >= len ? tr("<qt>Free: %1 token slots, room for %2 more %3-slot reservation(s)")
                                  .arg(numberText(left), numberText(left / len), numberText(len))
                            : tr("<qt>Free: %1 token slots, too few for another %2-slot reservation")
                                  .arg(numberText(left), numberText(len));
    if (m_stats.holders.size() > m_stats.contiguousFit)
        s += tr("<br>%1 of the %2 requests holding KV would not fit")
                 .arg(m_stats.holders.size() - m_stats.contiguousFit)
                 .arg(m_stats.holders.size());
    return s + QStringLiteral("</qt>");
}

// The pool with every reservation's tint and hatching: it changes only when requests come,
// go or are selected, so it is kept as a pixmap; each frame draws the used parts over it.
void ContiguousBaselineView::rebuildBackground(const QVector<qint64>& key) {
    const qreal dpr = devicePixelRatioF();
    const CellStyle st(palette());
    m_background = QPixmap(size() * dpr);
    m_background.setDevicePixelRatio(dpr);
    m_background.fill(st.base);
    m_backgroundKey = key;
    m_hatch = hatchTile(st.hatchInk(), std::max(4, m_geo.cell / 3 + 2), dpr);
    QPainter p(&m_background);
    for (int i = 0; i < m_frame.blocks.size(); ++i) p.fillRect(m_geo.cellRect(i), st.freeFill);
    const qint64 len = m_stats.maxModelLen;
    if (len <= 0) return;
    QColor dim = st.base;
    dim.setAlphaF(0.72f);
    for (int k = 0; k < m_stats.contiguousFit; ++k) {
        const qint64 id = m_stats.holders[k];
        for (const QRectF& r : tokenSpan(k * len, (k + 1) * len)) {
            p.fillRect(r, st.usedTint(requestColor(id)));
            drawHatch(p, r, m_hatch);
            if (m_selected != kNoRequest && id != m_selected) p.fillRect(r, dim);
        }
    }
}

void ContiguousBaselineView::paintEvent(QPaintEvent*) {
    const qreal dpr = devicePixelRatioF();
    const CellStyle st(palette());
    const qint64 len = m_stats.maxModelLen;
    QVector<qint64> key{len, m_stats.contiguousFit, m_selected, m_stats.blockSize};
    key += m_stats.holders.mid(0, m_stats.contiguousFit);
    if (m_background.isNull() || m_background.devicePixelRatio() != dpr || m_background.size() != size() * dpr ||
        key != m_backgroundKey)
        rebuildBackground(key);
    QPainter p(this);
    p.drawPixmap(0, 0, m_background);
    if (len <= 0 || m_frame.blocks.isEmpty()) {
        p.setPen(st.secondaryText);
        p.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap,
                   m_frame.blocks.isEmpty() ? tr("No KV pool yet") : tr("The model's maximum length is not known"));
        return;
    }
    for (int k = 0; k < m_stats.contiguousFit; ++k) {
        const qint64 id = m_stats.holders[k];
        const QColor c = m_selected != kNoRequest && id != m_selected ? mixColors(requestColor(id), st.base, 0.72)
                                                                      : requestColor(id);
        const qint64 start = k * len, used = std::min<qint64>(m_stats.holderTokens[k], len);
        for (const QRectF& r : tokenSpan(start, start + used)) p.fillRect(r, c);
        if (k > 0) {  // where a reservation starts: a notch, so neighbours of one colour stay apart
            const QRectF first = tokenSpan(start, start + 1).value(0);
            p.fillRect(QRectF(first.left(), first.top(), std::max(1, m_geo.gap), first.height()), st.base);
        }
    }
    if (m_selected != kNoRequest) {
        const int k = static_cast<int>(m_stats.holders.indexOf(m_selected));
        if (k >= 0 && k < m_stats.contiguousFit) {
            p.setPen(QPen(st.text, m_geo.cell >= 10 ? 2 : 1));
            p.setBrush(Qt::NoBrush);
            for (const QRectF& r : tokenSpan(k * len, (k + 1) * len)) p.drawRect(r.adjusted(-0.5, -0.5, 0.5, 0.5));
        }
    }
}

void ContiguousBaselineView::mousePressEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return QWidget::mousePressEvent(e);
    Q_EMIT requestClicked(requestAt(e->position().toPoint()));
}

bool ContiguousBaselineView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* he = static_cast<QHelpEvent*>(e);
        const QString t = tooltipAt(he->pos());
        if (t.isEmpty()) QToolTip::hideText();
        else
            QToolTip::showText(he->globalPos(), t, this);
        return true;
    }
    return QWidget::event(e);
}

void ContiguousBaselineView::changeEvent(QEvent* e) {
    if (e->type() == QEvent::PaletteChange || e->type() == QEvent::StyleChange) m_background = QPixmap();
    if (e->type() == QEvent::FontChange) relayout();
    update();
    QWidget::changeEvent(e);
}
}  // namespace kvs::ui
