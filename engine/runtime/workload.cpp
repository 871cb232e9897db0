// Benchmark workload generation and the workload spec parser (the format is in workload.h).
#include "engine/runtime/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <string_view>

namespace kvs {

namespace {

constexpr const char* kKinds[] = {"mixed", "poisson", "shared-prefix", "uniform"};
constexpr const char* kKeys =
    "n, rate, prompt, prompt_min, prompt_max, output, output_min, output_max, prefix, vocab, first_token, seed, "
    "priorities";

bool is_known_kind(const std::string& kind) {
    for (const char* k : kKinds)
        if (kind == k) return true;
    return false;
}

std::string kinds_list() {
    std::string s;
    for (const char* k : kKinds) s += std::string(s.empty() ? "" : ", ") + k;
    return s;
}

// Log-uniform lengths for the heavy-tailed kinds, uniform for the others.
bool log_uniform_lengths(const std::string& kind) { return kind == "mixed" || kind == "poisson"; }

// ---- random numbers, defined here so every platform draws the same ones -----------------

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

class Stream {
public:
    Stream(uint64_t seed, uint64_t stream_id) : m_gen(splitmix64(seed ^ splitmix64(stream_id))) {}

    // Uniform in [0, 1), 53 random bits.
    double uniform01() { return static_cast<double>(m_gen() >> 11) * 0x1.0p-53; }

    // Uniform integer in [lo, hi] without modulo bias (rejection of the short last bucket).
    int64_t uniform_int(int64_t lo, int64_t hi) {
        const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;  // 0 means all 2^64 values
        if (range == 0) return static_cast<int64_t>(m_gen());
        const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
        uint64_t x;
        do x = m_gen();
        while (x >= limit);
        return lo + static_cast<int64_t>(x % range);
    }

    // floor(exp(U)), U uniform in [ln lo, ln(hi + 1)): P(length in [a, 2a)) is the same for every a.
    int log_uniform_int(int lo, int hi) {
        const double a = std::log(static_cast<double>(lo));
        const double b = std::log(static_cast<double>(hi) + 1.0);
        const int v = static_cast<int>(std::floor(std::exp(a + (b - a) * uniform01())));
        return std::clamp(v, lo, hi);  // exp/log rounding at the ends
    }

    // Exponential with the given rate (mean 1 / rate).
    double exponential(double rate) { return -std::log1p(-uniform01()) / rate; }

private:
    std::mt19937_64 m_gen;  // its output sequence is fixed by the standard
};

// Stream ids: one per aspect of the workload.
enum : uint64_t { kArrivals = 1, kLengths = 2, kTokens = 3, kPriorities = 4 };

// ---- spec parsing --------------------------------------------------------------------

Status bad_value(std::string_view key, std::string_view value, const char* expected) {
    return Status::error("workload spec: " + std::string(key) + "=\"" + std::string(value) + "\" is not " + expected);
}

template <typename T>
Status parse_integer(std::string_view key, std::string_view s, T& out) {
    T v{};
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size())
        return bad_value(key, s, ec == std::errc::result_out_of_range ? "in range" : "an integer");
    out = v;
    return Status::ok();
}

Status parse_number(std::string_view key, std::string_view s, double& out) {
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || std::isnan(v))
        return bad_value(key, s, "a number");
    out = v;
    return Status::ok();
}

// "N" (both bounds N) or "A..B".
Status parse_range(std::string_view key, std::string_view s, int& lo, int& hi) {
    const size_t dots = s.find("..");
    if (dots == std::string_view::npos) {
        KVS_RETURN_IF_ERROR(parse_integer(key, s, lo));
        hi = lo;
        return Status::ok();
    }
    const std::string_view a = s.substr(0, dots), b = s.substr(dots + 2);
    int l = 0, h = 0;
    if (!parse_integer(key, a, l).is_ok() || !parse_integer(key, b, h).is_ok())
        return bad_value(key, s, "a length N or a range A..B");
    lo = l;
    hi = h;
    return Status::ok();
}

Status apply_key(WorkloadSpec& spec, std::string_view key, std::string_view value) {
    if (key == "n") return parse_integer(key, value, spec.n_requests);
    if (key == "rate") return parse_number(key, value, spec.rate_rps);
    if (key == "prompt") return parse_range(key, value, spec.prompt_min, spec.prompt_max);
    if (key == "prompt_min") return parse_integer(key, value, spec.prompt_min);
    if (key == "prompt_max") return parse_integer(key, value, spec.prompt_max);
    if (key == "output") return parse_range(key, value, spec.output_min, spec.output_max);
    if (key == "output_min") return parse_integer(key, value, spec.output_min);
    if (key == "output_max") return parse_integer(key, value, spec.output_max);
    if (key == "prefix") return parse_integer(key, value, spec.shared_prefix_len);
    if (key == "vocab") return parse_integer(key, value, spec.n_vocab);
    if (key == "first_token") return parse_integer(key, value, spec.first_token_id);
    if (key == "seed") return parse_integer(key, value, spec.seed);
    if (key == "priorities") return parse_integer(key, value, spec.n_priorities);
    return Status::error("workload spec: unknown key \"" + std::string(key) + "\" (known: " + kKeys + ")");
}

std::string number_string(double v) {
    char buf[64];
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back the same
    return ec == std::errc() ? std::string(buf, p) : std::to_string(v);
}

}  // namespace

