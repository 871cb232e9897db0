#include "app/net/telemetry_reader.h"

#include "app/net/openai_client.h"
#include "app/net/sse_parser.h"

namespace kvs::net {

namespace {
constexpr const char* kPath = "/v1/kvscope/telemetry";
}

TelemetryReader::TelemetryReader(TelemetryReaderOptions opt) : m_opt(std::move(opt)) {
    ClientOptions o;
    o.base_url = m_opt.base_url;
    o.api_key = m_opt.api_key;
    o.connect_timeout_s = m_opt.connect_timeout_s;
    o.read_timeout_s = m_opt.read_timeout_s;
    o.max_event_bytes = m_opt.max_event_bytes;
    o.max_body_bytes = size_t{1} << 20;  // an error page
    m_client = std::make_unique<OpenAIClient>(o);
    std::string base = m_opt.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    if (base.size() >= 3 && base.compare(base.size() - 3, 3, "/v1") == 0) base.resize(base.size() - 3);
    m_url = base + kPath;
}

TelemetryReader::~TelemetryReader() = default;

void TelemetryReader::cancel() { m_client->cancel(); }

Status TelemetryReader::run(const std::function<bool(TelemetryEvent&&)>& on_event) {
    SseParser parser(m_opt.max_event_bytes);
    std::string fault;
    bool caller_stopped = false;
    auto on_sse = [&](const SseEvent& ev) {
        if (ev.event == "end") {
            fault = "the server ended the stream (it is stopping)";
            return false;
        }
        if (ev.event == "error") {
            const std::string m = error_message_of(ev.data);
            fault = "the server sent an error: " + (m.empty() ? ev.data.substr(0, 200) : m);
            return false;
        }
        if (!ev.event.empty() && ev.event != "telemetry") return true;  // a kind this version does not know
        auto e = parse_telemetry_event(ev.data);
        if (!e) {
            fault = e.message();
            return false;
        }
        ++m_events;
        if (!on_event(std::move(e.value()))) {
            caller_stopped = true;
            return false;
        }
        return true;
    };
    Status s = m_client->get_stream(kPath, [&](const char* data, size_t n) {
        if (Status f = parser.feed(std::string_view(data, n), on_sse); !f) {
            fault = f.message();
            return false;
        }
        return !parser.stopped();
    });
    if (caller_stopped) return Status::ok();
    if (!fault.empty()) return Status::error("GET " + m_url + ": " + fault);
    if (!s) {
        if (Status f = parser.finish(); !f)  // cut in the middle of an event: say that, not only "Read"
            return Status::error("GET " + m_url + ": " + f.message() + " (" + s.message() + ")");
    }
    if (!s) {
        std::string m = s.message();
        if (m.find("HTTP 404") != std::string::npos)
            m += " (this server has no telemetry stream: it is not kvscope serve, or an older one)";
        else if (m.find("HTTP 401") != std::string::npos || m.find("HTTP 403") != std::string::npos)
            m += " (the API key was refused)";
        return Status::error(m);
    }
    if (Status f = parser.finish(); !f) return Status::error("GET " + m_url + ": " + f.message());
    return Status::error("GET " + m_url + ": the stream ended (after " + std::to_string(m_events) + " events)");
}

}  // namespace kvs::net
