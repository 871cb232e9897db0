// ctest-labels: ui
// The block map with Gemma 3's sliding-window layers in a pool of their own: a real engine on
// a tiny generated gemma3 model (window 8, two local layers, one global) runs three requests
// part-way; its snapshot goes through app/view_convert into the KvBlockMapView. The local
// pool's grid appears under the global layers' one; the counters (blocks in use, request
// blocks freed out of the window, freed since start) are the engine's own numbers; a freed
// cell is drawn (dashed outline and cross in its last owner's colour) unlike a free one; a
// model whose layers share one pool shows no local grid. Screenshot:
// tests/output/kv_block_map_window.png.
#include <QApplication>
#include <QScrollArea>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "app/view_convert.h"
#include "engine/runtime/engine.h"
#include "tests/support/greedy_params.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "tests/support/token_ids.h"
#include "ui/kv_block_map.h"
#include "ui/request_colors.h"

using namespace kvs;

namespace {

std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> m, bool freeing) {
    EngineOptions o;
    o.backend = "cpu";
    o.n_threads = 1;
    o.block_size = 8;
    o.kv_blocks = 40;
    o.local_kv_blocks = 16;
    o.max_model_len = 256;
    o.free_out_of_window = freeing;
    o.scheduler.max_num_batched_tokens = 16;
    auto e = Engine::create(std::move(m), nullptr, o);
    if (!e) qFatal("Engine::create: %s", e.message().c_str());
    return std::move(*e);
}

// Distinct colours inside a cell (its 1-pixel border left out).
int colours_in(const QImage& img, const QRect& r) {
    std::set<QRgb> seen;
    for (int y = r.top() + 1; y < r.bottom(); ++y)
        for (int x = r.left() + 1; x < r.right(); ++x) seen.insert(img.pixel(x, y));
    return static_cast<int>(seen.size());
}

}  // namespace

class TstKvBlockMapWindow : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_model;

private Q_SLOTS:
    void initTestCase() {
        test::TinyModelSpec spec;
        spec.arch = "gemma3";
        spec.n_layer = 3;
        spec.sliding_window = 8;
        spec.swa_pattern = 3;
        auto m = test::write_and_load_tiny_gguf(m_dir.filePath("g.gguf").toStdString(), spec);
        QVERIFY2(m, m.message().c_str());
        m_model = *m;
    }

    void localPoolDrawnWithFreedBlocks() {
        auto e = make_engine(m_model, true);
        for (int i = 0; i < 3; ++i) {
            GenerationRequest g;
            g.prompt = test::random_tokens(20 + 9 * i, m_model->config.n_vocab, uint32_t(30 + i));
            g.params = test::greedy(60);
            QVERIFY(e->submit(std::move(g)));
        }
        // The view sees every step, as the window's poll does: it remembers who held a block last.
        ui::KvBlockMapView view;
        view.resize(1000, 700);
        for (int s = 0; s < 30; ++s) {
            QVERIFY(e->step());
            view.setFrame(app::to_frame(e->snapshot(StepRecord{})));
        }
        const EngineSnapshot snap = e->snapshot(StepRecord{});
        QVERIFY(snap.total_freed_blocks > 0);
        int freed_entries = 0, freed_cells = 0, used_cells = 0;
        for (const RequestView& r : snap.requests)
            for (int32_t b : r.local_block_ids) freed_entries += b < 0 ? 1 : 0;
        for (const BlockView& b : snap.local_blocks) {
            freed_cells += b.state == BlockSlotState::freed ? 1 : 0;
            used_cells += b.state == BlockSlotState::used ? 1 : 0;
        }
        QVERIFY(freed_entries > 0);
        QVERIFY2(freed_cells > 0, "no local block waits in the pool as freed");

        const ui::EngineFrame f = app::to_frame(snap);
        QCOMPARE(f.localBlocks.size(), qsizetype(16));
        view.setFrame(f);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        QTest::qWait(ui::KvBlockMapView::kTextIntervalMs + 50);  // the labels follow the frames at most that often
        QApplication::processEvents();
        const ui::KvMapStats& st = view.stats();
        QCOMPARE(st.nLocalBlocks, 16);
        QCOMPARE(st.localUsed, used_cells);
        QCOMPARE(st.localFreed, freed_cells);
        QCOMPARE(st.freedEntries, freed_entries);
        QCOMPARE(st.freedTotal, snap.total_freed_blocks);
        QVERIFY(view.localGrid()->isVisible());
        const QString title = view.localTitleText();
        QVERIFY2(title.contains(QString("%1 of 16 blocks in use").arg(used_cells)), qPrintable(title));
        QVERIFY2(title.contains(QString("%1 request blocks freed").arg(freed_entries)), qPrintable(title));
        QVERIFY2(title.contains("2 of 3"), qPrintable(title));
        QVERIFY2(view.summaryText().contains(QString("%1 freed</b> out of the window").arg(snap.total_freed_blocks)),
                 qPrintable(view.summaryText()));

        // A freed cell looks unlike a free one; its colour is the request that gave it back.
        const QImage grid = view.localGrid()->grab().toImage();
        int freed_seen = 0, free_seen = 0;
        for (int i = 0; i < f.localBlocks.size(); ++i) {
            const QRect r = view.localGrid()->blockRect(i);
            QVERIFY(!r.isEmpty());
            const int n = colours_in(grid, r);
            if (f.localBlocks[i].state == ui::BlockState::Freed) {
                QVERIFY2(n >= 2, qPrintable(QString("freed cell %1 has %2 colours").arg(i).arg(n)));
                QVERIFY(view.localGrid()->lastOwner(i) != ui::kNoRequest);
                ++freed_seen;
            } else if (f.localBlocks[i].state == ui::BlockState::Free) {
                QCOMPARE(n, 1);
                ++free_seen;
            }
        }
        QCOMPARE(freed_seen, freed_cells);
        QVERIFY(view.localGrid()->tooltipForBlock(0).contains("Block 0"));
        const QImage shot = view.grab().toImage();
        QVERIFY(shot.save(QString::fromStdString(test::output_path("kv_block_map_window.png"))));
        qInfo(
            "local pool: %d of 16 blocks used, %d freed cells, %d free cells, %d request entries freed, %lld freed "
            "since start",
            used_cells, freed_cells, free_seen, freed_entries, static_cast<long long>(snap.total_freed_blocks));

        // One pool for every layer: no local grid, no local numbers.
        auto plain = make_engine(m_model, false);
        view.setFrame(app::to_frame(plain->snapshot(StepRecord{})));
        QVERIFY(!view.localGrid()->isVisible());
        QCOMPARE(view.stats().nLocalBlocks, 0);
        QVERIFY(!view.summaryText().contains("sliding-window"));
    }
};

QTEST_MAIN(TstKvBlockMapWindow)
#include "tst_kv_block_map_window.moc"
