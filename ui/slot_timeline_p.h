#pragma once
// Private to ui/slot_timeline*.cpp: the view's private data (its model, from
// ui/slot_timeline_model.h, and its plot parts) and the cell-area widget. Split out so
// the view, its canvas and its plots each live in a file of their own.

#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QSplitter>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include "ui/qcp.h"
#include "ui/request_colors.h"

#include "ui/slot_timeline.h"
#include "ui/slot_timeline_model.h"

namespace kvs::ui {

namespace timeline_detail {

using Cell = TimelineCell;
using Column = TimelineColumn;
using Row = TimelineRow;

inline bool holdsSeat(SlotState s) { return SlotTimelineModel::holdsSeat(s); }

inline QFont smallFont(const QFont& f) {
    QFont s = f;
    if (f.pointSizeF() > 0) s.setPointSizeF(f.pointSizeF() * 0.85);
    else if (f.pixelSize() > 0)
        s.setPixelSize(std::max(8, f.pixelSize() * 85 / 100));
    return s;
}

struct PlotParts {
    QCPAxisRect* rects[3] = {};
    QCPGraph* util = nullptr;
    QCPGraph* prefill = nullptr;  // stacked step areas: prefill, + decode, + padding
    QCPGraph* decode = nullptr;
    QCPGraph* padding = nullptr;
    QCPGraph* budget = nullptr;
    QCPGraph* tput = nullptr;
    QCPGraph* decodeTput = nullptr;
    QCPItemStraightLine* cursor[3] = {};
    QCPItemText* title[3] = {};
    QCPLegend* legends[2] = {};
};

}  // namespace timeline_detail

using namespace timeline_detail;

struct SlotTimelineView::Data {
    SlotTimelineModel model;  // steps, rows, seats, utilization and throughput
    PlotParts plots;
};

// ---- the cell area -------------------------------------------------------------------

class TimelineCanvas : public QWidget {
public:
    explicit TimelineCanvas(SlotTimelineView* view) : QWidget(view), v(view) {
        setMouseTracking(true);
        setFocusPolicy(Qt::StrongFocus);
        setAttribute(Qt::WA_OpaquePaintEvent);
        setObjectName("slotTimelineCanvas");
        setAccessibleName(tr("Batch slot timeline cells"));
        setAccessibleDescription(
            tr("Rows are requests or batch seats, columns engine steps. Left/Right and Page "
               "Up/Down scroll, Home/End jump, Ctrl+wheel zooms, a click selects a request."));
    }

    // Geometry: the cell area in logical pixels; columns and rows in device pixels so the
    // cached image scrolls by whole pixels at any device pixel ratio.
    struct Layout {
        int gutter = 0, right = 0;
        QRect cells;
        qreal dpr = 1;
        int cw = 1, rh = 1;  // device px per column / row
        int wDev = 1, hDev = 1;
        int visibleCols = 1, rowsFit = 1, firstRow = 0, nRows = 0;
    };

    static int gutterWidth(const QFont& f) {
        const QFontMetrics fm(smallFont(f));
        // Room for a short chat title and its request id ("Hello the… #12"): labels are
        // elided in the middle, so the id always shows.
        return fm.horizontalAdvance(QStringLiteral("synthetic #00000")) + fm.height() + 6;
    }
    static int rightMargin(const QFont& f) { return QFontMetrics(f).averageCharWidth() * 2; }

    Layout layout() const {
        Layout L;
        L.dpr = devicePixelRatioF();
        L.gutter = gutterWidth(font());
        L.right = rightMargin(font());
        L.cells = QRect(L.gutter, 0, std::max(1, width() - L.gutter - L.right), std::max(1, height()));
        L.wDev = std::max(1, int(std::lround(L.cells.width() * L.dpr)));
        L.hDev = std::max(1, int(std::lround(L.cells.height() * L.dpr)));
        L.cw = std::max(1, int(std::lround(v->m_cellWidth * L.dpr)));
        L.visibleCols = (L.wDev + L.cw - 1) / L.cw;
        L.nRows = v->rowCount();
        const int comfy = int(std::lround(QFontMetrics(smallFont(font())).height() * L.dpr));
        const int minimum = std::max(2, int(std::lround(4 * L.dpr)));
        L.rh = L.nRows > 0 ? std::clamp(L.hDev / L.nRows, minimum, std::max(minimum, comfy)) : comfy;
        L.rowsFit = std::max(1, L.hDev / L.rh);
        L.firstRow = std::clamp(v->m_vscroll ? v->m_vscroll->value() : 0, 0, std::max(0, L.nRows - L.rowsFit));
        return L;
    }

