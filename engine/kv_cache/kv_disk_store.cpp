#include "engine/kv_cache/kv_disk_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <tuple>

#include "engine/core/quote.h"

namespace kvs {

static_assert(std::endian::native == std::endian::little, "block files are written in little-endian order");

namespace fs = std::filesystem;

namespace {

constexpr size_t kFixedHeader = 80;  // up to the token ids
constexpr uint32_t kMaxTokens = 1024;

template <typename T>
void put_at(std::vector<uint8_t>& b, size_t off, T v) {
    std::memcpy(b.data() + off, &v, sizeof v);
}
template <typename T>
T get_at(const uint8_t* p, size_t off) {
    T v;
    std::memcpy(&v, p + off, sizeof v);
    return v;
}

std::string hex16(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

// 16 lowercase hex digits + ".kvb" -> the key; nothing for any other name.
std::optional<uint64_t> key_of_name(const std::string& name) {
    if (name.size() != 20 || name.compare(16, 4, ".kvb") != 0) return std::nullopt;
    uint64_t v = 0;
    for (size_t i = 0; i < 16; ++i) {
        const char c = name[i];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return std::nullopt;
        v = (v << 4) | static_cast<uint64_t>(d);
    }
    return v;
}

// Reads at most `max` bytes of a file; false when it cannot be opened or read.
bool read_file(const std::string& path, std::vector<uint8_t>* out, size_t max) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    out->resize(max);
    const size_t n = std::fread(out->data(), 1, max, f);
    const bool err = std::ferror(f) != 0;
    std::fclose(f);
    out->resize(n);
    return !err;
}

}  // namespace

int64_t block_file_header_bytes(int n_tokens) {
    return static_cast<int64_t>(kFixedHeader) + 4LL * n_tokens + 8;
}

std::string block_file_name(uint64_t store_key) { return hex16(store_key) + ".kvb"; }

std::vector<uint8_t> encode_block_file(BlockFileHeader h, const std::vector<uint8_t>& payload) {
    const size_t n_tok = h.tokens.size();
    const size_t hb = static_cast<size_t>(block_file_header_bytes(static_cast<int>(n_tok)));
    std::vector<uint8_t> b(hb + payload.size());
    h.payload_bytes = payload.size();
    h.payload_checksum = XXH3_64bits(payload.data(), payload.size());
    std::memcpy(b.data(), kBlockFileMagic, 8);
    put_at<uint32_t>(b, 8, h.version);
    put_at<uint32_t>(b, 12, static_cast<uint32_t>(hb));
    put_at<uint64_t>(b, 16, h.store_key);
    put_at<uint64_t>(b, 24, h.chain_hash);
    put_at<uint64_t>(b, 32, h.salt);
    put_at<uint64_t>(b, 40, h.model_fingerprint);
    put_at<uint32_t>(b, 48, h.kv_type);
    put_at<uint32_t>(b, 52, h.block_size);
    put_at<uint32_t>(b, 56, h.n_layer);
    put_at<uint32_t>(b, 60, static_cast<uint32_t>(n_tok));
    put_at<uint64_t>(b, 64, h.payload_bytes);
    put_at<uint64_t>(b, 72, h.payload_checksum);
    if (n_tok > 0) std::memcpy(b.data() + kFixedHeader, h.tokens.data(), 4 * n_tok);
    put_at<uint64_t>(b, hb - 8, XXH3_64bits(b.data(), hb - 8));
    if (!payload.empty()) std::memcpy(b.data() + hb, payload.data(), payload.size());
    return b;
}

Result<BlockFileHeader> decode_block_header(const uint8_t* p, size_t size) {
    using R = Result<BlockFileHeader>;
    if (size < kFixedHeader)
        return R::error("the file is " + std::to_string(size) + " bytes, shorter than a block file header (" +
                        std::to_string(kFixedHeader) + ")");
    if (std::memcmp(p, kBlockFileMagic, 8) != 0) return R::error("the magic is not KVSTIER (not a KV block file)");
    BlockFileHeader h;
    h.version = get_at<uint32_t>(p, 8);
    if (h.version != kBlockFileVersion)
        return R::error("version " + std::to_string(h.version) + ", this program reads version " +
                        std::to_string(kBlockFileVersion));
    const uint32_t hb = get_at<uint32_t>(p, 12);
    const uint32_t n_tok = get_at<uint32_t>(p, 60);
    if (n_tok > kMaxTokens || hb != static_cast<uint32_t>(block_file_header_bytes(static_cast<int>(n_tok))))
        return R::error("header size " + std::to_string(hb) + " does not match its " + std::to_string(n_tok) +
                        " tokens");
    if (size < hb)
        return R::error("the file is " + std::to_string(size) + " bytes, shorter than its header (" +
                        std::to_string(hb) + ")");
    if (get_at<uint64_t>(p, hb - 8) != XXH3_64bits(p, hb - 8)) return R::error("the header checksum does not match");
    h.store_key = get_at<uint64_t>(p, 16);
    h.chain_hash = get_at<uint64_t>(p, 24);
    h.salt = get_at<uint64_t>(p, 32);
    h.model_fingerprint = get_at<uint64_t>(p, 40);
    h.kv_type = get_at<uint32_t>(p, 48);
    h.block_size = get_at<uint32_t>(p, 52);
    h.n_layer = get_at<uint32_t>(p, 56);
    h.payload_bytes = get_at<uint64_t>(p, 64);
    h.payload_checksum = get_at<uint64_t>(p, 72);
    h.tokens.resize(n_tok);
    if (n_tok > 0) std::memcpy(h.tokens.data(), p + kFixedHeader, 4 * static_cast<size_t>(n_tok));
    return h;
}

Result<std::unique_ptr<KvDiskStore>> KvDiskStore::open(const DiskStoreParams& p, TierLog log) {
    using R = Result<std::unique_ptr<KvDiskStore>>;
    if (p.folder.empty()) return R::error("the KV disk store needs a folder");
    if (p.limit_bytes <= 0) return R::error("the KV disk store needs a size limit above 0");
    std::error_code ec;
    fs::create_directories(p.folder, ec);
    if (ec) return R::error("cannot create the KV disk store folder " + quote_untrusted(p.folder) + ": " + ec.message());
    if (::access(p.folder.c_str(), W_OK | X_OK) != 0)
        return R::error("the KV disk store folder " + quote_untrusted(p.folder) + " is not writable: " +
                        std::strerror(errno));
    std::unique_ptr<KvDiskStore> s(new KvDiskStore(p, std::move(log)));
    KVS_RETURN_IF_ERROR(s->scan());
    return s;
}

std::string KvDiskStore::path_of(uint64_t store_key) const { return m_p.folder + "/" + block_file_name(store_key); }

Status KvDiskStore::scan() {
    std::error_code ec;
    fs::directory_iterator it(m_p.folder, ec);
    if (ec) return Status::error("cannot list the KV disk store folder " + quote_untrusted(m_p.folder) + ": " + ec.message());
    struct Found {
        int64_t mtime_ns;
        uint64_t key;
        int64_t bytes;
    };
    std::vector<Found> found;
    const int64_t want_header = block_file_header_bytes(m_p.block_size);
    for (; it != fs::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        const std::string name = it->path().filename().string();
        const std::string path = it->path().string();
        const auto key = key_of_name(name);
        if (!key) {
            if (name.find(".kvb.tmp") != std::string::npos) {  // a write cut off by a crash
                fs::remove(it->path(), ec);
                m_log("KV disk store: removed the unfinished write " + quote_untrusted(path));
            } else {
                m_log("KV disk store: skipped " + quote_untrusted(path) + ": not a KV block file name");
            }
            continue;
        }
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
            m_log("KV disk store: skipped " + quote_untrusted(path) + ": not a regular file");
            continue;
        }
        std::vector<uint8_t> head;
        std::string why;
        if (!read_file(path, &head, static_cast<size_t>(want_header))) {
            why = "cannot be read";
        } else if (auto h = decode_block_header(head.data(), head.size()); !h) {
            why = h.message();
        } else if (h->store_key != *key) {
            why = "its header names block " + hex16(h->store_key) + ", not the one in its file name";
        } else if (h->model_fingerprint != m_p.model_fingerprint || h->kv_type != m_p.kv_type ||
                   h->block_size != static_cast<uint32_t>(m_p.block_size) ||
                   h->n_layer != static_cast<uint32_t>(m_p.n_layer) ||
                   h->payload_bytes != static_cast<uint64_t>(m_p.block_bytes)) {
            why = "it was written for another model, KV type or block shape";
        } else if (st.st_size != want_header + m_p.block_bytes) {
            why = "it is " + std::to_string(st.st_size) + " bytes, not " + std::to_string(want_header + m_p.block_bytes) +
                  " (truncated or padded)";
        }
        if (!why.empty()) {
            ++m_counters.bad_files;
            m_log("KV disk store: skipped " + quote_untrusted(path) + ": " + why + "; deleted");
            fs::remove(it->path(), ec);
            continue;
        }
        found.push_back({static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec, *key,
                         static_cast<int64_t>(st.st_size)});
    }
    std::sort(found.begin(), found.end(),
              [](const Found& a, const Found& b) { return std::tie(a.mtime_ns, a.key) < std::tie(b.mtime_ns, b.key); });
    for (const Found& f : found) {
        m_lru.push_back(f.key);
        m_index[f.key] = Entry{f.bytes, std::prev(m_lru.end())};
        m_bytes += f.bytes;
    }
    while (m_bytes > m_p.limit_bytes && !m_lru.empty()) evict_lru();  // a lower limit than last time
    return Status::ok();
}

