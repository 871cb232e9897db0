#include "engine/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace kvs {

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Result<std::shared_ptr<MappedFile>>::error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        return Result<std::shared_ptr<MappedFile>>::error(path + ": cannot stat: " + why);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return Result<std::shared_ptr<MappedFile>>::error(path + ": not a regular file");
    }
    std::shared_ptr<MappedFile> f(new MappedFile());
    f->m_path = path;
    f->m_size = static_cast<size_t>(st.st_size);
    if (f->m_size > 0) {
        void* p = ::mmap(nullptr, f->m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const std::string why = std::strerror(errno);
            ::close(fd);
            return Result<std::shared_ptr<MappedFile>>::error(path + ": cannot map " + std::to_string(f->m_size) +
                                                              " bytes: " + why);
        }
        f->m_data = static_cast<const uint8_t*>(p);
        f->m_mapped = true;
    }
    ::close(fd);
    return f;
}

MappedFile::~MappedFile() {
    if (m_mapped) ::munmap(const_cast<uint8_t*>(m_data), m_size);
}

}  // namespace kvs
