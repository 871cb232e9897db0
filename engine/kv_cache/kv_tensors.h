#pragma once
// The paged K and V tensors of every layer, allocated on the backend:
// k[layer], v[layer] each [n_blocks, block_size, n_kv_head * head_dim] in F16.
#include <cstdint>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "kernels/backend.h"

namespace kvs {

class KvTensors {
public:
    KvTensors(Backend& backend, const ModelConfig& config, int n_blocks, int block_size);
    ~KvTensors();
    KvTensors(const KvTensors&) = delete;
    KvTensors& operator=(const KvTensors&) = delete;

    uint16_t* k(int layer) const { return m_k[static_cast<size_t>(layer)]; }  // [n_blocks, block_size, kv_dim]
    uint16_t* v(int layer) const { return m_v[static_cast<size_t>(layer)]; }  // [n_blocks, block_size, kv_dim]
    int n_blocks() const { return m_n_blocks; }
    int block_size() const { return m_block_size; }
    int64_t bytes() const { return m_bytes; }
    // False when the backend could not allocate every layer (out of memory).
    bool allocated() const;
    // One block of every layer, K and V: n_layer * 2 * block_size * kv_dim halfs.
    int64_t block_elems() const { return m_block_elems * 2 * static_cast<int64_t>(m_k.size()); }

    // Block moves for copy-on-write and the swap tier (all layers, K and V).
    void copy_block(int32_t src, int32_t dst);
    // host: [n_layer, 2 (K, V), block_size, kv_dim] halfs, block_elems() of them.
    void read_block(int32_t block, uint16_t* host) const;
    void write_block(int32_t block, const uint16_t* host);

private:
    Backend& m_backend;
    std::vector<uint16_t*> m_k;  // [n_layer]
    std::vector<uint16_t*> m_v;  // [n_layer]
    int64_t m_block_elems = 0;   // block_size * kv_dim: one block of one layer's K (or V)
    int m_n_blocks;
    int m_block_size;
    int64_t m_bytes = 0;
};

}  // namespace kvs
