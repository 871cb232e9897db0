#pragma once
// A file mapped read-only into memory (POSIX mmap), the storage model weights are read
// from without copying. Zero-length files map to an empty span.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/status.h"

namespace kvs {

class MappedFile {
public:
    static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return m_data; }  // [size()] bytes
    size_t size() const { return m_size; }
    const std::string& path() const { return m_path; }

private:
    MappedFile() = default;
    std::string m_path;
    const uint8_t* m_data = nullptr;
    size_t m_size = 0;
    bool m_mapped = false;
};

}  // namespace kvs
