// ctest-labels: ui remote net
// The telemetry stream of `kvscope serve` (GET /v1/kvscope/telemetry, app/server/
// telemetry_stream) and the remote window's full engine views fed from it:
//  - an event written and read back (engine/telemetry/telemetry_event) equals the structs it
//    was made of, field by field; token bytes that split a UTF-8 character cross whole; a
//    wrong format, version, type or a non-finite number is refused with a message;
//  - against a live kvscope server on 127.0.0.1 running HTTP requests: for every step both
//    sides have, the view models (app/view_convert) of the snapshots the client received
//    equal those of the snapshots the server's engine published (what its own window draws),
//    every step reaches the client, and the remote views show the newest one; the API key
//    guards the stream;
//  - the remote chat window against a KV Scope connection draws the block map while a chat
//    runs, says when the server went away and follows it again once it is back on the same
//    port;
//  - a misbehaving server (a stream cut mid-event, a 10 MB event, invalid JSON, another
//    version, NaN metrics, a server that never answers, 401, 404): a message naming
//    the fault, the event loop keeps turning, the views keep what they had.
// With the default model installed it saves docs' screenshot of a remote block map
// (tests/output/remote_kvscope_block_map.png).
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTimer>
#include <QtTest>
#include <atomic>
#include <map>
#include <thread>

#include "app/net/telemetry_reader.h"
#include "app/remote/gui/remote_chat_window.h"
#include "app/remote/gui/remote_engine_views.h"
#include "app/remote/telemetry_client.h"
#include "app/view_convert.h"
#include "engine/telemetry/snapshot_ring.h"
#include "engine/telemetry/telemetry_event.h"
#include "tests/support/live_server.h"
#include "ui/chat_view.h"
#include "ui/kv_block_map.h"
#include "ui/slot_timeline.h"

using namespace kvs;
using namespace kvs::remote;

