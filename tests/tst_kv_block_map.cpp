// ctest-labels: ui
// The KV block map view, offscreen, fed frames built here (free / used / cached / shared
// blocks, partly filled last blocks, a request swapped out to the CPU tier): its numbers
// (paged vs contiguous waste), hit tests, tooltips, clicks and selection, the pixel colours
// of each cell style, incremental repaint against a full one, frame times (printed, never
// asserted) and screenshots of a small and a big pool in light and dark palettes
// (tests/output/kv_block_map_*.png).
#include <QApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QRandomGenerator>
#include <QScrollArea>
#include <QSignalSpy>
#include <QStyleFactory>
#include <QThread>
#include <QToolTip>
#include <QtTest>
#include <algorithm>

#include "ui/dark_palette.h"
#include "tests/support/test_paths.h"
#include "tests/support/widget_probe.h"
#include "ui/kv_block_map.h"
#include "ui/request_colors.h"

using namespace kvs::ui;

namespace {

using kvs::test::color_distance;
using kvs::ui::dark_palette;

// Builds a realistic frame: blocks are taken from a shuffled free list (a pool after some
// churn hands out scattered blocks), requests may share a prefix, last blocks are partly
// filled, finished requests leave cached blocks, and a swapped request holds host blocks.
class FrameBuilder {
public:
    FrameBuilder(int nBlocks, int nHost, int maxModelLen, quint32 seed, int blockSize = 16) {
        m_f.blockSize = blockSize;
        m_f.maxModelLen = maxModelLen;
        m_f.nHostBlocks = nHost;
        m_f.blocks.resize(nBlocks);
        for (int i = 0; i < nBlocks; ++i) m_f.blocks[i].id = i;
        for (int i = 0; i < nBlocks; ++i) m_free.push_back(i);
        QRandomGenerator rng(seed);
        std::shuffle(m_free.begin(), m_free.end(), rng);
    }
    // A prefix of n full blocks that requests added with shared=true start with.
    void sharedPrefix(int n) {
        for (int i = 0; i < n; ++i) m_prefix.push_back(take());
    }
    void request(qint64 id, int tokens, bool shared = false, const QString& label = {}) {
        RequestRow r = row(id, label);
        r.status = "running";
        r.slot = SlotState::Decode;
        const int bs = m_f.blockSize;
        int left = tokens;
        if (shared) {
            for (int b : m_prefix) {
                use(b, id, bs);
                r.blockIds.push_back(b);
                left -= bs;
            }
        }
        while (left > 0) {
            const int b = take();
            use(b, id, std::min(left, bs));
            r.blockIds.push_back(b);
            left -= bs;
        }
        r.computedTokens = tokens;
        m_f.requests.push_back(r);
    }
    void swapped(qint64 id, int hostBlocks) {
        RequestRow r = row(id, {});
        r.status = "swapped";
        r.slot = SlotState::Swapped;
        r.hostBlocks = hostBlocks;
        for (int i = 0; i < hostBlocks; ++i) m_f.hostBlocks.push_back(HostCell{m_nextHost++, id});
        m_f.requests.push_back(r);
    }
    void cached(int n) {
        for (int i = 0; i < n; ++i) {
            BlockCell& c = m_f.blocks[take()];
            c.state = BlockState::Cached;
            c.filled = m_f.blockSize;
            c.hashed = true;
        }
    }
    EngineFrame frame() {
        EngineFrame f = m_f;
        std::sort(f.requests.begin(), f.requests.end(),
                  [](const RequestRow& a, const RequestRow& b) { return a.id < b.id; });
        for (BlockCell& c : f.blocks) std::sort(c.owners.begin(), c.owners.end());
        f.step.nBlocks = static_cast<int>(f.blocks.size());
        return f;
    }
    const QVector<int>& prefix() const { return m_prefix; }

private:
    RequestRow row(qint64 id, const QString& label) {
        RequestRow r;
        r.id = id;
        r.label = label.isEmpty() ? QStringLiteral("req %1").arg(id) : label;
        return r;
    }
    int take() { return m_free.takeFirst(); }
    void use(int b, qint64 owner, int filled) {
        BlockCell& c = m_f.blocks[b];
        c.state = BlockState::Used;
        c.owners.push_back(owner);
        c.refCount = static_cast<int>(c.owners.size());
        c.filled = std::max(c.filled, filled);
        c.hashed = c.filled == m_f.blockSize;
    }
    EngineFrame m_f;
    QVector<int> m_free;
    QVector<int> m_prefix;
    int m_nextHost = 0;
};

// 64 blocks: req 1 holds 100 tokens (7 blocks, last 4/16); req 2 (75 tokens) and req 3
// (50 tokens) share a 2-block prefix; req 4 is swapped out (3 host blocks of 16); 5 blocks
// are cached; max model length 512 (two reservations fit in 64 x 16 slots).
EngineFrame smallFrame() {
    FrameBuilder b(64, 16, 512, 7);
    b.request(1, 100);
    b.sharedPrefix(2);
    b.request(2, 75, true);
    b.request(3, 50, true);
    b.swapped(4, 3);
    b.cached(5);
    return b.frame();
}

// 4096 blocks, 64 requests of 40..1440 tokens, the first 8 sharing a 4-block system prompt,
// one swapped out, 96 cached blocks, max model length 2048.
EngineFrame bigFrame(quint32 seed = 11) {
    FrameBuilder b(4096, 256, 2048, seed);
    QRandomGenerator rng(seed);
    b.sharedPrefix(4);
    for (int i = 1; i <= 64; ++i) {
        if (i == 40) {
            b.swapped(i, 20);
            continue;
        }
        b.request(i, 40 + int(rng.bounded(1400)), i <= 8, i % 5 == 0 ? QStringLiteral("chat %1").arg(i) : QString());
    }
    b.cached(96);
    return b.frame();
}

// One decode step: every running request writes one more token (a new block when its last
// one is full). Returns how many cells change look.
int decodeStep(EngineFrame& f) {
    int changed = 0;
    QVector<int> freeList;
    for (const BlockCell& c : f.blocks)
        if (c.state == BlockState::Free) freeList.push_back(c.id);
    for (RequestRow& r : f.requests) {
        if (r.blockIds.isEmpty()) continue;
        BlockCell& last = f.blocks[r.blockIds.last()];
        if (last.filled < f.blockSize && last.refCount == 1) {
            ++last.filled;
            last.hashed = last.filled == f.blockSize;
        } else if (!freeList.isEmpty()) {
            BlockCell& c = f.blocks[freeList.takeFirst()];
            c.state = BlockState::Used;
            c.owners = {r.id};
            c.refCount = 1;
            c.filled = 1;
            r.blockIds.push_back(c.id);
        }
        ++r.computedTokens;
        ++changed;
    }
    return changed;
}

#define VERIFY_COLOR(actual, expected, tol)                 \
    QVERIFY2(color_distance((actual), (expected)) <= (tol), \
             qPrintable(QStringLiteral("got %1, expected %2").arg((actual).name(), (expected).name())))

QColor pixelAt(const QImage& img, QPointF p) { return img.pixelColor(p.toPoint()); }

// A block of request `id` in its table at `index` (negative: from the end).
int blockOf(const EngineFrame& f, qint64 id, int index) {
    for (const RequestRow& r : f.requests)
        if (r.id == id) return r.blockIds[index >= 0 ? index : r.blockIds.size() + index];
    return -1;
}

int firstBlockIn(const EngineFrame& f, BlockState s) {
    for (const BlockCell& c : f.blocks)
        if (c.state == s) return c.id;
    return -1;
}

void showAndWait(QWidget& w, QSize size) {
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCoreApplication::processEvents();
}

}  // namespace

