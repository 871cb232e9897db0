#include "app/server/telemetry_stream.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "app/server/http_reply.h"
#include "engine/telemetry/snapshot_ring.h"
#include "engine/telemetry/telemetry_event.h"

namespace kvs::server {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// What every stream of one server shares: the count of readers (snapshots are on while there
// is one) and the engine's own setting to put back.
struct TelemetryHub : std::enable_shared_from_this<TelemetryHub> {
    std::shared_ptr<const Session> session;
    EngineLoop* loop = nullptr;
    std::string model;
    const std::atomic<bool>* stopping = nullptr;
    TelemetryStreamOptions opt;

    std::mutex mu;
    int readers = 0;
    int saved_every = -1;  // the engine's snapshot_every before the first reader; -1: not read yet

    void add_reader() {
        std::lock_guard<std::mutex> lk(mu);
        if (readers++ > 0) return;
        // Runs on the engine thread before the next step.
        loop->post([self = shared_from_this()](Engine& e) {
            std::lock_guard<std::mutex> lk2(self->mu);
            if (self->readers == 0) return;
            if (self->saved_every < 0) self->saved_every = e.snapshot_every();
            if (e.snapshot_every() <= 0) e.set_snapshot_every(1);
        });
    }
    void remove_reader() {
        std::lock_guard<std::mutex> lk(mu);
        if (--readers > 0) return;
        loop->post([self = shared_from_this()](Engine& e) {
            std::lock_guard<std::mutex> lk2(self->mu);
            if (self->readers > 0 || self->saved_every < 0) return;
            e.set_snapshot_every(self->saved_every);
            self->saved_every = -1;
        });
    }
};

// Finished requests' latencies, read on the engine thread when the finished count changes
// and taken by the stream on a later tick (it never waits for the engine).
struct LatencyBox {
    std::mutex mu;
    LatencySummary summary;
};

// One reader's stream.
struct StreamState {
    std::shared_ptr<TelemetryHub> hub;
    std::shared_ptr<const SnapshotRing> ring;
    TelemetryServerInfo info;
    std::shared_ptr<const EngineSnapshot> first;  // the state at connection time, sent first
    std::shared_ptr<LatencyBox> latency = std::make_shared<LatencyBox>();
    int64_t last_step = -1;
    std::shared_ptr<const EngineSnapshot> last_sent;
    int64_t last_finished = -1;
    int64_t spec_step = -1;
    Clock::time_point last_write = Clock::now();
    Clock::time_point last_event{};
    Clock::time_point last_spec{};
    std::set<int32_t> sent_pieces;
    bool ended = false;

    ~StreamState() {
        if (hub) hub->remove_reader();
    }
};

void read_latency(EngineLoop& loop, const std::shared_ptr<LatencyBox>& box) {
    loop.post([box](Engine& e) {
        std::vector<RequestMetrics> done;
        for (RequestMetrics& m : e.request_metrics())
            if (m.finish_ms >= 0) done.push_back(std::move(m));
        // the most recent ones, as the window's metrics keep them (EngineBridge::kRecentRequests)
        std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.finish_ms < b.finish_ms; });
        if (done.size() > 64) done.erase(done.begin(), done.end() - 64);
        LatencySummary s = summarize(done);
        std::lock_guard<std::mutex> lk(box->mu);
        box->summary = std::move(s);
    });
}

void add_pieces(StreamState& st, const std::vector<int32_t>& ids, TelemetryEvent& ev) {
    for (int32_t id : ids) {
        if (id < 0 || !st.sent_pieces.insert(id).second) continue;
        TokenPiece p;
        p.bytes = st.hub->session->decode({id}, false);
        p.control = !p.bytes.empty() && st.hub->session->decode({id}, true).empty();
        ev.pieces.emplace(id, std::move(p));
    }
}

std::string sse(const std::string& event, int64_t id, const std::string& data) {
    return "event: " + event + "\nid: " + std::to_string(id) + "\ndata: " + data + "\n\n";
}

// The next event, or none when the engine published nothing new.
bool build_event(StreamState& st, TelemetryEvent& ev) {
    const TelemetryStreamOptions& opt = st.hub->opt;
    if (st.first) {
        ev.snapshots.push_back(std::move(st.first));
        st.first.reset();
    } else {
        for (auto& s : st.ring->recent(st.ring->capacity()))
            if (s->step.step > st.last_step) ev.snapshots.push_back(std::move(s));
        if (ev.snapshots.empty()) {  // republished for the step already sent (a cancel between steps)?
            auto latest = st.ring->latest();
            if (!latest || latest == st.last_sent || latest->step.step != st.last_step) return false;
            ev.snapshots.push_back(std::move(latest));
        }
        if (ev.snapshots.size() > opt.max_snapshots_per_event)
            ev.snapshots.erase(ev.snapshots.begin(), ev.snapshots.end() - static_cast<long>(opt.max_snapshots_per_event));
    }
    const EngineSnapshot& newest = *ev.snapshots.back();
    st.last_sent = ev.snapshots.back();
    st.last_step = newest.step.step;
    ev.server = st.info;
    if (newest.total_finished != st.last_finished) {
        st.last_finished = newest.total_finished;
        read_latency(*st.hub->loop, st.latency);
    }
    {
        std::lock_guard<std::mutex> lk(st.latency->mu);
        ev.latency = st.latency->summary;
    }
    for (const RequestView& r : newest.requests) add_pieces(st, r.tokens, ev);
    const auto now = Clock::now();
    if (now - st.last_spec >= std::chrono::milliseconds(opt.spec_interval_ms)) {
        auto spec = st.hub->loop->spec_snapshot();
        if (spec && spec->step != st.spec_step) {
            st.spec_step = spec->step;
            st.last_spec = now;
            std::vector<int32_t> ids;
            for (const auto& r : spec->requests)
                for (const SpecTokenEvent& f : r->fates) ids.push_back(f.token);
            add_pieces(st, ids, ev);
            ev.spec = std::move(spec);
        }
    }
    return true;
}

