#include "engine/runtime/machine_roof.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/thread_pool.h"

namespace kvs {

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
        }
    return "unknown CPU";
}

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int threads_for(int n_threads) {
    return n_threads > 0 ? n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Peak GFLOP/s: the best of repeated matmul calls on weights that stay in cache.
double measure_peak_gflops(Backend& be, double budget_s) {
    constexpr int64_t n_out = 1536, n_in = 576;
    constexpr int n_tokens = 256;
    const DType t = DType::Q4_1;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    const size_t rb = row_bytes(t, n_in);
    std::vector<uint8_t> bytes(rb * n_out);  // [n_out, n_in] in Q4_1 blocks
    std::vector<float> row(n_in);
    for (int64_t r = 0; r < n_out; ++r) {
        for (float& v : row) v = nd(rng);
        cpu::quantize_row(t, row.data(), bytes.data() + r * rb, n_in);
    }
    std::vector<float> x(static_cast<size_t>(n_tokens) * n_in);  // [n_tokens, n_in]
    for (float& v : x) v = nd(rng);
    std::vector<float> y(static_cast<size_t>(n_tokens) * n_out);  // [n_tokens, n_out]
    WeightView w{t, bytes.data(), n_in, n_out};
    void* tiles = be.prepare_weight(w);  // the layout the engine's matrices get
    const double flops = 2.0 * n_tokens * n_in * n_out;
    be.matmul(w, x.data(), y.data(), n_tokens);  // warm-up
    double best = 1e30;
    const auto t0 = Clock::now();
    for (int i = 0; i < 3 || seconds_since(t0) < budget_s; ++i) {
        const auto t1 = Clock::now();
        be.matmul(w, x.data(), y.data(), n_tokens);
        best = std::min(best, seconds_since(t1));
        if (i > 1000) break;
    }
    if (tiles) be.release(tiles);
    return flops / best / 1e9;
}

// Streaming read: every thread sums its share of a large buffer; the best pass counts.
double measure_mem_gbps(int n_threads, int64_t bytes, double budget_s) {
    cpu::ThreadPool pool(n_threads);
    const size_t n = static_cast<size_t>(bytes) / sizeof(uint64_t);
    std::vector<uint64_t> buf(n);  // [n] written once, so every page is real memory
    for (size_t i = 0; i < n; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
    constexpr size_t chunk = (size_t{4} << 20) / sizeof(uint64_t);  // 4 MiB per task
    const int64_t n_tasks = static_cast<int64_t>((n + chunk - 1) / chunk);
    std::vector<uint64_t> sums(static_cast<size_t>(pool.size()) * 8, 0);  // a cache line per thread
    auto pass = [&] {
        pool.parallel_for(n_tasks, [&](int64_t task, int thread) {
            const uint64_t* p = buf.data() + static_cast<size_t>(task) * chunk;
            const size_t m = std::min(chunk, n - static_cast<size_t>(task) * chunk);
            uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            size_t i = 0;
            for (; i + 4 <= m; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
            for (; i < m; ++i) s0 += p[i];
            sums[static_cast<size_t>(thread) * 8] += s0 ^ s1 ^ s2 ^ s3;
        });
    };
    pass();  // warm-up
    double best = 1e30;
    const auto t0 = Clock::now();
    for (int i = 0; i < 3 || seconds_since(t0) < budget_s; ++i) {
        const auto t1 = Clock::now();
        pass();
        best = std::min(best, seconds_since(t1));
        if (i > 200) break;
    }
    volatile uint64_t sink = 0;
    for (uint64_t s : sums) sink = sink + s;
    return static_cast<double>(n * sizeof(uint64_t)) / best / 1e9;
}
}  // namespace

double MachineRoof::attainable_gflops(double ai) const { return std::min(peak_gflops, ai * mem_gbps); }

Result<MachineRoof> measure_machine_roof(const RoofOptions& opt) {
    MachineRoof r;
    r.n_threads = threads_for(opt.n_threads);
    std::string err;
    auto be = make_cpu_backend(r.n_threads, "auto", &err);
    if (!be) return Result<MachineRoof>::error("measuring the roofline: no CPU backend: " + err);
    r.kernel = be->name();
    r.cpu = cpu_model_name();
    r.stream_bytes = std::max<int64_t>(opt.stream_bytes, int64_t{8} << 20);
    r.peak_gflops = measure_peak_gflops(*be, opt.seconds / 2);
    be.reset();  // its spinning workers would steal time from the read
    r.mem_gbps = measure_mem_gbps(r.n_threads, r.stream_bytes, opt.seconds / 2);
    r.measured_at = static_cast<int64_t>(std::time(nullptr));
    return r;
}

std::string machine_roof_cache_path() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kvscope/machine_roof.json";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.cache/kvscope/machine_roof.json";
}

namespace {
nlohmann::json read_cache(const std::string& path) {
    std::ifstream in(path);
    if (!in) return nlohmann::json::object();
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("entries") || !j["entries"].is_array())
        return nlohmann::json::object();
    return j;
}
std::string current_kernel() {
    auto be = make_cpu_backend(1, "auto", nullptr);
    return be ? be->name() : "cpu";
}
}  // namespace

