#include "engine/model/gguf_writer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/model/gguf_reader.h"

namespace kvs {

void GgufWriter::set(const std::string& key, GgufValue value) {
    for (auto& kv : m_kv)
        if (kv.first == key) {
            kv.second = std::move(value);
            return;
        }
    m_kv.emplace_back(key, std::move(value));
}

void GgufWriter::set_alignment(uint32_t alignment) {
    m_alignment = alignment;
    set_u32("general.alignment", alignment);
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, const void* data,
                            size_t n_bytes) {
    auto owned = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(data),
                                                        static_cast<const uint8_t*>(data) + n_bytes);
    m_tensors.push_back({name, type, std::move(ne), owned->data(), n_bytes, owned});
}

void GgufWriter::add_tensor_view(const std::string& name, DType type, std::vector<int64_t> ne, const void* data,
                                 size_t n_bytes) {
    m_tensors.push_back({name, type, std::move(ne), data, n_bytes, nullptr});
}

namespace {

// Serializes into a byte buffer (headers are small; tensor data is streamed separately).
struct Out {
    std::vector<uint8_t> bytes;
    template <typename T>
    void put(const T& v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        bytes.insert(bytes.end(), p, p + sizeof(T));
    }
    void put_string(const std::string& s) {
        put(static_cast<uint64_t>(s.size()));
        bytes.insert(bytes.end(), s.begin(), s.end());
    }
    void put_value(const GgufValue& v) {
        if (v.type == GgufType::String) return put_string(v.str);
        if (v.type != GgufType::Array) {
            const size_t n = gguf_scalar_size(static_cast<uint32_t>(v.type)).value_or(0);
            bytes.insert(bytes.end(), v.scalar, v.scalar + n);
            return;
        }
        put(static_cast<uint32_t>(v.elem_type));
        put(static_cast<uint64_t>(v.n_elems));
        if (v.elem_type == GgufType::String)
            for (const auto& s : v.strings) put_string(s);
        else if (v.elem_type == GgufType::Array)
            for (const auto& item : v.items) put_value(item);
        else
            bytes.insert(bytes.end(), v.raw.begin(), v.raw.end());
    }
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

Status check_value(const std::string& key, const GgufValue& v) {
    if (v.type != GgufType::Array) return Status::ok();
    const size_t elem = gguf_scalar_size(static_cast<uint32_t>(v.elem_type)).value_or(0);
    const bool ok = v.elem_type == GgufType::String  ? v.strings.size() == v.n_elems
                    : v.elem_type == GgufType::Array ? v.items.size() == v.n_elems
                                                     : v.raw.size() == v.n_elems * elem;
    if (!ok)
        return Status::error("GGUF writer: metadata key '" + key +
                             "': array holds a different number of "
                             "elements than n_elems = " +
                             std::to_string(v.n_elems));
    for (const auto& item : v.items) KVS_RETURN_IF_ERROR(check_value(key, item));
    return Status::ok();
}

}  // namespace

Status GgufWriter::write(const std::string& path) const {
    if (m_alignment == 0 || (m_alignment & (m_alignment - 1)) != 0)
        return Status::error(path + ": alignment " + std::to_string(m_alignment) + " is not a power of two");
    Out h;
    h.put(kGgufMagic);
    h.put(m_version);
    h.put(static_cast<uint64_t>(m_tensors.size()));
    h.put(static_cast<uint64_t>(m_kv.size()));
    for (const auto& [key, v] : m_kv) {
        KVS_RETURN_IF_ERROR(check_value(key, v));
        h.put_string(key);
        h.put(static_cast<uint32_t>(v.type));
        h.put_value(v);
    }
    std::vector<uint64_t> offsets;  // [n_tensors] from the start of the data section
    uint64_t data_size = 0;
    for (const Tensor& t : m_tensors) {
        if (t.ne.empty() || t.ne.size() > 4)
            return Status::error(path + ": tensor '" + t.name + "' has " + std::to_string(t.ne.size()) +
                                 " dimensions (expected 1..4)");
        int64_t rows = 1;
        for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
        const auto& info = dtype_info(t.type);
        if (t.ne[0] <= 0 || t.ne[0] % info.block_size != 0)
            return Status::error(path + ": tensor '" + t.name + "' ne[0] = " + std::to_string(t.ne[0]) +
                                 " is not a positive multiple of the " + std::string(info.name) + " block size");
        const size_t expected = row_bytes(t.type, t.ne[0]) * static_cast<size_t>(rows);
        if (expected != t.n_bytes)
            return Status::error(path + ": tensor '" + t.name + "' has " + std::to_string(t.n_bytes) +
                                 " bytes of data, its shape and type need " + std::to_string(expected));
        h.put_string(t.name);
        h.put(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) h.put(d);
        h.put(static_cast<uint32_t>(t.type));
        h.put(data_size);
        offsets.push_back(data_size);
        data_size = align_up(data_size + t.n_bytes, m_alignment);
    }
    h.bytes.resize(align_up(h.bytes.size(), m_alignment), 0);

    // Written beside the target and renamed over it, so a process that has the old file
    // mapped (another test, a loaded model being re-saved) keeps reading intact bytes, and a
    // failed write never leaves a truncated model under the real name.
    static std::atomic<unsigned> s_serial{0};
    const std::string tmp = path + ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(s_serial++);
    std::FILE* fp = std::fopen(tmp.c_str(), "wb");
    if (!fp) return Status::error(path + ": cannot create: " + std::strerror(errno));
    bool ok = std::fwrite(h.bytes.data(), 1, h.bytes.size(), fp) == h.bytes.size();
    const std::vector<uint8_t> zeros(m_alignment, 0);
    for (size_t i = 0; ok && i < m_tensors.size(); ++i) {
        const Tensor& t = m_tensors[i];
        ok = t.n_bytes == 0 || std::fwrite(t.data, 1, t.n_bytes, fp) == t.n_bytes;
        const uint64_t pad = align_up(offsets[i] + t.n_bytes, m_alignment) - (offsets[i] + t.n_bytes);
        if (ok && pad) ok = std::fwrite(zeros.data(), 1, pad, fp) == pad;
    }
    if (std::fclose(fp) != 0) ok = false;
    if (!ok) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        return Status::error(path + ": write failed: " + why);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        return Status::error(path + ": cannot replace: " + why);
    }
    return Status::ok();
}

}  // namespace kvs
