#pragma once
// KV tiers (LMCache-style): full prefix blocks that the device pool evicts go to a CPU
// tier (host memory, bounded in bytes, LRU) and from there to a bounded on-disk store
// (engine/kv_cache/kv_disk_store.h); a prefix lookup that misses in the device pool asks
// the CPU tier, then the disk, and a hit comes back into a device block instead of being
// recomputed - across requests, and through the disk store across restarts.
//
// Keys: a block is stored under its tier key, XXH3 of (prefix-cache chain hash, model
// fingerprint, KV type, block size); the chain hash already covers the block's whole
// prefix and the LoRA adapter's salt. The disk folder is
// <root>/<model fingerprint hex>-<KV type>-b<block size>/ (so two KV types or block sizes of
// one model never touch each other's files), and every file repeats the fingerprint, KV
// type, shape, salt and tokens, checked on load.
//
// One engine owns one KvTiers, on its thread (not thread-safe).
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/kv_block_tier.h"
#include "engine/kv_cache/kv_cpu_tier.h"
#include "engine/kv_cache/kv_disk_store.h"

namespace kvs {

struct Model;

struct KvTierOptions {
    int64_t cpu_bytes = 0;   // CPU tier bound (0: none)
    int64_t disk_bytes = 0;  // disk store bound (0: none)
    std::string disk_root;   // "" : default_kv_disk_root(); the store is <root>/<fingerprint>-<kv type>-b<block size>
    uint64_t model_fingerprint = 0;
    uint32_t kv_type = 0;  // DType id
    std::string kv_type_name = "f16";  // kv_type_name(kv_type), for the folder's name
    int block_size = 0;
    int n_layer = 0;
    int64_t block_bytes = 0;  // KvTensors::block_bytes()
};

// $XDG_CACHE_HOME/kvscope/kv, else ~/.cache/kvscope/kv.
std::string default_kv_disk_root();
// A model's identity for the tiers: its hyper-parameters, every weight's type and shape,
// and samples of every weight's bytes (start, middle, end) - cheap at start, and two
// models that differ in their weights (another checkpoint, a quantized variant) differ.
uint64_t model_fingerprint(const Model& m);

class KvTiers final : public KvBlockTier {
public:
    // Errors: neither tier asked for, or the disk folder cannot be created or listed.
    static Result<std::unique_ptr<KvTiers>> create(const KvTierOptions& opt, TierLog log = {});
    // With both tiers, the CPU tier's blocks go to the disk store (least recently used
    // first), so a restart finds everything the disk limit holds.
    ~KvTiers() override;

    uint64_t tier_key(uint64_t chain_hash) const;
    std::optional<TierHit> find(const TierBlockKey& key) override;
    // An evicted device block's bytes: into the CPU tier (its least recently used entries
    // out to disk), or straight to disk without a CPU tier.
    void spill(const TierBlockKey& key, TierBytes bytes);

    KvTierStats stats() const;
    const KvCpuTier* cpu() const { return m_cpu.get(); }
    const KvDiskStore* disk() const { return m_disk.get(); }
    // The newest reports (bad files skipped, failed writes), at most 64; each also went to
    // the log function (stderr by default).
    const std::deque<std::string>& messages() const { return m_messages; }

private:
    KvTiers() = default;
    void note(const std::string& line);

    KvTierOptions m_opt;
    TierLog m_log;
    std::unique_ptr<KvCpuTier> m_cpu;
    std::unique_ptr<KvDiskStore> m_disk;
    std::deque<std::string> m_messages;
    int64_t m_spilled = 0, m_cpu_hits = 0, m_disk_hits = 0;
};

}  // namespace kvs
