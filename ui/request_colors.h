#pragma once
// The colour of a request, the same in every view (KV block map, slot timeline, request
// lists): a fixed qualitative set of mid-lightness hues that read on light and dark
// backgrounds alike, indexed by request id (ids past the set's size get lighter and
// darker variants of the same hues). Plus the few colour helpers the views share.
#include <QColor>
#include <QtGlobal>

namespace kvs::ui {

// How many base hues there are before the set repeats in a lighter / darker variant.
int requestColorCount();

// The colour of request `id` (any id, negative ones included); deterministic.
QColor requestColor(qint64 id);

// a blended towards b: t = 0 gives a, t = 1 gives b (alpha blended too).
QColor mixColors(const QColor& a, const QColor& b, double t);

// `color` faded towards a background: the tint used for "reserved but not used" and for
// blocks that a request no longer holds. strength 0 = background, 1 = color.
QColor fadedColor(const QColor& color, const QColor& background, double strength = 0.3);

// Black or white, whichever reads better on `fill` (text and marks drawn over a cell).
QColor contrastingTextColor(const QColor& fill);

// WCAG relative luminance (0..1) and the contrast ratio of two colours (1..21).
double relativeLuminance(const QColor& c);
double contrastRatio(const QColor& a, const QColor& b);

}  // namespace kvs::ui
