#pragma once
// A buffer on a backend, filled from host memory; read() copies it back. Lets the same
// op test run unchanged on the CPU and on a GPU backend.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/backend.h"

namespace kvs::test {

class DeviceBuffer {
public:
    DeviceBuffer(Backend* b, const void* host, size_t bytes) : m_b(b), m_bytes(bytes) {
        m_p = b->alloc(std::max<size_t>(bytes, 4));
        if (host && bytes) b->copy_to_device(m_p, host, bytes);
    }
    template <class T>
    DeviceBuffer(Backend* b, const std::vector<T>& v) : DeviceBuffer(b, v.data(), v.size() * sizeof(T)) {}
    ~DeviceBuffer() { m_b->release(m_p); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    template <class T>
    T* as() const {
        return static_cast<T*>(m_p);
    }
    template <class T>
    std::vector<T> read() const {
        std::vector<T> v(m_bytes / sizeof(T));
        m_b->synchronize();
        m_b->copy_to_host(v.data(), m_p, m_bytes);
        return v;
    }

private:
    Backend* m_b;
    void* m_p = nullptr;
    size_t m_bytes;
};

}  // namespace kvs::test
