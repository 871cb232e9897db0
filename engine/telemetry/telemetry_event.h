#pragma once
// One event of `kvscope serve`'s telemetry stream (GET /v1/kvscope/telemetry, server-sent
// events; app/server/telemetry_stream.h): the snapshots the engine published since the
// previous event, what speculative decoding looks like now, the latencies of the recently
// finished requests and the text of the token ids it names, so a remote window draws the
// same views a local one draws from the same engine. Written by the server and read by the
// remote window (app/net/telemetry_reader.h) through this one pair of functions; no engine
// object is involved, only the plain telemetry structs.
//
// Format (version 1), one JSON object per SSE event ("event: telemetry", "id: <step>"):
// {
//   "format": "kvscope-telemetry", "version": 1,
//   "server":    {"model", "weight_bytes", "kv_bytes_per_block", "block_size", "n_blocks",
//                 "max_model_len", "kv_type"},
//   "snapshots": [EngineSnapshot, ...],  // oldest first (trace_json.h's schema); the newest is
//                                        // whole, the earlier ones have no "blocks" /
//                                        // "host_blocks" (their step and request rows feed
//                                        // the slot timeline); requests add "adapter",
//                                        // "client" and, in the newest, "tokens" (ids);
//                                        // the roofline's op_steps are not sent
//   "spec":      SpecSnapshot,           // only when it changed since the previous event:
//                {"step", "requests": [{"id", "proposer", "k", "adaptive", "finished",
//                 "stats": SpecStats, "fates": [[token, fate, draft_pos, step], ...],
//                 "rate": DecodeRate}], "totals": SpecStats, "drafts": [name],
//                 "plain_baseline": DecodeRate}
//   "latency":   LatencySummary,         // of the recently finished requests (trace_json.h)
//   "pieces":    {"<id>": [bytes, control], ...}  // token text not sent before on this stream
// }
// A piece's bytes are written one code point per byte (U+0000..U+00FF), so a token that ends
// inside a UTF-8 character crosses JSON whole; `control` is true for a control token (the
// chat and the token view leave it out, a block's text shows it).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/status.h"
#include "engine/telemetry/latency_stats.h"
#include "engine/telemetry/snapshot.h"

namespace kvs {

inline constexpr const char* kTelemetryFormat = "kvscope-telemetry";
inline constexpr int kTelemetryVersion = 1;

// What the server's engine is, for the views' captions and the memory plot.
struct TelemetryServerInfo {
    std::string model;
    int64_t weight_bytes = 0;
    int64_t kv_bytes_per_block = 0;
    int block_size = 0;
    int n_blocks = 0;
    int max_model_len = 0;
    std::string kv_type;
};

struct TokenPiece {
    std::string bytes;  // what the tokenizer decodes the id alone to
    bool control = false;
};

struct TelemetryEvent {
    TelemetryServerInfo server;
    std::vector<std::shared_ptr<const EngineSnapshot>> snapshots;  // oldest first, never empty when read
    std::shared_ptr<const SpecSnapshot> spec;                      // null: unchanged
    LatencySummary latency;
    std::map<int32_t, TokenPiece> pieces;

    int64_t last_step() const { return snapshots.empty() ? -1 : snapshots.back()->step.step; }
};

nlohmann::json telemetry_event_to_json(const TelemetryEvent& e);
// The event from an SSE event's data. The error says what was wrong: not JSON, another
// format or version, a field of the wrong type (naming it), no snapshot.
Result<TelemetryEvent> parse_telemetry_event(const std::string& text);

// A SpecSnapshot as JSON and back (the "spec" member above).
nlohmann::json spec_snapshot_to_json(const SpecSnapshot& s);
SpecSnapshot spec_snapshot_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

// Bytes as a JSON-safe string (each byte one code point) and back; false when the string
// has a code point above U+00FF.
std::string bytes_to_latin1_utf8(const std::string& bytes);
bool latin1_utf8_to_bytes(const std::string& text, std::string* bytes);

}  // namespace kvs
