#include "ui/kv_block_map.h"

#include <QEvent>
#include <QFrame>
#include <QLabel>
#include <QPainter>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QStyle>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/adapter_legend.h"
#include "ui/kv_block_paint.h"
#include "ui/kv_tier_strip.h"
#include "ui/request_colors.h"

namespace kvs::ui {

using namespace blockpaint;

// ---- KvBlockLegend ----------------------------------------------------------------------

namespace {

enum class LegendSwatch { Free, Used, Cached, Shared, Swapped, Freed, Reserved, Selected };

struct LegendEntry {
    LegendSwatch swatch;
    const char* text;
};

constexpr LegendEntry kLegend[] = {
    {LegendSwatch::Free, QT_TRANSLATE_NOOP("KvBlockLegend", "free")},
    {LegendSwatch::Used, QT_TRANSLATE_NOOP("KvBlockLegend", "used (filled part = tokens written)")},
    {LegendSwatch::Cached, QT_TRANSLATE_NOOP("KvBlockLegend", "cached (free, reusable prefix)")},
    {LegendSwatch::Shared, QT_TRANSLATE_NOOP("KvBlockLegend", "shared (refs > 1)")},
    {LegendSwatch::Swapped, QT_TRANSLATE_NOOP("KvBlockLegend", "swapped out (CPU tier)")},
    {LegendSwatch::Freed, QT_TRANSLATE_NOOP("KvBlockLegend", "freed (evicted / out of window)")},
    {LegendSwatch::Reserved, QT_TRANSLATE_NOOP("KvBlockLegend", "reserved, unused (contiguous)")},
    {LegendSwatch::Selected, QT_TRANSLATE_NOOP("KvBlockLegend", "selected request, table order")},
};

}  // namespace

KvBlockLegend::KvBlockLegend(QWidget* parent) : QWidget(parent) {
    setObjectName("kvBlockLegend");
    QStringList words;
    for (const LegendEntry& e : kLegend) words << tr(e.text);
    setAccessibleName(tr("Legend: %1").arg(words.join(", ")));
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Minimum);
}

QVector<QRect> KvBlockLegend::itemRects(int width) const {
    const QFontMetrics fm = fontMetrics();
    const int h = fm.height(), sw = h, pad = h / 2, gap = h;
    QVector<QRect> out;
    int x = 0, y = pad / 2;
    for (const LegendEntry& e : kLegend) {
        const int w = sw + pad / 2 + fm.horizontalAdvance(tr(e.text));
        if (x > 0 && x + w > width) {
            x = 0;
            y += h + pad / 2;
        }
        out.push_back(QRect(x, y, w, h));
        x += w + gap;
    }
    return out;
}

int KvBlockLegend::heightForWidth(int w) const {
    const QVector<QRect> r = itemRects(w);
    return r.isEmpty() ? 0 : r.last().bottom() + 1 + fontMetrics().height() / 4;
}

QSize KvBlockLegend::sizeHint() const {
    const QVector<QRect> r = itemRects(QWIDGETSIZE_MAX);
    return {r.last().right() + 1, heightForWidth(QWIDGETSIZE_MAX)};
}

QSize KvBlockLegend::minimumSizeHint() const {
    return {fontMetrics().height() * 8, heightForWidth(fontMetrics().height() * 8)};
}

void KvBlockLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const CellStyle st(palette());
    const QFontMetrics fm = fontMetrics();
    const int sw = fm.height();
    const QPixmap hatch = hatchTile(st.hatchInk(), std::max(4, sw / 3 + 2), devicePixelRatioF());
    const QVector<QRect> rects = itemRects(width());
    for (int i = 0; i < rects.size(); ++i) {
        const QRect sr(rects[i].left(), rects[i].top(), sw, sw);
        BlockCell b;
        switch (kLegend[i].swatch) {
            case LegendSwatch::Free: break;
            case LegendSwatch::Used: b.state = BlockState::Used, b.refCount = 1, b.owners = {0}, b.filled = 10; break;
            case LegendSwatch::Cached: b.state = BlockState::Cached; break;
            case LegendSwatch::Freed: b.state = BlockState::Freed; break;
            case LegendSwatch::Shared:
                b.state = BlockState::Used, b.refCount = 2, b.owners = {1, 2}, b.filled = 16;
                break;
            default: break;
        }
        p.fillRect(sr.adjusted(-1, -1, 1, 1), st.base);
        if (kLegend[i].swatch == LegendSwatch::Swapped) {
            drawHostCell(p, sr, 4, st);
        } else if (kLegend[i].swatch == LegendSwatch::Reserved) {
            p.fillRect(sr, st.usedTint(requestColor(0)));
            drawHatch(p, sr, hatch);
            p.fillRect(QRect(sr.left(), sr.top(), sw / 4, sw), requestColor(0));
        } else if (kLegend[i].swatch == LegendSwatch::Selected) {
            p.fillRect(sr, requestColor(5));
            p.setPen(QPen(st.text, 2));
            p.drawRect(sr.adjusted(0, 0, -1, -1));
            p.setRenderHint(QPainter::Antialiasing);
            p.setBrush(st.text);
            p.setPen(Qt::NoPen);
            p.drawEllipse(QRectF(sr).center(), sw * 0.2, sw * 0.2);
            p.setRenderHint(QPainter::Antialiasing, false);
        } else {
            const bool owned = kLegend[i].swatch == LegendSwatch::Cached || kLegend[i].swatch == LegendSwatch::Freed;
            drawBlockCell(p, sr, b, 16, owned ? 3 : kNoRequest, st, hatch, fm);
        }
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(rects[i].adjusted(sw + sw / 4, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, tr(kLegend[i].text));
    }
}

