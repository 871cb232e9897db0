#include "app/net/serve_metrics.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/telemetry/latency_stats.h"

namespace kvs::net {
namespace {

LatencyStat stat_ms(std::vector<double> seconds) {
    LatencyStat s;
    s.count = static_cast<int64_t>(seconds.size());
    if (seconds.empty()) return s;  // vLLM: np.mean(x or 0) = 0
    for (double& v : seconds) v *= 1000.0;
    s.mean = mean(seconds);
    double var = 0;
    for (double v : seconds) var += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(var / static_cast<double>(seconds.size()));
    s.median = percentile(seconds, 50);
    s.p90 = percentile(seconds, 90);
    s.p99 = percentile(seconds, 99);
    return s;
}

nlohmann::json stat_json(const LatencyStat& s) {
    return {{"mean", s.mean}, {"median", s.median}, {"std", s.std}, {"p90", s.p90}, {"p99", s.p99}, {"count", s.count}};
}

}  // namespace

Result<GoodputSlo> parse_goodput(const std::string& text) {
    GoodputSlo slo;
    std::string norm = text;
    for (char& c : norm)
        if (c == ',') c = ' ';
    std::istringstream in(norm);
    std::string item;
    while (in >> item) {
        const size_t colon = item.find(':');
        if (colon == std::string::npos)
            return Status::error("--goodput: '" + item + "' is not KEY:MS (keys ttft, tpot, e2el)");
        const std::string key = item.substr(0, colon), val = item.substr(colon + 1);
        char* end = nullptr;
        const double ms = std::strtod(val.c_str(), &end);
        if (val.empty() || *end != '\0' || !(ms > 0) || !std::isfinite(ms))
            return Status::error("--goodput: '" + val + "' for " + key + " is not a number of milliseconds > 0");
        if (key == "ttft") slo.ttft_ms = ms;
        else if (key == "tpot")
            slo.tpot_ms = ms;
        else if (key == "e2el")
            slo.e2el_ms = ms;
        else
            return Status::error("--goodput: unknown metric '" + key + "' (ttft, tpot or e2el)");
    }
    if (!slo.any()) return Status::error("--goodput: no SLO given (e.g. ttft:500 tpot:50)");
    return slo;
}

ServeMetrics compute_serve_metrics(const std::vector<RequestOutcome>& outcomes, double duration_s,
                                   const GoodputSlo& slo) {
    ServeMetrics m;
    m.duration_s = duration_s;
    std::vector<double> ttfts, tpots, itls, e2els;
    int good = 0;
    for (const RequestOutcome& o : outcomes) {
        if (!o.success) {
            ++m.failed;
            continue;
        }
        ++m.completed;
        m.total_input += o.prompt_len;
        m.total_output += o.output_tokens;
        double tpot = 0;  // vLLM: a request of <= 1 token has tpot 0 for goodput
        if (o.output_tokens > 1) {
            tpot = (o.latency_s - o.ttft_s) / static_cast<double>(o.output_tokens - 1);
            tpots.push_back(tpot);
        }
        itls.insert(itls.end(), o.itl_s.begin(), o.itl_s.end());
        ttfts.push_back(o.ttft_s);
        e2els.push_back(o.latency_s);
        bool ok = true;
        if (slo.ttft_ms && o.ttft_s * 1000.0 > *slo.ttft_ms) ok = false;
        if (slo.tpot_ms && tpot * 1000.0 > *slo.tpot_ms) ok = false;
        if (slo.e2el_ms && o.latency_s * 1000.0 > *slo.e2el_ms) ok = false;
        good += ok ? 1 : 0;
    }
    if (duration_s > 0) {
        m.request_throughput = m.completed / duration_s;
        m.output_throughput = static_cast<double>(m.total_output) / duration_s;
        m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
        if (slo.any()) m.request_goodput = good / duration_s;
    }
    m.goodput_measured = slo.any();
    m.ttft = stat_ms(ttfts);
    m.tpot = stat_ms(tpots);
    m.itl = stat_ms(itls);
    m.e2el = stat_ms(e2els);
    return m;
}

nlohmann::json to_json(const ServeMetrics& m) {
    nlohmann::json j = {{"completed", m.completed},
                        {"failed", m.failed},
                        {"total_input_tokens", m.total_input},
                        {"total_output_tokens", m.total_output},
                        {"duration_s", m.duration_s},
                        {"request_throughput", m.request_throughput},
                        {"output_throughput", m.output_throughput},
                        {"total_token_throughput", m.total_token_throughput},
                        {"ttft_ms", stat_json(m.ttft)},
                        {"tpot_ms", stat_json(m.tpot)},
                        {"itl_ms", stat_json(m.itl)},
                        {"e2el_ms", stat_json(m.e2el)}};
    j["request_goodput"] = m.goodput_measured ? nlohmann::json(m.request_goodput) : nlohmann::json(nullptr);
    return j;
}

std::string format_table(const ServeMetrics& m, const std::string& title) {
    std::string out;
    char line[160];
    auto row = [&](const char* name, double v, int decimals) {
        std::snprintf(line, sizeof line, "%-40s %-10.*f\n", name, decimals, v);
        out += line;
    };
    auto header = [&](const std::string& t, char fill) {
        const int w = 50, pad = std::max(0, w - static_cast<int>(t.size()));
        out += std::string(static_cast<size_t>(pad / 2), fill) + t +
               std::string(static_cast<size_t>(pad - pad / 2), fill) + "\n";
    };
    auto block = [&](const char* head, const char* abbr, const LatencyStat& s) {
        header(head, '-');
        std::string n;
        n = std::string("Mean ") + abbr + " (ms):";
        row(n.c_str(), s.mean, 2);
        n = std::string("Median ") + abbr + " (ms):";
        row(n.c_str(), s.median, 2);
        n = std::string("P99 ") + abbr + " (ms):";
        row(n.c_str(), s.p99, 2);
    };
    header(" " + title + " ", '=');
    row("Successful requests:", m.completed, 0);
    row("Failed requests:", m.failed, 0);
    row("Benchmark duration (s):", m.duration_s, 2);
    row("Total input tokens:", static_cast<double>(m.total_input), 0);
    row("Total generated tokens:", static_cast<double>(m.total_output), 0);
    row("Request throughput (req/s):", m.request_throughput, 2);
    if (m.goodput_measured) row("Request goodput (req/s):", m.request_goodput, 2);
    row("Output token throughput (tok/s):", m.output_throughput, 2);
    row("Total Token throughput (tok/s):", m.total_token_throughput, 2);
    block("Time to First Token", "TTFT", m.ttft);
    block("Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
    block("Inter-token Latency", "ITL", m.itl);
    block("End-to-end Latency", "E2EL", m.e2el);
    out += std::string(50, '=') + "\n";
    return out;
}

}  // namespace kvs::net
