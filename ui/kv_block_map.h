#pragma once
// The KV block map view: the paged block pool as a grid (one cell per block, coloured by the
// request that owns it, filled as far as tokens were written), the CPU swap tier as a strip
// below it, and beside it the same requests under contiguous max-length reservation, so the
// memory PagedAttention saves is visible at a glance. Takes ui/view_types.h frames only.
//
//   KvBlockMapView "kvBlockMap"
//   ├─ summary line             QLabel "kvBlockMapSummary"
//   ├─ QSplitter "kvBlockMapSplitter"
//   │  ├─ paged pool            KvBlockGrid "kvBlockGrid" in QScrollArea "kvBlockGridScroll",
//   │  │                        titles/footers "kvPagedTitle", "kvPagedFooter"; with sliding-window
//   │  │                        layers in a pool of their own (gemma3) their pool below it:
//   │  │                        "kvLocalTitle", KvBlockGrid "kvLocalBlockGrid" in "kvLocalGridScroll"
//   │  └─ contiguous baseline   ContiguousBaselineView "contiguousBaseline",
//   │                           "kvContiguousTitle", "kvContiguousFooter"
//   ├─ KV tiers                 KvTierStrip "kvTierStrip" (device pool, CPU tier, disk; hidden without tiers)
//   └─ legend                   KvBlockLegend "kvBlockLegend"
#include <QElapsedTimer>
#include <QWidget>

#include "ui/contiguous_baseline_view.h"
#include "ui/kv_block_grid.h"
#include "ui/kv_map_stats.h"
#include "ui/view_types.h"

class QLabel;
class QScrollArea;
class QSplitter;
class QTimer;

namespace kvs::ui {

class KvTierStrip;

class AdapterLegend;

// Swatches of every cell style with a word each; wraps to its width.
class KvBlockLegend : public QWidget {
    Q_OBJECT
public:
    explicit KvBlockLegend(QWidget* parent = nullptr);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int w) const override;

protected:
    void paintEvent(QPaintEvent* e) override;

private:
    QVector<QRect> itemRects(int width) const;  // one per legend entry
};

class KvBlockMapView : public QWidget {
    Q_OBJECT
public:
    explicit KvBlockMapView(QWidget* parent = nullptr);

    void setFrame(const EngineFrame& frame);
    const EngineFrame& frame() const { return m_frame; }
    const KvMapStats& stats() const { return m_stats; }
    // Text a block holds, for the tooltip (the app wires it to the tokenizer).
    void setTokenText(BlockTextProvider fn);

    qint64 selectedRequest() const { return m_selected; }
    QVector<int> selectedBlockOrder() const;  // the selected request's block table

    // Hit tests and geometry in this widget's coordinates.
    int blockAt(QPoint pos) const;  // device block id, -1 when none
    QRect blockRect(int block) const;
    QString tooltipForBlock(int block) const;
    // The summary line and the footers under the two pools, for this frame (the labels
    // themselves follow at most every kTextIntervalMs).
    QString summaryText() const;
    QString pagedFooterText() const;
    QString contiguousFooterText() const;
    static constexpr int kTextIntervalMs = 150;

    KvBlockGrid* grid() const { return m_grid; }
    // The sliding-window layers' pool (hidden without one), drawn from localPoolFrame().
    KvBlockGrid* localGrid() const { return m_localGrid; }
    QString localTitleText() const;
    // The frame the local grid draws: the local pool's blocks, each request's local table.
    static EngineFrame localPoolFrame(const EngineFrame& frame);
    KvTierStrip* tierStrip() const { return m_tierStrip; }
    ContiguousBaselineView* baseline() const { return m_baseline; }

    // The colour of a request in every view (see ui/request_colors.h).
    static QColor colorForRequest(qint64 id);

    QSize sizeHint() const override;

public Q_SLOTS:
    // Highlights the request's block table in order (kNoRequest clears); does not emit.
    void setSelectedRequest(qint64 id);

Q_SIGNALS:
    void requestSelected(qint64 id);  // a click chose a request (kNoRequest: a free cell)
    void blockHovered(int block);

protected:
    bool eventFilter(QObject* obj, QEvent* e) override;

private:
    void onCellClicked(qint64 id);
    void refit();
    void scheduleTexts(bool now);
    void updateTexts();

    EngineFrame m_frame;
    KvMapStats m_stats;
    qint64 m_selected = kNoRequest;
    QLabel* m_summary;
    QLabel* m_pagedTitle;
    QLabel* m_pagedFooter;
    QLabel* m_contigTitle;
    QLabel* m_contigFooter;
    QScrollArea* m_scroll;
    KvBlockGrid* m_grid;
    QLabel* m_localTitle;
    QScrollArea* m_localScroll;
    KvBlockGrid* m_localGrid;  // the sliding-window layers' own pool
    ContiguousBaselineView* m_baseline;
    KvBlockLegend* m_legend;
    KvTierStrip* m_tierStrip;  // the three KV tiers, while the engine has tiers
    AdapterLegend* m_adapterLegend;  // requests by LoRA adapter, while any has one
    QSplitter* m_split;
    QTimer* m_textTimer;
    QElapsedTimer m_textClock;
};

}  // namespace kvs::ui
