// AutoGPTQ / GPTQModel checkpoints: settings, unpacking into GptqMatrix, packing, and the
// loader's conversion into the kernels' group formats.
#include "engine/model/gptq_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/model/json_file.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

Result<GptqConfig> parse_settings(const json& q, const std::string& where) {
    GptqConfig c;
    c.source = where;
    auto it = q.find("bits");
    if (it == q.end() || !it->is_number_integer())
        return Status::error(where + ": field 'bits' is missing or not an integer");
    c.bits = it->get<int>();
    if (c.bits != 4 && c.bits != 8)
        return Status::error(where + ": bits = " + std::to_string(c.bits) +
                             " is not supported (KV Scope runs 4-bit and 8-bit GPTQ checkpoints)");
    it = q.find("group_size");
    if (it == q.end() || !it->is_number_integer())
        return Status::error(where + ": field 'group_size' is missing or not an integer");
    c.group_size = it->get<int>();
    if (c.group_size != -1 && c.group_size < 1)
        return Status::error(where + ": group_size = " + std::to_string(c.group_size) +
                             " (expected a positive size or -1)");
    for (auto [key, dst] : {std::pair<const char*, bool*>{"desc_act", &c.desc_act},
                            {"sym", &c.sym},
                            {"static_groups", &c.static_groups}}) {
        auto f = q.find(key);
        if (f == q.end() || f->is_null()) continue;
        if (!f->is_boolean()) return Status::error(where + ": field '" + key + "' is not true/false");
        *dst = f->get<bool>();
    }
    if (auto f = q.find("checkpoint_format"); f != q.end() && !f->is_null()) {
        if (!f->is_string()) return Status::error(where + ": field 'checkpoint_format' is not a string");
        c.checkpoint_format = f->get<std::string>();
    }
    if (c.checkpoint_format != "gptq" && c.checkpoint_format != "gptq_v2")
        return Status::error(where + ": checkpoint_format '" + c.checkpoint_format +
                             "' is not supported (expected \"gptq\" or \"gptq_v2\"; marlin / bitblas / other kernel "
                             "layouts pack their words differently)");
    return c;
}

uint32_t load_u32(const uint8_t* p, int64_t i) {
    uint32_t v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
}

}  // namespace

Result<std::optional<GptqConfig>> read_gptq_config(const std::string& dir) {
    using R = Result<std::optional<GptqConfig>>;
    const fs::path qc = fs::path(dir) / "quantize_config.json";
    auto q = read_json_object_if_present(qc.string());
    if (!q) return q.status();
    if (q.value()) {
        const json& j = *q.value();
        if (auto m = j.find("quant_method"); m != j.end() && m->is_string() && m->get<std::string>() != "gptq")
            return std::optional<GptqConfig>();  // another method's file of the same name
        auto c = parse_settings(j, qc.string());
        if (!c) return c.status();
        return std::optional<GptqConfig>(std::move(c).value());
    }
    const fs::path cp = fs::path(dir) / "config.json";
    auto config = read_json_object_if_present(cp.string());
    if (!config) return config.status();
    if (!config.value()) return std::optional<GptqConfig>();
    const json& j = *config.value();
    auto qcfg = j.find("quantization_config");
    if (qcfg == j.end() || !qcfg->is_object()) return std::optional<GptqConfig>();
    auto m = qcfg->find("quant_method");
    if (m == qcfg->end() || !m->is_string() || m->get<std::string>() != "gptq") return std::optional<GptqConfig>();
    auto c = parse_settings(*qcfg, cp.string() + " quantization_config");
    if (!c) return c.status();
    return R(std::optional<GptqConfig>(std::move(c).value()));
}