// ---- KvBlockMapView ---------------------------------------------------------------------

KvBlockMapView::KvBlockMapView(QWidget* parent) : QWidget(parent) {
    setObjectName("kvBlockMap");
    setAccessibleName(tr("KV block map"));
    auto label = [this](const char* name) {
        auto* l = new QLabel(this);
        l->setObjectName(name);
        l->setWordWrap(true);
        l->setTextFormat(Qt::RichText);
        return l;
    };
    m_summary = label("kvBlockMapSummary");
    m_summary->setAccessibleName(tr("KV block map summary"));
    m_pagedTitle = label("kvPagedTitle");
    m_pagedFooter = label("kvPagedFooter");
    m_contigTitle = label("kvContiguousTitle");
    m_contigFooter = label("kvContiguousFooter");

    m_grid = new KvBlockGrid;
    m_scroll = new QScrollArea(this);
    m_scroll->setObjectName("kvBlockGridScroll");
    m_scroll->setWidget(m_grid);
    m_scroll->setWidgetResizable(false);
    m_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_scroll->setFrameShape(QFrame::StyledPanel);
    m_scroll->viewport()->installEventFilter(this);
    m_localTitle = label("kvLocalTitle");
    m_localGrid = new KvBlockGrid;
    m_localGrid->setObjectName("kvLocalBlockGrid");
    m_localGrid->setAccessibleName(tr("KV blocks of the sliding-window layers"));
    m_localScroll = new QScrollArea(this);
    m_localScroll->setObjectName("kvLocalGridScroll");
    m_localScroll->setWidget(m_localGrid);
    m_localScroll->setWidgetResizable(false);
    m_localScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_localScroll->setFrameShape(QFrame::StyledPanel);
    m_localScroll->viewport()->installEventFilter(this);
    m_localTitle->hide();
    m_localScroll->hide();
    m_baseline = new ContiguousBaselineView(this);
    m_legend = new KvBlockLegend(this);
    m_tierStrip = new KvTierStrip(this);
    m_adapterLegend = new AdapterLegend(this);

    auto* left = new QWidget(this);
    auto* ll = new QVBoxLayout(left);
    ll->setContentsMargins(0, 0, 0, 0);
    ll->addWidget(m_pagedTitle);
    ll->addWidget(m_scroll, 3);
    ll->addWidget(m_pagedFooter);
    ll->addWidget(m_localTitle);
    ll->addWidget(m_localScroll, 2);
    auto* right = new QWidget(this);
    auto* rl = new QVBoxLayout(right);
    rl->setContentsMargins(0, 0, 0, 0);
    auto* frame = new QFrame(right);  // the same frame as the grid's scroll area
    frame->setFrameShape(QFrame::StyledPanel);
    auto* fl = new QVBoxLayout(frame);
    fl->setContentsMargins(1, 1, 1, 1);
    fl->addWidget(m_baseline);
    rl->addWidget(m_contigTitle);
    rl->addWidget(frame, 1);
    rl->addWidget(m_contigFooter);
    m_split = new QSplitter(Qt::Horizontal, this);
    m_split->setObjectName("kvBlockMapSplitter");
    m_split->setChildrenCollapsible(false);
    m_split->addWidget(left);
    m_split->addWidget(right);
    m_split->setStretchFactor(0, 3);
    m_split->setStretchFactor(1, 2);

    auto* lay = new QVBoxLayout(this);
    lay->addWidget(m_summary);
    lay->addWidget(m_split, 1);
    lay->addWidget(m_adapterLegend);
    lay->addWidget(m_tierStrip);
    lay->addWidget(m_legend);

    connect(m_grid, &KvBlockGrid::requestClicked, this, &KvBlockMapView::onCellClicked);
    connect(m_baseline, &ContiguousBaselineView::requestClicked, this, &KvBlockMapView::onCellClicked);
    connect(m_grid, &KvBlockGrid::blockHovered, this, &KvBlockMapView::blockHovered);
    connect(m_localGrid, &KvBlockGrid::requestClicked, this, &KvBlockMapView::onCellClicked);
    m_textTimer = new QTimer(this);
    m_textTimer->setSingleShot(true);
    connect(m_textTimer, &QTimer::timeout, this, &KvBlockMapView::updateTexts);
    updateTexts();
}

