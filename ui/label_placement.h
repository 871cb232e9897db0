#pragma once
// Where a scatter plot's point labels go so that no label covers another label or any
// point's marker, and every label stays inside the plot's area: a pure function over pixel
// rectangles (no widget, no painting), used by the Quantization table's speed-vs-quality
// plot (ui/quant_table_view) and testable without a display.
//
// Labels are placed one after another in the order given (deterministic: the same input
// gives the same output). Each tries eight spots next to its marker, in this order: right,
// left, above, below, upper right, lower right, upper left, lower left; the first whose box
// touches no placed label, no marker, no obstacle and lies inside the bounds is taken. When
// none is free, the free spot nearest to the point on a grid over the bounds is taken, with
// a leader line (from the marker to the box) when it is not right beside the marker. Only when no free spot
// exists anywhere (more text than room) does a label overlap: it then takes the
// next-to-the-marker spot that is covered least, and says so.
#include <QPointF>
#include <QRectF>
#include <QSizeF>
#include <QVector>

namespace kvs::ui {

struct LabelPlacementInput {
    QVector<QPointF> points;    // the markers' centres, pixels
    QVector<QSizeF> sizes;      // each point's label box, pixels (same index as points)
    double markerRadius = 5;    // half a marker's width: the square around each centre is kept clear
    double gap = 4;             // space between a marker and its label, and between two labels
    QRectF bounds;              // every label box stays inside (the axis rect)
    QVector<QRectF> obstacles;  // other text to keep clear of (e.g. a reference line's caption)
};

struct PlacedLabel {
    QRectF rect;            // where the label's box goes, pixels
    bool leader = false;    // away from its marker: draw a line from the marker to the box
    bool overlaps = false;  // no free spot anywhere: the least-covered spot next to the marker
};

// One PlacedLabel per point, in the input's order; empty when points and sizes differ in count.
QVector<PlacedLabel> placeLabels(const LabelPlacementInput& in);

// The point of r nearest to p (p itself when inside r): where a leader line ends.
QPointF nearestPointOn(const QRectF& r, const QPointF& p);

}  // namespace kvs::ui
