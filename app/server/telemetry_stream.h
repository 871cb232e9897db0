#pragma once
// GET /v1/kvscope/telemetry: the engine's own telemetry as server-sent events, so a remote
// KV Scope window draws the same views (block map with every block, slot timeline per
// request, token fates, metrics) as a window on the server's own engine. Behind the API key
// like every /v1 route.
//
// Each event (engine/telemetry/telemetry_event.h) carries the snapshots the engine
// published since the previous one (the newest whole, the earlier ones as step + request
// rows for the timeline), speculative decoding when it changed (at most 5 times a second),
// the latencies of the recently finished requests, and the text of the token ids not sent
// before. Events go out at most max_events_per_s times a second, only when the engine
// published something, with an SSE comment after keepalive_ms of quiet (the only way to
// notice a reader that left, and the reader's sign of a live server). Latest wins: an event
// is built only when the previous one has been written, from what the engine's ring holds
// then, so a slow reader gets fewer, fuller events and the server holds at most one event
// per reader. The first event is the engine's state at connection time.
//
// While at least one reader is connected the engine publishes a full snapshot every step
// (`kvscope serve` runs with snapshots off: EngineOptions::snapshot_every 0); the last
// reader to leave puts the engine's own setting back.
#include <atomic>
#include <memory>
#include <string>

#include "engine/runtime/session.h"

namespace httplib {
class Server;
}

namespace kvs::server {

struct TelemetryStreamOptions {
    int max_events_per_s = 20;
    int keepalive_ms = 1000;
    int spec_interval_ms = 200;         // speculative decoding at most this often
    size_t max_snapshots_per_event = 64;  // the ring's size: older steps of a slow reader are skipped
    size_t max_event_bytes = size_t{8} << 20;  // what readers take; a bigger event is an "error" event
};

inline constexpr const char* kTelemetryPath = "/v1/kvscope/telemetry";

// Adds GET kTelemetryPath to the server. `stopping` is read on every tick: once true, each
// stream sends "event: end" and closes. The loop must outlive the server's handlers.
void install_telemetry_route(httplib::Server& http, std::shared_ptr<const Session> session, EngineLoop& loop,
                             std::string model_name, const std::atomic<bool>* stopping,
                             TelemetryStreamOptions opt = {});

}  // namespace kvs::server
