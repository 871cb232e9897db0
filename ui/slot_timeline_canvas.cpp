// The slot timeline's cell area: a cached image of request rows x step columns, drawn a
// column at a time as steps arrive (see ui/slot_timeline_p.h).
#include "ui/slot_timeline_p.h"

namespace kvs::ui {

void TimelineCanvas::ensureCache(const Layout& L) {
    const CacheKey key{QSize(L.wDev, L.hDev), L.cw, L.rh, L.firstRow, int(v->m_mode), v->d->model.layoutVersion(),
                       m_paletteVersion};
    const qint64 last = v->m_viewLast;
    const qint64 delta = last - m_cacheLast;
    if (!m_cacheValid || !(key == m_key) || std::abs(delta) >= L.visibleCols) {
        if (m_cache.size() != key.size) m_cache = QImage(key.size, QImage::Format_ARGB32_Premultiplied);
        m_key = key;
        m_cacheLast = last;
        m_cacheValid = true;
        ++fullRedraws;
        drawColumns(L, last - L.visibleCols + 1, last);
        return;
    }
    if (delta == 0) return;
    // Shift what is drawn by whole columns, then draw the columns that came into view.
    const int dx = int(std::min<qint64>(std::abs(delta) * L.cw, L.wDev));
    uchar* bits = m_cache.bits();
    for (int y = 0; y < L.hDev; ++y) {
        uchar* line = bits + qsizetype(y) * m_cache.bytesPerLine();
        if (delta > 0) std::memmove(line, line + dx * 4, size_t(L.wDev - dx) * 4);
        else
            std::memmove(line + dx * 4, line, size_t(L.wDev - dx) * 4);
    }
    if (delta > 0) drawColumns(L, m_cacheLast + 1, last);
    else
        drawColumns(L, last - L.visibleCols + 1, m_cacheLast - L.visibleCols + 1);
    m_cacheLast = last;
}

// Cells are solid axis-aligned rectangles in device pixels: written straight into the
// cache's scan lines (a QPainter fillRect per cell costs ~20× more).
void TimelineCanvas::fillRaw(QRect r, QRgb color) {
    r = r.intersected(m_cache.rect());
    if (r.isEmpty()) return;
    uchar* row = m_bits + qsizetype(r.top()) * m_bpl;
    for (int y = r.top(); y <= r.bottom(); ++y, row += m_bpl)
        std::fill_n(reinterpret_cast<QRgb*>(row) + r.left(), r.width(), color);
}

void TimelineCanvas::hatchRaw(QRect r, QRgb color, int period) {
    r = r.intersected(m_cache.rect());
    if (r.isEmpty()) return;
    uchar* row = m_bits + qsizetype(r.top()) * m_bpl;
    for (int y = r.top(); y <= r.bottom(); ++y, row += m_bpl) {
        QRgb* line = reinterpret_cast<QRgb*>(row);
        for (int x = r.left() + ((period - (r.left() + y) % period) % period); x <= r.right(); x += period)
            line[x] = color;
    }
}

void TimelineCanvas::drawColumns(const Layout& L, qint64 from, qint64 to) {
    if (to < from) return;
    m_bits = m_cache.bits();  // detaches once, not per scan line
    m_bpl = m_cache.bytesPerLine();
    const QPalette& pal = palette();
    const auto opaque = [](const QColor& c) { return c.rgb() | 0xFF000000u; };
    const int x0 = int(L.wDev - (v->m_viewLast - from + 1) * qint64(L.cw));
    const int x1 = int(L.wDev - (v->m_viewLast - to) * qint64(L.cw));
    fillRaw(QRect(x0, 0, x1 - x0, L.hDev), opaque(pal.color(QPalette::Base)));
    const QRgb band = opaque(mixColors(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.035));
    for (int r = L.firstRow; r < std::min(L.nRows, L.firstRow + L.rowsFit + 1); ++r)
        if (r % 2) fillRaw(QRect(x0, (r - L.firstRow) * L.rh, x1 - x0, L.rh), band);

    const bool seats = v->m_mode == SlotTimelineView::RowMode::Seats;
    const int px = std::max(1, int(L.dpr));
    const int gapX = seats ? 0 : (L.cw >= int(5 * L.dpr) ? px : 0);
    const int gapY = L.rh >= int(5 * L.dpr) ? px : 0;
    QRgb colors[7];
    for (int s = 0; s < 7; ++s) colors[s] = opaque(SlotTimelineView::stateColor(SlotState(s), pal));
    const QRgb hatch = opaque(SlotTimelineView::stateColor(SlotState::Padding, pal).darker(150));
    const int hatchPeriod = std::max(3, int(std::lround(4 * L.dpr)));
    const QRgb greenList = opaque(SlotTimelineView::watermarkColor(true));
    const QRgb redList = opaque(SlotTimelineView::watermarkColor(false));
    const SlotTimelineModel& m = v->d->model;
    for (auto it = m.firstColumnFrom(from); it != m.columns().end() && it->point.step <= to; ++it) {
        const int x = int(L.wDev - (v->m_viewLast - it->point.step + 1) * qint64(L.cw));
        for (int pass = 0; pass < (seats ? 2 : 1); ++pass) {
            for (const Cell& c : it->cells) {
                int row;
                if (seats) {
                    if (c.seat < 0 || holdsSeat(SlotState(c.state)) != (pass == 1)) continue;
                    row = c.seat;
                } else {
                    row = m.requestRow(c.id);
                }
                if (row < L.firstRow || row > L.firstRow + L.rowsFit) continue;
                const int y = (row - L.firstRow) * L.rh;
                int left = x, w = L.cw - gapX;
                if (seats && c.seatChange && L.cw >= 3) {
                    left += px;
                    w -= px;
                }  // a new occupant
                const QRect r(left, y, std::max(1, w), std::max(1, L.rh - gapY));
                fillRaw(r, colors[c.state]);
                if (c.state == quint8(SlotState::Padding)) hatchRaw(r, hatch, hatchPeriod);
                if (c.green >= 0 && c.sampled > 0) {  // watermark: the new tokens' lists, green part first
                    const int sh = std::max(px, r.height() * 2 / 5);
                    const int gw = r.width() * c.green / c.sampled;
                    fillRaw(QRect(r.left(), r.bottom() - sh + 1, gw, sh), greenList);
                    fillRaw(QRect(r.left() + gw, r.bottom() - sh + 1, r.width() - gw, sh), redList);
                }
            }
        }
    }
}

void TimelineCanvas::drawGutter(QPainter& p, const Layout& L, const QRect& clip) {
    const QPalette& pal = palette();
    const QRect g(0, 0, L.gutter, height());
    if (!clip.intersects(g)) return;
    p.fillRect(g, pal.window());
    p.setPen(pal.color(QPalette::Mid));
    p.drawLine(QPointF(L.gutter - 0.5, 0), QPointF(L.gutter - 0.5, height()));
    const QFont f = smallFont(font());
    p.setFont(f);
    const QFontMetrics fm(f);
    const qreal rowH = L.rh / L.dpr;
    const int every = std::max(1, int(std::ceil(fm.height() * 0.95 / rowH)));
    const bool seats = v->m_mode == SlotTimelineView::RowMode::Seats;
    for (int r = L.firstRow; r < std::min(L.nRows, L.firstRow + L.rowsFit); ++r) {
        const qreal y = yOf(L, r);
        const bool selected = !seats && v->m_selected >= 0 && v->d->model.rows()[r].id == v->m_selected;
        if (selected) p.fillRect(QRectF(0, y, L.gutter - 1, rowH), pal.color(QPalette::Highlight));
        if (r % every && !selected) continue;
        QRectF text(4, y + rowH / 2 - fm.height() / 2.0, L.gutter - 8, fm.height());
        QString label;
        if (seats) {
            label = tr("seat %1").arg(r);
        } else {
            const Row& row = v->d->model.rows()[r];
            const qreal sw = std::min<qreal>(fm.height() * 0.6, std::max<qreal>(3, rowH - 2));
            p.fillRect(QRectF(4, y + (rowH - sw) / 2, sw, sw), SlotTimelineView::requestColor(row.id));
            text.setLeft(4 + sw + 4);
            label = row.label.isEmpty() ? tr("req %1").arg(row.id) : row.label;
        }
        p.setPen(selected ? pal.color(QPalette::HighlightedText) : pal.color(QPalette::Text));
        p.drawText(text, Qt::AlignVCenter | Qt::AlignLeft, fm.elidedText(label, Qt::ElideMiddle, int(text.width())));
    }
}

void TimelineCanvas::drawOverlay(QPainter& p, const Layout& L) {
    const QPalette& pal = palette();
    p.setClipRect(L.cells);
    QColor hl = pal.color(QPalette::Highlight);
    if (v->m_hoverStep >= 0) {
        QColor band = hl;
        band.setAlpha(60);
        p.fillRect(QRectF(xOf(L, v->m_hoverStep), L.cells.top(), L.cw / L.dpr, L.cells.height()), band);
        if (m_hoverRow >= 0) {
            p.setPen(QPen(pal.color(QPalette::Text), 1));
            p.drawRect(cellRectF(L, v->m_hoverStep, m_hoverRow).adjusted(0, 0, -1, -1));
        }
    }
    if (v->m_selected >= 0) {
        QColor band = hl;
        band.setAlpha(45);
        if (v->m_mode == SlotTimelineView::RowMode::Requests) {
            const int r = v->d->model.requestRow(v->m_selected);
            if (r >= L.firstRow && r < L.firstRow + L.rowsFit) {
                const QRectF rr(L.cells.left(), yOf(L, r), L.cells.width(), L.rh / L.dpr);
                p.fillRect(rr, band);
                p.setPen(QPen(hl, 1));
                p.drawRect(rr.adjusted(0.5, 0.5, -0.5, -0.5));
            }
        } else {
            // Seats: outline the selected request's cells wherever it sat.
            p.setPen(QPen(pal.color(QPalette::Text), 1));
            const qint64 first = v->m_viewLast - L.visibleCols + 1;
            const SlotTimelineModel& m = v->d->model;
            for (auto it = m.firstColumnFrom(first); it != m.columns().end() && it->point.step <= v->m_viewLast; ++it)
                for (const Cell& cell : it->cells)
                    if (cell.id == v->m_selected && cell.seat >= 0)
                        p.fillRect(cellRectF(L, it->point.step, cell.seat), band);
        }
    }
    p.setClipping(false);
}

void TimelineCanvas::paintEvent(QPaintEvent* ev) {
    ++paintCount;
    const Layout L = layout();
    QPainter p(this);
    if (v->d->model.isEmpty()) {
        p.fillRect(rect(), palette().base());
        drawGutter(p, L, ev->rect());
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(L.cells, Qt::AlignCenter | Qt::TextWordWrap,
                   tr("No engine steps yet.\nRequests appear here as the scheduler runs them."));
        return;
    }
    ensureCache(L);
    m_cache.setDevicePixelRatio(L.dpr);
    p.drawImage(L.cells.topLeft(), m_cache);
    p.fillRect(QRect(L.cells.right() + 1, 0, width() - L.cells.right() - 1, height()), palette().base());
    drawGutter(p, L, ev->rect());
    drawOverlay(p, L);
}

void TimelineCanvas::mouseMoveEvent(QMouseEvent* ev) {
    const Layout L = layout();
    const QPointF pos = ev->position();
    if (!L.cells.contains(pos.toPoint()) || v->d->model.isEmpty()) {
        v->setHoverStep(-1);
        m_hoverRow = -1;
        return;
    }
    const int row = rowAtY(L, pos.y());
    if (row != m_hoverRow) {
        m_hoverRow = row;
        update(columnRect(L, v->m_hoverStep));
    }
    v->setHoverStep(stepAtX(L, pos.x()));
}

void TimelineCanvas::mousePressEvent(QMouseEvent* ev) {
    if (ev->button() != Qt::LeftButton) return QWidget::mousePressEvent(ev);
    const TimelineHit hit = v->hitTest(mapTo(v, ev->position().toPoint()));
    qint64 id = hit.requestId;
    if (id >= 0 && id == v->m_selected) id = -1;  // a second click clears the selection
    v->setSelectedRequest(id);
    Q_EMIT v->requestSelected(id);
}

void TimelineCanvas::wheelEvent(QWheelEvent* ev) {
    const QPoint a = ev->angleDelta();
    if (ev->modifiers() & Qt::ControlModifier) {
        if (a.y() != 0) v->setCellWidth(v->m_cellWidth * (a.y() > 0 ? 1.25 : 0.8));
        return ev->accept();
    }
    const Layout L = layout();
    const bool rowsOverflow = L.nRows > L.rowsFit;
    const bool horizontal = a.x() != 0 || (ev->modifiers() & Qt::ShiftModifier) || !rowsOverflow;
    const int notches = (a.x() != 0 ? a.x() : a.y()) / 40;  // 3 per wheel notch
    if (horizontal) v->scrollBy(-notches * std::max(1, L.visibleCols / 30));
    else
        v->m_vscroll->setValue(v->m_vscroll->value() - notches);
    ev->accept();
}

void TimelineCanvas::keyPressEvent(QKeyEvent* ev) {
    const Layout L = layout();
    switch (ev->key()) {
        case Qt::Key_Left: v->scrollBy(-1); break;
        case Qt::Key_Right: v->scrollBy(1); break;
        case Qt::Key_PageUp: v->scrollBy(-L.visibleCols); break;
        case Qt::Key_PageDown: v->scrollBy(L.visibleCols); break;
        case Qt::Key_Home: v->scrollToStep(v->oldestStep() + L.visibleCols - 1); break;
        case Qt::Key_End: v->setFollowing(true); break;
        case Qt::Key_Up: v->m_vscroll->setValue(v->m_vscroll->value() - 1); break;
        case Qt::Key_Down: v->m_vscroll->setValue(v->m_vscroll->value() + 1); break;
        default: QWidget::keyPressEvent(ev); return;
    }
}

}  // namespace kvs::ui
