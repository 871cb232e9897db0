#include "ui/label_placement.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace kvs::ui {

namespace {

// What is already on the plot: markers, obstacles, the labels placed so far.
class Occupancy {
public:
    explicit Occupancy(const LabelPlacementInput& in) : m_in(in), m_half(std::max(0.0, in.gap) / 2) {
        const double r = std::max(0.0, in.markerRadius);
        for (const QPointF& p : in.points) m_taken.push_back(QRectF(p.x() - r, p.y() - r, 2 * r, 2 * r));
        for (const QRectF& o : in.obstacles) m_taken.push_back(o);
    }

    // Inside the bounds, and at least half a gap from every marker and obstacle and a whole
    // gap from every placed label (each placed one keeps half a gap around itself).
    bool isFree(const QRectF& r) const {
        // (not QRectF::contains, which holds no empty box)
        const QRectF& b = m_in.bounds;
        if (r.left() < b.left() || r.right() > b.right() || r.top() < b.top() || r.bottom() > b.bottom()) return false;
        const QRectF padded = r.adjusted(-m_half, -m_half, m_half, m_half);
        return std::none_of(m_taken.begin(), m_taken.end(), [&](const QRectF& t) { return padded.intersects(t); });
    }

    // How much of r is covered (by markers, obstacles, labels) or outside the bounds, px².
    double covered(const QRectF& r) const {
        double area = r.width() * r.height() - overlap(r, m_in.bounds);
        for (const QRectF& t : m_taken) area += overlap(r, t);
        return area;
    }

    void take(const QRectF& r) { m_taken.push_back(r.adjusted(-m_half, -m_half, m_half, m_half)); }

private:
    static double overlap(const QRectF& a, const QRectF& b) {
        const QRectF i = a.intersected(b);
        return i.isEmpty() ? 0.0 : i.width() * i.height();
    }

    const LabelPlacementInput& m_in;
    double m_half;
    QVector<QRectF> m_taken;  // markers, obstacles, then placed labels (padded)
};

// The eight spots next to the marker at p for a box of size s, d from the centre, in the
// order they are tried: right, left, above, below, upper right, lower right, upper left,
// lower left.
std::array<QRectF, 8> spotsNextTo(const QPointF& p, const QSizeF& s, double d) {
    const double w = s.width(), h = s.height(), x = p.x(), y = p.y();
    return {QRectF(x + d, y - h / 2, w, h),     QRectF(x - d - w, y - h / 2, w, h), QRectF(x - w / 2, y - d - h, w, h),
            QRectF(x - w / 2, y + d, w, h),     QRectF(x + d, y - d - h, w, h),     QRectF(x + d, y + d, w, h),
            QRectF(x - d - w, y - d - h, w, h), QRectF(x - d - w, y + d, w, h)};
}

double distanceTo(const QRectF& r, const QPointF& p) {
    const QPointF q = nearestPointOn(r, p);
    return std::hypot(q.x() - p.x(), q.y() - p.y());
}

// The free box of size s nearest to p, its top left corner on a grid over the bounds (at
// most about 40000 spots, at least 1 px apart; the first found wins a tie); false when none
// is free.
bool nearestFreeSpot(const Occupancy& occ, const QRectF& bounds, const QPointF& p, const QSizeF& s, QRectF* out) {
    const double w = s.width(), h = s.height();
    if (w > bounds.width() || h > bounds.height()) return false;
    const double step = std::max(1.0, std::sqrt(bounds.width() * bounds.height() / 40000.0));
    const int nx = int(std::floor((bounds.width() - w) / step)) + 1;
    const int ny = int(std::floor((bounds.height() - h) / step)) + 1;
    double best = std::numeric_limits<double>::infinity();
    for (int j = 0; j <= ny; ++j) {
        // the last row / column sits on the far edge, so that a box can reach it
        const double top = j < ny ? bounds.top() + j * step : bounds.bottom() - h;
        for (int i = 0; i <= nx; ++i) {
            const double left = i < nx ? bounds.left() + i * step : bounds.right() - w;
            const QRectF r(left, top, w, h);
            const double d = distanceTo(r, p);
            if (d >= best || !occ.isFree(r)) continue;
            best = d;
            *out = r;
        }
    }
    return std::isfinite(best);
}

// r moved (not resized) to lie inside bounds as far as it can.
QRectF movedInside(QRectF r, const QRectF& bounds) {
    r.moveLeft(std::max(bounds.left(), std::min(r.left(), bounds.right() - r.width())));
    r.moveTop(std::max(bounds.top(), std::min(r.top(), bounds.bottom() - r.height())));
    return r;
}

}  // namespace

QPointF nearestPointOn(const QRectF& r, const QPointF& p) {
    const QRectF n = r.normalized();
    return {std::clamp(p.x(), n.left(), n.right()), std::clamp(p.y(), n.top(), n.bottom())};
}

QVector<PlacedLabel> placeLabels(const LabelPlacementInput& in) {
    QVector<PlacedLabel> out;
    if (in.points.size() != in.sizes.size()) return out;
    Occupancy occ(in);
    const double d = std::max(0.0, in.markerRadius) + std::max(0.0, in.gap);
    for (int i = 0; i < in.points.size(); ++i) {
        const QPointF p = in.points[i];
        const QSizeF s = in.sizes[i];
        const std::array<QRectF, 8> spots = spotsNextTo(p, s, d);
        PlacedLabel placed;
        const auto free = std::find_if(spots.begin(), spots.end(), [&](const QRectF& r) { return occ.isFree(r); });
        if (free != spots.end()) {
            placed.rect = *free;
        } else if (nearestFreeSpot(occ, in.bounds, p, s, &placed.rect)) {
            // a grid spot can still touch the marker's gap: a leader only where it is away
            placed.leader = distanceTo(placed.rect, p) > d + in.gap;
        } else {
            double least = std::numeric_limits<double>::infinity();
            for (const QRectF& spot : spots) {
                const QRectF r = movedInside(spot, in.bounds);
                const double c = occ.covered(r);
                if (c < least) {
                    least = c;
                    placed.rect = r;
                }
            }
            placed.overlaps = true;
        }
        occ.take(placed.rect);
        out.push_back(placed);
    }
    return out;
}

}  // namespace kvs::ui