class TestKvBlockMap : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QApplication::setStyle(QStyleFactory::create("Fusion")); }

    void statsOfSmallFrame() {
        const KvMapStats s = KvMapStats::compute(smallFrame());
        QCOMPARE(s.nBlocks, 64);
        QCOMPARE(s.used, 14);  // 7 + 2 shared + 3 + 2
        QCOMPARE(s.shared, 2);
        QCOMPARE(s.cached, 5);
        QCOMPARE(s.free, 64 - 14 - 5);
        QCOMPARE(s.hostUsed, 3);
        QCOMPARE(s.nHostBlocks, 16);
        QCOMPARE(s.tokensInKv, qint64(100 + 32 + 43 + 18));  // the shared prefix once
        QCOMPARE(s.usedSlots, qint64(14 * 16));
        QVERIFY(qAbs(s.pagedWaste - (1.0 - 193.0 / 224.0)) < 1e-9);
        QCOMPARE(s.holders, (QVector<qint64>{1, 2, 3}));  // the swapped request holds no device block
        QCOMPARE(s.holderTokens, (QVector<int>{100, 75, 50}));
        QCOMPARE(s.contiguousReserved, qint64(3 * 512));
        QVERIFY(qAbs(s.contiguousWaste - (1.0 - 225.0 / 1536.0)) < 1e-9);
        QCOMPARE(s.contiguousFit, 2);  // 1024 slots hold two 512-slot reservations
        const KvMapStats empty = KvMapStats::compute(EngineFrame{});
        QCOMPARE(empty.pagedWaste, 0.0);
        QCOMPARE(empty.contiguousWaste, 0.0);
    }

    void summaryAndFooters() {
        KvBlockMapView v;
        v.setFrame(smallFrame());
        const QString s = v.summaryText();
        QVERIFY2(s.contains("14 / 64</b> blocks used") && s.contains("5 cached") && s.contains("2 shared"),
                 qPrintable(s));
        QVERIFY2(s.contains("3 swapped out") && s.contains("13.8%") && s.contains("contiguous: 85.4%"), qPrintable(s));
        const QString contig = v.findChild<QLabel*>("kvContiguousFooter")->text();
        QVERIFY2(contig.contains("2 of 3") && contig.contains("85.4%"), qPrintable(contig));
        const QString paged = v.findChild<QLabel*>("kvPagedFooter")->text();
        QVERIFY2(paged.contains("193") && paged.contains("13.8%"), qPrintable(paged));
    }

    void hitTestsAndGeometry() {
        const EngineFrame f = smallFrame();
        KvBlockMapView v;
        v.setFrame(f);
        showAndWait(v, {900, 560});
        KvBlockGrid* g = v.grid();
        auto* scroll = v.findChild<QScrollArea*>("kvBlockGridScroll");
        QVERIFY(g && scroll);
        QVERIFY2(g->height() <= scroll->viewport()->height(), "64 blocks must fit without scrolling");
        for (int i = 0; i < 64; ++i) {
            const QRect r = v.blockRect(i);
            QCOMPARE(r.width(), r.height());  // square
            QCOMPARE(v.blockAt(r.center()), i);
            QCOMPARE(g->blockAt(g->blockRect(i).topLeft()), i);
        }
        QVERIFY(g->geometryInfo().cell >= v.fontMetrics().height());  // a small pool gets big cells
        QCOMPARE(g->blockAt(QPoint(-3, -3)), -1);
        QCOMPARE(
            g->blockAt(QPoint(g->geometryInfo().margin + g->geometryInfo().cols * g->geometryInfo().pitch() + 2, 5)),
            -1);
        QCOMPARE(v.blockAt(QPoint(1, 1)), -1);  // the summary line, not the grid
        for (int h = 0; h < 16; ++h) QCOMPARE(g->hostBlockAt(g->hostBlockRect(h).center()), h);
        QVERIFY(g->hostBlockRect(0).top() > g->blockRect(63).bottom());  // the swap strip is below
        // Hovering reports the block and shows its tooltip.
        QSignalSpy hovered(&v, &KvBlockMapView::blockHovered);
        const int b = f.requests[0].blockIds[3];
        QTest::mouseMove(g, g->blockRect(b).center());
        QTRY_COMPARE(hovered.count(), 1);
        QCOMPARE(hovered.last().at(0).toInt(), b);
        QHelpEvent help(QEvent::ToolTip, g->blockRect(b).center(), g->mapToGlobal(g->blockRect(b).center()));
        QApplication::sendEvent(g, &help);
        QTRY_VERIFY(QToolTip::isVisible());
        QCOMPARE(QToolTip::text(), v.tooltipForBlock(b));
        QToolTip::hideText();
        QCOMPARE(g->hostOwner(0), qint64(4));
        QCOMPARE(g->hostOwner(3), kNoRequest);

        // 4096 blocks still fit a typical dock without scrolling, in cells of a few pixels.
        v.setFrame(bigFrame());
        showAndWait(v, {1400, 900});
        QVERIFY2(g->height() <= scroll->viewport()->height(), qPrintable(QString::number(g->height())));
        QVERIFY(g->geometryInfo().cell >= 4);
        for (int i : {0, 1, 777, 4095}) QCOMPARE(v.blockAt(v.blockRect(i).center()), i);
        // Too small for the smallest cells: the grid scrolls vertically, never horizontally.
        v.resize(500, 300);
        QCoreApplication::processEvents();
        QVERIFY(g->height() > scroll->viewport()->height());
        QVERIFY(g->width() <= scroll->viewport()->width());
        QCOMPARE(g->geometryInfo().cell, std::max(4, v.fontMetrics().height() / 3));
    }

    void tooltipsTellBlockDetails() {
        const EngineFrame f = smallFrame();
        KvBlockMapView v;
        QVector<QPair<qint64, int>> asked;
        v.setTokenText([&](qint64 req, int index) {
            asked.push_back({req, index});
            return QStringLiteral("text of %1/%2 <b>\n").arg(req).arg(index);
        });
        v.setFrame(f);
        const int shared = blockOf(f, 2, 0);
        QString t = v.tooltipForBlock(shared);
        QVERIFY2(
            t.contains(QStringLiteral("Block %1").arg(shared)) && t.contains("used, shared") && t.contains("refs 2"),
            qPrintable(t));
        QVERIFY2(t.contains("owners: req 2 (block #0 of its table), req 3 (block #0 of its table)"), qPrintable(t));
        QVERIFY2(t.contains("filled 16 / 16 tokens") && t.contains("prefix cache"), qPrintable(t));
        QVERIFY2(t.contains("text of 2/0 &lt;b&gt;⏎"), qPrintable(t));  // the provider's text, escaped
        const int last1 = blockOf(f, 1, -1);
        asked.clear();
        t = v.tooltipForBlock(last1);
        QVERIFY2(t.contains("filled 4 / 16 tokens") && t.contains("owner: req 1 (block #6 of its table)"),
                 qPrintable(t));
        QVERIFY2(!t.contains("prefix cache"), qPrintable(t));
        QCOMPARE(asked, (QVector<QPair<qint64, int>>{{1, 6}}));
        t = v.tooltipForBlock(firstBlockIn(f, BlockState::Cached));
        QVERIFY2(t.contains("cached (free, reusable by prefix)") && t.contains("16 / 16"), qPrintable(t));
        t = v.tooltipForBlock(firstBlockIn(f, BlockState::Free));
        QVERIFY2(t.contains("· free") && !t.contains("owner"), qPrintable(t));
        t = v.grid()->tooltipForHostBlock(1);
        QVERIFY2(t.contains("Host block 1") && t.contains("swapped out") && t.contains("req 4") &&
                     t.contains("3 host blocks"),
                 qPrintable(t));
        QVERIFY(v.grid()->tooltipForHostBlock(9).contains("free"));
        QVERIFY(v.tooltipForBlock(64).isEmpty());
    }

    void clicksSelectOwners() {
        const EngineFrame f = smallFrame();
        KvBlockMapView v;
        v.setFrame(f);
        showAndWait(v, {900, 560});
        QSignalSpy spy(&v, &KvBlockMapView::requestSelected);
        KvBlockGrid* g = v.grid();
        auto click = [&](QPoint p) { QTest::mouseClick(g, Qt::LeftButton, {}, p); };
        click(g->blockRect(blockOf(f, 1, 2)).center());
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.last().at(0).toLongLong(), qint64(1));
        QCOMPARE(v.selectedRequest(), qint64(1));
        const QRect shared = g->blockRect(blockOf(f, 3, 1));
        click(shared.center());
        QCOMPARE(spy.last().at(0).toLongLong(), qint64(2));  // the first owner...
        click(shared.center());
        QCOMPARE(spy.last().at(0).toLongLong(), qint64(3));  // ...then the next one
        click(g->hostBlockRect(2).center());
        QCOMPARE(spy.last().at(0).toLongLong(), qint64(4));  // a swapped-out block
        click(g->blockRect(firstBlockIn(f, BlockState::Free)).center());
        QCOMPARE(spy.last().at(0).toLongLong(), kNoRequest);
        QCOMPARE(v.selectedRequest(), kNoRequest);
        // The contiguous baseline picks requests too.
        ContiguousBaselineView* c = v.baseline();
        QTest::mouseClick(c, Qt::LeftButton, {}, c->reservationRect(2).center().toPoint());
        QCOMPARE(spy.last().at(0).toLongLong(), qint64(2));
        QCOMPARE(spy.count(), 6);
        // The setter highlights without emitting.
        v.setSelectedRequest(1);
        QCOMPARE(spy.count(), 6);
    }

    void selectionDrawsTheTableInOrder() {
        const EngineFrame f = smallFrame();
        KvBlockMapView v;
        v.setFrame(f);
        showAndWait(v, {900, 560});
        v.setSelectedRequest(2);
        const QVector<int> table = f.requests[1].blockIds;
        QCOMPARE(v.selectedBlockOrder(), table);
        const QVector<QPointF> path = v.grid()->selectionPath();
        QCOMPARE(path.size(), table.size());
        for (int i = 0; i < table.size(); ++i) QCOMPARE(path[i], QRectF(v.grid()->blockRect(table[i])).center());
        QVERIFY(v.summaryText().contains("Selected <b>req 2</b>: 5 blocks"));

        const QImage img = v.grid()->grab().toImage();
        const QPalette pal = v.grid()->palette();
        const QColor base = pal.color(QPalette::Base);
        // Other requests' blocks are dimmed towards the background...
        const QColor c1 = requestColor(1);
        const QColor dimmed = mixColors(c1, base, 0.72);
        // (sampled near the corners of a cell: the path between centres may cross a cell)
        auto corners = [&](const QRect& r, const QColor& want, int tol) {
            const int in = std::max(3, r.width() / 6);
            int n = 0;
            for (QPoint p : {r.topLeft() + QPoint(in, in), r.topRight() + QPoint(-in, in),
                             r.bottomLeft() + QPoint(in, -in), r.bottomRight() + QPoint(-in, -in)})
                n += color_distance(img.pixelColor(p), want) <= tol;
            return n;
        };
        QVERIFY(corners(v.grid()->blockRect(blockOf(f, 1, 0)), dimmed, 6) >= 2);
        // ...the selected one's are not.
        const QRect mine = v.grid()->blockRect(blockOf(f, 2, 2));  // full, not shared
        QVERIFY(corners(mine, requestColor(2), 3) >= 2);
        // An outline in the text colour frames each selected cell.
        VERIFY_COLOR(img.pixelColor(mine.left() - 1, mine.center().y()), pal.color(QPalette::Text), 10);
        QVERIFY(v.grab().save(QString::fromStdString(kvs::test::output_path("kv_block_map_small_selected.png"))));
        // The baseline highlights the same request.
        QVERIFY(!v.baseline()->reservationRect(2).isEmpty());
        QVERIFY(v.baseline()->reservationRect(3).isEmpty());  // does not fit contiguously
    }

    void cellColoursFollowState() {
        // Frame A: request 9 holds block X; frame B: it finished, X is cached.
        FrameBuilder b(64, 16, 512, 7);
        b.request(1, 100);
        b.request(9, 32);
        b.swapped(4, 3);
        const EngineFrame a = b.frame();
        const int x = blockOf(a, 9, 0);
        EngineFrame bf = a;
        QCOMPARE(a.requests.last().id, qint64(9));
        bf.requests.removeLast();
        for (int blk : a.requests.last().blockIds) {  // request 9's two blocks
            bf.blocks[blk].state = BlockState::Cached;
            bf.blocks[blk].owners.clear();
            bf.blocks[blk].refCount = 0;
        }
        KvBlockMapView v;
        v.setFrame(a);
        showAndWait(v, {900, 560});
        v.setFrame(bf);
        QCOMPARE(v.grid()->lastOwner(x), qint64(9));
        QVERIFY2(v.tooltipForBlock(x).contains("last held by req 9"), qPrintable(v.tooltipForBlock(x)));

        const QImage img = v.grid()->grab().toImage();
        const QPalette pal = v.grid()->palette();
        const QColor base = pal.color(QPalette::Base), text = pal.color(QPalette::Text);
        const QColor c1 = requestColor(1);
        KvBlockGrid* g = v.grid();
        // A full block: the owner's colour.
        VERIFY_COLOR(pixelAt(img, g->blockRect(blockOf(bf, 1, 0)).center()), c1, 3);
        // The last block, 4 of 16 written: solid on the left quarter, the owner's tint after.
        const QRect last = g->blockRect(blockOf(bf, 1, -1));
        VERIFY_COLOR(img.pixelColor(last.left() + last.width() / 10, last.center().y()), c1, 3);
        VERIFY_COLOR(img.pixelColor(last.left() + last.width() * 8 / 10, last.center().y()), fadedColor(c1, base, 0.32),
                     3);
        // A free block: plain.
        VERIFY_COLOR(pixelAt(img, g->blockRect(firstBlockIn(bf, BlockState::Free)).center()),
                     mixColors(base, text, 0.09), 3);
        // A cached block: its last owner's faded colour, outlined in that colour.
        const QRect cx = g->blockRect(x);
        VERIFY_COLOR(pixelAt(img, cx.center()), fadedColor(requestColor(9), base, 0.2), 3);
        VERIFY_COLOR(img.pixelColor(cx.left(), cx.center().y()), requestColor(9), 3);
        // A swapped-out block in the CPU strip: the owner's colour.
        VERIFY_COLOR(img.pixelColor(g->hostBlockRect(0).topLeft() + QPoint(2, 2)), requestColor(4), 3);
        VERIFY_COLOR(pixelAt(img, g->hostBlockRect(5).center()), mixColors(base, text, 0.09), 3);

        // The contiguous baseline: request 1's reservation starts with its 100 used tokens, solid.
        const QImage cimg = v.baseline()->grab().toImage();
        ContiguousBaselineView* cb = v.baseline();
        const QRectF r1 = cb->reservationRect(1);
        QCOMPARE(r1, cb->tokenSpan(0, 512).first());  // the first reservation starts the pool
        const QRectF used = cb->tokenSpan(40, 41).first(), unused = cb->tokenSpan(500, 501).first();
        VERIFY_COLOR(pixelAt(cimg, used.center()), c1, 3);
        QVERIFY(color_distance(pixelAt(cimg, unused.center()), c1) > 20);  // reserved, unused: tint + hatching
        QCOMPARE(cb->requestAt(unused.center().toPoint()), qint64(1));
        const QPoint after = cb->tokenSpan(600, 601).first().center().toPoint();  // request 9 is gone: free
        QCOMPARE(cb->requestAt(after), kNoRequest);
        QVERIFY2(cb->tooltipAt(after).contains("Free: 512 token slots, room for 1 more"),
                 qPrintable(cb->tooltipAt(after)));
        const QString tip = cb->tooltipAt(unused.center().toPoint());
        QVERIFY2(tip.contains("holds 100 tokens") && tip.contains("412 reserved but unused (80.5%)"), qPrintable(tip));
    }

    void incrementalRepaintMatchesFullRepaint() {
        EngineFrame f = bigFrame();
        KvBlockMapView v;
        v.setFrame(f);
        showAndWait(v, {1200, 800});
        v.grid()->grab();  // paints: the pixmap is built
        const int changed = decodeStep(f);
        v.setFrame(f);
        QCOMPARE(v.grid()->lastDirtyCells(), changed);  // only the cells that changed look
        const QImage incremental = v.grid()->grab().toImage();
        KvBlockMapView fresh;
        fresh.setFrame(f);
        showAndWait(fresh, {1200, 800});
        QCOMPARE(fresh.grid()->size(), v.grid()->size());
        QVERIFY(fresh.grid()->grab().toImage() == incremental);
        v.setFrame(f);
        QCOMPARE(v.grid()->lastDirtyCells(), 0);
        // A pool of another size (4095 blocks keep the same rows) is drawn afresh.
        EngineFrame smaller = f;
        smaller.blocks.removeLast();
        for (RequestRow& r : smaller.requests) r.blockIds.removeAll(4095);
        v.setFrame(smaller);
        fresh.setFrame(smaller);
        QCOMPARE(fresh.grid()->geometryInfo(), v.grid()->geometryInfo());
        QVERIFY(fresh.grid()->grab().toImage() == v.grid()->grab().toImage());
        v.setFrame(smallFrame());
        fresh.setFrame(smallFrame());
        QVERIFY(fresh.grid()->grab().toImage() == v.grid()->grab().toImage());
        QCOMPARE(v.blockAt(v.blockRect(63).center()), 63);
    }

    void requestColorsReadOnBothThemes() {
        const QColor white(Qt::white), dark(0x1e, 0x1e, 0x1e);
        for (qint64 id = -3; id < 40; ++id) {
            const QColor c = requestColor(id);
            QCOMPARE(c, requestColor(id));  // deterministic
            QVERIFY2(contrastRatio(c, white) >= 1.3, qPrintable(QString("%1 %2").arg(id).arg(c.name())));
            QVERIFY2(contrastRatio(c, dark) >= 2.5, qPrintable(QString("%1 %2").arg(id).arg(c.name())));
        }
        for (int a = 0; a < requestColorCount(); ++a)
            for (int b = a + 1; b < requestColorCount(); ++b)
                QVERIFY(color_distance(requestColor(a), requestColor(b)) > 30);
        QVERIFY(color_distance(requestColor(3), requestColor(3 + requestColorCount())) > 20);  // variants differ
        QCOMPARE(KvBlockMapView::colorForRequest(5), requestColor(5));
        QCOMPARE(contrastingTextColor(QColor(Qt::yellow)), QColor(Qt::black));
        QCOMPARE(contrastingTextColor(QColor(0x20, 0x20, 0x60)), QColor(Qt::white));
    }

    void screenshots() {
        struct Shot {
            const char* name;
            bool big;
            bool dark;
            qint64 select;
        };
        for (const Shot& s : {Shot{"small_light", false, false, kNoRequest}, Shot{"small_dark", false, true, 2},
                              Shot{"big_light", true, false, 5}, Shot{"big_dark", true, true, kNoRequest}}) {
            KvBlockMapView v;
            if (s.dark) v.setPalette(dark_palette());
            v.setFrame(s.big ? bigFrame() : smallFrame());
            v.setSelectedRequest(s.select);
            showAndWait(v, s.big ? QSize(1280, 760) : QSize(960, 560));
            const QImage img = v.grab().toImage();
            QVERIFY(img.save(
                QString::fromStdString(kvs::test::output_path(std::string("kv_block_map_") + s.name + ".png"))));
            // The theme is followed: the grid's background is the palette's base colour.
            VERIFY_COLOR(v.grid()->grab().toImage().pixelColor(0, 0), v.palette().color(QPalette::Base), 2);
        }
    }

    void frameTimes() {
        EngineFrame f = bigFrame();
        KvBlockMapView v;
        showAndWait(v, {1280, 760});
        QElapsedTimer t;
        t.start();
        v.setFrame(f);
        v.repaint();
        const double firstMs = t.nsecsElapsed() / 1e6;
        // Decode steps: every running request writes a token; setFrame + the repaint it asks for.
        const int steps = 60;
        double sumMs = 0, maxMs = 0, setMs = 0;
        for (int i = 0; i < steps; ++i) {
            decodeStep(f);
            t.restart();
            v.setFrame(f);
            setMs += t.nsecsElapsed() / 1e6;
            QCoreApplication::processEvents();  // the update requests: only changed cells are painted
            const double ms = t.nsecsElapsed() / 1e6;
            sumMs += ms;
            maxMs = std::max(maxMs, ms);
        }
        // Frames that also refresh the summary and footers (they follow at most every
        // kTextIntervalMs, so wait that long first).
        double textSumMs = 0, textMaxMs = 0;
        const int textSteps = 8;
        for (int i = 0; i < textSteps; ++i) {
            decodeStep(f);
            QThread::msleep(KvBlockMapView::kTextIntervalMs + 5);
            t.restart();
            v.setFrame(f);
            QCoreApplication::processEvents();
            const double ms = t.nsecsElapsed() / 1e6;
            textSumMs += ms;
            textMaxMs = std::max(textMaxMs, ms);
        }
        // The worst case: the whole view repainted (e.g. a selection drawn over 4096 cells).
        v.setSelectedRequest(7);
        QCoreApplication::processEvents();
        double fullMs = 0;
        for (int i = 0; i < 20; ++i) {
            t.restart();
            v.grid()->repaint();
            v.baseline()->repaint();
            fullMs += t.nsecsElapsed() / 1e6;
        }
        qInfo(
            "kv block map, 4096 blocks / 64 requests: first frame %.2f ms; per decode step: setFrame %.3f ms, "
            "setFrame+paint mean %.3f ms, max %.3f ms; with the texts refreshed mean %.3f ms, max %.3f ms; "
            "grid+baseline full repaint with a selection %.3f ms",
            firstMs, setMs / steps, sumMs / steps, maxMs, textSumMs / textSteps, textMaxMs, fullMs / 20);
        QVERIFY(v.grid()->lastDirtyCells() > 0);
    }
};

QTEST_MAIN(TestKvBlockMap)
#include "tst_kv_block_map.moc"
