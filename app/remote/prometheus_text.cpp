#include "app/remote/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace kvs::remote {

namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
bool label_start(char c) { return name_start(c) && c != ':'; }
bool label_char(char c) { return name_char(c) && c != ':'; }
bool blank(char c) { return c == ' ' || c == '\t'; }

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

// A reader over one line; every parse_* returns "" on success or why the line is bad.
struct Cursor {
    std::string_view s;
    size_t i = 0;
    bool done() const { return i >= s.size(); }
    char peek() const { return i < s.size() ? s[i] : '\0'; }
    void skip_blanks() {
        while (i < s.size() && blank(s[i])) ++i;
    }
    std::string_view word() {  // up to the next blank
        const size_t b = i;
        while (i < s.size() && !blank(s[i])) ++i;
        return s.substr(b, i - b);
    }
};

std::string parse_name(Cursor& c, std::string& out, bool label) {
    const size_t b = c.i;
    if (c.done() || !(label ? label_start(c.peek()) : name_start(c.peek())))
        return label ? "a label name must start with a letter or '_'"
                     : "a metric name must start with a letter, '_' or ':'";
    ++c.i;
    while (!c.done() && (label ? label_char(c.peek()) : name_char(c.peek()))) ++c.i;
    out.assign(c.s.substr(b, c.i - b));
    return "";
}

std::string parse_label_value(Cursor& c, std::string& out) {
    if (c.peek() != '"') return "a label value must be in double quotes";
    ++c.i;
    out.clear();
    while (!c.done()) {
        const char ch = c.s[c.i++];
        if (ch == '"') return "";
        if (ch != '\\') {
            out.push_back(ch);
            continue;
        }
        if (c.done()) break;
        const char e = c.s[c.i++];
        if (e == '\\') out.push_back('\\');
        else if (e == '"')
            out.push_back('"');
        else if (e == 'n')
            out.push_back('\n');
        else
            return std::string("the escape \\") + (e >= 32 && e < 127 ? std::string(1, e) : std::string("?")) +
                   " in a label value (only \\\\, \\\" and \\n are allowed)";
    }
    return "a label value is not closed by '\"'";
}

std::string parse_labels(Cursor& c, PromSample& s) {
    ++c.i;  // '{'
    for (;;) {
        c.skip_blanks();
        if (c.peek() == '}') {
            ++c.i;
            return "";
        }
        std::string key, value;
        if (std::string e = parse_name(c, key, true); !e.empty()) return e;
        c.skip_blanks();
        if (c.peek() != '=') return "'=' expected after the label name '" + key + "'";
        ++c.i;
        c.skip_blanks();
        if (std::string e = parse_label_value(c, value); !e.empty()) return e;
        for (const auto& kv : s.labels)
            if (kv.first == key) return "the label '" + key + "' appears twice";
        s.labels.emplace_back(std::move(key), std::move(value));
        c.skip_blanks();
        if (c.peek() == ',') {
            ++c.i;
            continue;
        }
        if (c.peek() == '}') continue;
        return "',' or '}' expected after a label";
    }
}

std::string parse_sample(std::string_view line, PromSample& s) {
    Cursor c{line};
    if (std::string e = parse_name(c, s.name, false); !e.empty()) return e;
    Cursor look = c;
    look.skip_blanks();
    if (look.peek() == '{') {
        c = look;
        if (std::string e = parse_labels(c, s); !e.empty()) return e;
    }
    if (c.done() || !blank(c.peek()))
        return c.done() ? "no value after the metric" : "a blank expected before the value";
    c.skip_blanks();
    const std::string_view v = c.word();
    const auto value = parse_prom_float(v);
    if (!value) return "the value '" + std::string(v.substr(0, 40)) + "' is not a number";
    s.value = *value;
    c.skip_blanks();
    if (!c.done()) {
        const std::string_view t = c.word();
        int64_t ts = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), ts);
        if (ec != std::errc() || p != t.data() + t.size())
            return "the timestamp '" + std::string(t.substr(0, 40)) + "' is not an integer";
        s.timestamp_ms = ts;
        c.skip_blanks();
        if (!c.done()) return "text after the timestamp";
    }
    return "";
}