Result<WorkloadSpec> default_workload_spec(const std::string& kind) {
    if (!is_known_kind(kind))
        return Result<WorkloadSpec>::error("workload spec: unknown kind \"" + kind + "\" (expected one of " +
                                           kinds_list() + ")");
    WorkloadSpec s;  // the struct's defaults are "mixed"
    s.kind = kind;
    if (kind == "poisson") {
        s.rate_rps = 1.0;
    } else if (kind == "shared-prefix") {
        s.n_requests = 32;
        s.shared_prefix_len = 256;
        s.prompt_min = 16;
        s.prompt_max = 64;
        s.output_min = 16;
        s.output_max = 128;
    }
    return s;
}

Result<WorkloadSpec> parse_workload_spec(const std::string& text) {
    const std::string_view all(text);
    const size_t colon = all.find(':');
    const std::string kind(all.substr(0, colon));
    auto spec = default_workload_spec(kind);
    if (!spec) return spec;
    if (colon != std::string_view::npos) {
        std::string_view rest = all.substr(colon + 1);
        while (!rest.empty()) {
            const size_t comma = rest.find(',');
            const std::string_view item = rest.substr(0, comma);
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            const size_t eq = item.find('=');
            if (eq == std::string_view::npos || eq == 0)
                return Result<WorkloadSpec>::error("workload spec \"" + text + "\": \"" + std::string(item) +
                                                   "\" is not key=value");
            const Status st = apply_key(*spec, item.substr(0, eq), item.substr(eq + 1));
            if (!st) return st;
        }
    }
    const Status valid = validate_workload_spec(*spec);
    if (!valid) return valid;
    return spec;
}

std::string workload_spec_string(const WorkloadSpec& s) {
    return s.kind + ":n=" + std::to_string(s.n_requests) + ",rate=" + number_string(s.rate_rps) +
           ",prompt=" + std::to_string(s.prompt_min) + ".." + std::to_string(s.prompt_max) +
           ",output=" + std::to_string(s.output_min) + ".." + std::to_string(s.output_max) +
           ",prefix=" + std::to_string(s.shared_prefix_len) + ",vocab=" + std::to_string(s.n_vocab) +
           ",first_token=" + std::to_string(s.first_token_id) + ",seed=" + std::to_string(s.seed) +
           ",priorities=" + std::to_string(s.n_priorities);
}

Status validate_workload_spec(const WorkloadSpec& s) {
    auto fail = [](const std::string& what) { return Status::error("workload spec: " + what); };
    if (!is_known_kind(s.kind)) return fail("unknown kind \"" + s.kind + "\" (expected one of " + kinds_list() + ")");
    if (s.n_requests < 1) return fail("n=" + std::to_string(s.n_requests) + " must be at least 1");
    if (std::isnan(s.rate_rps) || s.rate_rps < 0)
        return fail("rate=" + number_string(s.rate_rps) + " must be >= 0 (0 or inf: all at t=0)");
    if (s.prompt_min < 1 || s.prompt_max < s.prompt_min)
        return fail("prompt=" + std::to_string(s.prompt_min) + ".." + std::to_string(s.prompt_max) +
                    " needs 1 <= min <= max");
    if (s.output_min < 1 || s.output_max < s.output_min)
        return fail("output=" + std::to_string(s.output_min) + ".." + std::to_string(s.output_max) +
                    " needs 1 <= min <= max");
    if (s.shared_prefix_len < 0) return fail("prefix=" + std::to_string(s.shared_prefix_len) + " must be >= 0");
    if (s.first_token_id < 0 || s.first_token_id >= s.n_vocab)
        return fail("first_token=" + std::to_string(s.first_token_id) +
                    " must be in [0, vocab=" + std::to_string(s.n_vocab) + ")");
    if (s.n_priorities < 1) return fail("priorities=" + std::to_string(s.n_priorities) + " must be at least 1");
    return Status::ok();
}

Result<std::vector<WorkloadRequest>> make_workload(const WorkloadSpec& spec) {
    const Status valid = validate_workload_spec(spec);
    if (!valid) return valid;

    Stream arrivals(spec.seed, kArrivals), lengths(spec.seed, kLengths), tokens(spec.seed, kTokens),
        priorities(spec.seed, kPriorities);
    auto draw_token = [&] { return static_cast<int32_t>(tokens.uniform_int(spec.first_token_id, spec.n_vocab - 1)); };

    std::vector<int32_t> prefix(static_cast<size_t>(spec.shared_prefix_len));  // [shared_prefix_len]
    for (int32_t& t : prefix) t = draw_token();

    const bool poisson = spec.rate_rps > 0 && std::isfinite(spec.rate_rps);
    const bool log_uniform = log_uniform_lengths(spec.kind);
    std::vector<WorkloadRequest> out(static_cast<size_t>(spec.n_requests));
    double t = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        WorkloadRequest& r = out[i];
        if (poisson && i > 0) t += arrivals.exponential(spec.rate_rps);
        r.arrival_s = t;
        const int own = log_uniform ? lengths.log_uniform_int(spec.prompt_min, spec.prompt_max)
                                    : static_cast<int>(lengths.uniform_int(spec.prompt_min, spec.prompt_max));
        r.max_tokens = log_uniform ? lengths.log_uniform_int(spec.output_min, spec.output_max)
                                   : static_cast<int>(lengths.uniform_int(spec.output_min, spec.output_max));
        r.prompt = prefix;
        r.prompt.reserve(prefix.size() + static_cast<size_t>(own));
        for (int k = 0; k < own; ++k) r.prompt.push_back(draw_token());
        r.priority = static_cast<int>(priorities.uniform_int(0, spec.n_priorities - 1));
    }
    return out;
}

}  // namespace kvs