std::optional<MachineRoof> load_machine_roof(const std::string& path, int n_threads) {
    const auto j = read_cache(path);
    if (!j.contains("entries")) return std::nullopt;
    const std::string cpu = cpu_model_name(), kernel = current_kernel();
    const int threads = threads_for(n_threads);
    for (const auto& e : j["entries"]) {
        if (!e.is_object() || e.value("cpu", "") != cpu || e.value("kernel", "") != kernel ||
            e.value("n_threads", 0) != threads)
            continue;
        MachineRoof r;
        r.cpu = cpu;
        r.kernel = kernel;
        r.n_threads = threads;
        r.peak_gflops = e.value("peak_gflops", 0.0);
        r.mem_gbps = e.value("mem_gbps", 0.0);
        r.stream_bytes = e.value("stream_bytes", int64_t{0});
        r.measured_at = e.value("measured_at", int64_t{0});
        if (r.peak_gflops > 0 && r.mem_gbps > 0) return r;
    }
    return std::nullopt;
}

Status save_machine_roof(const std::string& path, const MachineRoof& roof) {
    auto j = read_cache(path);
    nlohmann::json entries = nlohmann::json::array();
    if (j.contains("entries"))
        for (const auto& e : j["entries"])
            if (!(e.value("cpu", "") == roof.cpu && e.value("kernel", "") == roof.kernel &&
                  e.value("n_threads", 0) == roof.n_threads))
                entries.push_back(e);
    entries.push_back({{"cpu", roof.cpu},
                       {"kernel", roof.kernel},
                       {"n_threads", roof.n_threads},
                       {"peak_gflops", roof.peak_gflops},
                       {"mem_gbps", roof.mem_gbps},
                       {"stream_bytes", roof.stream_bytes},
                       {"measured_at", roof.measured_at}});
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        if (!out) return Status::error("cannot write the roofline cache " + tmp);
        out << nlohmann::json{{"entries", entries}}.dump(2) << "\n";
        if (!out) return Status::error("cannot write the roofline cache " + tmp);
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) return Status::error("cannot write the roofline cache " + path + ": " + ec.message());
    return Status::ok();
}

Result<MachineRoof> machine_roof(int n_threads, bool remeasure) {
    const std::string path = machine_roof_cache_path();
    if (!remeasure)
        if (auto cached = load_machine_roof(path, n_threads)) return *cached;
    auto r = measure_machine_roof(RoofOptions{n_threads});
    if (!r) return r;
    (void)save_machine_roof(path, r.value());  // a read-only cache only means measuring next time again
    return r;
}

}  // namespace kvs
