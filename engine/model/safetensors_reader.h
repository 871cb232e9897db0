#pragma once
// Reads Hugging Face safetensors files (8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw data), memory-mapped.
// A model may be one file or several shards, listed by model.safetensors.index.json
// or simply all *.safetensors files of a folder. Float tensors (F32, F16, BF16) and the
// integer tensors of quantized checkpoints (I32: AWQ qweight/qzeros, I8: int8 weights).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/mapped_file.h"
#include "kernels/dtype.h"

namespace kvs {

struct SafetensorsTensor {
    std::string name;
    std::string dtype;           // the file's spelling: "F32", "F16", "BF16", "I32" or "I8"
    bool integer = false;        // I32 / I8: `type` is not meaningful, read `dtype`
    DType type = DType::F32;     // float tensors: F32, F16 or BF16
    std::vector<int64_t> shape;  // [n_dims] row-major, outermost first (PyTorch order)
    int64_t n_elements = 0;
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // [n_bytes] inside the mapping
    std::string file;               // the shard it lives in
};

class SafetensorsSet {
public:
    // One .safetensors file.
    static Result<std::shared_ptr<SafetensorsSet>> open_file(const std::string& path);
    // A folder: the shards named by model.safetensors.index.json when present, else
    // every *.safetensors file in it (sorted by name).
    static Result<std::shared_ptr<SafetensorsSet>> open_folder(const std::string& dir);

    const SafetensorsTensor* find(std::string_view name) const;
    // The tensor `name` with dtype `dtype` and shape `shape` (`layout` says what the dimensions
    // mean); an error names the tensor, what was found and what was expected (`what`: the
    // kind of file, for a missing tensor of an empty set).
    Result<const SafetensorsTensor*> find_checked(const std::string& name, const char* dtype,
                                                  const std::vector<int64_t>& shape, const char* layout,
                                                  const char* what) const;
    const std::map<std::string, SafetensorsTensor, std::less<>>& tensors() const { return m_tensors; }
    const std::vector<std::string>& files() const { return m_files; }

private:
    Status add_file(const std::string& path);
    std::vector<std::shared_ptr<MappedFile>> m_maps;
    std::vector<std::string> m_files;
    std::map<std::string, SafetensorsTensor, std::less<>> m_tensors;
};

}  // namespace kvs
