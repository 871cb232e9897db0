#include "ui/kv_block_paint.h"

#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "ui/kv_map_stats.h"

namespace kvs::ui::blockpaint {

QPixmap hatchTile(const QColor& color, int period, qreal dpr) {
    QPixmap pm(QSize(period, period) * dpr);
    pm.setDevicePixelRatio(dpr);
    pm.fill(Qt::transparent);
    QPainter p(&pm);
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(QPen(color, std::max(1.0, period / 5.0)));
    for (int k = -1; k <= 1; ++k)  // the main diagonal and the two corner pieces: seamless
        p.drawLine(QPointF(k * period, period), QPointF(k * period + period, 0));
    return pm;
}

void drawHatch(QPainter& p, const QRectF& r, const QPixmap& tile) {
    const qreal period = tile.width() / tile.devicePixelRatio();
    p.drawTiledPixmap(r, tile, QPointF(std::fmod(r.x(), period), std::fmod(r.y(), period)));
}

QString percentText(double v) { return QStringLiteral("%1%").arg(v * 100.0, 0, 'f', 1); }

QString numberText(qint64 v) { return QLocale().toString(v); }

void drawBlockCell(QPainter& p, const QRect& r, const BlockCell& b, int blockSize, qint64 lastOwner,
                   const CellStyle& st, const QPixmap& hatch, const QFontMetrics& fm) {
    switch (b.state) {
        case BlockState::Free: p.fillRect(r, st.freeFill); return;
        case BlockState::Cached: {
            const QColor oc = lastOwner != kNoRequest ? requestColor(lastOwner) : st.secondaryText;
            p.fillRect(r, st.cachedFill(oc));
            const int w = r.width() >= 14 ? 2 : 1;
            if (r.width() >= 4) {
                p.fillRect(QRect(r.left(), r.top(), r.width(), w), oc);
                p.fillRect(QRect(r.left(), r.bottom() - w + 1, r.width(), w), oc);
                p.fillRect(QRect(r.left(), r.top(), w, r.height()), oc);
                p.fillRect(QRect(r.right() - w + 1, r.top(), w, r.height()), oc);
            }
            return;
        }
        case BlockState::Swapped:
            p.fillRect(r, st.freeFill);
            drawHatch(p, r, hatch);
            return;
        case BlockState::Freed: {  // free, with a dashed outline and a cross in the colour of who gave it back
            p.fillRect(r, st.freeFill);
            const QColor oc = lastOwner != kNoRequest ? requestColor(lastOwner) : st.secondaryText;
            if (r.width() >= 4) {
                p.save();
                p.setPen(QPen(oc, r.width() >= 14 ? 2 : 1, Qt::DashLine));
                p.drawRect(r.adjusted(0, 0, -1, -1));
                p.setPen(QPen(oc, 1));
                const int m = std::max(1, r.width() / 4);
                p.drawLine(r.left() + m, r.top() + m, r.right() - m, r.bottom() - m);
                p.drawLine(r.left() + m, r.bottom() - m, r.right() - m, r.top() + m);
                p.restore();
            }
            return;
        }
        case BlockState::Used: break;
    }
    const qint64 owner = !b.owners.isEmpty() ? b.owners.first() : lastOwner;
    const QColor c = owner != kNoRequest ? requestColor(owner) : st.secondaryText;
    const double f = blockSize > 0 ? std::clamp(double(b.filled) / blockSize, 0.0, 1.0) : 1.0;
    if (f < 1.0) p.fillRect(r, st.usedTint(c));
    if (f > 0.0) p.fillRect(QRectF(r.x(), r.y(), r.width() * f, r.height()), c);
    if (b.refCount > 1) {  // shared: hatched, with a corner badge (and the count when it fits)
        drawHatch(p, r, hatch);
        const qreal t = std::max(3.0, r.width() * 0.38);
        QPainterPath tri;
        tri.moveTo(r.right() + 1 - t, r.top());
        tri.lineTo(r.right() + 1, r.top());
        tri.lineTo(r.right() + 1, r.top() + t);
        tri.closeSubpath();
        p.fillPath(tri, st.text);
        if (r.height() >= fm.height() * 1.6) {
            p.setPen(contrastingTextColor(c));
            p.drawText(r.adjusted(0, 0, -2, 0), Qt::AlignRight | Qt::AlignBottom,
                       QStringLiteral("×%1").arg(b.refCount));
        }
    }
}

void drawHostCell(QPainter& p, const QRect& r, qint64 owner, const CellStyle& st) {
    if (owner == kNoRequest) {
        p.fillRect(r, st.freeFill);
        return;
    }
    const QColor c = requestColor(owner);
    p.fillRect(r, c);
    // a darker band at the bottom: "parked in host memory"
    p.fillRect(QRect(r.left(), r.bottom() - std::max(1, r.height() / 4) + 1, r.width(), std::max(1, r.height() / 4)),
               c.darker(150));
}

}  // namespace kvs::ui::blockpaint
