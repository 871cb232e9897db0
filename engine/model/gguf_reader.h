#pragma once
// Reads a GGUF file (versions 2 and 3, little-endian): header, metadata (every value
// type, nested arrays), tensor infos and the aligned tensor data, memory-mapped.
//
// Everything is validated before use: magic, version, counts against the bytes left,
// string and array lengths, value type ids, general.alignment, tensor dims (> 0, at
// most 4), GGML type ids, element counts (multiples of the block size, no overflow),
// offsets (aligned, inside the file). A truncated, empty or corrupted file gives an
// error naming the file, the field and what was expected; nothing is allocated beyond
// what the file's size can justify.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/gguf_value.h"
#include "engine/model/mapped_file.h"
#include "kernels/dtype.h"

namespace kvs {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint32_t kGgufDefaultAlignment = 32;

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> ne;  // [n_dims] ne[0] is the contiguous dimension
    DType type = DType::F32;
    uint64_t offset = 0;  // from the start of the data section
    int64_t n_elements = 0;
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // [n_bytes] inside the mapping
};

class GgufFile {
public:
    // Maps and parses the file at path.
    static Result<std::shared_ptr<GgufFile>> open(const std::string& path);
    // Parses bytes that `owner` keeps alive (name is used in messages).
    static Result<std::shared_ptr<GgufFile>> parse(const std::string& name, std::shared_ptr<const void> owner,
                                                   const uint8_t* data, size_t size);

    const std::string& path() const { return m_path; }
    uint32_t version() const { return m_version; }
    uint32_t alignment() const { return m_alignment; }
    uint64_t data_offset() const { return m_data_offset; }  // start of the tensor data section
    size_t file_size() const { return m_size; }

    // Metadata in file order.
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return m_kv; }
    const GgufValue* find(std::string_view key) const;
    const std::vector<GgufTensorInfo>& tensors() const { return m_tensors; }
    const GgufTensorInfo* tensor(std::string_view name) const;

    // Convenience getters: nullopt when the key is absent; an error when it has the wrong type.
    Result<std::optional<int64_t>> get_int(std::string_view key) const;
    Result<std::optional<double>> get_double(std::string_view key) const;
    Result<std::optional<bool>> get_bool(std::string_view key) const;
    Result<std::optional<std::string>> get_string(std::string_view key) const;

    std::shared_ptr<const void> owner() const { return m_owner; }

private:
    class Parser;
    Status read_metadata(Parser& in, uint64_t n_kv);
    Status read_tensor_infos(Parser& in, uint64_t n_tensors);
    Status place_tensors(size_t end_of_infos);
    std::string m_path;
    std::shared_ptr<const void> m_owner;
    const uint8_t* m_data = nullptr;
    size_t m_size = 0;
    uint32_t m_version = 0;
    uint32_t m_alignment = kGgufDefaultAlignment;
    uint64_t m_data_offset = 0;
    std::vector<std::pair<std::string, GgufValue>> m_kv;
    std::map<std::string, size_t, std::less<>> m_kv_index;
    std::vector<GgufTensorInfo> m_tensors;
    std::map<std::string, size_t, std::less<>> m_tensor_index;
};

}  // namespace kvs
