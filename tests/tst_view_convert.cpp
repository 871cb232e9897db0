// ctest-labels: ui model
// app/view_convert: engine snapshots -> the rows the views draw. Runs a real engine on a
// tiny model under static batching: once the short member of a batch has finished, its
// seat keeps running padding chunks, and its row must be drawn as Padding (issue: finished
// seats were blank because the Finished status was looked at before the padding chunk).
#include <QTemporaryDir>
#include <QtTest>

#include "app/view_convert.h"
#include "engine/runtime/session.h"
#include "tests/support/tiny_session.h"

using namespace kvs;

class TestViewConvert : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void staticBatchPaddingIsDrawn() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("tiny.gguf").toStdString();
        auto session = test::open_tiny_session(path);
        QVERIFY2(session, session.message().c_str());
        EngineOptions eo;
        eo.n_threads = 1;
        eo.scheduler.policy = BatchingPolicy::static_batch;
        eo.scheduler.max_num_seqs = 2;
        eo.scheduler.static_batch_size = 2;
        auto engine = (*session)->make_engine(eo);
        QVERIFY2(engine, engine.message().c_str());
        Engine& e = **engine;
        RequestId ids[2] = {0, 0};
        const int lengths[2] = {2, 8};
        for (int i = 0; i < 2; ++i) {
            GenerationRequest g;
            g.prompt = (*session)->encode_user(i == 0 ? "short" : "long one");
            g.params.temperature = 0;
            g.params.max_tokens = lengths[i];
            g.params.ignore_eos = true;
            auto id = e.submit(std::move(g));
            QVERIFY2(id, id.message().c_str());
            ids[i] = id.value();
        }
        int padding_rows = 0, padding_chunks = 0;
        for (int step = 0; step < 32 && e.has_work(); ++step) {
            auto r = e.step();
            QVERIFY2(r, r.message().c_str());
            const auto snap = e.telemetry()->latest();
            QVERIFY(snap);
            for (const ui::RequestRow& row : app::to_request_rows(*snap)) {
                if (row.id != ids[0]) continue;
                if (row.slot == ui::SlotState::Padding) ++padding_rows;
                for (const ChunkView& c : snap->chunks) padding_chunks += c.id == row.id && c.padding;
            }
        }
        QVERIFY2(padding_chunks > 0, "the short request's seat never ran a padding chunk");
        QCOMPARE(padding_rows, padding_chunks);
    }

    // A request the window did not name (an HTTP client's, or any request in a remote
    // server's telemetry) is named by its client; without one it stays "req N".
    void requestsAreNamedByTheirClient() {
        EngineSnapshot s;
        RequestView a;
        a.id = 7;
        a.client = "alice";
        RequestView b;
        b.id = 8;
        s.requests = {a, b};
        const auto rows = app::to_request_rows(s);
        QCOMPARE(rows.size(), 2);
        QCOMPARE(rows[0].label, QString("alice #7"));
        QCOMPARE(rows[1].label, QString("req 8"));
        const auto named = app::to_request_rows(s, [](RequestId id) { return id == 7 ? QString("my chat") : QString(); });
        QCOMPARE(named[0].label, QString("my chat"));  // the window's own name wins
    }
};

QTEST_MAIN(TestViewConvert)
#include "tst_view_convert.moc"
