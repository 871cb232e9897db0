#include "engine/model/gguf_value.h"

#include <limits>

namespace kvs {

std::string_view gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::UInt8: return "uint8";
        case GgufType::Int8: return "int8";
        case GgufType::UInt16: return "uint16";
        case GgufType::Int16: return "int16";
        case GgufType::UInt32: return "uint32";
        case GgufType::Int32: return "int32";
        case GgufType::Float32: return "float32";
        case GgufType::Bool: return "bool";
        case GgufType::String: return "string";
        case GgufType::Array: return "array";
        case GgufType::UInt64: return "uint64";
        case GgufType::Int64: return "int64";
        case GgufType::Float64: return "float64";
    }
    return "unknown";
}

namespace {

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// The element at p of fixed-size type t as an integer (bools count), if it is one and fits.
std::optional<int64_t> int_from(GgufType t, const uint8_t* p) {
    switch (t) {
        case GgufType::UInt8: return load<uint8_t>(p);
        case GgufType::Int8: return load<int8_t>(p);
        case GgufType::UInt16: return load<uint16_t>(p);
        case GgufType::Int16: return load<int16_t>(p);
        case GgufType::UInt32: return load<uint32_t>(p);
        case GgufType::Int32: return load<int32_t>(p);
        case GgufType::Bool: return load<uint8_t>(p) != 0 ? 1 : 0;
        case GgufType::Int64: return load<int64_t>(p);
        case GgufType::UInt64: {
            const uint64_t v = load<uint64_t>(p);
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
            return static_cast<int64_t>(v);
        }
        default: return std::nullopt;
    }
}

std::optional<double> double_from(GgufType t, const uint8_t* p) {
    switch (t) {
        case GgufType::Float32: return load<float>(p);
        case GgufType::Float64: return load<double>(p);
        case GgufType::UInt64: return static_cast<double>(load<uint64_t>(p));
        case GgufType::Bool: return std::nullopt;
        default: {
            auto i = int_from(t, p);
            if (!i) return std::nullopt;
            return static_cast<double>(*i);
        }
    }
}

}  // namespace

std::optional<int64_t> GgufValue::as_int() const {
    if (type == GgufType::String || type == GgufType::Array) return std::nullopt;
    return int_from(type, scalar);
}

std::optional<double> GgufValue::as_double() const {
    if (type == GgufType::String || type == GgufType::Array) return std::nullopt;
    return double_from(type, scalar);
}

std::optional<bool> GgufValue::as_bool() const {
    if (type == GgufType::Bool) return scalar[0] != 0;
    return std::nullopt;
}

std::optional<int64_t> GgufValue::int_at(uint64_t i) const {
    if (type != GgufType::Array || i >= n_elems) return std::nullopt;
    const size_t sz = gguf_scalar_size(static_cast<uint32_t>(elem_type)).value_or(0);
    if (sz == 0 || (i + 1) * sz > raw.size()) return std::nullopt;
    return int_from(elem_type, raw.data() + i * sz);
}

std::optional<double> GgufValue::double_at(uint64_t i) const {
    if (type != GgufType::Array || i >= n_elems) return std::nullopt;
    const size_t sz = gguf_scalar_size(static_cast<uint32_t>(elem_type)).value_or(0);
    if (sz == 0 || (i + 1) * sz > raw.size()) return std::nullopt;
    return double_from(elem_type, raw.data() + i * sz);
}

}  // namespace kvs