QSize KvBlockMapView::sizeHint() const {
    const int h = fontMetrics().height();
    return {h * 52, h * 30};
}

QColor KvBlockMapView::colorForRequest(qint64 id) { return requestColor(id); }

void KvBlockMapView::setTokenText(BlockTextProvider fn) {
    m_localGrid->setTokenText(fn);  // a local table's entry i holds the same positions as block i
    m_grid->setTokenText(std::move(fn));
}

EngineFrame KvBlockMapView::localPoolFrame(const EngineFrame& f) {
    EngineFrame local;
    local.step = f.step;
    local.blockSize = f.blockSize;
    local.maxModelLen = f.maxModelLen;
    local.blocks = f.localBlocks;
    local.requests = f.requests;
    for (RequestRow& r : local.requests) r.blockIds = r.localBlockIds;
    return local;
}

void KvBlockMapView::setFrame(const EngineFrame& frame) {
    const bool shape = frame.blocks.size() != m_frame.blocks.size() || frame.nHostBlocks != m_frame.nHostBlocks ||
                       frame.localBlocks.size() != m_frame.localBlocks.size();
    m_frame = frame;
    m_stats = KvMapStats::compute(m_frame);
    m_grid->setFrame(m_frame);
    const bool local = !m_frame.localBlocks.isEmpty();
    if (local || !m_localScroll->isHidden()) m_localGrid->setFrame(localPoolFrame(m_frame));
    m_localTitle->setVisible(local);
    m_localScroll->setVisible(local);
    m_tierStrip->setFrame(m_frame);
    m_adapterLegend->setFrame(m_frame);
    if (shape) refit();
    m_baseline->setFrame(m_frame, m_stats);
    scheduleTexts(shape);
}

void KvBlockMapView::setSelectedRequest(qint64 id) {
    if (id == m_selected) return;
    m_selected = id;
    m_grid->setSelectedRequest(id);
    m_localGrid->setSelectedRequest(id);
    m_baseline->setSelectedRequest(id);
    const QVector<int> order = selectedBlockOrder();
    if (!order.isEmpty()) {
        const QRect r = m_grid->blockRect(order.first());
        m_scroll->ensureVisible(r.center().x(), r.center().y(), r.width() * 2, r.height() * 2);
    }
    updateTexts();
}

QVector<int> KvBlockMapView::selectedBlockOrder() const {
    for (const RequestRow& r : m_frame.requests)
        if (r.id == m_selected) return r.blockIds;
    return {};
}

void KvBlockMapView::onCellClicked(qint64 id) {
    setSelectedRequest(id);
    Q_EMIT requestSelected(id);
}

int KvBlockMapView::blockAt(QPoint pos) const {
    const QPoint vp = m_scroll->viewport()->mapFrom(this, pos);
    if (!m_scroll->viewport()->rect().contains(vp)) return -1;
    return m_grid->blockAt(m_grid->mapFrom(this, pos));
}

QRect KvBlockMapView::blockRect(int block) const {
    const QRect r = m_grid->blockRect(block);
    return r.isNull() ? r : QRect(m_grid->mapTo(this, r.topLeft()), r.size());
}

QString KvBlockMapView::tooltipForBlock(int block) const { return m_grid->tooltipForBlock(block); }

bool KvBlockMapView::eventFilter(QObject* obj, QEvent* e) {
    if ((obj == m_scroll->viewport() || obj == m_localScroll->viewport()) && e->type() == QEvent::Resize) refit();
    return QWidget::eventFilter(obj, e);
}

void KvBlockMapView::refit() {
    const int sb = style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, m_scroll->verticalScrollBar());
    m_grid->fitTo(m_scroll->maximumViewportSize(), sb);
    m_localGrid->fitTo(m_localScroll->maximumViewportSize(), sb);
}