void KvDiskStore::evict_lru() {
    const uint64_t key = m_lru.front();
    m_lru.pop_front();
    auto it = m_index.find(key);
    m_bytes -= it->second.bytes;
    m_index.erase(it);
    std::error_code ec;
    fs::remove(path_of(key), ec);
    ++m_counters.lru_deletions;
}

void KvDiskStore::drop(uint64_t store_key, const std::string& why) {
    ++m_counters.bad_files;
    m_log("KV disk store: skipped " + quote_untrusted(path_of(store_key)) + ": " + why + "; deleted, not loaded");
    if (auto it = m_index.find(store_key); it != m_index.end()) {
        m_bytes -= it->second.bytes;
        m_lru.erase(it->second.pos);
        m_index.erase(it);
    }
    std::error_code ec;
    fs::remove(path_of(store_key), ec);
}

bool KvDiskStore::put(uint64_t store_key, const TierBlockKey& key, const std::vector<uint8_t>& payload) {
    if (auto it = m_index.find(store_key); it != m_index.end()) {
        m_lru.splice(m_lru.end(), m_lru, it->second.pos);
        ::utimensat(AT_FDCWD, path_of(store_key).c_str(), nullptr, 0);  // the order survives a restart
        return true;
    }
    BlockFileHeader h;
    h.store_key = store_key;
    h.chain_hash = key.chain_hash;
    h.salt = key.salt;
    h.model_fingerprint = m_p.model_fingerprint;
    h.kv_type = m_p.kv_type;
    h.block_size = static_cast<uint32_t>(m_p.block_size);
    h.n_layer = static_cast<uint32_t>(m_p.n_layer);
    h.tokens = key.tokens;
    const std::vector<uint8_t> file = encode_block_file(std::move(h), payload);
    const int64_t sz = static_cast<int64_t>(file.size());
    if (sz > m_p.limit_bytes) return false;
    while (!m_lru.empty() && m_bytes + sz > m_p.limit_bytes) evict_lru();

    const std::string path = path_of(store_key);
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    bool ok = f != nullptr;
    std::string why = ok ? "" : std::strerror(errno);
    if (ok && std::fwrite(file.data(), 1, file.size(), f) != file.size()) {
        ok = false;
        why = std::strerror(errno);
    }
    if (f && std::fclose(f) != 0 && ok) {
        ok = false;
        why = std::strerror(errno);
    }
    if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
        ok = false;
        why = std::strerror(errno);
    }
    if (!ok) {
        std::remove(tmp.c_str());
        ++m_counters.write_failures;
        m_log("KV disk store: could not write " + quote_untrusted(path) + ": " + why + "; the block was dropped");
        return false;
    }
    m_lru.push_back(store_key);
    m_index[store_key] = Entry{sz, std::prev(m_lru.end())};
    m_bytes += sz;
    ++m_counters.writes;
    return true;
}

