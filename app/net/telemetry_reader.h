#pragma once
// A reader of `kvscope serve`'s telemetry stream (GET /v1/kvscope/telemetry, server-sent
// events of engine/telemetry/telemetry_event.h): one connection read until it ends, fails or
// the caller stops it. Qt-free and blocking; the remote window runs it on a worker thread
// (app/remote/telemetry_client.h), cancel() from any other thread ends it at once.
//
// Every fault is an error naming the URL and what was wrong: nobody listening, the API key
// refused (401), a server without the stream (404: not KV Scope, or an older one), no byte
// for read_timeout_s (the server sends a keep-alive comment every second), a stream cut in
// the middle of an event, an event over max_event_bytes, an event that is not valid JSON or
// not a telemetry event of a version this program reads, the server saying it stops.
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "engine/core/status.h"
#include "engine/telemetry/telemetry_event.h"

namespace kvs::net {

class OpenAIClient;

struct TelemetryReaderOptions {
    std::string base_url = "http://127.0.0.1:8000";  // with or without a trailing /v1
    std::string api_key;
    double connect_timeout_s = 5;
    double read_timeout_s = 5;
    size_t max_event_bytes = size_t{8} << 20;  // a 4096-block map is about 350 kB; 8 MiB is ~90,000 blocks
};

class TelemetryReader {
public:
    explicit TelemetryReader(TelemetryReaderOptions opt);
    ~TelemetryReader();
    TelemetryReader(const TelemetryReader&) = delete;
    TelemetryReader& operator=(const TelemetryReader&) = delete;

    // Reads one stream: on_event gets each event (false stops, and run returns ok). Returns
    // why the stream ended otherwise (never ok: a telemetry stream does not end by itself).
    Status run(const std::function<bool(TelemetryEvent&&)>& on_event);
    void cancel();  // thread-safe
    const std::string& url() const { return m_url; }
    size_t events() const { return m_events; }

private:
    TelemetryReaderOptions m_opt;
    std::string m_url;
    std::unique_ptr<OpenAIClient> m_client;
    size_t m_events = 0;
};

}  // namespace kvs::net
