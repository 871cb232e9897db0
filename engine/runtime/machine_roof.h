#pragma once
// This machine's roofline roof, measured by KV Scope itself (never typed in): the peak
// compute the engine's best matmul kernel reaches on all threads, and the memory bandwidth
// of a streaming read far larger than the caches. Their ratio is the ridge point, the
// arithmetic intensity (FLOP per byte) where an op stops being memory-bound. The numbers
// are cached per machine (CPU model, kernel level, threads) in
// $XDG_CACHE_HOME/kvscope/machine_roof.json and measured again on request.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/core/status.h"

namespace kvs {

struct MachineRoof {
    double peak_gflops = 0;  // best matmul call: Q4_1 weights [1536, 576] x 256 tokens (SmolLM2's FFN shape)
    double mem_gbps = 0;     // best streaming read of stream_bytes over all threads
    std::string cpu;         // the CPU's model name (/proc/cpuinfo)
    std::string kernel;      // the backend that ran the matmul ("cpu-avx2")
    int n_threads = 0;
    int64_t stream_bytes = 0;
    int64_t measured_at = 0;  // Unix seconds
    // FLOP per byte where the two roofs meet; 0 when either is missing.
    double ridge() const { return mem_gbps > 0 ? peak_gflops / mem_gbps : 0; }
    // Attainable GFLOP/s at arithmetic intensity ai: min(peak, ai x bandwidth).
    double attainable_gflops(double ai) const;
};

struct RoofOptions {
    int n_threads = 0;                        // 0: one per core (the engine's default)
    double seconds = 1.0;                     // time budget, about half for each roof
    int64_t stream_bytes = int64_t{256} << 20;  // the read buffer, far past any last-level cache
};

// Runs both micro-benchmarks (about opt.seconds; no model needed). Errors: no CPU backend.
Result<MachineRoof> measure_machine_roof(const RoofOptions& opt = {});

// The CPU's model name from /proc/cpuinfo ("unknown CPU" when it has none).
std::string cpu_model_name();

// The cache file: $XDG_CACHE_HOME/kvscope/machine_roof.json (~/.cache/... without it).
std::string machine_roof_cache_path();
// The cached roof of this CPU, kernel level and thread count (0: one per core); nullopt when
// the file has none (or cannot be read).
std::optional<MachineRoof> load_machine_roof(const std::string& path, int n_threads = 0);
// Stores roof in the file, replacing the entry of the same CPU, kernel and threads.
Status save_machine_roof(const std::string& path, const MachineRoof& roof);
// Cached when there is one, else measured and cached.
Result<MachineRoof> machine_roof(int n_threads = 0, bool remeasure = false);

}  // namespace kvs
