#include "engine/sampling/stop_matcher.h"

#include <algorithm>

namespace kvs {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (auto& s : stops) {
        if (!s.empty()) m_stops.push_back(std::move(s));
    }
}

StopCheck StopMatcher::push(std::string_view text, bool may_stop) {
    StopCheck out;
    if (m_stopped) {
        out.stopped = true;
        return out;
    }
    m_held.append(text);
    if (!may_stop) {
        const size_t n_keep = partial_match_len();
        out.emit = m_held.substr(0, m_held.size() - n_keep);
        m_held.erase(0, m_held.size() - n_keep);
        return out;
    }
    // Earliest occurrence of any stop string wins; on the same start, the first listed.
    size_t best_pos = std::string::npos;
    for (size_t i = 0; i < m_stops.size(); ++i) {
        const size_t pos = m_held.find(m_stops[i]);
        if (pos < best_pos) {
            best_pos = pos;
            out.stop_index = static_cast<int>(i);
        }
    }
    if (best_pos != std::string::npos) {
        out.emit = m_held.substr(0, best_pos);
        out.stopped = true;
        m_stopped = true;
        m_held.clear();
        return out;
    }
    const size_t n_keep = partial_match_len();
    out.emit = m_held.substr(0, m_held.size() - n_keep);
    m_held.erase(0, m_held.size() - n_keep);
    return out;
}

std::string StopMatcher::flush() {
    std::string rest;
    rest.swap(m_held);
    return rest;
}

size_t StopMatcher::partial_match_len() const {
    size_t best = 0;
    for (const auto& s : m_stops) {
        // A full match was ruled out by push(), so a tail of up to |s|-1 bytes can match.
        const size_t max_len = std::min(m_held.size(), s.size() - 1);
        for (size_t len = max_len; len > best; --len) {
            if (std::string_view(m_held).substr(m_held.size() - len) == std::string_view(s).substr(0, len)) {
                best = len;
                break;
            }
        }
    }
    return best;
}

}  // namespace kvs