    // Logical x of a step's left edge, and the step under a logical x.
    qreal xOf(const Layout& L, qint64 step) const {
        return L.cells.left() + (L.wDev - (v->m_viewLast - step + 1) * double(L.cw)) / L.dpr;
    }
    qint64 stepAtX(const Layout& L, qreal x) const {
        const double fromRight = L.wDev - (x - L.cells.left()) * L.dpr;
        if (fromRight <= 0) return v->m_viewLast;
        return v->m_viewLast - qint64(std::floor(fromRight / L.cw));
    }
    qreal yOf(const Layout& L, int row) const { return L.cells.top() + (row - L.firstRow) * double(L.rh) / L.dpr; }
    int rowAtY(const Layout& L, qreal y) const {
        const int r = L.firstRow + int(std::floor((y - L.cells.top()) * L.dpr / L.rh));
        return r >= 0 && r < L.nRows && r < L.firstRow + L.rowsFit ? r : -1;
    }
    QRectF cellRectF(const Layout& L, qint64 step, int row) const {
        return QRectF(xOf(L, step), yOf(L, row), L.cw / L.dpr, L.rh / L.dpr);
    }
    QRect columnRect(const Layout& L, qint64 step) const {
        if (step < 0) return {};
        const QRectF r(xOf(L, step), L.cells.top(), L.cw / L.dpr, L.cells.height());
        return r.toAlignedRect().adjusted(-1, 0, 1, 0).intersected(L.cells);
    }

    QSize sizeHint() const override {
        const QFontMetrics fm(smallFont(font()));
        return {fm.averageCharWidth() * 100, fm.height() * 24};
    }
    QSize minimumSizeHint() const override {
        const QFontMetrics fm(smallFont(font()));
        return {gutterWidth(font()) + fm.averageCharWidth() * 10, fm.height() * 4};
    }

    void invalidate() { m_cacheValid = false; }
    void paletteChanged() {
        ++m_paletteVersion;
        m_cacheValid = false;
    }
    int paintCount = 0, fullRedraws = 0;

protected:
    void paintEvent(QPaintEvent* ev) override;
    void mouseMoveEvent(QMouseEvent* ev) override;
    void mousePressEvent(QMouseEvent* ev) override;
    void leaveEvent(QEvent*) override {
        v->setHoverStep(-1);
        m_hoverRow = -1;
    }
    void wheelEvent(QWheelEvent* ev) override;
    void keyPressEvent(QKeyEvent* ev) override;
    void resizeEvent(QResizeEvent*) override { v->syncView(); }
    void changeEvent(QEvent* ev) override {
        if (ev->type() == QEvent::PaletteChange || ev->type() == QEvent::StyleChange ||
            ev->type() == QEvent::FontChange)
            paletteChanged();
        QWidget::changeEvent(ev);
    }
    bool event(QEvent* ev) override {
        if (ev->type() == QEvent::ToolTip) {
            auto* he = static_cast<QHelpEvent*>(ev);
            const QPoint inView = mapTo(v, he->pos());
            const QString text = v->toolTipAt(inView);
            if (text.isEmpty()) QToolTip::hideText();
            else
                QToolTip::showText(he->globalPos(), text, this);
            return true;
        }
        return QWidget::event(ev);
    }

private:
    struct CacheKey {
        QSize size;
        int cw = 0, rh = 0, firstRow = 0, mode = 0, layoutVersion = 0, paletteVersion = 0;
        bool operator==(const CacheKey&) const = default;
    };
    void ensureCache(const Layout& L);
    void drawColumns(const Layout& L, qint64 from, qint64 to);  // into the cache
    void fillRaw(QRect r, QRgb color);
    void hatchRaw(QRect r, QRgb color, int period);
    void drawGutter(QPainter& p, const Layout& L, const QRect& clip);
    void drawOverlay(QPainter& p, const Layout& L);

    SlotTimelineView* v;
    QImage m_cache;           // [hDev, wDev] the cell area, device pixels
    uchar* m_bits = nullptr;  // m_cache.bits() while drawing columns
    qsizetype m_bpl = 0;
    CacheKey m_key;
    qint64 m_cacheLast = -1;  // step at the cache's right edge
    bool m_cacheValid = false;
    int m_paletteVersion = 0;
    int m_hoverRow = -1;
};

}  // namespace kvs::ui
