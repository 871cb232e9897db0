#include "engine/kv_cache/kv_tensors.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

namespace kvs {

Result<DType> parse_kv_type(const std::string& name) {
    if (name == "f16") return DType::F16;
    if (name == "int8" || name == "q8_0") return DType::Q8_0;
    return Result<DType>::error("KV cache type '" + name + "' is not known: use f16 or int8");
}

std::string kv_type_name(DType kv_type) {
    if (kv_type == DType::F16) return "f16";
    if (kv_type == DType::Q8_0) return "int8";
    return std::string(dtype_name(kv_type));
}

Status check_kv_type(const Backend& backend, const ModelConfig& c, DType kv_type) {
    if (kv_type != DType::F16 && kv_type != DType::Q8_0)
        return Status::error("KV cache type " + std::string(dtype_name(kv_type)) + " is not supported (f16 or int8)");
    if (!backend.supports_kv(kv_type))
        return Status::error("backend " + backend.name() + " has no kernels for a " + kv_type_name(kv_type) +
                             " KV cache; use --kv-type f16 (or the CPU backend)");
    const int block = dtype_info(kv_type).block_size;
    if (c.head_dim % block != 0)
        return Status::error("a " + kv_type_name(kv_type) + " KV cache stores blocks of " + std::to_string(block) +
                             " values per head, but model " + c.name + " has head_dim " + std::to_string(c.head_dim) +
                             "; use --kv-type f16");
    return Status::ok();
}

int64_t kv_cache_bytes_per_token(const ModelConfig& c, DType kv_type) {
    return 2LL * c.n_layer * static_cast<int64_t>(row_bytes(kv_type, static_cast<int64_t>(c.n_kv_head) * c.head_dim));
}

int64_t physical_ram_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

namespace {
std::string gib(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
    return buf;
}
}  // namespace

Status check_kv_cache_fits(const ModelConfig& c, DType kv_type, int64_t n_blocks, int block_size) {
    const double bytes = static_cast<double>(kv_cache_bytes_per_token(c, kv_type)) * static_cast<double>(block_size) *
                         static_cast<double>(n_blocks);
    const int64_t ram = physical_ram_bytes();
    const double tokens = static_cast<double>(n_blocks) * block_size;
    const std::string what = "the KV cache for " + std::to_string(static_cast<long long>(tokens)) + " tokens (" +
                             std::to_string(n_blocks) + " blocks of " + std::to_string(block_size) + ") needs " +
                             gib(bytes);
    if (ram > 0 && bytes > static_cast<double>(ram) * 0.9)
        return Status::error(what + ", more than 90% of this machine's " + gib(static_cast<double>(ram)) + " of RAM");
    if (n_blocks > std::numeric_limits<int>::max())
        return Status::error(what + " in more blocks than one pool can number (" +
                             std::to_string(std::numeric_limits<int>::max()) + ")");
    return Status::ok();
}

Result<std::unique_ptr<KvTensors>> KvTensors::create(Backend& backend, const ModelConfig& c, int n_blocks,
                                                     int block_size, DType kv_type) {
    using R = Result<std::unique_ptr<KvTensors>>;
    if (n_blocks < 1 || block_size < 1)
        return R::error("a KV cache needs at least one block of at least one token (got " + std::to_string(n_blocks) +
                        " blocks of " + std::to_string(block_size) + ")");
    std::unique_ptr<KvTensors> kv(new KvTensors(backend, c, n_blocks, block_size, kv_type));
    if (!kv->allocated()) {
        const int64_t layer_bytes = kv->bytes() / std::max(1, 2 * c.n_layer);
        return R::error("out of memory: the backend " + backend.name() + " could not allocate the KV cache of " +
                        std::to_string(n_blocks) + " blocks of " + std::to_string(block_size) + " tokens (" +
                        std::to_string(kv->bytes()) + " bytes, " + gib(static_cast<double>(kv->bytes())) + " in " +
                        std::to_string(2 * c.n_layer) + " tensors of " + std::to_string(layer_bytes) + " bytes)");
    }
    return kv;
}

KvTensors::KvTensors(Backend& backend, const ModelConfig& c, int n_blocks, int block_size, DType kv_type)
    : m_backend(backend), m_kv_type(kv_type), m_n_blocks(n_blocks), m_block_size(block_size) {
    m_layer_block_bytes = static_cast<int64_t>(block_size) *
                          static_cast<int64_t>(row_bytes(kv_type, static_cast<int64_t>(c.n_kv_head) * c.head_dim));
    const size_t layer_bytes = static_cast<size_t>(std::max(0, n_blocks)) * static_cast<size_t>(m_layer_block_bytes);
    m_bytes = static_cast<int64_t>(layer_bytes) * 2 * c.n_layer;
    m_k.assign(static_cast<size_t>(c.n_layer), nullptr);
    m_v.assign(static_cast<size_t>(c.n_layer), nullptr);
    if (layer_bytes == 0) return;  // nothing to hold: allocated() says no
    // Stops at the first failure: the rest would fail too, and allocated() reports it.
    for (size_t l = 0; l < m_k.size(); ++l) {
        m_k[l] = static_cast<uint8_t*>(backend.alloc(layer_bytes));
        if (!m_k[l]) break;
        m_v[l] = static_cast<uint8_t*>(backend.alloc(layer_bytes));
        if (!m_v[l]) break;
    }
}

bool KvTensors::allocated() const {
    if (m_k.empty()) return false;
    for (size_t l = 0; l < m_k.size(); ++l)
        if (!m_k[l] || !m_v[l]) return false;
    return true;
}

void KvTensors::copy_block(int32_t src, int32_t dst) {
    if (src == dst) return;
    const size_t bytes = static_cast<size_t>(m_layer_block_bytes);
    if (m_backend.host_visible()) {
        for (size_t l = 0; l < m_k.size(); ++l) {
            std::memcpy(k_block(l, dst), k_block(l, src), bytes);
            std::memcpy(v_block(l, dst), v_block(l, src), bytes);
        }
        return;
    }
    std::vector<uint8_t> staging(static_cast<size_t>(block_bytes()));  // through the host
    read_block(src, staging.data());
    write_block(dst, staging.data());
}

void KvTensors::read_block(int32_t block, void* host) const {
    const size_t bytes = static_cast<size_t>(m_layer_block_bytes);
    auto* h = static_cast<uint8_t*>(host);
    for (size_t l = 0; l < m_k.size(); ++l) {
        m_backend.copy_to_host(h + (2 * l) * bytes, k_block(l, block), bytes);
        m_backend.copy_to_host(h + (2 * l + 1) * bytes, v_block(l, block), bytes);
    }
}

void KvTensors::write_block(int32_t block, const void* host) {
    const size_t bytes = static_cast<size_t>(m_layer_block_bytes);
    const auto* h = static_cast<const uint8_t*>(host);
    for (size_t l = 0; l < m_k.size(); ++l) {
        m_backend.copy_to_device(k_block(l, block), h + (2 * l) * bytes, bytes);
        m_backend.copy_to_device(v_block(l, block), h + (2 * l + 1) * bytes, bytes);
    }
}

KvTensors::~KvTensors() {
    for (auto* p : m_k)
        if (p) m_backend.release(p);
    for (auto* p : m_v)
        if (p) m_backend.release(p);
}

}  // namespace kvs
