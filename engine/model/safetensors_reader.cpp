#include "engine/model/safetensors_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kvs {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit is 100 MB

struct ElemType {
    DType type;  // F32 for the integer types (unused there)
    bool integer;
    uint64_t bytes;  // per element
};

std::optional<ElemType> dtype_from_safetensors(const std::string& s) {
    if (s == "F32") return ElemType{DType::F32, false, 4};
    if (s == "F16") return ElemType{DType::F16, false, 2};
    if (s == "BF16") return ElemType{DType::BF16, false, 2};
    if (s == "I32") return ElemType{DType::F32, true, 4};
    if (s == "I8") return ElemType{DType::F32, true, 1};
    return std::nullopt;
}

// Parses one header entry into t; its data offsets must lie inside [data, data + data_bytes).
Status parse_entry(const std::string& file, const std::string& name, const json& e, const uint8_t* data,
                   uint64_t data_bytes, SafetensorsTensor& t) {
    const std::string what = file + ": tensor '" + name + "'";
    if (!e.is_object()) return Status::error(what + ": header entry is not an object");
    auto dt = e.find("dtype");
    auto sh = e.find("shape");
    auto off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string()) return Status::error(what + ": missing string field 'dtype'");
    if (sh == e.end() || !sh->is_array()) return Status::error(what + ": missing array field 'shape'");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
        return Status::error(what + ": field 'data_offsets' must be [begin, end] (two non-negative integers)");
    const auto type = dtype_from_safetensors(dt->get<std::string>());
    if (!type)
        return Status::error(what + " has dtype " + dt->get<std::string>() +
                             ", which KV Scope does not support (expected F32, F16, BF16, I32 or I8)");
    t.name = name;
    t.dtype = dt->get<std::string>();
    t.integer = type->integer;
    t.type = type->type;
    t.file = file;
    uint64_t n = 1;
    for (const auto& d : *sh) {
        if (!d.is_number_unsigned()) return Status::error(what + ": 'shape' holds a non-integer or negative value");
        const uint64_t v = d.get<uint64_t>();
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(n, v, &n))
            return Status::error(what + ": 'shape' element count overflows");
        t.shape.push_back(static_cast<int64_t>(v));
    }
    const uint64_t elem = type->bytes;
    const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end || end > data_bytes)
        return Status::error(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                             "] are not inside the " + std::to_string(data_bytes) + "-byte data section");
    if (n > std::numeric_limits<uint64_t>::max() / elem || end - begin != n * elem)
        return Status::error(what + ": data_offsets span " + std::to_string(end - begin) +
                             " bytes but shape and dtype need " + std::to_string(n * elem));
    t.n_elements = static_cast<int64_t>(n);
    t.n_bytes = end - begin;
    t.data = data + begin;
    return Status::ok();
}

}  // namespace

Status SafetensorsSet::add_file(const std::string& path) {
    auto map = MappedFile::open(path);
    if (!map) return map.status();
    const MappedFile& m = *map.value();
    if (m.size() < 8) return Status::error(path + ": file is truncated (expected an 8-byte safetensors header length)");
    uint64_t header_len = 0;
    std::memcpy(&header_len, m.data(), 8);
    if (header_len > kMaxHeaderBytes || header_len > m.size() - 8)
        return Status::error(path + ": safetensors header length " + std::to_string(header_len) +
                             " does not fit the file (" + std::to_string(m.size()) + " bytes)");
    const char* hb = reinterpret_cast<const char*>(m.data() + 8);
    const json header = json::parse(hb, hb + header_len, nullptr, /*allow_exceptions=*/false);
    if (header.is_discarded() || !header.is_object())
        return Status::error(path + ": safetensors header is not a valid JSON object");
    const uint8_t* data = m.data() + 8 + header_len;
    const uint64_t data_bytes = m.size() - 8 - header_len;
    for (const auto& [name, e] : header.items()) {
        if (name == "__metadata__") continue;
        SafetensorsTensor t;
        KVS_RETURN_IF_ERROR(parse_entry(path, name, e, data, data_bytes, t));
        if (m_tensors.count(name))
            return Status::error(path + ": tensor '" + name + "' also appears in " + m_tensors[name].file);
        m_tensors.emplace(name, std::move(t));
    }
    m_maps.push_back(std::move(map).value());
    m_files.push_back(path);
    return Status::ok();
}

Result<std::shared_ptr<SafetensorsSet>> SafetensorsSet::open_file(const std::string& path) {
    auto set = std::shared_ptr<SafetensorsSet>(new SafetensorsSet());
    KVS_RETURN_IF_ERROR(set->add_file(path));
    return set;
}

Result<std::shared_ptr<SafetensorsSet>> SafetensorsSet::open_folder(const std::string& dir) {
    using R = Result<std::shared_ptr<SafetensorsSet>>;
    std::vector<std::string> shards;
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(index, ec)) {
        std::ifstream in(index);
        std::stringstream ss;
        ss << in.rdbuf();
        const json j = json::parse(ss.str(), nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            return R::error(index.string() + ": expected a JSON object with a 'weight_map' object");
        std::set<std::string> names;
        for (const auto& [tensor, file] : j["weight_map"].items()) {
            if (!file.is_string())
                return R::error(index.string() + ": weight_map['" + tensor + "'] is not a file name");
            const std::string f = file.get<std::string>();
            if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
                return R::error(index.string() + ": weight_map['" + tensor + "'] = '" + f +
                                "' is not a plain file name");
            names.insert(f);
        }
        for (const auto& f : names) shards.push_back((fs::path(dir) / f).string());
    } else {
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".safetensors") shards.push_back(e.path().string());
        std::sort(shards.begin(), shards.end());
    }
    if (ec) return R::error(dir + ": cannot list the folder: " + ec.message());
    if (shards.empty()) return R::error(dir + ": no *.safetensors files in the folder");
    auto set = std::shared_ptr<SafetensorsSet>(new SafetensorsSet());
    for (const auto& s : shards) KVS_RETURN_IF_ERROR(set->add_file(s));
    return set;
}

const SafetensorsTensor* SafetensorsSet::find(std::string_view name) const {
    auto it = m_tensors.find(name);
    return it == m_tensors.end() ? nullptr : &it->second;
}

Result<const SafetensorsTensor*> SafetensorsSet::find_checked(const std::string& name, const char* dtype,
                                                              const std::vector<int64_t>& shape, const char* layout,
                                                              const char* what) const {
    const auto shape_str = [](const std::vector<int64_t>& v) {
        std::string out = "[";
        for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
        return out + "]";
    };
    const SafetensorsTensor* t = find(name);
    const std::string want = std::string(dtype) + " " + shape_str(shape) + " " + layout;
    if (!t) {
        const std::string where = m_files.empty() ? std::string(what) : m_files.front();
        return Status::error(where + ": missing tensor '" + name + "' (expected " + want + ")");
    }
    if (t->dtype != dtype)
        return Status::error(t->file + ": tensor '" + name + "' has dtype " + t->dtype + ", expected " + want);
    if (t->shape != shape)
        return Status::error(t->file + ": tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " +
                             want);
    return t;
}

}  // namespace kvs
