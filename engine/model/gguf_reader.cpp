#include "engine/model/gguf_reader.h"

#include <algorithm>
#include <limits>

#include "engine/core/quote.h"

namespace kvs {

namespace {

constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr uint32_t kMaxAlignment = 1u << 20;

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Names from a corrupt file may hold anything: quote_untrusted escapes what is not printable.
std::string quoted(std::string_view s) { return quote_untrusted(s); }

}  // namespace

// A bounds-checked cursor over the file bytes. Every read checks the bytes left first;
// the first failure records a message and makes every later read fail.
class GgufFile::Parser {
public:
    Parser(const std::string& name, const uint8_t* data, size_t size) : m_name(name), m_p(data), m_size(size) {}

    const std::string& error() const { return m_err; }
    size_t pos() const { return m_pos; }
    size_t left() const { return m_size - m_pos; }

    bool fail(const std::string& what) {
        if (m_err.empty()) m_err = m_name + ": " + what;
        return false;
    }

    bool need(uint64_t n, const std::string& what) {
        if (n <= left()) return true;
        return fail("file is truncated: " + what + " at offset " + std::to_string(m_pos) + " needs " +
                    std::to_string(n) + " bytes, only " + std::to_string(left()) + " left");
    }

    template <typename T>
    bool read(T& v, const std::string& what) {
        if (!need(sizeof(T), what)) return false;
        std::memcpy(&v, m_p + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return true;
    }

    bool read_string(std::string& s, const std::string& what) {
        uint64_t n = 0;
        if (!read(n, what + " (string length)")) return false;
        if (n > left())
            return fail(what + ": string length " + std::to_string(n) + " at offset " + std::to_string(m_pos - 8) +
                        " exceeds the " + std::to_string(left()) + " bytes left in the file");
        s.assign(reinterpret_cast<const char*>(m_p + m_pos), static_cast<size_t>(n));
        m_pos += static_cast<size_t>(n);
        return true;
    }

    bool read_value(uint32_t type_id, GgufValue& v, int depth, const std::string& what);

private:
    bool read_array(GgufValue& v, int depth, const std::string& what);

    std::string m_name;
    const uint8_t* m_p;
    size_t m_size;
    size_t m_pos = 0;
    std::string m_err;
};

bool GgufFile::Parser::read_value(uint32_t type_id, GgufValue& v, int depth, const std::string& what) {
    const auto size = gguf_scalar_size(type_id);
    if (!size) return fail(what + ": unknown GGUF value type " + std::to_string(type_id) + " (expected 0..12)");
    v.type = static_cast<GgufType>(type_id);
    if (v.type == GgufType::String) return read_string(v.str, what);
    if (v.type == GgufType::Array) return read_array(v, depth, what);
    if (!need(*size, what)) return false;
    std::memcpy(v.scalar, m_p + m_pos, *size);
    m_pos += *size;
    if (v.type == GgufType::Bool && v.scalar[0] > 1)
        return fail(what + ": bool value " + std::to_string(v.scalar[0]) + " (expected 0 or 1)");
    return true;
}

bool GgufFile::Parser::read_array(GgufValue& v, int depth, const std::string& what) {
    if (depth >= kMaxArrayDepth)
        return fail(what + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
    uint32_t elem = 0;
    uint64_t n = 0;
    if (!read(elem, what + " (array element type)") || !read(n, what + " (array length)")) return false;
    const auto elem_size = gguf_scalar_size(elem);
    if (!elem_size)
        return fail(what + ": unknown GGUF array element type " + std::to_string(elem) + " (expected 0..12)");
    v.elem_type = static_cast<GgufType>(elem);
    v.n_elems = n;
    // The least bytes one element can take: its size, a string's length field, or a
    // nested array's type and length fields. n must fit in what is left.
    const uint64_t min_bytes = *elem_size ? *elem_size : (v.elem_type == GgufType::String ? 8 : 12);
    if (n > left() / min_bytes)
        return fail(what + ": array of " + std::to_string(n) + " " + std::string(gguf_type_name(v.elem_type)) +
                    " elements needs at least " + std::to_string(min_bytes) + " bytes each, only " +
                    std::to_string(left()) + " bytes left at offset " + std::to_string(m_pos));
    if (*elem_size) {
        const size_t bytes = static_cast<size_t>(n * *elem_size);
        v.raw.assign(m_p + m_pos, m_p + m_pos + bytes);
        m_pos += bytes;
        if (v.elem_type == GgufType::Bool)
            for (uint64_t i = 0; i < n; ++i)
                if (v.raw[i] > 1) return fail(what + ": bool array element " + std::to_string(i) + " is not 0 or 1");
        return true;
    }
    if (v.elem_type == GgufType::String) {
        v.strings.resize(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i)
            if (!read_string(v.strings[i], what + "[" + std::to_string(i) + "]")) return false;
        return true;
    }
    v.items.resize(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i)
        if (!read_value(static_cast<uint32_t>(GgufType::Array), v.items[i], depth + 1,
                        what + "[" + std::to_string(i) + "]"))
            return false;
    return true;
}

Result<std::shared_ptr<GgufFile>> GgufFile::open(const std::string& path) {
    auto map = MappedFile::open(path);
    if (!map) return map.status();
    std::shared_ptr<MappedFile> m = std::move(map).value();
    const uint8_t* data = m->data();
    const size_t size = m->size();
    return parse(path, std::move(m), data, size);
}

namespace {

// Validates one tensor's dims and type and computes its element and byte counts.
Status check_tensor_shape(const std::string& file, GgufTensorInfo& t, uint32_t type_id) {
    const std::string what = file + ": tensor " + quoted(t.name);
    const auto info = dtype_info(type_id);
    if (!info)
        return Status::error(what + " has GGML type id " + std::to_string(type_id) +
                             ", which KV Scope does not support (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, "
                             "Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)");
    t.type = info->type;
    uint64_t n = 1;
    for (size_t d = 0; d < t.ne.size(); ++d) {
        if (t.ne[d] <= 0)
            return Status::error(what + " has dimension " + std::to_string(d) + " = " + std::to_string(t.ne[d]) +
                                 " (expected > 0)");
        if (mul_overflows(n, static_cast<uint64_t>(t.ne[d]), &n) ||
            n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            return Status::error(what + " has an element count that overflows 64 bits");
    }
    if (t.ne[0] % info->block_size != 0)
        return Status::error(what + " of type " + std::string(info->name) + " has ne[0] = " + std::to_string(t.ne[0]) +
                             ", not a multiple of the block size " + std::to_string(info->block_size));
    t.n_elements = static_cast<int64_t>(n);
    if (mul_overflows(n / info->block_size, info->block_bytes, &t.n_bytes))
        return Status::error(what + " has a byte size that overflows 64 bits");
    return Status::ok();
}

}  // namespace

Result<std::shared_ptr<GgufFile>> GgufFile::parse(const std::string& name, std::shared_ptr<const void> owner,
                                                  const uint8_t* data, size_t size) {
    using R = Result<std::shared_ptr<GgufFile>>;
    std::shared_ptr<GgufFile> f(new GgufFile());
    f->m_path = name;
    f->m_owner = std::move(owner);
    f->m_data = data;
    f->m_size = size;
    if (size == 0) return R::error(name + ": file is empty (expected a GGUF header)");

    Parser in(name, data, size);
    uint32_t magic = 0;
    if (!in.read(magic, "magic")) return R::error(in.error());
    if (magic != kGgufMagic) return R::error(name + ": not a GGUF file (the first 4 bytes are not \"GGUF\")");
    if (!in.read(f->m_version, "version")) return R::error(in.error());
    if (f->m_version == 1) return R::error(name + ": GGUF version 1 is not supported (expected 2 or 3)");
    if (f->m_version != 2 && f->m_version != 3) {
        if ((f->m_version & 0xffffu) == 0)
            return R::error(name + ": GGUF version field " + std::to_string(f->m_version) +
                            " looks big-endian; only little-endian GGUF is supported");
        return R::error(name + ": unsupported GGUF version " + std::to_string(f->m_version) + " (expected 2 or 3)");
    }
    uint64_t n_tensors = 0, n_kv = 0;
    if (!in.read(n_tensors, "tensor count") || !in.read(n_kv, "metadata count")) return R::error(in.error());
    // A key-value pair takes at least 13 bytes (key length, type, one byte of value),
    // a tensor info at least 32 (name length, n_dims, one dim, type, offset).
    if (n_kv > in.left() / 13)
        return R::error(name + ": metadata count " + std::to_string(n_kv) + " is impossible for a file of " +
                        std::to_string(size) + " bytes");
    if (n_tensors > in.left() / 32)
        return R::error(name + ": tensor count " + std::to_string(n_tensors) + " is impossible for a file of " +
                        std::to_string(size) + " bytes");
    KVS_RETURN_IF_ERROR(f->read_metadata(in, n_kv));
    KVS_RETURN_IF_ERROR(f->read_tensor_infos(in, n_tensors));
    KVS_RETURN_IF_ERROR(f->place_tensors(in.pos()));
    return f;
}

Status GgufFile::read_metadata(Parser& in, uint64_t n_kv) {
    m_kv.reserve(static_cast<size_t>(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
        std::string key;
        if (!in.read_string(key, "metadata key #" + std::to_string(i))) return Status::error(in.error());
        if (key.empty()) return Status::error(m_path + ": metadata key #" + std::to_string(i) + " is empty");
        uint32_t type = 0;
        GgufValue v;
        const std::string what = "metadata key " + quoted(key);
        if (!in.read(type, what + " (value type)") || !in.read_value(type, v, 0, what))
            return Status::error(in.error());
        if (m_kv_index.count(key)) return Status::error(m_path + ": duplicate " + what);
        m_kv_index.emplace(key, m_kv.size());
        m_kv.emplace_back(std::move(key), std::move(v));
    }
    if (const GgufValue* a = find("general.alignment")) {
        const auto al = a->as_int();
        if (!al || *al <= 0 || *al > kMaxAlignment || (*al & (*al - 1)) != 0)
            return Status::error(m_path + ": general.alignment must be a power of two integer up to " +
                                 std::to_string(kMaxAlignment) + " (it is a " + std::string(gguf_type_name(a->type)) +
                                 (al ? " with value " + std::to_string(*al) : std::string()) + ")");
        m_alignment = static_cast<uint32_t>(*al);
    }
    return Status::ok();
}

Status GgufFile::read_tensor_infos(Parser& in, uint64_t n_tensors) {
    m_tensors.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        GgufTensorInfo t;
        const std::string what = "tensor info #" + std::to_string(i);
        if (!in.read_string(t.name, what + " name")) return Status::error(in.error());
        uint32_t n_dims = 0;
        if (!in.read(n_dims, what + " n_dims")) return Status::error(in.error());
        if (n_dims == 0 || n_dims > kMaxDims)
            return Status::error(m_path + ": tensor " + quoted(t.name) + " has " + std::to_string(n_dims) +
                                 " dimensions (expected 1.." + std::to_string(kMaxDims) + ")");
        t.ne.resize(n_dims);
        for (uint32_t d = 0; d < n_dims; ++d)
            if (!in.read(t.ne[d], what + " dims")) return Status::error(in.error());
        uint32_t type_id = 0;
        if (!in.read(type_id, what + " type") || !in.read(t.offset, what + " offset")) return Status::error(in.error());
        KVS_RETURN_IF_ERROR(check_tensor_shape(m_path, t, type_id));
        if (m_tensor_index.count(t.name)) return Status::error(m_path + ": duplicate tensor name " + quoted(t.name));
        m_tensor_index.emplace(t.name, m_tensors.size());
        m_tensors.push_back(std::move(t));
    }
    return Status::ok();
}

// The data section starts at the next multiple of the alignment after the tensor infos;
// every tensor must lie inside it, aligned, without overlapping another.
Status GgufFile::place_tensors(size_t end_of_infos) {
    const uint64_t al = m_alignment;
    m_data_offset = (static_cast<uint64_t>(end_of_infos) + al - 1) / al * al;
    const uint64_t data_bytes = m_data_offset <= m_size ? m_size - m_data_offset : 0;
    for (GgufTensorInfo& t : m_tensors) {
        const std::string what = m_path + ": tensor " + quoted(t.name);
        if (t.offset % al != 0)
            return Status::error(what + " has data offset " + std::to_string(t.offset) +
                                 ", not a multiple of the alignment " + std::to_string(al));
        if (t.offset > data_bytes || t.n_bytes > data_bytes - t.offset)
            return Status::error(what + " (" + std::to_string(t.n_bytes) + " bytes at data offset " +
                                 std::to_string(t.offset) +
                                 ") extends past the end of the file (the data section holds " +
                                 std::to_string(data_bytes) + " bytes; is the file truncated?)");
        t.data = m_data + m_data_offset + t.offset;
    }
    std::vector<const GgufTensorInfo*> by_offset;
    for (const auto& t : m_tensors) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i)
        if (by_offset[i - 1]->offset + by_offset[i - 1]->n_bytes > by_offset[i]->offset)
            return Status::error(m_path + ": tensors " + quoted(by_offset[i - 1]->name) + " and " +
                                 quoted(by_offset[i]->name) + " overlap in the data section");
    return Status::ok();
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = m_kv_index.find(key);
    return it == m_kv_index.end() ? nullptr : &m_kv[it->second].second;
}

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const {
    auto it = m_tensor_index.find(name);
    return it == m_tensor_index.end() ? nullptr : &m_tensors[it->second];
}

namespace {
std::string wrong_type(const std::string& file, std::string_view key, const GgufValue& v, const char* expected) {
    return file + ": metadata key " + quoted(key) + " is a " + std::string(gguf_type_name(v.type)) + " (expected " +
           expected + ")";
}
}  // namespace

Result<std::optional<int64_t>> GgufFile::get_int(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::optional<int64_t>();
    if (v->type == GgufType::Bool || !v->as_int()) return Status::error(wrong_type(m_path, key, *v, "an integer"));
    return std::optional<int64_t>(v->as_int());
}

Result<std::optional<double>> GgufFile::get_double(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::optional<double>();
    if (!v->as_double()) return Status::error(wrong_type(m_path, key, *v, "a number"));
    return std::optional<double>(v->as_double());
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::optional<bool>();
    if (!v->as_bool()) return Status::error(wrong_type(m_path, key, *v, "a bool"));
    return std::optional<bool>(v->as_bool());
}

Result<std::optional<std::string>> GgufFile::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::optional<std::string>();
    if (!v->as_string()) return Status::error(wrong_type(m_path, key, *v, "a string"));
    return std::optional<std::string>(*v->as_string());
}

}  // namespace kvs
