// ctest-labels: ui
// The KV tiers under the block map (ui/kv_tier_strip): a real engine with a CPU tier and a
// disk store on a tiny generated model runs a prompt, a filler that evicts it, and the prompt
// again; its snapshot goes through app/view_convert into the KvBlockMapView. The strip's rows
// say what the engine's tiers hold (numbers read from the engine itself), its bars fill as far
// as the bytes of their limits; without tiers it is hidden. Screenshot:
// tests/output/kv_tiers_block_map.png (docs/screenshots/ keeps a copy).
#include <QApplication>
#include <QTemporaryDir>
#include <QtTest>

#include "app/view_convert.h"
#include "engine/kv_cache/kv_tiers.h"
#include "engine/runtime/engine.h"
#include "tests/support/greedy_params.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/kv_block_map.h"
#include "ui/kv_tier_strip.h"

using namespace kvs;

namespace {

std::vector<int32_t> run_one(Engine& e, std::vector<int32_t> prompt, int n) {
    GenerationRequest g;
    g.prompt = std::move(prompt);
    g.params = test::greedy(n);
    auto id = e.submit(std::move(g));
    if (!id) qFatal("submit: %s", id.message().c_str());
    if (Status st = e.run_until_idle(); !st) qFatal("run: %s", st.message().c_str());
    return e.output_tokens(*id);
}

std::vector<int32_t> tokens(int n, int first) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(3 + (first + i * 7) % 250);
    return v;
}

}  // namespace

class TstKvTierStrip : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void stripShowsTheEnginesTiers();
};

void TstKvTierStrip::stripShowsTheEnginesTiers() {
    QTemporaryDir dir;
    auto m = test::write_and_load_tiny_gguf((dir.path() + "/m.gguf").toStdString(), {});
    QVERIFY(static_cast<bool>(m));
    EngineOptions o;
    o.backend = "cpu";
    o.n_threads = 1;
    o.block_size = 8;
    o.kv_blocks = 24;
    o.max_model_len = 256;
    o.kv_cpu_tier_bytes = 6 * 4096;  // twelve blocks of this model (2 layers x K, V x 8 tokens x 32 values x 2 bytes)
    o.kv_disk_bytes = 1 << 20;
    o.kv_disk_dir = (dir.path() + "/kv").toStdString();
    auto e = Engine::create(*m, nullptr, o);
    QVERIFY2(static_cast<bool>(e), e.message().c_str());
    Engine& eng = **e;
    const std::vector<int32_t> prompt = tokens(100, 1);
    run_one(eng, prompt, 4);
    run_one(eng, tokens(180, 50), 8);  // takes the pool: the prompt's blocks go down the tiers
    run_one(eng, prompt, 4);           // and come back up
    const KvTiers& t = *eng.kv_tiers();
    QVERIFY(t.cpu()->n_blocks() > 0 && t.disk()->n_blocks() > 0);

    // One more request in flight (its first prefill chunk), so the pool shows blocks in use.
    GenerationRequest g;
    g.prompt = tokens(120, 9);
    g.params = test::greedy(8);
    QVERIFY(static_cast<bool>(eng.submit(std::move(g))));
    QVERIFY(static_cast<bool>(eng.step()));
    const ui::EngineFrame f = app::to_frame(eng.snapshot(StepRecord{}));
    ui::KvBlockMapView view;
    view.resize(980, 620);
    view.setFrame(f);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    ui::KvTierStrip* strip = view.tierStrip();
    QVERIFY(strip->isVisible());
    const KVCacheStats s = eng.kv_cache().stats();
    QVERIFY(s.cpu_hit_tokens + s.disk_hit_tokens > 0);
    auto has = [&](int row, const QString& what) {
        return strip->rowText(row).contains(what) ? true : (qWarning() << strip->rowText(row), false);
    };
    QVERIFY(has(1, QString("%1 blocks").arg(t.cpu()->n_blocks())));
    QVERIFY(has(1, QString("%1 tokens hit").arg(s.cpu_hit_tokens)));
    QVERIFY(has(2, QString("%1 blocks").arg(t.disk()->n_blocks())));
    QVERIFY(has(2, QString("%1 tokens hit").arg(s.disk_hit_tokens)));
    QVERIFY(has(0, QString("%1 tokens hit").arg(s.hit_tokens - s.cpu_hit_tokens - s.disk_hit_tokens)));
    QCOMPARE(strip->rowFill(1), static_cast<double>(t.cpu()->bytes()) / static_cast<double>(o.kv_cpu_tier_bytes));
    QCOMPARE(strip->rowFill(2), static_cast<double>(t.disk()->bytes()) / static_cast<double>(o.kv_disk_bytes));
    QVERIFY(strip->rowText(3).contains(QString::number(t.stats().spilled_blocks)));
    QApplication::processEvents();
    const QImage shot = view.grab().toImage();
    QVERIFY(shot.save(QString::fromStdString(test::output_path("kv_tiers_block_map.png"))));

    // Without tiers the strip is not shown.
    EngineOptions plain = o;
    plain.kv_cpu_tier_bytes = plain.kv_disk_bytes = 0;
    auto e2 = Engine::create(*m, nullptr, plain);
    QVERIFY(static_cast<bool>(e2));
    view.setFrame(app::to_frame((*e2)->snapshot(StepRecord{})));
    QVERIFY(!strip->isVisible());
}

QTEST_MAIN(TstKvTierStrip)
#include "tst_kv_tier_strip.moc"