Result<GptqMatrix> unpack_gptq_linear(const SafetensorsSet& set, const std::string& module, int64_t n_in, int64_t n_out,
                                      const GptqConfig& cfg) {
    const int bits = cfg.bits, per = 32 / bits;
    const int64_t group = cfg.group_size == -1 ? n_in : cfg.group_size;
    if (n_in % per != 0 || n_out % per != 0 || n_in % group != 0)
        return Status::error("GPTQ linear '" + module + "': [in " + std::to_string(n_in) + ", out " +
                             std::to_string(n_out) + "] needs in and out divisible by " + std::to_string(per) +
                             " and in by the group size " + std::to_string(group));
    const int64_t n_groups = n_in / group;
    auto qw = set.find_checked(module + ".qweight", "I32", {n_in / per, n_out},
                               "[in_features * bits / 32, out_features]", "GPTQ checkpoint");
    if (!qw) return qw.status();
    auto qz = set.find_checked(module + ".qzeros", "I32", {n_groups, n_out / per},
                               "[n_groups, out_features * bits / 32]", "GPTQ checkpoint");
    if (!qz) return qz.status();
    auto sc =
        set.find_checked(module + ".scales", "F16", {n_groups, n_out}, "[n_groups, out_features]", "GPTQ checkpoint");
    if (!sc) return sc.status();
    auto gi = set.find_checked(module + ".g_idx", "I32", {n_in}, "[in_features]", "GPTQ checkpoint");
    if (!gi) return gi.status();

    GptqMatrix m;
    m.n_in = n_in, m.n_out = n_out, m.group = int(group), m.bits = bits;
    m.q.resize(size_t(n_out * n_in));
    m.zeros.resize(size_t(n_groups * n_out));
    m.scales.resize(m.zeros.size());
    m.g_idx.resize(size_t(n_in));
    const uint32_t mask = (1u << bits) - 1;
    for (int64_t r = 0; r < n_in / per; ++r)
        for (int64_t o = 0; o < n_out; ++o) {
            const uint32_t w = load_u32(qw.value()->data, r * n_out + o);
            for (int j = 0; j < per; ++j) m.q[size_t(o * n_in + r * per + j)] = uint8_t((w >> (bits * j)) & mask);
        }
    const int add = cfg.checkpoint_format == "gptq" ? 1 : 0;  // v1 stores zero - 1
    for (int64_t g = 0; g < n_groups; ++g)
        for (int64_t c = 0; c < n_out / per; ++c) {
            const uint32_t w = load_u32(qz.value()->data, g * (n_out / per) + c);
            for (int j = 0; j < per; ++j) {
                const int z = int((w >> (bits * j)) & mask) + add;
                if (z > int(mask))
                    return Status::error(qz.value()->file + ": tensor '" + module + ".qzeros' group " +
                                         std::to_string(g) + " output " + std::to_string(c * per + j) +
                                         " has zero point " + std::to_string(z) + " (stored " + std::to_string(z - 1) +
                                         " in the v1 'gptq' format), outside 0.." + std::to_string(mask));
                m.zeros[size_t(g * n_out + c * per + j)] = z;
            }
        }
    for (int64_t i = 0; i < n_groups * n_out; ++i) {
        uint16_t h;
        std::memcpy(&h, sc.value()->data + i * 2, 2);
        m.scales[size_t(i)] = cpu::fp16_to_fp32(h);
    }
    for (int64_t i = 0; i < n_in; ++i) {
        const int32_t g = int32_t(load_u32(gi.value()->data, i));
        if (g < 0 || g >= n_groups)
            return Status::error(gi.value()->file + ": tensor '" + module + ".g_idx' entry " + std::to_string(i) +
                                 " is " + std::to_string(g) + ", outside 0.." + std::to_string(n_groups - 1));
        m.g_idx[size_t(i)] = g;
    }
    return m;
}

GptqPacked pack_gptq_linear(const GptqMatrix& m, bool v1) {
    const int bits = m.bits, per = 32 / bits;
    const uint32_t mask = (1u << bits) - 1;
    const int64_t n_groups = m.n_in / m.group;
    GptqPacked p;
    p.qweight.assign(size_t(m.n_in / per * m.n_out), 0);
    p.qzeros.assign(size_t(n_groups * (m.n_out / per)), 0);
    p.scales.resize(size_t(n_groups * m.n_out));
    p.g_idx = m.g_idx;
    for (int64_t r = 0; r < m.n_in / per; ++r)
        for (int64_t o = 0; o < m.n_out; ++o) {
            uint32_t w = 0;
            for (int j = 0; j < per; ++j) w |= (uint32_t(m.q[size_t(o * m.n_in + r * per + j)]) & mask) << (bits * j);
            p.qweight[size_t(r * m.n_out + o)] = int32_t(w);
        }
    for (int64_t g = 0; g < n_groups; ++g)
        for (int64_t c = 0; c < m.n_out / per; ++c) {
            uint32_t w = 0;
            for (int j = 0; j < per; ++j)
                w |= (uint32_t(m.zeros[size_t(g * m.n_out + c * per + j)] - (v1 ? 1 : 0)) & mask) << (bits * j);
            p.qzeros[size_t(g * (m.n_out / per) + c)] = int32_t(w);
        }
    for (size_t i = 0; i < p.scales.size(); ++i) p.scales[i] = cpu::fp32_to_fp16(m.scales[i]);
    return p;
}