// One call of the chunked content provider: waits for the next tick, then writes an event,
// a keep-alive comment or nothing. False ends the stream (the reader left).
bool provide(StreamState& st, httplib::DataSink& sink) {
    const TelemetryStreamOptions& opt = st.hub->opt;
    const auto period = std::chrono::milliseconds(1000 / std::max(1, opt.max_events_per_s));
    const auto next = st.last_event + period;
    while (Clock::now() < next && !st.hub->stopping->load())
        std::this_thread::sleep_for(std::min<Clock::duration>(next - Clock::now(), std::chrono::milliseconds(10)));
    st.last_event = Clock::now();
    if (st.hub->stopping->load()) {
        const std::string bye = sse("end", st.last_step, R"({"reason":"the server is stopping"})");
        sink.write(bye.data(), bye.size());
        sink.done();
        return true;
    }
    TelemetryEvent ev;
    std::string out;
    if (build_event(st, ev)) {
        std::string data = telemetry_event_to_json(ev).dump(-1, ' ', false, json::error_handler_t::replace);
        // Readers take events up to 8 MiB (net::TelemetryReaderOptions); a bigger one (a pool
        // of about 90,000 blocks) is said in words instead of sent.
        if (data.size() > opt.max_event_bytes)
            out = sse("error", st.last_step,
                      json{{"error", "a telemetry event of " + std::to_string(data.size()) + " bytes is over the " +
                                           std::to_string(opt.max_event_bytes) + "-byte limit (" +
                                           std::to_string(st.info.n_blocks) + " KV blocks)"}}
                          .dump());
        else
            out = sse("telemetry", st.last_step, data);
    } else if (Clock::now() - st.last_write >= std::chrono::milliseconds(opt.keepalive_ms)) {
        out = ": keep-alive\n\n";
    }
    if (out.empty()) return true;
    if (!sink.write(out.data(), out.size())) return false;
    st.last_write = Clock::now();
    return true;
}

void handle(const std::shared_ptr<TelemetryHub>& hub, httplib::Response& res) {
    if (hub->stopping->load())
        return send_error(res, ApiError{503, "the server is stopping", "server_error", "", ""});
    auto st = std::make_shared<StreamState>();
    // What the engine is and its state now, read on its thread (between two steps).
    auto read = std::make_shared<std::promise<void>>();
    auto done = read->get_future();
    hub->loop->post([st, hub, read](Engine& e) {
        st->ring = e.telemetry();
        st->info.block_size = e.block_size();
        st->info.n_blocks = e.kv_cache().n_blocks();
        st->info.max_model_len = e.max_model_len();
        st->info.kv_type = std::string(dtype_name(e.kv_type()));
        st->info.kv_bytes_per_block = hub->session->kv_bytes_per_token(e.kv_type()) * e.block_size();
        const auto steps = st->ring->recent_steps(1);
        StepRecord rec;
        rec.step = -1;  // before the first step: the first step (0) is new to the reader
        EngineSnapshot now = e.snapshot(steps.empty() ? rec : steps.back());
        fill_block_counts(now.step, now.blocks, now.block_size);
        st->first = std::make_shared<const EngineSnapshot>(std::move(now));
        read->set_value();
    });
    if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
        return send_error(res, ApiError{503, "the engine did not answer within 30 s", "server_error", "", ""});
    st->info.model = hub->model;
    st->info.weight_bytes = hub->session->model().weight_bytes;
    st->last_step = st->first->step.step;
    st->last_event = Clock::now() - std::chrono::seconds(1);  // the first event at once
    hub->add_reader();
    st->hub = hub;
    read_latency(*hub->loop, st->latency);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider("text/event-stream",
                                     [st](size_t, httplib::DataSink& sink) { return provide(*st, sink); });
}

}  // namespace

void install_telemetry_route(httplib::Server& http, std::shared_ptr<const Session> session, EngineLoop& loop,
                             std::string model_name, const std::atomic<bool>* stopping, TelemetryStreamOptions opt) {
    auto hub = std::make_shared<TelemetryHub>();
    hub->session = std::move(session);
    hub->loop = &loop;
    hub->model = std::move(model_name);
    hub->stopping = stopping;
    hub->opt = opt;
    http.Get(kTelemetryPath, [hub](const httplib::Request&, httplib::Response& res) { handle(hub, res); });
}

}  // namespace kvs::server
