#pragma once
// A GGUF metadata value: one of the 13 GGUF value types, arrays included (nested
// arrays too). Shared by the GGUF reader and writer.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvs {

// GGUF value type ids, as the file stores them (uint32).
enum class GgufType : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

// Size in bytes of a fixed-size type; 0 for String and Array; nullopt for an unknown id.
inline std::optional<size_t> gguf_scalar_size(uint32_t t) {
    static constexpr size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (t >= sizeof(sizes) / sizeof(sizes[0])) return std::nullopt;
    return sizes[t];
}
std::string_view gguf_type_name(GgufType t);

struct GgufValue {
    GgufType type = GgufType::UInt8;
    // Scalars: the little-endian bytes of a fixed-size value (1..8 bytes used).
    uint8_t scalar[8] = {};
    std::string str;  // String
    // Arrays
    GgufType elem_type = GgufType::UInt8;
    uint64_t n_elems = 0;
    std::vector<uint8_t> raw;          // [n_elems * elem size] fixed-size elements, little-endian
    std::vector<std::string> strings;  // [n_elems] when elem_type == String
    std::vector<GgufValue> items;      // [n_elems] when elem_type == Array (nested arrays)

    bool is_array() const { return type == GgufType::Array; }

    // Any integer or bool scalar, if its value fits in int64.
    std::optional<int64_t> as_int() const;
    // Any numeric scalar (integers too).
    std::optional<double> as_double() const;
    std::optional<bool> as_bool() const;
    const std::string* as_string() const { return type == GgufType::String ? &str : nullptr; }
    // Element i of a numeric/bool array (i < n_elems), widened like as_int()/as_double().
    std::optional<int64_t> int_at(uint64_t i) const;
    std::optional<double> double_at(uint64_t i) const;

    // ---- builders
    template <typename T>
    static GgufValue of(T v) {
        GgufValue g;
        g.type = type_of<T>();
        std::memcpy(g.scalar, &v, sizeof(T));
        return g;
    }
    static GgufValue of_string(std::string s) {
        GgufValue g;
        g.type = GgufType::String;
        g.str = std::move(s);
        return g;
    }
    template <typename T>
    static GgufValue array_of(const std::vector<T>& v) {
        GgufValue g;
        g.type = GgufType::Array;
        g.n_elems = v.size();
        if constexpr (std::is_same_v<T, std::string>) {
            g.elem_type = GgufType::String;
            g.strings = v;
        } else if constexpr (std::is_same_v<T, bool>) {
            g.elem_type = GgufType::Bool;
            for (bool b : v) g.raw.push_back(b ? 1 : 0);
        } else {
            g.elem_type = type_of<T>();
            g.raw.resize(v.size() * sizeof(T));
            if (!v.empty()) std::memcpy(g.raw.data(), v.data(), g.raw.size());
        }
        return g;
    }
    static GgufValue array_of_arrays(std::vector<GgufValue> items) {
        GgufValue g;
        g.type = GgufType::Array;
        g.elem_type = GgufType::Array;
        g.n_elems = items.size();
        g.items = std::move(items);
        return g;
    }

    template <typename T>
    static constexpr GgufType type_of() {
        if constexpr (std::is_same_v<T, uint8_t>) return GgufType::UInt8;
        else if constexpr (std::is_same_v<T, int8_t>)
            return GgufType::Int8;
        else if constexpr (std::is_same_v<T, uint16_t>)
            return GgufType::UInt16;
        else if constexpr (std::is_same_v<T, int16_t>)
            return GgufType::Int16;
        else if constexpr (std::is_same_v<T, uint32_t>)
            return GgufType::UInt32;
        else if constexpr (std::is_same_v<T, int32_t>)
            return GgufType::Int32;
        else if constexpr (std::is_same_v<T, float>)
            return GgufType::Float32;
        else if constexpr (std::is_same_v<T, bool>)
            return GgufType::Bool;
        else if constexpr (std::is_same_v<T, uint64_t>)
            return GgufType::UInt64;
        else if constexpr (std::is_same_v<T, int64_t>)
            return GgufType::Int64;
        else if constexpr (std::is_same_v<T, double>)
            return GgufType::Float64;
        else
            static_assert(sizeof(T) == 0, "not a GGUF scalar type");
    }
};

}  // namespace kvs
