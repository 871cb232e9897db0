#pragma once
// The disk tier of the KV tiers (engine/kv_cache/kv_tiers.h): full prefix blocks in a
// folder, one file per block named by its tier key (16 hex digits + ".kvb"), bounded in
// total bytes, least recently used deleted first. Written atomically (a temp file in the
// same folder, then rename), so a crash leaves a whole file or none; every file carries
// checksums, so a truncated or corrupted one is found and never loaded.
//
// File layout (little-endian):
//   offset  0  magic "KVSTIER\0"                     8 bytes
//           8  version (1)                           u32
//          12  header bytes (up to the payload)      u32
//          16  tier key (the file's name)            u64
//          24  chain hash (prefix cache)             u64
//          32  salt (LoRA adapter; 0 = base model)   u64
//          40  model fingerprint                     u64
//          48  KV type (DType id)                    u32
//          52  block size (tokens)                   u32
//          56  layer count                           u32
//          60  token count (= block size)            u32
//          64  payload bytes                         u64
//          72  payload checksum (XXH3-64)            u64
//          80  token ids                             i32 x token count
//          ..  header checksum (XXH3-64 of every byte before it)   u64
//          ..  payload: [n_layer, 2 (K, V), block_size, kv_dim] in the KV type
// The index is rebuilt at open by reading every file's header; a file whose header is bad,
// belongs to another model / KV type / block shape, or whose size is not header + payload
// is reported and deleted. The payload checksum and the tokens are checked on every load.
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/kv_block_tier.h"

namespace kvs {

using TierLog = std::function<void(const std::string&)>;

struct BlockFileHeader {
    uint32_t version = 1;
    uint64_t store_key = 0;
    uint64_t chain_hash = 0;
    uint64_t salt = 0;
    uint64_t model_fingerprint = 0;
    uint32_t kv_type = 0;
    uint32_t block_size = 0;
    uint32_t n_layer = 0;
    std::vector<int32_t> tokens;  // [block_size]
    uint64_t payload_bytes = 0;
    uint64_t payload_checksum = 0;  // filled by encode_block_file
};

inline constexpr char kBlockFileMagic[8] = {'K', 'V', 'S', 'T', 'I', 'E', 'R', '\0'};
inline constexpr uint32_t kBlockFileVersion = 1;

// A whole block file: header (checksums computed here) + payload.
std::vector<uint8_t> encode_block_file(BlockFileHeader h, const std::vector<uint8_t>& payload);
// Bytes in a block file's header for n tokens (everything before the payload).
int64_t block_file_header_bytes(int n_tokens);
// The header at the start of `data` (size bytes; the payload need not be there): magic,
// version, sizes and the header checksum checked. The error says what is wrong.
Result<BlockFileHeader> decode_block_header(const uint8_t* data, size_t size);
// "0123456789abcdef.kvb"
std::string block_file_name(uint64_t store_key);

struct DiskStoreParams {
    std::string folder;  // created if missing
    int64_t limit_bytes = 0;
    uint64_t model_fingerprint = 0;
    uint32_t kv_type = 0;
    int block_size = 0;
    int n_layer = 0;
    int64_t block_bytes = 0;  // payload bytes of one block
};

struct DiskStoreCounters {
    int64_t writes = 0;          // block files written
    int64_t write_failures = 0;  // could not write (full disk, unwritable folder): the block was dropped
    int64_t loads = 0;           // blocks read back and checked
    int64_t bad_files = 0;       // files found damaged or foreign (at open or on load), deleted and never loaded
    int64_t lru_deletions = 0;   // files deleted to stay within the size limit
};

class KvDiskStore {
public:
    // Opens (or creates) the folder and indexes the block files already there. Errors: the
    // folder cannot be created or listed (the message names it).
    static Result<std::unique_ptr<KvDiskStore>> open(const DiskStoreParams& p, TierLog log);

    const std::string& folder() const { return m_p.folder; }
    int64_t limit_bytes() const { return m_p.limit_bytes; }
    int64_t bytes() const { return m_bytes; }  // bytes of the indexed files, never above limit_bytes()
    int n_blocks() const { return static_cast<int>(m_index.size()); }
    bool contains(uint64_t store_key) const { return m_index.count(store_key) != 0; }
    const DiskStoreCounters& counters() const { return m_counters; }

    // Writes the block unless it is already stored (then it only becomes the most recently
    // used), deleting least recently used files first to stay within the limit. False when
    // it was not stored (bigger than the limit, or a write failed: reported).
    bool put(uint64_t store_key, const TierBlockKey& key, const std::vector<uint8_t>& payload);
    // Reads the block and checks everything (header, model, KV type, shape, key, tokens,
    // salt, payload checksum); a bad file is reported, deleted and nothing is returned.
    std::optional<TierBytes> get(uint64_t store_key, const TierBlockKey& expect);
    // Tier keys from least to most recently used.
    std::vector<uint64_t> lru_keys() const;

private:
    KvDiskStore(const DiskStoreParams& p, TierLog log) : m_p(p), m_log(std::move(log)) {}
    Status scan();
    std::string path_of(uint64_t store_key) const;
    void drop(uint64_t store_key, const std::string& why);  // bad file: report, unindex, delete
    void evict_lru();

    struct Entry {
        int64_t bytes = 0;
        std::list<uint64_t>::iterator pos;
    };
    DiskStoreParams m_p;
    TierLog m_log;
    std::list<uint64_t> m_lru;  // front = least recently used
    std::unordered_map<uint64_t, Entry> m_index;
    int64_t m_bytes = 0;
    DiskStoreCounters m_counters;
};

}  // namespace kvs