std::optional<TierBytes> KvDiskStore::get(uint64_t store_key, const TierBlockKey& expect) {
    auto it = m_index.find(store_key);
    if (it == m_index.end()) return std::nullopt;
    const std::string path = path_of(store_key);
    const int64_t hb = block_file_header_bytes(m_p.block_size);
    std::vector<uint8_t> file;
    // One byte more than expected, so a file that grew since the scan is noticed.
    if (!read_file(path, &file, static_cast<size_t>(hb + m_p.block_bytes + 1))) {
        drop(store_key, "it cannot be read any more");
        return std::nullopt;
    }
    auto h = decode_block_header(file.data(), file.size());
    if (!h) {
        drop(store_key, h.message());
        return std::nullopt;
    }
    std::string why;
    if (static_cast<int64_t>(file.size()) != hb + m_p.block_bytes)
        why = "it is " + std::to_string(file.size()) + " bytes, not " + std::to_string(hb + m_p.block_bytes);
    else if (h->store_key != store_key)
        why = "its header names block " + hex16(h->store_key) + ", not the one in its file name";
    else if (h->model_fingerprint != m_p.model_fingerprint || h->kv_type != m_p.kv_type ||
             h->block_size != static_cast<uint32_t>(m_p.block_size) || h->n_layer != static_cast<uint32_t>(m_p.n_layer) ||
             h->payload_bytes != static_cast<uint64_t>(m_p.block_bytes))
        why = "it was written for another model, KV type or block shape";
    else if (h->chain_hash != expect.chain_hash || h->salt != expect.salt || h->tokens != expect.tokens)
        why = "it holds other tokens than the prefix asked for";
    else if (XXH3_64bits(file.data() + hb, static_cast<size_t>(m_p.block_bytes)) != h->payload_checksum)
        why = "the payload checksum does not match (corrupted)";
    if (!why.empty()) {
        drop(store_key, why);
        return std::nullopt;
    }
    m_lru.splice(m_lru.end(), m_lru, it->second.pos);
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    ++m_counters.loads;
    return std::make_shared<const std::vector<uint8_t>>(file.begin() + hb, file.end());
}

std::vector<uint64_t> KvDiskStore::lru_keys() const { return {m_lru.begin(), m_lru.end()}; }

}  // namespace kvs