// "# HELP ..." / "# TYPE ..." / any other comment; returns "" or why a TYPE line is bad.
std::string parse_comment(std::string_view line, PromPage& page) {
    Cursor c{line};
    ++c.i;  // '#'
    c.skip_blanks();
    const std::string_view kw = c.word();
    if (kw != "TYPE") return "";  // HELP and free comments carry nothing we use
    c.skip_blanks();
    std::string name;
    if (std::string e = parse_name(c, name, false); !e.empty()) return "# TYPE: " + e;
    c.skip_blanks();
    const std::string_view type = c.word();
    static const char* kTypes[] = {"counter", "gauge",    "histogram",      "summary", "untyped",
                                   "info",    "stateset", "gaugehistogram", "unknown"};
    if (std::none_of(std::begin(kTypes), std::end(kTypes), [&](const char* t) { return type == t; }))
        return "# TYPE " + name + ": unknown type '" + std::string(type.substr(0, 40)) + "'";
    page.types.emplace_back(std::move(name), std::string(type));
    return "";
}

}  // namespace

const std::string* PromSample::label(std::string_view key) const {
    for (const auto& kv : labels)
        if (kv.first == key) return &kv.second;
    return nullptr;
}

std::string PromPage::type_of(std::string_view family) const {
    for (const auto& t : types)
        if (t.first == family) return t.second;
    return "";
}

std::vector<const PromSample*> PromPage::find(std::string_view name) const {
    std::vector<const PromSample*> out;
    for (const PromSample& s : samples)
        if (s.name == name) out.push_back(&s);
    return out;
}

std::optional<double> parse_prom_float(std::string_view s) {
    if (s.empty()) return std::nullopt;
    bool neg = false;
    std::string_view body = s;
    if (body[0] == '+' || body[0] == '-') {
        neg = body[0] == '-';
        body.remove_prefix(1);
    }
    if (iequals(body, "inf") || iequals(body, "infinity"))
        return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    if (iequals(body, "nan"))
        return s.size() == 3 ? std::optional<double>(std::numeric_limits<double>::quiet_NaN()) : std::nullopt;
    if (body.empty() || !((body[0] >= '0' && body[0] <= '9') || body[0] == '.')) return std::nullopt;
    double v = 0;
    auto [p, ec] = std::from_chars(body.data(), body.data() + body.size(), v, std::chars_format::general);
    if (p != body.data() + body.size()) return std::nullopt;
    if (ec == std::errc::result_out_of_range) {
        // Go's ParseFloat gives +-Inf on overflow and 0 on underflow; from_chars only says out of range.
        const size_t e = body.find_first_of("eE");
        const bool tiny = e != std::string_view::npos && e + 1 < body.size() && body[e + 1] == '-';
        v = tiny ? 0.0 : std::numeric_limits<double>::infinity();
    } else if (ec != std::errc()) {
        return std::nullopt;
    }
    return neg ? -v : v;
}

Result<PromPage> parse_prometheus_text(std::string_view text, const PromLimits& limits) {
    if (text.size() > limits.max_bytes)
        return Status::error("the /metrics page is " + std::to_string(text.size()) + " bytes, over the " +
                             std::to_string(limits.max_bytes) + "-byte limit");
    PromPage page;
    auto bad = [&](size_t line_no, const std::string& why) {
        ++page.n_bad_lines;
        if (page.bad_examples.size() < 5) page.bad_examples.push_back("line " + std::to_string(line_no) + ": " + why);
    };
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        const size_t line_no = ++page.n_lines;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.size() > limits.max_line_bytes) {
            bad(line_no, "a line of " + std::to_string(line.size()) + " bytes (limit " +
                             std::to_string(limits.max_line_bytes) + ")");
            continue;
        }
        if (line.find('\0') != std::string_view::npos) {
            bad(line_no, "a NUL byte");
            continue;
        }
        size_t b = 0;
        while (b < line.size() && blank(line[b])) ++b;
        line.remove_prefix(b);
        if (line.empty()) continue;
        if (line[0] == '#') {
            if (std::string e = parse_comment(line, page); !e.empty()) bad(line_no, e);
            continue;
        }
        PromSample s;
        if (std::string e = parse_sample(line, s); !e.empty()) {
            bad(line_no, e);
            continue;
        }
        if (page.samples.size() >= limits.max_samples)
            return Status::error("the /metrics page has more than " + std::to_string(limits.max_samples) + " samples");
        page.samples.push_back(std::move(s));
    }
    if (page.samples.empty() && page.n_bad_lines > 0)
        return Status::error("not Prometheus text (" + std::to_string(page.n_bad_lines) + " bad line" +
                             (page.n_bad_lines == 1 ? "" : "s") + ", no sample; " + page.bad_examples.front() + ")");
    return page;
}

}  // namespace kvs::remote