QString KvBlockMapView::summaryText() const {
    const KvMapStats& s = m_stats;
    QString summary = tr("<b>%1 / %2</b> blocks used · %3 cached · %4 shared")
                          .arg(numberText(s.used), numberText(s.nBlocks), numberText(s.cached), numberText(s.shared));
    if (s.nHostBlocks > 0) summary += tr(" · %1 swapped out").arg(numberText(s.hostUsed));
    if (s.freed > 0) summary += tr(" · %1 freed").arg(numberText(s.freed));
    if (s.nLocalBlocks > 0)
        summary += tr(" · sliding-window layers <b>%1 / %2</b> blocks, <b>%3 freed</b> out of the window so far")
                       .arg(numberText(s.localUsed), numberText(s.nLocalBlocks), numberText(s.freedTotal));
    summary += tr(" · waste <b>%1</b>").arg(percentText(s.pagedWaste));
    if (s.maxModelLen > 0 && !s.holders.isEmpty())
        summary += tr(" (contiguous: %1)").arg(percentText(s.contiguousWaste));
    if (m_selected == kNoRequest) return summary;
    QString name = tr("req %1").arg(m_selected);
    int blocks = 0;
    for (const RequestRow& r : m_frame.requests)
        if (r.id == m_selected) {
            if (!r.label.isEmpty()) name = r.label.toHtmlEscaped();
            blocks = static_cast<int>(r.blockIds.size());
        }
    return summary +
           (blocks == 1
                ? tr("<br>Selected <b>%1</b>: 1 block, marked with a dot").arg(name)
                : tr("<br>Selected <b>%1</b>: %2 blocks, drawn in table order from the dot").arg(name).arg(blocks));
}

QString KvBlockMapView::localTitleText() const {
    const KvMapStats& s = m_stats;
    if (s.nLocalBlocks == 0) return {};
    return tr("<b>Sliding-window layers</b> (%1 of %2, window %3 tokens) — their own pool: %4 of %5 blocks in use; "
              "%6 request blocks freed out of the window, %7 since start (crossed cells: freed, free again)")
        .arg(m_frame.nLocalLayers)
        .arg(m_frame.nLayers)
        .arg(numberText(m_frame.slidingWindow), numberText(s.localUsed), numberText(s.nLocalBlocks),
             numberText(s.freedEntries), numberText(s.freedTotal));
}

QString KvBlockMapView::pagedFooterText() const {
    const KvMapStats& s = m_stats;
    if (s.used == 0) return tr("No block in use.");
    return tr("%1 used blocks × %2 = %3 slots hold %4 tokens → <b>%5 wasted</b> (only each request's last block is "
              "partly empty)")
        .arg(numberText(s.used), numberText(s.blockSize), numberText(s.usedSlots), numberText(s.tokensInKv),
             percentText(s.pagedWaste));
}

QString KvBlockMapView::contiguousFooterText() const {
    const KvMapStats& s = m_stats;
    const int holders = static_cast<int>(s.holders.size());
    if (holders == 0 || s.maxModelLen <= 0) return tr("No request holds KV.");
    const QString fit =
        s.contiguousFit >= holders
            ? tr("all %1 fit in the same memory").arg(holders)
            : tr("only <b>%1 of %2</b> requests fit in the same memory").arg(s.contiguousFit).arg(holders);
    return tr("%1 × %2 = %3 slots reserved for %4 tokens → <b>%5 wasted</b>; %6")
        .arg(numberText(holders), numberText(s.maxModelLen), numberText(s.contiguousReserved),
             numberText(s.totalHolderTokens), percentText(s.contiguousWaste), fit);
}

// Rich-text labels cost more to lay out than the whole grid costs to paint, and numbers
// changing 30 times a second cannot be read anyway: the texts follow the frames at most
// every kTextIntervalMs (at once for a new pool or a new selection).
void KvBlockMapView::scheduleTexts(bool now) {
    if (now || !m_textClock.isValid() || m_textClock.elapsed() >= kTextIntervalMs) {
        updateTexts();
        return;
    }
    if (!m_textTimer->isActive()) m_textTimer->start(int(kTextIntervalMs - m_textClock.elapsed()));
}

void KvBlockMapView::updateTexts() {
    m_textTimer->stop();
    m_textClock.restart();
    auto set = [](QLabel* l, const QString& t) {
        if (l->text() != t) l->setText(t);
    };
    set(m_summary, summaryText());
    set(m_pagedTitle, m_stats.nLocalBlocks > 0
                          ? tr("<b>Paged</b> — global layers (%1 of %2), %3-token blocks, taken as needed")
                                .arg(m_frame.nLayers - m_frame.nLocalLayers)
                                .arg(m_frame.nLayers)
                                .arg(m_frame.blockSize)
                          : tr("<b>Paged</b> — %1-token blocks, taken as needed").arg(m_frame.blockSize));
    set(m_localTitle, localTitleText());
    set(m_pagedFooter, pagedFooterText());
    set(m_contigTitle,
        m_stats.maxModelLen > 0
            ? tr("<b>Contiguous</b> — %1 slots reserved per request").arg(numberText(m_stats.maxModelLen))
            : tr("<b>Contiguous</b> — max length reserved per request"));
    set(m_contigFooter, contiguousFooterText());
}

}  // namespace kvs::ui
