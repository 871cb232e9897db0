#include "engine/core/quote.h"

namespace kvs {

std::string quote_untrusted(std::string_view s, size_t max_bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "'";
    const size_t n = s.size() < max_bytes ? s.size() : max_bytes;
    for (size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '\\' || c == '\'') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    out += '\'';
    if (s.size() > n) out += "... (" + std::to_string(s.size()) + " bytes)";
    return out;
}

}  // namespace kvs
