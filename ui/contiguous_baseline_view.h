#pragma once
// The contiguous baseline beside the block map: the same requests as if each reserved the
// model's maximum length as one contiguous range of the same memory (serving before
// PagedAttention). The pool's token slots are drawn as wrapped rows of block-sized cells,
// like the paged grid; each holder's reservation is one bar, in arrival order, its used part
// solid and the reserved-but-unused rest hatched. Holders that do not fit are counted by
// the block map's footer.
#include <QPixmap>
#include <QWidget>

#include "ui/kv_block_grid.h"
#include "ui/kv_map_stats.h"

namespace kvs::ui {

class ContiguousBaselineView : public QWidget {
    Q_OBJECT
public:
    explicit ContiguousBaselineView(QWidget* parent = nullptr);

    void setFrame(const EngineFrame& frame, const KvMapStats& stats);
    void setSelectedRequest(qint64 id);
    qint64 requestAt(QPoint p) const;         // kNoRequest outside every reservation
    QRectF reservationRect(qint64 id) const;  // first row segment of its bar; empty if none
    // Where token slots [first, end) of the pool lie: one rect per row they cross.
    QVector<QRectF> tokenSpan(qint64 first, qint64 end) const;
    QString tooltipAt(QPoint p) const;
    const BlockGridGeometry& geometryInfo() const { return m_geo; }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

Q_SIGNALS:
    void requestClicked(qint64 id);

protected:
    void paintEvent(QPaintEvent* e) override;
    void resizeEvent(QResizeEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;
    void changeEvent(QEvent* e) override;

private:
    void relayout();
    void rebuildBackground(const QVector<qint64>& key);

    EngineFrame m_frame;
    KvMapStats m_stats;
    BlockGridGeometry m_geo;
    QPixmap m_background;             // the pool and every reservation's hatched tint
    QVector<qint64> m_backgroundKey;  // what it was drawn for: length, fit, selection, holders
    QPixmap m_hatch;
    qint64 m_selected = kNoRequest;
};

}  // namespace kvs::ui
