#include "engine/kv_cache/kv_tensors.h"

#include <cstring>

namespace kvs {

KvTensors::KvTensors(Backend& backend, const ModelConfig& c, int n_blocks, int block_size)
    : m_backend(backend), m_n_blocks(n_blocks), m_block_size(block_size) {
    const size_t layer_bytes = static_cast<size_t>(n_blocks) * block_size * c.n_kv_head * c.head_dim * sizeof(uint16_t);
    for (int l = 0; l < c.n_layer; ++l) {
        m_k.push_back(static_cast<uint16_t*>(backend.alloc(layer_bytes)));
        m_v.push_back(static_cast<uint16_t*>(backend.alloc(layer_bytes)));
    }
    m_bytes = static_cast<int64_t>(layer_bytes) * 2 * c.n_layer;
    m_block_elems = static_cast<int64_t>(block_size) * c.n_kv_head * c.head_dim;
}

bool KvTensors::allocated() const {
    for (size_t l = 0; l < m_k.size(); ++l)
        if (!m_k[l] || !m_v[l]) return false;
    return true;
}

void KvTensors::copy_block(int32_t src, int32_t dst) {
    if (src == dst) return;
    const size_t bytes = static_cast<size_t>(m_block_elems) * sizeof(uint16_t);
    if (m_backend.host_visible()) {
        for (size_t l = 0; l < m_k.size(); ++l) {
            std::memcpy(m_k[l] + dst * m_block_elems, m_k[l] + src * m_block_elems, bytes);
            std::memcpy(m_v[l] + dst * m_block_elems, m_v[l] + src * m_block_elems, bytes);
        }
        return;
    }
    std::vector<uint16_t> staging(static_cast<size_t>(block_elems()));  // through the host
    read_block(src, staging.data());
    write_block(dst, staging.data());
}

void KvTensors::read_block(int32_t block, uint16_t* host) const {
    const size_t bytes = static_cast<size_t>(m_block_elems) * sizeof(uint16_t);
    for (size_t l = 0; l < m_k.size(); ++l) {
        m_backend.copy_to_host(host + (2 * l) * m_block_elems, m_k[l] + block * m_block_elems, bytes);
        m_backend.copy_to_host(host + (2 * l + 1) * m_block_elems, m_v[l] + block * m_block_elems, bytes);
    }
}

void KvTensors::write_block(int32_t block, const uint16_t* host) {
    const size_t bytes = static_cast<size_t>(m_block_elems) * sizeof(uint16_t);
    for (size_t l = 0; l < m_k.size(); ++l) {
        m_backend.copy_to_device(m_k[l] + block * m_block_elems, host + (2 * l) * m_block_elems, bytes);
        m_backend.copy_to_device(m_v[l] + block * m_block_elems, host + (2 * l + 1) * m_block_elems, bytes);
    }
}

KvTensors::~KvTensors() {
    for (auto* p : m_k) m_backend.release(p);
    for (auto* p : m_v) m_backend.release(p);
}

}  // namespace kvs
