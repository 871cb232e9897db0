#include "ui/kv_block_grid.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "ui/adapter_legend.h"
#include "ui/kv_block_paint.h"
#include "ui/request_colors.h"

namespace kvs::ui {

using namespace blockpaint;

// ---- grid geometry ----------------------------------------------------------------------

QRect BlockGridGeometry::cellRect(int i) const {
    return QRect(margin + (i % cols) * pitch(), margin + (i / cols) * pitch(), cell, cell);
}

QRect BlockGridGeometry::hostRect(int i) const {
    return QRect(margin + (i % cols) * pitch(), hostTop + (i / cols) * pitch(), cell, cell);
}

int BlockGridGeometry::cellAt(QPoint p, int nCells) const {
    const int x = p.x() - margin, y = p.y() - margin;
    if (x < 0 || y < 0 || x >= cols * pitch()) return -1;
    const int i = (y / pitch()) * cols + x / pitch();
    return i < nCells ? i : -1;
}

int BlockGridGeometry::hostAt(QPoint p, int nHost) const {
    const int x = p.x() - margin, y = p.y() - hostTop;
    if (nHost <= 0 || x < 0 || y < 0 || x >= cols * pitch()) return -1;
    const int i = (y / pitch()) * cols + x / pitch();
    return i < nHost ? i : -1;
}

BlockGridGeometry BlockGridGeometry::fit(int nCells, int nHost, int width, int height, int captionHeight, int minCell,
                                         int maxCell) {
    auto layout = [&](int s) {
        BlockGridGeometry g;
        g.cell = s;
        g.gap = s >= 14 ? 2 : 1;
        g.margin = std::max(2, s / 4);
        g.cols = std::max(1, (width - 2 * g.margin + g.gap) / g.pitch());
        g.rows = (nCells + g.cols - 1) / g.cols;
        int y = g.margin + g.rows * g.pitch() - g.gap;
        if (nHost > 0) {
            g.hostCaptionTop = y + captionHeight / 3;
            g.hostTop = g.hostCaptionTop + captionHeight;
            g.hostRows = (nHost + g.cols - 1) / g.cols;
            y = g.hostTop + g.hostRows * g.pitch() - g.gap;
        }
        g.height = y + g.margin;
        return g;
    };
    minCell = std::max(1, minCell);
    for (int s = std::max(minCell, maxCell); s > minCell; --s) {
        const BlockGridGeometry g = layout(s);
        if (g.height <= height) return g;
    }
    return layout(minCell);
}

// ---- KvBlockGrid ------------------------------------------------------------------------

KvBlockGrid::KvBlockGrid(QWidget* parent) : QWidget(parent) {
    setObjectName("kvBlockGrid");
    setAccessibleName(tr("KV block pool"));
    setAccessibleDescription(tr("One cell per KV-cache block, coloured by the request that holds it"));
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
}

QSize KvBlockGrid::sizeHint() const {
    const int h = fontMetrics().height();
    return {h * 30, h * 20};
}

QSize KvBlockGrid::minimumSizeHint() const {
    const int h = fontMetrics().height();
    return {h * 6, h * 4};
}

void KvBlockGrid::setFrame(const EngineFrame& f) {
    const bool shapeChanged = f.blocks.size() != m_frame.blocks.size() || f.nHostBlocks != m_frame.nHostBlocks;
    const qsizetype oldHostUsed = m_frame.hostBlocks.size();
    m_frame = f;
    m_rowOf.clear();
    for (int i = 0; i < m_frame.requests.size(); ++i) m_rowOf.insert(m_frame.requests[i].id, i);
    rememberOwners();
    if (const QStringList adapters = frameAdapters(m_frame); adapters != m_adapters) {
        m_adapters = adapters;
        m_pixmapValid = false;  // the bars' colours follow the set of adapters
    }
    m_hostOwner.fill(kNoRequest, std::max(0, m_frame.nHostBlocks));
    for (const HostCell& h : m_frame.hostBlocks)
        if (h.hostBlock >= 0 && h.hostBlock < m_hostOwner.size()) m_hostOwner[h.hostBlock] = h.owner;
    if (m_hovered >= m_frame.blocks.size()) m_hovered = -1;
    if (m_hoveredHost >= m_hostOwner.size()) m_hoveredHost = -1;

    if (shapeChanged) {
        m_pixmapValid = false;  // other cells: repaint all, even where the layout stays
        relayout();
        m_lastDirty = static_cast<int>(m_frame.blocks.size() + m_hostOwner.size());
        return;
    }
    if (!m_pixmapValid) {
        m_lastDirty = static_cast<int>(m_frame.blocks.size() + m_hostOwner.size());
        update();
        return;
    }
    // Repaint into the cached pixmap only the cells whose look changed.
    QPainter p(&m_pixmap);
    p.setFont(font());
    QRect dirty;
    int n = 0;
    for (int i = 0; i < m_frame.blocks.size(); ++i) {
        const quint64 k = cellKey(i);
        if (k == m_keys[i]) continue;
        m_keys[i] = k;
        paintCell(p, i);
        dirty |= m_geo.cellRect(i);
        ++n;
    }
    for (int i = 0; i < m_hostOwner.size(); ++i) {
        if (m_hostKeys[i] == m_hostOwner[i]) continue;
        m_hostKeys[i] = m_hostOwner[i];
        paintHostCell(p, i);
        dirty |= m_geo.hostRect(i);
        ++n;
    }
    if (oldHostUsed != m_frame.hostBlocks.size() && !m_hostOwner.isEmpty()) {
        paintHostCaption(p);
        dirty |= QRect(0, m_geo.hostCaptionTop, width(), m_geo.hostTop - m_geo.hostCaptionTop);
    }
    p.end();
    m_lastDirty = n;
    if (m_selected != kNoRequest || m_hovered >= 0 || m_hoveredHost >= 0)
        update();  // the overlay depends on more than the changed cells; blitting is cheap
    else if (!dirty.isEmpty())
        update(dirty);
}

void KvBlockGrid::rememberOwners() {
    const int n = static_cast<int>(m_frame.blocks.size());
    if (m_lastOwner.size() != n) {
        m_lastOwner.fill(kNoRequest, n);
        m_lastIndex.fill(-1, n);
    }
    QVector<char> seen(n, 0);
    for (const RequestRow& r : m_frame.requests) {
        for (int i = 0; i < r.blockIds.size(); ++i) {
            const int b = r.blockIds[i];
            if (b < 0 || b >= n || seen[b]) continue;
            seen[b] = 1;
            m_lastOwner[b] = r.id;
            m_lastIndex[b] = i;
        }
    }
    for (int i = 0; i < n; ++i) {
        if (seen[i]) continue;
        const BlockCell& b = m_frame.blocks[i];
        if (!b.owners.isEmpty()) {
            m_lastOwner[i] = b.owners.first();
            m_lastIndex[i] = -1;
        } else if (b.state != BlockState::Cached && b.state != BlockState::Freed) {  // keeps its last owner
            m_lastOwner[i] = kNoRequest;
            m_lastIndex[i] = -1;
        }
    }
}

quint64 KvBlockGrid::cellKey(int i) const {
    const BlockCell& b = m_frame.blocks[i];
    const qint64 owner = !b.owners.isEmpty()             ? b.owners.first()
                         : b.state == BlockState::Cached || b.state == BlockState::Freed ? m_lastOwner[i]
                                                         : kNoRequest;
    const quint64 filled = b.state == BlockState::Used ? quint64(std::clamp(b.filled, 0, 4095)) : 0;
    const quint64 refs = quint64(std::clamp(b.refCount, 0, 255));
    return (quint64(owner + 2) << 24) | (refs << 16) | (filled << 4) | quint64(b.state);
}

void KvBlockGrid::setSelectedRequest(qint64 id) {
    if (id == m_selected) return;
    m_selected = id;
    update();
}

void KvBlockGrid::fitTo(const QSize& viewport, int scrollBarExtent) {
    m_viewport = viewport;
    m_scrollBarExtent = scrollBarExtent;
    relayout();
}

void KvBlockGrid::relayout() {
    const QSize vp = m_viewport.isValid() && !m_viewport.isEmpty() ? m_viewport : sizeHint();
    const QFontMetrics fm = fontMetrics();
    const int caption = fm.height() + fm.height() / 2;
    const int minCell = std::max(4, fm.height() / 3);
    const int maxCell = std::max(minCell, fm.height() * 3);
    const int n = static_cast<int>(m_frame.blocks.size()), nh = std::max(0, m_frame.nHostBlocks);
    BlockGridGeometry g = BlockGridGeometry::fit(n, nh, vp.width(), vp.height(), caption, minCell, maxCell);
    int w = vp.width();
    if (g.height > vp.height()) {  // scrolls: leave room for the vertical scroll bar
        w = std::max(minCell * 2, vp.width() - m_scrollBarExtent);
        g = BlockGridGeometry::fit(n, nh, w, vp.height(), caption, minCell, maxCell);
    }
    const QSize size(w, std::max(vp.height(), g.height));
    if (g == m_geo && size == this->size() && m_pixmapValid) return;  // nothing moved: keep the pixmap
    m_geo = g;
    m_pixmapValid = false;
    resize(size);
    update();
}

int KvBlockGrid::blockAt(QPoint p) const { return m_geo.cellAt(p, static_cast<int>(m_frame.blocks.size())); }

int KvBlockGrid::hostBlockAt(QPoint p) const { return m_geo.hostAt(p, static_cast<int>(m_hostOwner.size())); }

QRect KvBlockGrid::blockRect(int block) const {
    return block >= 0 && block < m_frame.blocks.size() ? m_geo.cellRect(block) : QRect();
}

QRect KvBlockGrid::hostBlockRect(int hostBlock) const {
    return hostBlock >= 0 && hostBlock < m_hostOwner.size() ? m_geo.hostRect(hostBlock) : QRect();
}

qint64 KvBlockGrid::hostOwner(int hostBlock) const {
    return hostBlock >= 0 && hostBlock < m_hostOwner.size() ? m_hostOwner[hostBlock] : kNoRequest;
}

qint64 KvBlockGrid::lastOwner(int block) const {
    return block >= 0 && block < m_lastOwner.size() ? m_lastOwner[block] : kNoRequest;
}

QVector<QPointF> KvBlockGrid::selectionPath() const {
    QVector<QPointF> out;
    const auto it = m_rowOf.constFind(m_selected);
    if (it == m_rowOf.cend()) return out;
    for (int b : m_frame.requests[*it].blockIds)
        if (b >= 0 && b < m_frame.blocks.size()) out.push_back(QRectF(m_geo.cellRect(b)).center());
    return out;
}

QString KvBlockGrid::ownerName(qint64 id) const {
    const auto it = m_rowOf.constFind(id);
    if (it != m_rowOf.cend() && !m_frame.requests[*it].label.isEmpty()) return m_frame.requests[*it].label;
    return tr("req %1").arg(id);
}

QString KvBlockGrid::tooltipForBlock(int block) const {
    if (block < 0 || block >= m_frame.blocks.size()) return {};
    const BlockCell& b = m_frame.blocks[block];
    const int bs = m_frame.blockSize;
    QString state;
    switch (b.state) {
        case BlockState::Free: state = tr("free"); break;
        case BlockState::Used: state = b.refCount > 1 ? tr("used, shared") : tr("used"); break;
        case BlockState::Cached: state = tr("cached (free, reusable by prefix)"); break;
        case BlockState::Swapped: state = tr("swapped"); break;
        case BlockState::Freed: state = tr("freed (given back by a request that goes on)"); break;
    }
    QStringList lines{tr("<b>Block %1</b> · %2").arg(block).arg(state)};
    if (b.state == BlockState::Used) {
        lines << (b.refCount > 1 ? tr("refs %1 (prefix sharing or copy-on-write fork)").arg(b.refCount)
                                 : tr("refs %1").arg(b.refCount));
        QStringList owners;
        for (int i = 0; i < b.owners.size() && i < 6; ++i) {
            const auto it = m_rowOf.constFind(b.owners[i]);
            const int idx = it == m_rowOf.cend() ? -1 : int(m_frame.requests[*it].blockIds.indexOf(block));
            owners << (idx >= 0 ? tr("%1 (block #%2 of its table)").arg(ownerName(b.owners[i]).toHtmlEscaped()).arg(idx)
                                : ownerName(b.owners[i]).toHtmlEscaped());
        }
        if (b.owners.size() > 6) owners << tr("+%1 more").arg(b.owners.size() - 6);
        if (!owners.isEmpty())
            lines << (b.owners.size() > 1 ? tr("owners: %1") : tr("owner: %1")).arg(owners.join(", "));
        lines << tr("filled %1 / %2 tokens").arg(b.filled).arg(bs);
        if (const auto it = b.owners.isEmpty() ? m_rowOf.cend() : m_rowOf.constFind(b.owners.first());
            it != m_rowOf.cend() && !m_frame.requests[*it].kvEviction.isEmpty()) {
            const RequestRow& r = m_frame.requests[*it];
            const int idx = int(r.blockIds.indexOf(block));
            QStringList runs;  // the logical positions this block's entries stand for, as runs
            for (int e = idx * bs; idx >= 0 && e < std::min<int>((idx + 1) * bs, r.kvEntryPos.size());) {
                int e1 = e + 1;
                while (e1 < std::min<int>((idx + 1) * bs, r.kvEntryPos.size()) && r.kvEntryPos[e1] == r.kvEntryPos[e1 - 1] + 1)
                    ++e1;
                runs << (e1 - e > 1 ? QStringLiteral("%1–%2").arg(r.kvEntryPos[e]).arg(r.kvEntryPos[e1 - 1])
                                    : QString::number(r.kvEntryPos[e]));
                e = e1;
            }
            lines << tr("KV eviction %1: positions %2").arg(r.kvEviction, runs.join(", "));
            lines << tr("%1 of %2 tokens cached (budget %3), %4 evicted so far, %5 blocks given back")
                         .arg(r.kvEntries)
                         .arg(r.computedTokens)
                         .arg(r.kvBudget)
                         .arg(r.kvEvicted)
                         .arg(r.kvFreedBlocks);
        }
    } else if (b.state == BlockState::Cached) {
        lines << tr("filled %1 / %2 tokens").arg(b.filled).arg(bs);
        if (m_lastOwner[block] != kNoRequest)
            lines << tr("last held by %1").arg(ownerName(m_lastOwner[block]).toHtmlEscaped());
    } else if (b.state == BlockState::Freed && m_lastOwner[block] != kNoRequest) {
        lines << tr("given back by %1").arg(ownerName(m_lastOwner[block]).toHtmlEscaped());
        if (const auto it = m_rowOf.constFind(m_lastOwner[block]); it != m_rowOf.cend()) {
            const RequestRow& r = m_frame.requests[*it];
            if (!r.kvEviction.isEmpty())
                lines << tr("KV eviction %1: %2 cached of %3 tokens, %4 evicted, %5 blocks given back")
                             .arg(r.kvEviction)
                             .arg(r.kvEntries)
                             .arg(r.computedTokens)
                             .arg(r.kvEvicted)
                             .arg(r.kvFreedBlocks);
        }
    }
    if (b.hashed) lines << tr("in the prefix cache (hashed)");
    if (m_tokenText && b.state != BlockState::Free && m_lastOwner[block] != kNoRequest) {
        int idx = m_lastIndex[block];
        if (idx < 0) {
            const auto it = m_rowOf.constFind(m_lastOwner[block]);
            if (it != m_rowOf.cend()) idx = int(m_frame.requests[*it].blockIds.indexOf(block));
        }
        QString text = idx >= 0 ? m_tokenText(m_lastOwner[block], idx) : QString();
        if (!text.isEmpty()) {
            if (text.size() > 240) text = text.left(240) + QChar(0x2026);
            text = text.toHtmlEscaped().replace('\n', QStringLiteral("⏎"));
            lines << QStringLiteral("<span style=\"white-space:pre-wrap\">“%1”</span>").arg(text);
        }
    }
    return QStringLiteral("<qt>") + lines.join("<br>") + QStringLiteral("</qt>");
}

QString KvBlockGrid::tooltipForHostBlock(int hostBlock) const {
    if (hostBlock < 0 || hostBlock >= m_hostOwner.size()) return {};
    const qint64 owner = m_hostOwner[hostBlock];
    if (owner == kNoRequest) return tr("<qt><b>Host block %1</b> · free (CPU swap tier)</qt>").arg(hostBlock);
    const auto it = m_rowOf.constFind(owner);
    const int held = it == m_rowOf.cend() ? 0 : m_frame.requests[*it].hostBlocks;
    QString s = tr("<qt><b>Host block %1</b> · swapped out to CPU memory<br>owner: %2")
                    .arg(hostBlock)
                    .arg(ownerName(owner).toHtmlEscaped());
    if (held > 0)
        s += tr("<br>%1 holds %2 host blocks until it is swapped back in")
                 .arg(ownerName(owner).toHtmlEscaped())
                 .arg(held);
    return s + QStringLiteral("</qt>");
}

void KvBlockGrid::paintCell(QPainter& p, int i) const {
    const CellStyle st(palette());
    drawBlockCell(p, m_geo.cellRect(i), m_frame.blocks[i], m_frame.blockSize, m_lastOwner[i], st, m_hatch,
                  fontMetrics());
    paintAdapterBar(p, i);
}

void KvBlockGrid::paintAdapterBar(QPainter& p, int i) const {
    if (m_adapters.isEmpty() || m_frame.blocks[i].state == BlockState::Free) return;
    const auto it = m_rowOf.constFind(m_lastOwner[i]);
    if (it == m_rowOf.cend()) return;
    const QRect r = m_geo.cellRect(i);
    const int h = std::max(2, r.height() / 5);
    p.fillRect(QRect(r.left(), r.bottom() - h + 1, r.width(), h),
               adapterColor(m_adapters, m_frame.requests[*it].adapter));
}

void KvBlockGrid::paintHostCell(QPainter& p, int i) const {
    drawHostCell(p, m_geo.hostRect(i), m_hostOwner[i], CellStyle(palette()));
}

void KvBlockGrid::paintHostCaption(QPainter& p) const {
    const QRect r(m_geo.margin, m_geo.hostCaptionTop, width() - 2 * m_geo.margin, m_geo.hostTop - m_geo.hostCaptionTop);
    p.fillRect(QRect(0, r.top(), width(), r.height()), palette().color(QPalette::Base));
    p.setPen(CellStyle(palette()).secondaryText);
    p.setFont(font());
    const QString text = tr("CPU swap tier · %1 of %2 host blocks hold swapped-out KV")
                             .arg(m_frame.hostBlocks.size())
                             .arg(m_hostOwner.size());
    p.drawText(r, Qt::AlignLeft | Qt::AlignVCenter, fontMetrics().elidedText(text, Qt::ElideRight, r.width()));
}

void KvBlockGrid::rebuildPixmap() {
    const qreal dpr = devicePixelRatioF();
    m_pixmap = QPixmap(size() * dpr);
    m_pixmap.setDevicePixelRatio(dpr);
    const CellStyle st(palette());
    m_pixmap.fill(st.base);
    m_hatch = hatchTile(st.hatchInk(), std::max(4, m_geo.cell / 3 + 2), dpr);
    QPainter p(&m_pixmap);
    p.setFont(font());
    const QFontMetrics fm = fontMetrics();
    m_keys.resize(m_frame.blocks.size());
    for (int i = 0; i < m_frame.blocks.size(); ++i) {
        drawBlockCell(p, m_geo.cellRect(i), m_frame.blocks[i], m_frame.blockSize, m_lastOwner[i], st, m_hatch, fm);
        paintAdapterBar(p, i);
        m_keys[i] = cellKey(i);
    }
    m_hostKeys = m_hostOwner;
    for (int i = 0; i < m_hostOwner.size(); ++i) drawHostCell(p, m_geo.hostRect(i), m_hostOwner[i], st);
    if (!m_hostOwner.isEmpty()) paintHostCaption(p);
    m_pixmapValid = true;
}

void KvBlockGrid::paintEvent(QPaintEvent* e) {
    const qreal dpr = devicePixelRatioF();
    if (!m_pixmapValid || m_pixmap.devicePixelRatio() != dpr || m_pixmap.size() != size() * dpr) rebuildPixmap();
    QPainter p(this);
    const QRect er = e->rect();
    p.drawPixmap(er, m_pixmap, QRectF(QPointF(er.topLeft()) * dpr, QSizeF(er.size()) * dpr));
    if (m_selected != kNoRequest) paintSelection(p);
    const QColor ink = palette().color(QPalette::Text);
    const QRect hover = m_hovered >= 0 ? blockRect(m_hovered) : hostBlockRect(m_hoveredHost);
    if (!hover.isNull()) {
        p.setRenderHint(QPainter::Antialiasing, false);
        p.setPen(QPen(ink, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(hover.adjusted(-1, -1, 0, 0));
    }
}

void KvBlockGrid::paintSelection(QPainter& p) const {
    const auto it = m_rowOf.constFind(m_selected);
    const qreal dpr = m_pixmap.devicePixelRatio();
    const CellStyle st(palette());
    // Dim everything, then bring the selected request's cells back from the pixmap.
    QColor dim = st.base;
    dim.setAlphaF(0.72f);
    const int gridBottom = m_geo.margin + m_geo.rows * m_geo.pitch();
    p.fillRect(QRect(0, 0, width(), gridBottom), dim);
    if (!m_hostOwner.isEmpty()) p.fillRect(QRect(0, m_geo.hostTop - m_geo.gap, width(), height() - m_geo.hostTop), dim);
    auto undim = [&](const QRect& r) {
        p.drawPixmap(r, m_pixmap, QRectF(QPointF(r.topLeft()) * dpr, QSizeF(r.size()) * dpr));
    };
    for (int i = 0; i < m_hostOwner.size(); ++i)
        if (m_hostOwner[i] == m_selected) undim(m_geo.hostRect(i));
    if (it == m_rowOf.cend()) return;
    const QVector<int>& table = m_frame.requests[*it].blockIds;
    const QVector<QPointF> path = selectionPath();
    p.setRenderHint(QPainter::Antialiasing, false);
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(st.text, m_geo.cell >= 10 ? 2 : 1));
    for (int b : table) {
        if (b < 0 || b >= m_frame.blocks.size()) continue;
        const QRect r = m_geo.cellRect(b);
        undim(r);
        p.drawRect(r.adjusted(-1, -1, 0, 0));
    }
    if (path.isEmpty()) return;
    // The table order: a path through the blocks, a dot at the first, and indices when they fit.
    // Separate opaque segments with flat caps: a translucent polyline crossing itself, or
    // round caps, send Qt's raster engine through its general stroker (~10 ms here).
    p.setRenderHint(QPainter::Antialiasing, true);
    const QColor ink = mixColors(st.text, st.base, 0.3);
    p.setPen(QPen(ink, std::clamp(m_geo.cell / 12.0, 1.0, 3.0), Qt::SolidLine, Qt::FlatCap));
    QVector<QLineF> segments;
    segments.reserve(path.size());
    for (int i = 1; i < path.size(); ++i) segments.push_back(QLineF(path[i - 1], path[i]));
    p.drawLines(segments);
    p.setBrush(st.text);
    p.setPen(Qt::NoPen);
    p.drawEllipse(path.first(), m_geo.cell * 0.28 + 1, m_geo.cell * 0.28 + 1);
    const QFontMetrics fm = fontMetrics();
    if (m_geo.cell < fm.height() * 1.15) return;
    QFont small = font();
    small.setPointSizeF(std::max(1.0, small.pointSizeF() * std::min(1.0, m_geo.cell * 0.5 / fm.height())));
    p.setFont(small);
    const QFontMetricsF sfm(small);
    for (int i = 0; i < path.size(); ++i) {
        const QString n = QString::number(i);
        const qreal rad = std::max(sfm.horizontalAdvance(n), sfm.height()) * 0.6;
        p.setPen(Qt::NoPen);
        p.setBrush(i == 0 ? st.text : st.base);
        p.drawEllipse(path[i], rad, rad);
        p.setPen(i == 0 ? st.base : st.text);
        p.drawText(QRectF(path[i].x() - rad, path[i].y() - rad, 2 * rad, 2 * rad), Qt::AlignCenter, n);
    }
}

void KvBlockGrid::mouseMoveEvent(QMouseEvent* e) {
    const QPoint pos = e->position().toPoint();
    const int b = blockAt(pos), h = b >= 0 ? -1 : hostBlockAt(pos);
    if (b == m_hovered && h == m_hoveredHost) return;
    const QRect old = m_hovered >= 0 ? blockRect(m_hovered) : hostBlockRect(m_hoveredHost);
    const bool blockChanged = b != m_hovered;
    m_hovered = b;
    m_hoveredHost = h;
    const QRect now = b >= 0 ? blockRect(b) : hostBlockRect(h);
    if (m_selected != kNoRequest) {
        update();
    } else {
        if (!old.isNull()) update(old.adjusted(-3, -3, 3, 3));
        if (!now.isNull()) update(now.adjusted(-3, -3, 3, 3));
    }
    if (blockChanged) Q_EMIT blockHovered(b);
}

void KvBlockGrid::leaveEvent(QEvent* e) {
    if (m_hovered >= 0 || m_hoveredHost >= 0) {
        m_hovered = m_hoveredHost = -1;
        update();
        Q_EMIT blockHovered(-1);
    }
    QWidget::leaveEvent(e);
}

void KvBlockGrid::mousePressEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return QWidget::mousePressEvent(e);
    const QPoint pos = e->position().toPoint();
    qint64 id = kNoRequest;
    if (const int b = blockAt(pos); b >= 0) {
        const QVector<qint64>& owners = m_frame.blocks[b].owners;
        if (!owners.isEmpty()) {  // a shared block: each click moves on to its next owner
            const int at = static_cast<int>(owners.indexOf(m_selected));
            id = owners[at < 0 ? 0 : (at + 1) % owners.size()];
        }
    } else if (const int h = hostBlockAt(pos); h >= 0) {
        id = m_hostOwner[h];
    }
    Q_EMIT requestClicked(id);
}

bool KvBlockGrid::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* he = static_cast<QHelpEvent*>(e);
        const int b = blockAt(he->pos());
        const int h = b >= 0 ? -1 : hostBlockAt(he->pos());
        if (b >= 0) QToolTip::showText(he->globalPos(), tooltipForBlock(b), this, blockRect(b));
        else if (h >= 0)
            QToolTip::showText(he->globalPos(), tooltipForHostBlock(h), this, hostBlockRect(h));
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

void KvBlockGrid::changeEvent(QEvent* e) {
    if (e->type() == QEvent::PaletteChange || e->type() == QEvent::StyleChange) {
        m_pixmapValid = false;
        update();
    } else if (e->type() == QEvent::FontChange) {
        relayout();
    }
    QWidget::changeEvent(e);
}
}  // namespace kvs::ui
