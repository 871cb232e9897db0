#pragma once
// The Prometheus text exposition format (version 0.0.4, what prometheus_client writes for
// vLLM, llama-server and kvscope serve), parsed from a /metrics page. No Qt.
//
//   # HELP name text            # TYPE name counter|gauge|histogram|summary|untyped
//   name{label="value",...} value [timestamp_ms]
//
// Names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, label values
// escape only \\, \" and \n; values are Go floats ("1.5e-3", "+Inf", "-Inf", "NaN").
// The page comes from another machine, so nothing in it is trusted: a line that breaks the
// format is skipped and counted (the first few are kept with their line numbers for the
// message), a page with no valid sample line at all is an error ("not Prometheus text"),
// and a page over the byte, line or sample limits is an error before any work is spent on it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/status.h"

namespace kvs::remote {

struct PromSample {
    std::string name;
    std::vector<std::pair<std::string, std::string>> labels;  // in page order
    double value = 0;
    std::optional<int64_t> timestamp_ms;

    // The value of a label, or nullptr when the sample has none of that name.
    const std::string* label(std::string_view key) const;
};

struct PromLimits {
    size_t max_bytes = size_t{64} << 20;  // the whole page
    size_t max_line_bytes = 64 * 1024;    // longer lines are skipped as bad
    size_t max_samples = 500000;
};

struct PromPage {
    std::vector<PromSample> samples;
    std::vector<std::pair<std::string, std::string>> types;  // (family name, type) from # TYPE
    size_t n_lines = 0;
    size_t n_bad_lines = 0;
    std::vector<std::string> bad_examples;  // "line N: why", the first 5

    // The # TYPE of a family ("" when the page did not say).
    std::string type_of(std::string_view family) const;
    // Every sample of that exact name.
    std::vector<const PromSample*> find(std::string_view name) const;
};

Result<PromPage> parse_prometheus_text(std::string_view text, const PromLimits& limits = {});

// A Go / Prometheus float: decimal or exponent form, "+Inf", "-Inf", "Inf", "NaN" (any case).
std::optional<double> parse_prom_float(std::string_view s);

}  // namespace kvs::remote
