#include "engine/model/awq_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/model/json_file.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace fs = std::filesystem;
using json = nlohmann::json;

uint32_t awq_pack_word(const uint8_t values[8]) {
    uint32_t w = 0;
    for (int i = 0; i < 8; ++i) w |= uint32_t(values[kAwqOrder[i]] & 0xF) << (4 * i);
    return w;
}

void awq_unpack_word(uint32_t word, uint8_t values[8]) {
    for (int k = 0; k < 8; ++k) values[k] = uint8_t((word >> (4 * kAwqReverseOrder[k])) & 0xF);
}

namespace {

// The first of `keys` present in q: an integer / bool / string field of the AWQ settings.
const json* field(const json& q, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
        if (auto it = q.find(k); it != q.end() && !it->is_null()) return &*it;
    return nullptr;
}

Result<AwqConfig> parse_awq_settings(const json& q, const std::string& where) {
    AwqConfig c;
    c.source = where;
    const json* bits = field(q, {"bits", "w_bit"});
    if (!bits || !bits->is_number_integer())
        return Status::error(where + ": field 'bits' (or 'w_bit') is missing or not an integer");
    c.bits = bits->get<int>();
    const json* group = field(q, {"group_size", "q_group_size"});
    if (!group || !group->is_number_integer())
        return Status::error(where + ": field 'group_size' (or 'q_group_size') is missing or not an integer");
    c.group_size = group->get<int>();
    if (const json* zp = field(q, {"zero_point"})) {
        if (!zp->is_boolean()) return Status::error(where + ": field 'zero_point' is not true/false");
        c.zero_point = zp->get<bool>();
    }
    if (const json* v = field(q, {"version"})) {
        if (!v->is_string()) return Status::error(where + ": field 'version' is not a string");
        c.version = v->get<std::string>();
        std::transform(c.version.begin(), c.version.end(), c.version.begin(),
                       [](unsigned char ch) { return char(std::tolower(ch)); });
    }
    return c;
}

}  // namespace

Result<std::optional<AwqConfig>> read_awq_config(const std::string& dir) {
    using R = Result<std::optional<AwqConfig>>;
    const fs::path config_path = fs::path(dir) / "config.json";
    auto config = read_json_object_if_present(config_path.string());
    if (!config) return config.status();
    if (config.value()) {
        const json& j = *config.value();
        if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null()) {
            const std::string where = config_path.string() + " quantization_config";
            if (!q->is_object()) return R::error(where + ": expected a JSON object");
            const json* method = field(*q, {"quant_method"});
            const std::string m = method && method->is_string() ? method->get<std::string>() : "";
            if (m != "awq")
                return R::error(where + ": quant_method '" + m +
                                "' is not supported (KV Scope loads AWQ checkpoints: quant_method \"awq\")");
            auto c = parse_awq_settings(*q, where);
            if (!c) return c.status();
            return std::optional<AwqConfig>(std::move(c).value());
        }
    }
    const fs::path old_path = fs::path(dir) / "quant_config.json";
    auto old = read_json_object_if_present(old_path.string());
    if (!old) return old.status();
    if (!old.value()) return std::optional<AwqConfig>();
    const json& q = *old.value();
    if (const json* method = field(q, {"quant_method"});
        method && (!method->is_string() || method->get<std::string>() != "awq"))
        return R::error(old_path.string() + ": quant_method is not \"awq\" (KV Scope loads AWQ checkpoints only)");
    auto c = parse_awq_settings(q, old_path.string());
    if (!c) return c.status();
    return std::optional<AwqConfig>(std::move(c).value());
}

Status check_awq_config(const AwqConfig& c) {
    if (c.bits != 4)
        return Status::error(c.source + ": bits = " + std::to_string(c.bits) +
                             " is not supported (KV Scope runs 4-bit AWQ checkpoints only)");
    if (!i4_type_for_group(c.group_size))
        return Status::error(c.source + ": group_size = " + std::to_string(c.group_size) +
                             " is not supported (KV Scope runs AWQ weights as I4_G128 or I4_G64, groups of 128 "
                             "or 64 inputs; only group_size 128 or 64 fits)");
    if (!c.zero_point)
        return Status::error(c.source +
                             ": zero_point = false is not supported (expected asymmetric AWQ, "
                             "zero_point true)");
    if (c.version != "gemm")
        return Status::error(c.source + ": version '" + c.version +
                             "' is not supported (only the GEMM packing, version \"gemm\", is; GEMV / Marlin "
                             "checkpoints pack their words differently)");
    return Status::ok();
}

