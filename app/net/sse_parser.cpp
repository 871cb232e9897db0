#include "app/net/sse_parser.h"

namespace kvs::net {

Status SseParser::feed(std::string_view bytes, const EventFn& on_event) {
    if (!m_error.empty()) return Status::error(m_error);
    if (m_stopped) return Status::ok();
    if (m_start && !bytes.empty()) {
        // A BOM may arrive split; only a whole one at the start is dropped.
        if (bytes.size() >= 3 && bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
        m_start = false;
    }
    size_t i = 0;
    while (i < bytes.size()) {
        if (m_after_cr && bytes[i] == '\n') ++i;  // the LF of a CRLF split across pieces
        m_after_cr = false;
        if (i >= bytes.size()) break;
        const size_t end = bytes.find_first_of(std::string_view("\r\n\0", 3), i);
        const std::string_view part = bytes.substr(i, end == std::string_view::npos ? bytes.size() - i : end - i);
        if (m_line.size() + part.size() + m_cur.data.size() > m_max) {
            m_error = "an event of the stream is over the " + std::to_string(m_max) + "-byte limit";
            return Status::error(m_error);
        }
        m_line.append(part);
        if (end == std::string_view::npos) break;
        if (bytes[end] == '\0') {
            m_error = "the stream holds a NUL byte (not an event stream)";
            return Status::error(m_error);
        }
        i = end + 1;
        if (bytes[end] == '\r') {
            if (i < bytes.size() && bytes[i] == '\n') ++i;
            else if (i >= bytes.size())
                m_after_cr = true;
        }
        const std::string ln = std::move(m_line);
        m_line.clear();
        if (Status s = line(ln, on_event); !s) {
            m_error = s.message();
            return s;
        }
        if (m_stopped) return Status::ok();
    }
    return Status::ok();
}

Status SseParser::line(std::string_view ln, const EventFn& on_event) {
    if (ln.empty()) {  // dispatch
        if (m_has_fields) {
            ++m_events;
            SseEvent ev = std::move(m_cur);
            m_cur = {};
            m_has_fields = false;
            m_data_seen = false;
            if (on_event && !on_event(ev)) m_stopped = true;
        }
        return Status::ok();
    }
    if (ln.front() == ':') return Status::ok();  // comment
    const size_t colon = ln.find(':');
    const std::string_view field = ln.substr(0, colon);
    std::string_view value;
    if (colon != std::string_view::npos) {
        value = ln.substr(colon + 1);
        if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
        if (m_data_seen) m_cur.data.push_back('\n');
        m_cur.data.append(value);
        m_data_seen = true;
    } else if (field == "event") {
        m_cur.event.assign(value);
    } else if (field == "id") {
        m_cur.id.assign(value);
    } else {
        return Status::ok();  // retry and unknown fields are ignored, as the standard says
    }
    m_has_fields = true;
    return Status::ok();
}

Status SseParser::finish() const {
    if (!m_error.empty()) return Status::error(m_error);
    if (m_stopped) return Status::ok();
    if (!m_line.empty() || m_has_fields)
        return Status::error("the stream stopped in the middle of an event (" +
                             std::to_string(m_cur.data.size() + m_line.size()) + " bytes of it received)");
    return Status::ok();
}

}  // namespace kvs::net
