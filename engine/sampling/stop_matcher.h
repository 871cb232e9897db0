#pragma once
// Incremental stop-string detection over streamed text. Text arrives in pieces (one
// token's worth at a time); a stop string may straddle pieces. push() says how much
// text is safe to show now and holds back a tail that could still be the start of a
// stop string. Matching is on bytes, so UTF-8 stop strings work as long as the pieces
// are whole characters (engine/tokenizer/utf8_stream.h takes care of that).
#include <string>
#include <string_view>
#include <vector>

namespace kvs {

// Qt defines `emit` as a macro: Qt code that reads StopCheck::emit builds with
// QT_NO_KEYWORDS (see tests/tst_sampling.cpp).
struct StopCheck {
    std::string emit;      // text safe to show now (never includes a stop string)
    bool stopped = false;  // a stop string matched: generation should end
    int stop_index = -1;   // which stop string matched (index into the list), -1 if none
};

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);  // empty strings are ignored

    // Appends text. When a stop string occurs, emits the text before its earliest
    // occurrence and drops everything from there on; later pushes emit nothing. With
    // may_stop false (min_new_tokens not reached yet) a stop string is ordinary text: all
    // is emitted but a tail that could start one.
    StopCheck push(std::string_view text, bool may_stop = true);
    // Releases the held-back tail (call at the end when no stop string matched).
    std::string flush();

    bool stopped() const { return m_stopped; }
    size_t n_held() const { return m_held.size(); }

private:
    size_t partial_match_len() const;  // longest tail of m_held that starts some stop string

    std::vector<std::string> m_stops;
    std::string m_held;  // text not yet emitted: a possible stop-string prefix
    bool m_stopped = false;
};

}  // namespace kvs
