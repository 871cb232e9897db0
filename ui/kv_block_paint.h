#pragma once
// How one KV block looks, shared by the block grid, the contiguous baseline and the legend:
// colours from the palette (backgrounds, text) and the request colour set (owners), a
// hatching tile at the device's pixel ratio, and the painters of a device and a host cell.
#include <QColor>
#include <QFontMetrics>
#include <QPalette>
#include <QPixmap>

#include "ui/request_colors.h"
#include "ui/view_types.h"

class QPainter;

namespace kvs::ui::blockpaint {

struct CellStyle {
    QColor base, text, freeFill, secondaryText;
    explicit CellStyle(const QPalette& pal)
        : base(pal.color(QPalette::Base)),
          text(pal.color(QPalette::Text)),
          freeFill(mixColors(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.09)),
          secondaryText(mixColors(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.7)) {}
    QColor usedTint(const QColor& owner) const { return fadedColor(owner, base, 0.32); }  // written slots: solid
    QColor cachedFill(const QColor& owner) const { return fadedColor(owner, base, 0.2); }
    QColor hatchInk() const { return QColor(text.red(), text.green(), text.blue(), 120); }
};

// One tile of diagonal hatching, `period` logical pixels square, at the device pixel ratio.
QPixmap hatchTile(const QColor& color, int period, qreal dpr);
// Hatching anchored at the painter's origin, so neighbouring rects continue one pattern.
void drawHatch(QPainter& p, const QRectF& r, const QPixmap& tile);

// One device cell in its state's style; paints the whole rect. free: plain; used: the
// owner's tint with the written part (filled / blockSize, left to right) solid; shared
// (refCount > 1): hatched, with a corner badge (and "×refs" when the cell is large);
// cached: the last owner's faded colour with an outline in its colour.
void drawBlockCell(QPainter& p, const QRect& r, const BlockCell& b, int blockSize, qint64 lastOwner,
                   const CellStyle& st, const QPixmap& hatch, const QFontMetrics& fm);
// One host (swap tier) cell: the owner's colour with a darker band, or plain when free.
void drawHostCell(QPainter& p, const QRect& r, qint64 owner, const CellStyle& st);

QString percentText(double fraction);  // 0.021 -> "2.1%"
QString numberText(qint64 v);          // with the locale's group separators

}  // namespace kvs::ui::blockpaint
