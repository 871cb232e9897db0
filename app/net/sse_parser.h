#pragma once
// Server-sent events (the WHATWG "text/event-stream" format that OpenAI-style servers
// stream completions in), parsed from bytes as they arrive, in pieces of any size:
//   - lines end in LF, CRLF or CR (a CR at the end of one piece and the LF that starts the
//     next are one line end); a blank line dispatches the event;
//   - "field: value" (one space after the colon dropped), "field" alone = empty value;
//     fields data (lines joined with LF), event, id; others (retry, ...) are ignored;
//     lines that start with ':' are comments (keep-alives);
//   - a UTF-8 byte-order mark at the very start is dropped.
// Faults give an error Status instead of an event: an event (its data so far plus the
// unfinished line) over max_event_bytes, a NUL byte, and, at finish(), a stream that
// stopped in the middle of an event.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "engine/core/status.h"

namespace kvs::net {

struct SseEvent {
    std::string event;  // "" when the stream named none ("message")
    std::string data;
    std::string id;
};

class SseParser {
public:
    // Return false from the callback to stop: feed() then returns ok and ignores the rest.
    using EventFn = std::function<bool(const SseEvent&)>;

    explicit SseParser(size_t max_event_bytes = size_t{1} << 20) : m_max(max_event_bytes) {}

    // Parses bytes, calling on_event for each complete event. After an error the parser
    // stays failed (every later call returns the same error).
    Status feed(std::string_view bytes, const EventFn& on_event);
    // The stream has ended: an error when it stopped inside an event (a line not ended, or
    // fields not closed by a blank line).
    Status finish() const;

    size_t events() const { return m_events; }
    bool stopped() const { return m_stopped; }

private:
    Status line(std::string_view ln, const EventFn& on_event);

    size_t m_max;
    std::string m_line;  // the unfinished line
    SseEvent m_cur;      // the event being built
    bool m_has_fields = false;
    bool m_data_seen = false;
    bool m_after_cr = false;  // the last byte was a CR: an LF next is part of that line end
    bool m_start = true;      // nothing read yet (for the BOM)
    bool m_stopped = false;
    size_t m_events = 0;
    std::string m_error;
};

}  // namespace kvs::net