namespace {

// The first difference between two frames ("" when equal), field by field.
QString frameDiff(const ui::EngineFrame& a, const ui::EngineFrame& b);

QString stepDiff(const ui::StepPoint& a, const ui::StepPoint& b) {
#define KVS_CMP(f) \
    if (!(a.f == b.f)) return QStringLiteral("step.%1: %2 vs %3").arg(#f).arg(a.f).arg(b.f)
    KVS_CMP(step);
    KVS_CMP(tStartMs);
    KVS_CMP(durationMs);
    KVS_CMP(prefillTokens);
    KVS_CMP(decodeTokens);
    KVS_CMP(paddingTokens);
    KVS_CMP(tokenBudget);
    KVS_CMP(nSeqs);
    KVS_CMP(maxSeqs);
    KVS_CMP(preemptions);
    KVS_CMP(swapOutBlocks);
    KVS_CMP(swapInBlocks);
    KVS_CMP(cowCopies);
    KVS_CMP(prefixHitTokens);
    KVS_CMP(running);
    KVS_CMP(waiting);
    KVS_CMP(swapped);
    KVS_CMP(blocksUsed);
    KVS_CMP(blocksCached);
    KVS_CMP(nBlocks);
    KVS_CMP(kvUsage);
    KVS_CMP(internalWaste);
    return {};
}

QString rowsDiff(const QVector<ui::RequestRow>& a, const QVector<ui::RequestRow>& b) {
    if (a.size() != b.size()) return QStringLiteral("%1 vs %2 request rows").arg(a.size()).arg(b.size());
    for (int i = 0; i < a.size(); ++i) {
        const ui::RequestRow& x = a[i];
        const ui::RequestRow& y = b[i];
        if (x.id != y.id || x.label != y.label || x.status != y.status || x.slot != y.slot ||
            x.priority != y.priority || x.promptTokens != y.promptTokens || x.outputTokens != y.outputTokens ||
            x.maxTokens != y.maxTokens || x.computedTokens != y.computedTokens || x.cachedTokens != y.cachedTokens ||
            x.blockIds != y.blockIds || x.hostBlocks != y.hostBlocks || x.preemptions != y.preemptions ||
            x.scheduledTokens != y.scheduledTokens)
            return QStringLiteral("request row %1 (id %2 vs %3) differs").arg(i).arg(x.id).arg(y.id);
    }
    return {};
}

QString frameDiff(const ui::EngineFrame& a, const ui::EngineFrame& b) {
    if (QString d = stepDiff(a.step, b.step); !d.isEmpty()) return d;
    if (a.blockSize != b.blockSize || a.maxModelLen != b.maxModelLen || a.nHostBlocks != b.nHostBlocks ||
        a.prefixHitRate != b.prefixHitRate || a.totalPreemptions != b.totalPreemptions ||
        a.totalGeneratedTokens != b.totalGeneratedTokens)
        return QStringLiteral("frame totals differ");
    if (a.blocks.size() != b.blocks.size())
        return QStringLiteral("%1 vs %2 blocks").arg(a.blocks.size()).arg(b.blocks.size());
    for (int i = 0; i < a.blocks.size(); ++i) {
        const ui::BlockCell& x = a.blocks[i];
        const ui::BlockCell& y = b.blocks[i];
        if (x.id != y.id || x.state != y.state || x.refCount != y.refCount || x.owners != y.owners ||
            x.filled != y.filled || x.hashed != y.hashed)
            return QStringLiteral("block %1 differs").arg(x.id);
    }
    if (a.hostBlocks.size() != b.hostBlocks.size()) return QStringLiteral("host blocks differ");
    for (int i = 0; i < a.hostBlocks.size(); ++i)
        if (a.hostBlocks[i].hostBlock != b.hostBlocks[i].hostBlock || a.hostBlocks[i].owner != b.hostBlocks[i].owner)
            return QStringLiteral("host block %1 differs").arg(i);
    return rowsDiff(a.requests, b.requests);
}

// A snapshot written by hand (not by an engine): two requests, one shared block, a swapped one.
EngineSnapshot handSnapshot(int64_t step) {
    EngineSnapshot s;
    s.step.step = step;
    s.step.t_start_ms = 12.25 + step;
    s.step.duration_ms = 3.5;
    s.step.prefill_tokens = 7;
    s.step.decode_tokens = 1;
    s.step.n_seqs = 2;
    s.step.n_running = 2;
    s.step.n_swapped = 1;
    s.step.blocks_used = 3;
    s.step.n_blocks = 4;
    s.step.kv_usage = 0.75;
    s.step.internal_waste = 1.0 / 3.0;
    s.block_size = 4;
    s.max_model_len = 64;
    s.chunks = {{1, 0, 7, true, false}, {2, 5, 1, false, false}};
    s.blocks.resize(4);
    for (int i = 0; i < 4; ++i) s.blocks[i].block_id = i;
    s.blocks[0] = {0, BlockSlotState::used, 2, {1, 2}, 4, true};
    s.blocks[1] = {1, BlockSlotState::used, 1, {1}, 3, false};
    s.blocks[2] = {2, BlockSlotState::used, 1, {2}, 2, false};
    s.blocks[3] = {3, BlockSlotState::cached, 0, {}, 4, true};
    s.host_blocks = {{0, 3}};
    s.n_host_blocks = 2;
    RequestView a;
    a.id = 1;
    a.status = RequestStatus::running;
    a.n_prompt = 7;
    a.max_tokens = 9;
    a.num_computed_tokens = 7;
    a.num_cached_tokens = 4;
    a.block_ids = {0, 1};
    a.tokens = {5, 6, 7, 8, 9, 10, 11};
    a.adapter = "style";
    a.client = "HTTP 127.0.0.1:53012";
    RequestView b;
    b.id = 2;
    b.status = RequestStatus::running;
    b.n_prompt = 5;
    b.n_output = 1;
    b.block_ids = {0, 2};
    b.tokens = {5, 6, 7, 8, 12, 13};
    RequestView c;
    c.id = 3;
    c.status = RequestStatus::swapped;
    c.n_host_blocks = 1;
    c.num_preemptions = 1;
    c.finish_reason = FinishReason::none;
    s.requests = {a, b, c};
    s.kv_stats.query_tokens = 12;
    s.kv_stats.hit_tokens = 4;
    s.total_preemptions = 1;
    s.total_generated_tokens = 30;
    s.total_finished = 2;
    s.prefix_hit_rate = 4.0 / 12.0;
    return s;
}

// A telemetry server that misbehaves by the API key it is sent (the mode).
class BadTelemetryServer {
public:
    BadTelemetryServer() {
        m_svr.Get("/v1/kvscope/telemetry", [this](const httplib::Request& req, httplib::Response& res) {
            std::string mode = req.get_header_value("Authorization");
            if (mode.rfind("Bearer ", 0) == 0) mode = mode.substr(7);
            if (mode == "401") {
                res.status = 401;
                res.set_content(R"({"error":{"message":"incorrect API key provided"}})", "application/json");
                return;
            }
            if (mode == "404") {
                res.status = 404;
                res.set_content("not found", "text/plain");
                return;
            }
            if (mode == "never") {  // accepts, never answers (for at most 20 s)
                for (int i = 0; i < 2000 && !m_quit; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                res.set_content("", "text/plain");
                return;
            }
            std::atomic<bool>* quit = &m_quit;
            res.set_chunked_content_provider("text/event-stream", [mode, quit](size_t, httplib::DataSink& sink) {
                std::string s;
                if (mode == "cut") {
                    s = "event: telemetry\ndata: {\"format\":\"kvscope-telemetry\",\"version\":1,\"snaps";
                } else if (mode == "huge") {
                    s = "event: telemetry\ndata: " + std::string(size_t{10} << 20, 'x') + "\n\n";
                } else if (mode == "invalid") {
                    s = "event: telemetry\ndata: {\"format\": kvscope\n\n";
                } else if (mode == "version") {
                    s = "event: telemetry\ndata: {\"format\":\"kvscope-telemetry\",\"version\":99}\n\n";
                } else if (mode == "nan") {
                    s = "event: telemetry\ndata: {\"format\":\"kvscope-telemetry\",\"version\":1,\"snapshots\":[{"
                        "\"block_size\":16,\"step\":{\"step\":3,\"kv_usage\":NaN}}]}\n\n";
                } else if (mode == "silent") {  // headers, then nothing
                    for (int i = 0; i < 2000 && !*quit; ++i)
                        std::this_thread::sleep_for(std::chrono::milliseconds(10));
                    return false;
                }
                sink.write(s.data(), s.size());
                sink.done();
                return true;
            });
        });
        m_port = m_svr.bind_to_any_port("127.0.0.1");
        m_thread = std::thread([this] { m_svr.listen_after_bind(); });
    }
    ~BadTelemetryServer() {
        m_quit = true;
        m_svr.stop();
        m_thread.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }

private:
    httplib::Server m_svr;
    std::thread m_thread;
    int m_port = 0;
    std::atomic<bool> m_quit{false};
};

// A live server (test::start_live_server's parts) on this port (0: any free one), its engine
// slowed by stepDelayMs per step so a test sees every step.
Result<std::unique_ptr<test::LiveServer>> startOn(int port, const std::string& model, int stepDelayMs,
                                                  const std::string& key = {}) {
    auto ls = std::make_unique<test::LiveServer>();
    auto session = Session::open(model);
    if (!session) return session.status();
    ls->session = std::move(session.value());
    EngineOptions eo;
    eo.kv_blocks = 64;
    eo.n_threads = 2;
    eo.snapshot_every = 0;  // as kvscope serve runs: the stream turns snapshots on
    auto loop = ls->session->start_loop(eo);
    if (!loop) return loop.status();
    ls->loop = std::move(loop.value());
    ls->loop->set_step_delay_ms(stepDelayMs);
    server::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = port;
    so.api_key = key;
    so.served_model_name = "tiny";
    ls->server = std::make_unique<server::OpenAiServer>(ls->session, *ls->loop, so);
    if (Status st = ls->server->start(); !st) return st;
    return ls;
}

std::shared_ptr<const SnapshotRing> ringOf(EngineLoop& loop) {
    std::promise<std::shared_ptr<const SnapshotRing>> p;
    auto f = p.get_future();
    loop.post([&p](Engine& e) { p.set_value(e.telemetry()); });
    return f.get();
}

// Sends n completion requests at once (their threads joined by the caller).
std::vector<std::thread> sendRequests(int port, int n, int maxTokens, const std::string& key = {}) {
    std::vector<std::thread> ts;
    for (int i = 0; i < n; ++i)
        ts.emplace_back([port, i, maxTokens, key] {
            httplib::Client c("127.0.0.1", port);
            c.set_read_timeout(60, 0);
            if (!key.empty()) c.set_bearer_token_auth(key);
            const nlohmann::json body = {{"prompt", "hello number " + std::to_string(i) + " of the batch"},
                                         {"max_tokens", maxTokens},
                                         {"temperature", 0},
                                         {"ignore_eos", true}};
            c.Post("/v1/completions", body.dump(), "application/json");
        });
    return ts;
}

}  // namespace

class TestRemoteTelemetry : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;

private Q_SLOTS:
    void eventRoundTrip() {
        TelemetryEvent e;
        e.server = {"tiny", 1234567, 4096, 4, 4, 64, "F16"};
        e.snapshots.push_back(std::make_shared<const EngineSnapshot>(handSnapshot(6)));
        e.snapshots.push_back(std::make_shared<const EngineSnapshot>(handSnapshot(7)));
        auto spec = std::make_shared<SpecSnapshot>();
        spec->step = 7;
        auto r = std::make_shared<SpecRequestView>();
        r->id = 2;
        r->proposer = "ngram";
        r->k = 3;
        r->adaptive = true;
        r->stats.record(3, 2, false);
        r->fates = {{12, TokenFate::accepted, 1, 6}, {13, TokenFate::rejected, 2, 6}, {14, TokenFate::corrected, 0, 6}};
        r->rate = {2, 5, 41.5, false};
        spec->requests.push_back(r);
        spec->totals = r->stats;
        spec->drafts = {"layer-skip:10"};
        spec->plain_baseline = {1, 9, 60.25, true};
        e.spec = spec;
        e.latency.ttft_ms.count = 2;
        e.latency.ttft_ms.p50 = 11.5;
        e.latency.ttft_ms.p99 = 19.0;
        e.pieces[5] = {"\xE4\xB8", false};  // the first two bytes of a three-byte character
        e.pieces[6] = {"\xAD x", false};    // its last byte, then text
        e.pieces[7] = {"<|im_end|>", true};
        const std::string text = telemetry_event_to_json(e).dump();
        auto back = parse_telemetry_event(text);
        QVERIFY2(back, back.message().c_str());
        QCOMPARE(back->server.model, std::string("tiny"));
        QCOMPARE(back->server.weight_bytes, int64_t{1234567});
        QCOMPARE(back->server.kv_bytes_per_block, int64_t{4096});
        QCOMPARE(back->server.kv_type, std::string("F16"));
        QCOMPARE(back->snapshots.size(), size_t{2});
        // The newest whole: its frame, its tokens and adapters, as written.
        const EngineSnapshot want = handSnapshot(7);
        const EngineSnapshot& got = *back->snapshots.back();
        QCOMPARE(frameDiff(app::to_frame(got), app::to_frame(want)), QString());
        QCOMPARE(got.chunks.size(), want.chunks.size());
        QCOMPARE(got.requests[0].tokens, want.requests[0].tokens);
        QCOMPARE(got.requests[0].adapter, std::string("style"));
        QCOMPARE(got.requests[0].client, std::string("HTTP 127.0.0.1:53012"));
        QCOMPARE(got.requests[1].client, std::string());
        QCOMPARE(got.requests[2].status, RequestStatus::swapped);
        QCOMPARE(got.kv_stats.hit_tokens, int64_t{4});
        QCOMPARE(got.total_finished, int64_t{2});
        // The earlier one: step and request rows for the timeline, no block map, no tokens.
        const EngineSnapshot& early = *back->snapshots.front();
        QVERIFY(early.blocks.empty());
        QVERIFY(early.host_blocks.empty());
        QVERIFY(early.requests[0].tokens.empty());
        QCOMPARE(stepDiff(app::to_step_point(early.step), app::to_step_point(handSnapshot(6).step)), QString());
        QCOMPARE(rowsDiff(app::to_request_rows(early), app::to_request_rows(handSnapshot(6))), QString());
        // Speculative decoding.
        QVERIFY(back->spec);
        QCOMPARE(back->spec->step, int64_t{7});
        QCOMPARE(back->spec->requests.size(), size_t{1});
        const SpecRequestView& sr = *back->spec->requests[0];
        QCOMPARE(sr.proposer, std::string("ngram"));
        QCOMPARE(sr.k, 3);
        QVERIFY(sr.adaptive);
        QCOMPARE(sr.stats.evaluated, int64_t{3});
        QCOMPARE(sr.stats.accepted, int64_t{2});
        QCOMPARE(sr.stats.pos_accepted, (std::vector<int64_t>{1, 1, 0}));
        QCOMPARE(sr.fates.size(), size_t{3});
        QCOMPARE(sr.fates[1].fate, TokenFate::rejected);
        QCOMPARE(sr.fates[1].draft_pos, 2);
        QCOMPARE(sr.rate.tok_per_s, 41.5);
        QVERIFY(!sr.rate.solo);
        QCOMPARE(back->spec->drafts, std::vector<std::string>{"layer-skip:10"});
        QCOMPARE(back->spec->plain_baseline.tok_per_s, 60.25);
        QCOMPARE(back->latency.ttft_ms.p99, 19.0);
        // Token bytes cross whole: the two pieces make the character again.
        QCOMPARE(back->pieces.size(), size_t{3});
        QCOMPARE(back->pieces[5].bytes, std::string("\xE4\xB8"));
        QCOMPARE(QString::fromUtf8(back->pieces[5].bytes + back->pieces[6].bytes), QString::fromUtf8("\xE4\xB8\xAD x"));
        QVERIFY(back->pieces[7].control);
        QCOMPARE(back->last_step(), int64_t{7});
    }

    void eventFaults_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expect");
        QTest::newRow("not json") << "{\"format\": " << "not valid JSON";
        QTest::newRow("other format") << R"({"format":"kvscope-trace","version":1})" << "kvscope-telemetry";
        QTest::newRow("version") << R"({"format":"kvscope-telemetry","version":2,"snapshots":[{}]})"
                                 << "version 2 is not supported";
        QTest::newRow("no snapshots") << R"({"format":"kvscope-telemetry","version":1,"snapshots":[]})"
                                      << "without \"snapshots\"";
        QTest::newRow("wrong type")
            << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":"16"}]})" << "snapshots";
        // JSON has no NaN or infinity: such a number is not JSON at all.
        QTest::newRow("NaN")
            << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":16,"step":{"kv_usage":NaN}}]})"
            << "not valid JSON";
        QTest::newRow("infinite")
            << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":16,"step":{"kv_usage":1e999}}]})"
            << "not valid JSON";
        QTest::newRow("block size 0") << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":0}]})"
                                      << "block_size 0";
        QTest::newRow("overfilled block")
            << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":4,"blocks":[{"block_id":0,"n_filled":9}]}]})"
            << "block 0";
        QTest::newRow("fate") << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":4}],)"
                                 R"("spec":{"requests":[{"id":1,"fates":[[1,"lucky",0,0]]}]}})"
                              << "unknown token fate";
        QTest::newRow("piece") << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":4}],)"
                                  R"("pieces":{"5":["\u4e2d",false]}})"
                               << "one byte per character";
        QTest::newRow("piece id") << R"({"format":"kvscope-telemetry","version":1,"snapshots":[{"block_size":4}],)"
                                     R"("pieces":{"five":["a",false]}})"
                                  << "pieces";
    }
    void eventFaults() {
        QFETCH(QString, text);
        QFETCH(QString, expect);
        auto e = parse_telemetry_event(text.toStdString());
        QVERIFY(!e);
        QVERIFY2(QString::fromStdString(e.message()).contains(expect), e.message().c_str());
    }