Result<GptqMatrix> gptq_matrix_from_weight(const std::string& module, const WeightView& w) {
    int group = i4_group_size(w.dtype);
    if (w.dtype == DType::Q4_1) group = 32;
    if (group == 0)
        return Status::error("GPTQ linear '" + module + "': the weight is " + std::string(dtype_name(w.dtype)) +
                             ", not a 4-bit group format (I4_G128, I4_G64, Q4_1)");
    GptqMatrix m;
    m.n_in = w.n_in, m.n_out = w.n_out, m.group = group, m.bits = 4;
    const int64_t n_groups = w.n_in / group;
    m.q.resize(size_t(w.n_out * w.n_in));
    m.zeros.resize(size_t(n_groups * w.n_out));
    m.scales.resize(m.zeros.size());
    m.g_idx.resize(size_t(w.n_in));
    for (int64_t i = 0; i < w.n_in; ++i) m.g_idx[size_t(i)] = int32_t(i / group);
    const size_t rb = row_bytes(w.dtype, w.n_in);
    std::vector<float> d(static_cast<size_t>(n_groups)), row(static_cast<size_t>(w.n_in));
    std::vector<int> z(static_cast<size_t>(n_groups));
    for (int64_t o = 0; o < w.n_out; ++o) {
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + size_t(o) * rb;
        if (w.dtype == DType::Q4_1) {
            cpu::dequantize_row(w.dtype, src, row.data(), w.n_in);
            for (int64_t g = 0; g < n_groups; ++g) {
                uint16_t dh, mh;
                std::memcpy(&dh, src + g * 20, 2);
                std::memcpy(&mh, src + g * 20 + 2, 2);
                d[size_t(g)] = cpu::fp16_to_fp32(dh);
                const float mv = cpu::fp16_to_fp32(mh);
                const int zz = d[size_t(g)] > 0 ? int(std::nearbyint(-mv / d[size_t(g)])) : 0;
                if (zz < 0 || zz > 15 || cpu::fp32_to_fp16(-d[size_t(g)] * float(zz)) != mh)
                    return Status::error("GPTQ linear '" + module +
                                         "': a Q4_1 block's minimum is not -scale * zero "
                                         "for a zero point in 0..15 (not a GPTQ-made weight)");
                z[size_t(g)] = zz;
                for (int j = 0; j < 16; ++j) {
                    const uint8_t b = src[g * 20 + 4 + j];
                    m.q[size_t(o * w.n_in + g * 32 + j)] = b & 0xF;
                    m.q[size_t(o * w.n_in + g * 32 + j + 16)] = b >> 4;
                }
            }
        } else {
            cpu::unpack_i4_row(w.dtype, src, w.n_in, d.data(), z.data(), &m.q[size_t(o * w.n_in)]);
        }
        for (int64_t g = 0; g < n_groups; ++g) {
            m.scales[size_t(g * w.n_out + o)] = d[size_t(g)];
            m.zeros[size_t(g * w.n_out + o)] = z[size_t(g)];
        }
    }
    if (w.in_perm)  // stored in group order: back to the input's columns, g_idx the act-order one
        return gptq_unpermute_columns(m, std::vector<int32_t>(w.in_perm, w.in_perm + w.n_in));
    return m;
}

Result<std::vector<AwqTensor>> convert_gptq_linears(const SafetensorsSet& set, const ModelConfig& config,
                                                    const GptqConfig& gptq, const std::string& dir,
                                                    std::vector<std::string>& consumed) {
    std::set<std::string> modules;
    const std::string suffix = ".qweight";
    for (const auto& [name, t] : set.tensors())
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            modules.insert(name.substr(0, name.size() - suffix.size()));
    if (modules.empty())
        return Status::error(dir + ": " + gptq.source + " says GPTQ, but no tensor is named '<module>.qweight'");
    std::vector<AwqTensor> out;
    for (const std::string& module : modules) {
        const auto dims = awq_module_dims(config, module);
        if (!dims)
            return Status::error(dir + ": GPTQ tensors of '" + module + "': not a linear layer of this " + config.arch +
                                 " model (expected model.layers.<0.." + std::to_string(config.n_layer - 1) +
                                 ">.self_attn.{q,k,v,o}_proj, .mlp.{gate,up,down}_proj or lm_head)");
        if (set.find(module + ".weight"))
            return Status::error(dir + ": '" + module + "' has both a float '.weight' and GPTQ '.qweight' tensors");
        auto m = unpack_gptq_linear(set, module, dims->first, dims->second, gptq);
        if (!m) return m.status();
        // an act-order g_idx: the columns sorted by group, that order kept as the input permutation
        DType type;
        std::vector<int32_t> perm;
        auto bytes = gptq_encode(m.value(), &type, &perm);
        if (!bytes)
            return Status::error(dir + ": GPTQ linear '" + module + "' (tensor '" + module +
                                 ".g_idx'): " + bytes.message());
        out.push_back(AwqTensor{
            module + ".weight", {dims->first, dims->second}, type, std::move(bytes).value(), std::move(perm)});
        for (const char* s : {".qweight", ".qzeros", ".scales", ".g_idx"}) consumed.push_back(module + s);
        if (const SafetensorsTensor* b = set.find(module + ".bias");
            b && module.find("self_attn.") == std::string::npos)
            return Status::error(b->file + ": tensor '" + module + ".bias': biases of " + module +
                                 " are not supported (only qwen2's q/k/v biases)");
    }
    return out;
}

}  // namespace kvs
