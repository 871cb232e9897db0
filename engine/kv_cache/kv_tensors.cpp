#include "engine/kv_cache/kv_tensors.h"

namespace kvs {

KvTensors::KvTensors(Backend& backend, const ModelConfig& c, int n_blocks, int block_size)
    : m_backend(backend), m_n_blocks(n_blocks), m_block_size(block_size) {
    const size_t layer_bytes = static_cast<size_t>(n_blocks) * block_size * c.n_kv_head * c.head_dim * sizeof(uint16_t);
    for (int l = 0; l < c.n_layer; ++l) {
        m_k.push_back(static_cast<uint16_t*>(backend.alloc(layer_bytes)));
        m_v.push_back(static_cast<uint16_t*>(backend.alloc(layer_bytes)));
    }
    m_bytes = static_cast<int64_t>(layer_bytes) * 2 * c.n_layer;
}

KvTensors::~KvTensors() {
    for (auto* p : m_k) m_backend.release(p);
    for (auto* p : m_v) m_backend.release(p);
}

}  // namespace kvs
