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
