#pragma once
// The paged KV pool as a grid: one square cell per device block (wrapping to the width,
// as large as fit, scrolling below a minimum size), the CPU swap tier as a strip of host
// cells under it, hover tooltips, clicks that pick a block's owner, and the selected
// request's block table drawn in order. Painted from a cached pixmap; a new frame repaints
// only the cells whose look changed.
#include <QHash>
#include <QPixmap>
#include <QWidget>
#include <functional>

#include "ui/kv_map_stats.h"
#include "ui/view_types.h"

namespace kvs::ui {

// The text a block holds: the request and the block's index in that request's table
// (tokens [index * blockSize, (index + 1) * blockSize) of the request). Return "" when
// unknown. Called only while a tooltip is being built.
using BlockTextProvider = std::function<QString(qint64 request, int tableIndex)>;

// Where the cells of a wrapped square grid lie (logical pixels).
struct BlockGridGeometry {
    int cell = 8;  // side of a cell
    int gap = 1;   // between cells
    int margin = 4;
    int cols = 1;
    int rows = 0;
    int hostCaptionTop = 0;  // the swap tier's caption line
    int hostTop = 0;         // first row of host cells
    int hostRows = 0;
    int height = 0;  // of everything
    int pitch() const { return cell + gap; }
    bool operator==(const BlockGridGeometry&) const = default;
    QRect cellRect(int i) const;
    QRect hostRect(int i) const;
    int cellAt(QPoint p, int nCells) const;  // the gap after a cell counts as the cell; -1 outside
    int hostAt(QPoint p, int nHost) const;
    // The largest cell (between minCell and maxCell) whose grid fits width x height, or the
    // minCell grid (taller than height) when none does.
    static BlockGridGeometry fit(int nCells, int nHost, int width, int height, int captionHeight, int minCell,
                                 int maxCell);
};

// The device block grid and the host swap strip, painted from a cached pixmap: a new frame
// repaints only the cells whose look changed; hover and selection are drawn over it.
class KvBlockGrid : public QWidget {
    Q_OBJECT
public:
    explicit KvBlockGrid(QWidget* parent = nullptr);

    void setFrame(const EngineFrame& frame);
    void setSelectedRequest(qint64 id);
    void setTokenText(BlockTextProvider fn) { m_tokenText = std::move(fn); }
    // Lays the grid out for a scroll viewport: cells as large as fit, else the smallest
    // cells at the viewport's width less a scroll bar (the grid then scrolls).
    void fitTo(const QSize& viewport, int scrollBarExtent);

    const BlockGridGeometry& geometryInfo() const { return m_geo; }
    int blockAt(QPoint p) const;       // device block id, -1 when none
    int hostBlockAt(QPoint p) const;   // host block index, -1 when none
    QRect blockRect(int block) const;  // empty for a bad id
    QRect hostBlockRect(int hostBlock) const;
    qint64 hostOwner(int hostBlock) const;   // kNoRequest when free
    qint64 lastOwner(int block) const;       // who held a cached block last (kNoRequest if unknown)
    QVector<QPointF> selectionPath() const;  // centres of the selected request's blocks, table order
    QString tooltipForBlock(int block) const;
    QString tooltipForHostBlock(int hostBlock) const;
    int lastDirtyCells() const { return m_lastDirty; }  // cells repainted by the last setFrame

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

Q_SIGNALS:
    void requestClicked(qint64 id);  // kNoRequest for a free cell
    void blockHovered(int block);    // -1 when the mouse leaves the cells

protected:
    void paintEvent(QPaintEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    void leaveEvent(QEvent* e) override;
    bool event(QEvent* e) override;
    void changeEvent(QEvent* e) override;

private:
    void rebuildPixmap();
    void paintCell(QPainter& p, int block) const;
    // The bar under a held or cached block in its owner's LoRA adapter colour (ui/adapter_legend.h),
    // while the frame has requests with adapters.
    void paintAdapterBar(QPainter& p, int block) const;
    void paintHostCell(QPainter& p, int hostBlock) const;
    void paintHostCaption(QPainter& p) const;
    void paintSelection(QPainter& p) const;
    void relayout();
    quint64 cellKey(int block) const;
    QString ownerName(qint64 id) const;
    void rememberOwners();

    EngineFrame m_frame;
    QHash<qint64, int> m_rowOf;   // request id -> index in m_frame.requests
    QStringList m_adapters;       // frameAdapters(m_frame): the bars' colours
    QVector<qint64> m_hostOwner;  // [nHostBlocks]
    QVector<qint64> m_lastOwner;  // [nBlocks] owner (first) now, or last owner while cached
    QVector<int> m_lastIndex;     // [nBlocks] its index in that owner's table
    QVector<quint64> m_keys;      // [nBlocks] look of each cell in the pixmap
    QVector<qint64> m_hostKeys;   // [nHostBlocks]
    BlockGridGeometry m_geo;
    QSize m_viewport;
    int m_scrollBarExtent = 0;
    QPixmap m_pixmap;  // cells + caption, device pixels
    QPixmap m_hatch;   // one hatch tile for shared cells
    bool m_pixmapValid = false;
    qint64 m_selected = kNoRequest;
    int m_hovered = -1;
    int m_hoveredHost = -1;
    int m_lastDirty = 0;
    BlockTextProvider m_tokenText;
};

}  // namespace kvs::ui
