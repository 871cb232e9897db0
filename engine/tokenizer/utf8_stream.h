#pragma once
// Streaming detokenization: a token's bytes may end in the middle of a UTF-8 character
// (byte-level BPE splits emoji and CJK characters across tokens, SentencePiece emits
// <0xNN> byte tokens). Utf8Stream buffers bytes and hands out only complete characters.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvs {

// Length of the UTF-8 sequence that starts with lead byte `c`: 1..4, or 0 for a
// continuation byte or a byte that never starts a sequence (0xF8..0xFF).
inline int utf8_sequence_length(unsigned char c) {
    if (c < 0x80) return 1;
    if (c < 0xC0) return 0;
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    if (c < 0xF8) return 4;
    return 0;
}

class Utf8Stream {
public:
    // Appends raw bytes and returns the longest prefix of everything buffered that ends
    // on a character boundary. Bytes that can never become valid UTF-8 (a stray
    // continuation byte, 0xF8..0xFF, a lead byte cut short by a new lead byte) are
    // passed through as they are, so nothing is held back forever.
    std::string push(std::string_view bytes) {
        m_pending.append(bytes);
        size_t complete = 0;  // bytes of m_pending that form whole characters
        size_t i = 0;
        while (i < m_pending.size()) {
            const int n = utf8_sequence_length(static_cast<unsigned char>(m_pending[i]));
            if (n == 0) {  // invalid lead: emit it alone
                complete = ++i;
                continue;
            }
            if (i + static_cast<size_t>(n) > m_pending.size()) {
                // Incomplete at the end: keep it unless a non-continuation byte already broke it.
                bool broken = false;
                for (size_t j = i + 1; j < m_pending.size(); ++j)
                    broken |= (static_cast<unsigned char>(m_pending[j]) & 0xC0) != 0x80;
                if (!broken) break;
                complete = ++i;
                continue;
            }
            bool valid = true;
            for (int j = 1; j < n; ++j) valid &= (static_cast<unsigned char>(m_pending[i + j]) & 0xC0) == 0x80;
            i += valid ? static_cast<size_t>(n) : 1;
            complete = i;
        }
        std::string out = m_pending.substr(0, complete);
        m_pending.erase(0, complete);
        return out;
    }

    // Whatever is still buffered (an incomplete character at the end of generation).
    std::string flush() {
        std::string out;
        out.swap(m_pending);
        return out;
    }

    bool empty() const { return m_pending.empty(); }
    void reset() { m_pending.clear(); }

private:
    std::string m_pending;  // bytes of a character not yet complete (at most 3 when well-formed)
};

}  // namespace kvs
