#pragma once
// QCustomPlot's header says `signals` and `foreach`; KV Scope builds with QT_NO_KEYWORDS,
// so the words are mapped to their Q_ forms around the include. Include this, never
// <qcustomplot.h> directly.
#define signals Q_SIGNALS
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef signals
#undef foreach

#include "ui/request_colors.h"

namespace kvs::ui {

// The font scaled by k (point or pixel sized), at least 8 px: captions and big figures.
inline QFont scaledFont(const QFont& f, double k) {
    QFont s = f;
    if (f.pointSizeF() > 0) s.setPointSizeF(f.pointSizeF() * k);
    else if (f.pixelSize() > 0)
        s.setPixelSize(std::max(8, int(f.pixelSize() * k)));
    return s;
}

// The views' plot look, from the palette: axes, ticks and tick labels in the text colour
// (axes faded towards the background), a faint grid without a zero line, no sub-ticks.
inline void styleAxes(QCPAxisRect* rect, const QPalette& pal, const QFont& small) {
    const QColor text = pal.color(QPalette::Text), base = pal.color(QPalette::Base);
    const QColor axisColor = mixColors(base, text, 0.45), grid = mixColors(base, text, 0.12);
    for (QCPAxis* a : rect->axes()) {
        a->setBasePen(QPen(axisColor, 1));
        a->setTickPen(QPen(axisColor, 1));
        a->setSubTickPen(QPen(axisColor, 1));
        a->setTickLabelColor(text);
        a->setTickLabelFont(small);
        a->setLabelColor(text);
        a->grid()->setPen(QPen(grid, 1));
        a->grid()->setZeroLinePen(Qt::NoPen);
        a->setSubTicks(false);
    }
}

}  // namespace kvs::ui