std::optional<std::pair<int64_t, int64_t>> awq_module_dims(const ModelConfig& c, const std::string& module) {
    const int64_t q_dim = int64_t(c.n_head) * c.head_dim, kv_dim = int64_t(c.n_kv_head) * c.head_dim;
    if (module == "lm_head") return std::pair<int64_t, int64_t>{c.n_embd, c.n_vocab};
    const std::string prefix = "model.layers.";
    if (module.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
    const size_t dot = module.find('.', prefix.size());
    if (dot == std::string::npos) return std::nullopt;
    const std::string index = module.substr(prefix.size(), dot - prefix.size());
    if (index.empty() || index.size() > 6 || !std::all_of(index.begin(), index.end(), ::isdigit)) return std::nullopt;
    if (std::stoi(index) >= c.n_layer) return std::nullopt;
    const std::string rest = module.substr(dot + 1);
    if (rest == "self_attn.q_proj") return std::pair<int64_t, int64_t>{c.n_embd, q_dim};
    if (rest == "self_attn.k_proj" || rest == "self_attn.v_proj") return std::pair<int64_t, int64_t>{c.n_embd, kv_dim};
    if (rest == "self_attn.o_proj") return std::pair<int64_t, int64_t>{q_dim, c.n_embd};
    if (rest == "mlp.gate_proj" || rest == "mlp.up_proj") return std::pair<int64_t, int64_t>{c.n_embd, c.n_ff};
    if (rest == "mlp.down_proj") return std::pair<int64_t, int64_t>{c.n_ff, c.n_embd};
    return std::nullopt;
}

namespace {

int32_t load_i32(const uint8_t* p, int64_t i) {
    int32_t v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
}

}  // namespace

Result<AwqLinear> unpack_awq_linear(const SafetensorsSet& set, const std::string& module, int64_t n_in, int64_t n_out,
                                    int group_size) {
    if (n_out % 8 != 0 || n_in % group_size != 0)
        return Status::error("AWQ linear '" + module + "': [in " + std::to_string(n_in) + ", out " +
                             std::to_string(n_out) + "] needs out divisible by 8 and in divisible by the group size " +
                             std::to_string(group_size));
    const int64_t n_groups = n_in / group_size, n_words = n_out / 8;
    auto qw = set.find_checked(module + ".qweight", "I32", {n_in, n_words}, "[in_features, out_features / 8]",
                               "AWQ checkpoint");
    if (!qw) return qw.status();
    auto qz = set.find_checked(module + ".qzeros", "I32", {n_groups, n_words},
                               "[in_features / group_size, out_features / 8]", "AWQ checkpoint");
    if (!qz) return qz.status();
    auto sc = set.find_checked(module + ".scales", "F16", {n_groups, n_out}, "[in_features / group_size, out_features]",
                               "AWQ checkpoint");
    if (!sc) return sc.status();

    AwqLinear l;
    l.module = module;
    l.n_in = n_in;
    l.n_out = n_out;
    l.group_size = group_size;
    l.q.resize(size_t(n_out * n_in));
    l.zeros.resize(size_t(n_out * n_groups));
    l.scales.resize(size_t(n_out * n_groups));
    uint8_t v[8];
    for (int64_t i = 0; i < n_in; ++i)  // qweight row i: input i of every output column
        for (int64_t c = 0; c < n_words; ++c) {
            awq_unpack_word(uint32_t(load_i32(qw.value()->data, i * n_words + c)), v);
            for (int k = 0; k < 8; ++k) l.q[size_t((c * 8 + k) * n_in + i)] = v[k];
        }
    for (int64_t g = 0; g < n_groups; ++g)
        for (int64_t c = 0; c < n_words; ++c) {
            awq_unpack_word(uint32_t(load_i32(qz.value()->data, g * n_words + c)), v);
            for (int k = 0; k < 8; ++k) l.zeros[size_t((c * 8 + k) * n_groups + g)] = v[k];
        }
    for (int64_t g = 0; g < n_groups; ++g)
        for (int64_t r = 0; r < n_out; ++r) {
            uint16_t h;
            std::memcpy(&h, sc.value()->data + (g * n_out + r) * 2, 2);
            l.scales[size_t(r * n_groups + g)] = cpu::fp16_to_fp32(h);
        }
    return l;
}

AwqPacked pack_awq_linear(const AwqLinear& l) {
    const int64_t n_groups = l.n_in / l.group_size, n_words = l.n_out / 8;
    AwqPacked p;
    p.qweight.resize(size_t(l.n_in * n_words));
    p.qzeros.resize(size_t(n_groups * n_words));
    p.scales.resize(size_t(n_groups * l.n_out));
    uint8_t v[8];
    for (int64_t i = 0; i < l.n_in; ++i)
        for (int64_t c = 0; c < n_words; ++c) {
            for (int k = 0; k < 8; ++k) v[k] = l.q[size_t((c * 8 + k) * l.n_in + i)];
            p.qweight[size_t(i * n_words + c)] = int32_t(awq_pack_word(v));
        }
    for (int64_t g = 0; g < n_groups; ++g) {
        for (int64_t c = 0; c < n_words; ++c) {
            for (int k = 0; k < 8; ++k) v[k] = uint8_t(l.zeros[size_t((c * 8 + k) * n_groups + g)]);
            p.qzeros[size_t(g * n_words + c)] = int32_t(awq_pack_word(v));
        }
        for (int64_t r = 0; r < l.n_out; ++r)
            p.scales[size_t(g * l.n_out + r)] = cpu::fp32_to_fp16(l.scales[size_t(r * n_groups + g)]);
    }
    return p;
}

Result<std::vector<uint8_t>> awq_linear_to_i4(const AwqLinear& l) {
    const std::optional<DType> t = i4_type_for_group(l.group_size);
    if (!t || l.n_in % l.group_size != 0)
        return Status::error("AWQ linear '" + l.module +
                             "': I4_G128 / I4_G64 need groups of 128 or 64 inputs (group size " +
                             std::to_string(l.group_size) + ", " + std::to_string(l.n_in) + " inputs)");
    const int64_t n_groups = l.n_in / l.group_size;
    const size_t rb = row_bytes(*t, l.n_in);
    std::vector<uint8_t> out(rb * size_t(l.n_out));  // [n_out, rb]
    for (int64_t r = 0; r < l.n_out; ++r)
        if (!cpu::pack_i4_row(*t, &l.scales[size_t(r * n_groups)], &l.zeros[size_t(r * n_groups)],
                              &l.q[size_t(r * l.n_in)], l.n_in, out.data() + size_t(r) * rb))
            return Status::error("AWQ linear '" + l.module + "': output channel " + std::to_string(r) +
                                 " has a scale that is not finite");
    return out;
}

Result<AwqLinear> awq_linear_from_i4(const std::string& module, const WeightView& w, int group_size) {
    const int own = i4_group_size(w.dtype);
    if (own == 0)
        return Status::error("AWQ linear '" + module + "': the weight is " + std::string(dtype_name(w.dtype)) +
                             ", not I4_G128 or I4_G64");
    if (w.in_perm)
        return Status::error("AWQ linear '" + module +
                             "': the weight's input columns are permuted (GPTQ act-order), which an AWQ "
                             "checkpoint cannot hold; save it as a GPTQ folder");
    if (group_size < 0 || (group_size != 0 && (group_size > own || own % group_size != 0)))
        return Status::error("AWQ linear '" + module + "': groups of " + std::to_string(group_size) +
                             " do not divide the weight's groups of " + std::to_string(own));
    AwqLinear l;
    l.module = module;
    l.n_in = w.n_in;
    l.n_out = w.n_out;
    l.group_size = group_size == 0 ? own : group_size;
    const int64_t n_own = w.n_in / own, split = own / l.group_size, n_groups = n_own * split;
    const size_t rb = row_bytes(w.dtype, w.n_in);
    l.q.resize(size_t(w.n_out * w.n_in));
    l.zeros.resize(size_t(w.n_out * n_groups));
    l.scales.resize(size_t(w.n_out * n_groups));
    std::vector<float> d(static_cast<size_t>(n_own));  // [n_own] one row's groups as stored
    std::vector<int> z(static_cast<size_t>(n_own));
    for (int64_t r = 0; r < w.n_out; ++r) {
        cpu::unpack_i4_row(w.dtype, static_cast<const uint8_t*>(w.data) + size_t(r) * rb, w.n_in, d.data(), z.data(),
                           &l.q[size_t(r * w.n_in)]);
        for (int64_t g = 0; g < n_groups; ++g) {
            l.scales[size_t(r * n_groups + g)] = d[size_t(g / split)];
            l.zeros[size_t(r * n_groups + g)] = z[size_t(g / split)];
        }
    }
    return l;
}

Result<std::vector<AwqTensor>> convert_awq_linears(const SafetensorsSet& set, const ModelConfig& config,
                                                   const AwqConfig& awq, const std::string& dir,
                                                   std::vector<std::string>& consumed) {
    KVS_RETURN_IF_ERROR(check_awq_config(awq));
    std::set<std::string> modules;
    for (const auto& [name, t] : set.tensors())
        for (const char* suffix : {".qweight", ".qzeros", ".scales"}) {
            const std::string s(suffix);
            if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
                modules.insert(name.substr(0, name.size() - s.size()));
        }
    if (modules.empty())
        return Status::error(dir + ": " + awq.source + " says AWQ, but no tensor is named '<module>.qweight'");
    std::vector<AwqTensor> out;
    for (const std::string& module : modules) {
        const auto dims = awq_module_dims(config, module);
        if (!dims)
            return Status::error(dir + ": AWQ tensors of '" + module + "': not a linear layer of this " + config.arch +
                                 " model (expected model.layers.<0.." + std::to_string(config.n_layer - 1) +
                                 ">.self_attn.{q,k,v,o}_proj, .mlp.{gate,up,down}_proj or lm_head)");
        if (set.find(module + ".weight"))
            return Status::error(dir + ": '" + module + "' has both a float '.weight' and AWQ '.qweight' tensors");
        auto linear = unpack_awq_linear(set, module, dims->first, dims->second, awq.group_size);
        if (!linear) return linear.status();
        auto rows = awq_linear_to_i4(linear.value());
        if (!rows) return rows.status();
        out.push_back(AwqTensor{module + ".weight",
                                {dims->first, dims->second},
                                *i4_type_for_group(awq.group_size),
                                std::move(rows).value()});
        for (const char* suffix : {".qweight", ".qzeros", ".scales"}) consumed.push_back(module + suffix);
    }
    return out;
}

}  // namespace kvs
