#pragma once
// Strings read from a file (tensor names, metadata keys and values) quoted for an error
// message. A damaged file may put anything in them: a NUL byte would cut the message short
// wherever it is printed as a C string, control bytes would garble a terminal. So every
// byte that is not printable ASCII is written as \xNN (a backslash as \\, a quote as \').
#include <cstddef>
#include <string>
#include <string_view>

namespace kvs {

// 'text' with the escapes above; at most max_bytes bytes of s, then "..." and how long s is.
std::string quote_untrusted(std::string_view s, size_t max_bytes = 200);

}  // namespace kvs
