#pragma once
// Option groups several subcommands share (runner, CPU, sampling), each numeric option
// with a range check whose message names the range ("Value 0 not in range 1 to 1048576").
#include <CLI/CLI.hpp>

#include "engine/runtime/session.h"

namespace kvs::app {

// Limits of the numeric options (one place, so help texts and checks agree).
inline constexpr int kMaxCtx = 1 << 20;     // tokens of context (the KV memory check refuses what does not fit)
inline constexpr int kMaxTokens = 1 << 20;  // tokens of a prompt, a generation, a benchmark test
inline constexpr int kMaxBatch = 1 << 16;   // tokens per forward pass, sequences per step

// The --simd spellings: auto, avx2, scalar; "avx512" is refused by name (this build has no
// AVX-512 kernels), anything else is named as unknown.
CLI::Validator simd_level_check();
// --threads: 0 (one per core) up to the machine's hardware threads.
CLI::Validator thread_count_check();

// --threads, --backend, --simd
void add_cpu_options(CLI::App* c, RunnerOptions& r);
// the CPU options and --ctx, --batch, --block-size, --kv-type
void add_runner_options(CLI::App* c, RunnerOptions& r);
// KV tiers (engine/kv_cache/kv_tiers.h): --kv-cpu-mib, --kv-disk-mib, --kv-disk-dir.
struct KvTierFlags {
    double cpu_mib = 0;    // CPU tier in MiB (0: none)
    double disk_mib = 0;   // disk store in MiB (0: none)
    std::string disk_dir;  // "" : ~/.cache/kvscope/kv
    bool any() const { return cpu_mib > 0 || disk_mib > 0; }
    void apply(EngineOptions& e) const;
};
void add_kv_tier_options(CLI::App* c, KvTierFlags& t);
// -n/--max-tokens, --temp, --top-k, --top-p, --min-p, penalties, --seed, --stop, --ignore-eos, --watermark
void add_sampling_options(CLI::App* c, SamplingParams& s);

}  // namespace kvs::app
