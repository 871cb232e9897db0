#pragma once
// Writes a GGUF version 3 (or 2) file: metadata of every value type, then tensor infos,
// then the tensor data, each tensor aligned to general.alignment (32 by default).
// Used by the tests' tiny models and by the quantizer.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/gguf_value.h"
#include "kernels/dtype.h"

namespace kvs {

class GgufWriter {
public:
    explicit GgufWriter(uint32_t version = 3) : m_version(version) {}

    // Adds (or replaces) a metadata key. Keys are written in the order first set.
    void set(const std::string& key, GgufValue value);
    void set_string(const std::string& key, std::string v) { set(key, GgufValue::of_string(std::move(v))); }
    void set_u32(const std::string& key, uint32_t v) { set(key, GgufValue::of(v)); }
    void set_i32(const std::string& key, int32_t v) { set(key, GgufValue::of(v)); }
    void set_f32(const std::string& key, float v) { set(key, GgufValue::of(v)); }
    void set_bool(const std::string& key, bool v) { set(key, GgufValue::of(v)); }
    // Sets general.alignment (a power of two) and aligns the tensor data to it.
    void set_alignment(uint32_t alignment);

    // A tensor of `type` with dims ne (ne[0] contiguous); data holds row_bytes(type, ne[0])
    // * ne[1] * ... bytes. The writer keeps its own copy.
    void add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* data, size_t n_bytes);
    // The same without copying: `data` must stay valid until write() returns.
    void add_tensor_view(const std::string& name, DType type, std::vector<int64_t> ne, const void* data,
                         size_t n_bytes);

    // Checks sizes and writes the file; errors name the file or tensor.
    Status write(const std::string& path) const;

private:
    struct Tensor {
        std::string name;
        DType type;
        std::vector<int64_t> ne;  // [n_dims]
        const void* data;         // [n_bytes]
        size_t n_bytes;
        std::shared_ptr<std::vector<uint8_t>> owned;
    };
    uint32_t m_version;
    uint32_t m_alignment = 32;
    std::vector<std::pair<std::string, GgufValue>> m_kv;
    std::vector<Tensor> m_tensors;
};

}  // namespace kvs