    // The snapshots the client receives draw the same views as the server's own.
    void viewsMatchServer() {
        auto ls = startOn(0, test::tiny_server_model("remote_telemetry_tiny.gguf"), 20, "sekrit");
        QVERIFY2(ls, ls.message().c_str());
        const int port = (*ls)->server->port();
        const std::string base = "http://127.0.0.1:" + std::to_string(port);
        auto ring = ringOf(*(*ls)->loop);

        // Without the key: refused.
        {
            net::TelemetryReader r({base, "", 5, 5});
            Status s = r.run([](TelemetryEvent&&) { return false; });
            QVERIFY(!s);
            QVERIFY2(QString::fromStdString(s.message()).contains(QStringLiteral("refused")), s.message().c_str());
        }

        TelemetryClient client;
        RemoteEngineViews views;
        views.resize(1000, 700);
        std::map<int64_t, std::shared_ptr<const EngineSnapshot>> whole, rowsOnly;
        connect(&client, &TelemetryClient::event, &views, [&](const std::shared_ptr<const TelemetryEvent>& e) {
            views.applyEvent(*e);
            for (size_t i = 0; i < e->snapshots.size(); ++i)
                (i + 1 == e->snapshots.size() ? whole : rowsOnly)[e->snapshots[i]->step.step] = e->snapshots[i];
        });
        connect(&client, &TelemetryClient::connected, &views, &RemoteEngineViews::onConnected);
        views.setSource(QString::fromStdString(base));
        client.start({base, "sekrit", 5, 5});
        QTRY_VERIFY_WITH_TIMEOUT(client.eventsReceived() >= 1, 20000);
        QVERIFY2(views.caption().contains(QStringLiteral("remote: %1, live telemetry").arg(QString::fromStdString(base))),
                 qPrintable(views.caption()));

        // Requests run while both sides record: the server's snapshots from its engine's ring.
        std::map<int64_t, std::shared_ptr<const EngineSnapshot>> server;
        auto threads = sendRequests(port, 3, 12, "sekrit");
        std::atomic<int> done{0};
        std::thread joiner([&] {
            for (auto& t : threads) t.join();
            done = 1;
        });
        for (int i = 0; i < 6000 && !done; ++i) {
            for (auto& s : ring->recent(ring->capacity())) server.emplace(s->step.step, s);
            QTest::qWait(10);
        }
        joiner.join();
        QVERIFY(done);
        for (auto& s : ring->recent(ring->capacity())) server.emplace(s->step.step, s);
        const int64_t lastServerStep = server.empty() ? -1 : server.rbegin()->first;
        QVERIFY2(server.size() >= 12, qPrintable(QString::number(server.size())));
        QTRY_VERIFY_WITH_TIMEOUT(views.lastStep() >= lastServerStep, 20000);

        QVERIFY(!whole.empty());
        int wholeCompared = 0, rowsCompared = 0;
        for (const auto& [step, snap] : server) {
            if (auto it = whole.find(step); it != whole.end()) {
                const QString d = frameDiff(app::to_frame(*it->second), app::to_frame(*snap));
                QVERIFY2(d.isEmpty(), qPrintable(QStringLiteral("step %1: %2").arg(step).arg(d)));
                QCOMPARE(it->second->requests.size(), snap->requests.size());
                for (size_t i = 0; i < snap->requests.size(); ++i)
                    QCOMPARE(it->second->requests[i].tokens, snap->requests[i].tokens);
                ++wholeCompared;
            } else if (auto jt = rowsOnly.find(step); jt != rowsOnly.end()) {
                QCOMPARE(stepDiff(app::to_step_point(jt->second->step), app::to_step_point(snap->step)), QString());
                QCOMPARE(rowsDiff(app::to_request_rows(*jt->second), app::to_request_rows(*snap)), QString());
                ++rowsCompared;
            } else if (step > whole.begin()->first) {
                QFAIL(qPrintable(QStringLiteral("step %1 never reached the client").arg(step)));
            }
        }
        QVERIFY(wholeCompared >= 1);
        qInfo("compared %d whole snapshots and %d step + request-row snapshots", wholeCompared, rowsCompared);
        // The remote views show the server's newest step, and every step once in the timeline.
        QCOMPARE(frameDiff(views.frame(), app::to_frame(*server.rbegin()->second)), QString());
        QCOMPARE(int(views.blockMap()->frame().blocks.size()), 64);
        QVERIFY(views.timeline()->stepCount() >= int(server.size()));
        // A block's text is the concatenated pieces of its tokens: what the server's
        // tokenizer decodes the block's ids to.
        const EngineSnapshot& last = *whole.rbegin()->second;
        for (const RequestView& r : last.requests) {
            if (r.tokens.empty()) continue;
            const int bs = last.block_size;
            const std::vector<int32_t> ids(r.tokens.begin(), r.tokens.begin() + std::min<size_t>(bs, r.tokens.size()));
            QCOMPARE(views.blockText(r.id, 0), QString::fromStdString((*ls)->session->decode(ids)));
            break;
        }
        client.stop();
    }

