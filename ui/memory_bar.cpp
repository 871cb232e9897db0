#include "ui/memory_bar.h"

#include <QEvent>
#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>

#include "ui/memory_sizing.h"

namespace kvs::ui {

MemoryBar::MemoryBar(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setAccessibleName(tr("Memory split"));
}

void MemoryBar::setSegments(const QVector<Segment>& segments) {
    m_segments = segments;
    setAccessibleDescription(caption());
    update();
}

void MemoryBar::setCapacity(qint64 bytes) {
    m_capacity = std::max<qint64>(0, bytes);
    setAccessibleDescription(caption());
    update();
}

qint64 MemoryBar::total() const {
    qint64 t = 0;
    for (const Segment& s : m_segments) t = MemorySizing::addSaturated(t, std::max<qint64>(0, s.bytes));
    return t;
}

QSize MemoryBar::sizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 60, int(fm.height() * 1.5) + fm.height() + 4};
}
QSize MemoryBar::minimumSizeHint() const { return {QFontMetrics(font()).averageCharWidth() * 20, sizeHint().height()}; }

QRect MemoryBar::barRect() const {
    const QFontMetrics fm(font());
    return QRect(0, 0, width(), int(fm.height() * 1.5));
}

QString MemoryBar::caption() const {
    QStringList parts;
    for (const Segment& s : m_segments)
        parts << QStringLiteral("%1 %2").arg(s.name, MemorySizing::formatBytes(s.bytes));
    QString text = parts.join(QStringLiteral(" · "));
    if (m_segments.size() > 1) text += QStringLiteral(" = ") + MemorySizing::formatBytes(total());
    if (m_capacity > 0) text += tr(" of %1").arg(MemorySizing::formatBytes(m_capacity));
    return text;
}

void MemoryBar::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    const QRectF bar = QRectF(barRect()).adjusted(0.5, 0.5, -0.5, -0.5);
    const qint64 t = total();
    const double scale = double(std::max<qint64>({t, m_capacity, 1}));
    QPainterPath clip;
    clip.addRoundedRect(bar, 3, 3);
    p.fillPath(clip, pal.base());
    p.save();
    p.setClipPath(clip);
    const QFontMetrics fm(font());
    double x = bar.left();
    for (const Segment& s : m_segments) {
        const double w = bar.width() * double(std::max<qint64>(0, s.bytes)) / scale;
        const QRectF r(x, bar.top(), w, bar.height());
        p.fillRect(r, s.color);
        const QString label = QStringLiteral("%1 %2").arg(s.name, MemorySizing::formatBytes(s.bytes));
        if (fm.horizontalAdvance(label) + 8 < w) {
            p.setPen(Qt::white);
            p.drawText(r, Qt::AlignCenter, label);
        } else if (fm.horizontalAdvance(s.name) + 6 < w) {
            p.setPen(Qt::white);
            p.drawText(r, Qt::AlignCenter, s.name);
        }
        x += w;
    }
    if (m_capacity > 0) {
        const double cx = bar.left() + bar.width() * double(m_capacity) / scale;
        if (t > m_capacity) {  // the part that does not fit
            const QRectF over(cx, bar.top(), bar.right() - cx, bar.height());
            QColor c = overColor();
            c.setAlpha(110);
            p.fillRect(over, c);
            p.fillRect(over, QBrush(overColor().darker(130), Qt::BDiagPattern));
        }
        p.restore();
        p.setPen(QPen(pal.color(QPalette::Text), 2));
        p.drawLine(QPointF(cx, bar.top() - 1), QPointF(cx, bar.bottom() + 1));
    } else {
        p.restore();
    }
    p.setPen(QPen(pal.color(QPalette::Mid), 1));
    p.drawRoundedRect(bar, 3, 3);
    p.setPen(pal.color(QPalette::Text));
    const QRectF text(0, bar.bottom() + 2, width(), height() - bar.bottom() - 2);
    p.drawText(text, Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(caption(), Qt::ElideRight, width()));
}

bool MemoryBar::event(QEvent* ev) {
    if (ev->type() == QEvent::ToolTip) {
        QToolTip::showText(static_cast<QHelpEvent*>(ev)->globalPos(), caption(), this);
        return true;
    }
    return QWidget::event(ev);
}

}  // namespace kvs::ui
