#pragma once
// The paged K and V tensors of every layer, allocated on the backend:
// k[layer], v[layer] each [n_blocks, block_size, n_kv_head * head_dim] in the cache's
// element type: F16, or Q8_0 ("INT8 with per-block scales": each 32 consecutive values
// of a token's K or V row share one fp16 scale; see KvStoreArgs in kernels/backend.h).
// Everything here moves bytes, so block copies and swaps do not care which.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "kernels/backend.h"

namespace kvs {

// "f16" -> F16, "int8" (or "q8_0") -> Q8_0; an error naming the accepted spellings otherwise.
Result<DType> parse_kv_type(const std::string& name);
// "f16" or "int8": the spelling parse_kv_type takes and the CLI prints.
std::string kv_type_name(DType kv_type);
// Checks that `backend` runs a K/V cache of kv_type for this model's shape (Q8_0 needs
// head_dim a multiple of 32); the error names the backend, the type and the numbers.
Status check_kv_type(const Backend& backend, const ModelConfig& config, DType kv_type);
// K and V bytes of one token over all layers: 2 x n_layer x row_bytes(kv_type, kv_dim).
// The one definition of "KV bytes per token": the engine, the CLI, the window and
// /metrics all report this number.
int64_t kv_cache_bytes_per_token(const ModelConfig& config, DType kv_type);
// Checks that a KV cache of n_blocks blocks of block_size tokens fits beside everything
// else: at most 90% of this machine's RAM (the budget the batching engine and the single
// sequence runner both hold to). The error: "the KV cache for N tokens (B blocks of S)
// needs X GiB, more than 90% of this machine's Y GiB of RAM".
Status check_kv_cache_fits(const ModelConfig& config, DType kv_type, int64_t n_blocks, int block_size);
// This machine's physical RAM in bytes (0 when unknown).
int64_t physical_ram_bytes();

class KvTensors {
public:
    // The paged K/V tensors of every layer, or an error naming the bytes that the backend
    // could not allocate (a CUDA out-of-memory, a refused host allocation). kv_type must
    // have passed check_kv_type; n_blocks and block_size must be at least 1.
    static Result<std::unique_ptr<KvTensors>> create(Backend& backend, const ModelConfig& config, int n_blocks,
                                                     int block_size, DType kv_type = DType::F16);
    // Allocates without reporting: check allocated() before use (create() does).
    KvTensors(Backend& backend, const ModelConfig& config, int n_blocks, int block_size, DType kv_type = DType::F16);
    ~KvTensors();
    KvTensors(const KvTensors&) = delete;
    KvTensors& operator=(const KvTensors&) = delete;

    void* k(int layer) const { return m_k[static_cast<size_t>(layer)]; }  // [n_blocks, block_size, kv_dim] in kv_type
    void* v(int layer) const { return m_v[static_cast<size_t>(layer)]; }  // [n_blocks, block_size, kv_dim] in kv_type
    DType kv_type() const { return m_kv_type; }
    int n_blocks() const { return m_n_blocks; }
    int block_size() const { return m_block_size; }
    int64_t bytes() const { return m_bytes; }
    // False when the backend could not allocate every layer (out of memory).
    bool allocated() const;
    int n_layer() const { return static_cast<int>(m_k.size()); }
    // One block of every layer, K and V: n_layer * 2 * block_size * row_bytes(kv_type, kv_dim).
    int64_t block_bytes() const { return m_layer_block_bytes * 2 * static_cast<int64_t>(m_k.size()); }

    // Block moves for copy-on-write and the swap tier (all layers, K and V), byte for byte.
    void copy_block(int32_t src, int32_t dst);
    // host: [n_layer, 2 (K, V), block_size, kv_dim] in kv_type, block_bytes() bytes.
    void read_block(int32_t block, void* host) const;
    void write_block(int32_t block, const void* host);

private:
    uint8_t* k_block(size_t layer, int32_t block) const { return m_k[layer] + block * m_layer_block_bytes; }
    uint8_t* v_block(size_t layer, int32_t block) const { return m_v[layer] + block * m_layer_block_bytes; }

    Backend& m_backend;
    DType m_kv_type;
    std::vector<uint8_t*> m_k;        // [n_layer]
    std::vector<uint8_t*> m_v;        // [n_layer]
    int64_t m_layer_block_bytes = 0;  // block_size * row_bytes(kv_type, kv_dim): one block of one layer's K (or V)
    int m_n_blocks;
    int m_block_size;
    int64_t m_bytes = 0;
};

}  // namespace kvs