    // The remote chat window on a KV Scope connection: its block map while a chat runs, and
    // the stream followed again after the server restarts on the same port.
    void windowDrawsAndReconnects() {
        QVERIFY(m_dir.isValid());
        const std::string model = test::tiny_server_model("remote_telemetry_tiny.gguf");
        auto ls = startOn(0, model, 5);
        QVERIFY2(ls, ls.message().c_str());
        const int port = (*ls)->server->port();
        auto secrets = std::make_shared<SecretStore>(m_dir.filePath(QStringLiteral("keys.json")), false);
        ConnectionStore store(m_dir.filePath(QStringLiteral("remote.ini")), secrets);
        RemoteConnection c;
        c.name = QStringLiteral("kvscope serve");
        c.baseUrl = QStringLiteral("http://127.0.0.1:%1").arg(port);
        c.model = QStringLiteral("tiny");
        c.kind = QStringLiteral("KV Scope");
        QString error, id;
        QVERIFY2(store.save(c, {}, &error, &id), qPrintable(error));
        RemoteChatWindow w(&store);
        w.useConnection(id);
        w.show();
        QVERIFY(w.engineTabs()->isTabVisible(0));
        QCOMPARE(w.engineTabs()->currentIndex(), 0);
        QTRY_VERIFY_WITH_TIMEOUT(w.telemetry()->connections() == 1, 20000);
        RemoteSampling s = w.sampling();
        s.maxTokens = 40;
        s.temperature = 0;
        w.setSampling(s);
        w.send(QStringLiteral("Hello, remote engine"));
        QTRY_VERIFY_WITH_TIMEOUT(w.engineViews()->frame().step.blocksUsed > 0, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 60000);
        QVERIFY2(w.engineViews()->caption().contains(QStringLiteral("live telemetry")),
                 qPrintable(w.engineViews()->caption()));
        const QString chatBefore = w.chatView()->transcriptText();

        // The server goes away: the caption says so, the chat and the views stay (through a
        // failed reconnection too).
        ls->reset();
        QTRY_VERIFY_WITH_TIMEOUT(w.engineViews()->caption().contains(QStringLiteral("trying again")), 20000);
        const qint64 stepBefore = w.engineViews()->lastStep();
        QVERIFY(stepBefore > 0);
        QTest::qWait(1500);
        QCOMPARE(w.chatView()->transcriptText(), chatBefore);
        QCOMPARE(w.engineViews()->lastStep(), stepBefore);
        QVERIFY(w.engineViews()->frame().step.blocksUsed > 0 || w.engineViews()->frame().step.blocksCached > 0);
        // Back on the same port: followed again, with the new engine's steps from 0.
        auto again = startOn(port, model, 5);
        QVERIFY2(again, again.message().c_str());
        QTRY_VERIFY_WITH_TIMEOUT(w.telemetry()->connections() == 2, 30000);
        QTRY_VERIFY_WITH_TIMEOUT(w.engineViews()->caption().contains(QStringLiteral("— live")), 20000);
        w.send(QStringLiteral("And again"));
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 60000);
        // The timeline holds the new engine's steps only (its steps count from 0 again).
        QTRY_VERIFY_WITH_TIMEOUT(w.engineViews()->lastStep() > 0, 20000);
        QVERIFY2(w.engineViews()->timeline()->stepCount() <= w.engineViews()->lastStep() + 1,
                 qPrintable(QStringLiteral("%1 steps drawn, last step %2")
                                .arg(w.engineViews()->timeline()->stepCount())
                                .arg(w.engineViews()->lastStep())));
        QVERIFY2(w.chatView()->transcriptText().startsWith(chatBefore.left(20)), "the chat was kept");
    }

    void misbehavingServer_data() {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<QString>("expect");
        QTest::newRow("cut mid-event") << "cut" << "middle of an event";
        QTest::newRow("10 MB event") << "huge" << "byte limit";
        QTest::newRow("invalid JSON") << "invalid" << "not valid JSON";
        QTest::newRow("other version") << "version" << "version 99 is not supported";
        QTest::newRow("NaN metrics") << "nan" << "not valid JSON";
        QTest::newRow("silent stream") << "silent" << "no data came";
        QTest::newRow("never answers") << "never" << "no data came";
        QTest::newRow("key refused") << "401" << "API key was refused";
        QTest::newRow("no stream") << "404" << "no telemetry stream";
    }
    void misbehavingServer() {
        QFETCH(QString, mode);
        QFETCH(QString, expect);
        static BadTelemetryServer bad;
        TelemetryClient client;
        RemoteEngineViews views;
        // What the views had before stays.
        TelemetryEvent good;
        good.snapshots.push_back(std::make_shared<const EngineSnapshot>(handSnapshot(5)));
        views.setSource(QString::fromStdString(bad.url()));
        views.applyEvent(good);
        connect(&client, &TelemetryClient::event, &views,
                [&](const std::shared_ptr<const TelemetryEvent>& e) { views.applyEvent(*e); });
        connect(&client, &TelemetryClient::failed, &views, &RemoteEngineViews::onFailed);
        QSignalSpy failed(&client, &TelemetryClient::failed);
        int ticks = 0;
        QTimer timer;
        connect(&timer, &QTimer::timeout, [&] { ++ticks; });
        timer.start(10);
        client.start({bad.url(), mode.toStdString(), 2, 1});
        QTRY_VERIFY_WITH_TIMEOUT(failed.count() >= 1, 20000);
        const QString message = failed.first().first().toString();
        QVERIFY2(message.contains(expect), qPrintable(message));
        QVERIFY2(message.contains(QString::fromStdString(bad.url())), qPrintable(message));
        QVERIFY2(views.caption().contains(expect), qPrintable(views.caption()));
        QVERIFY2(views.caption().contains(QStringLiteral("trying again")), qPrintable(views.caption()));
        // The event loop keeps turning (a fast failure can arrive before the first 10 ms tick).
        QTRY_VERIFY_WITH_TIMEOUT(ticks > 0, 5000);
        QCOMPARE(views.lastStep(), qint64{5});
        QCOMPARE(int(views.frame().blocks.size()), 4);
        QElapsedTimer t;
        t.start();
        client.stop();  // a read in flight ends at once
        QVERIFY2(t.elapsed() < 5000, qPrintable(QString::number(t.elapsed())));
    }

    // docs/screenshots/remote_kvscope_block_map.png: the default model behind kvscope serve's
    // server, three HTTP clients streaming, the remote window's block map.
    void screenshotWithDefaultModel() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("the default model is not installed");
        EngineOptions eo;
        eo.kv_blocks = 256;
        server::ServerOptions so;
        so.served_model_name = "SmolLM2-135M-Instruct";
        auto ls = test::start_live_server(model, so, eo);
        QVERIFY2(ls, ls.message().c_str());
        (*ls)->loop->set_step_delay_ms(30);
        const int port = (*ls)->server->port();
        auto secrets = std::make_shared<SecretStore>(m_dir.filePath(QStringLiteral("keys2.json")), false);
        ConnectionStore store(m_dir.filePath(QStringLiteral("remote2.ini")), secrets);
        RemoteConnection c;
        c.name = QStringLiteral("lecture-room GPU box");
        c.baseUrl = QStringLiteral("http://127.0.0.1:%1").arg(port);
        c.model = QString::fromStdString((*ls)->server->model_name());
        c.kind = QStringLiteral("KV Scope");
        QString error, id;
        QVERIFY2(store.save(c, {}, &error, &id), qPrintable(error));
        RemoteChatWindow w(&store);
        w.useConnection(id);
        w.resize(1600, 900);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(w.telemetry()->connections() == 1, 20000);
        auto threads = sendRequests(port, 3, 160);
        w.send(QStringLiteral("Explain in two sentences what a KV cache block is."));
        QTRY_VERIFY_WITH_TIMEOUT(w.engineViews()->frame().step.running >= 3 &&
                                     w.engineViews()->frame().step.blocksUsed >= 12,
                                 120000);
        QTest::qWait(1500);
        const QString path = QString::fromStdString(test::output_path("remote_kvscope_block_map.png"));
        QVERIFY(w.grab().save(path));
        qInfo("screenshot: %s", qPrintable(path));
        w.stop();
        for (auto& t : threads) t.join();
    }
};

QTEST_MAIN(TestRemoteTelemetry)
#include "tst_remote_telemetry.moc"
