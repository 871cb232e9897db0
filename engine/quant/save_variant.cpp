// save_variant(): a model's weights to a GGUF file or an AutoAWQ safetensors folder.
#include "engine/quant/save_variant.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/model/awq_checkpoint.h"
#include "engine/model/gguf_reader.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/gptq_checkpoint.h"
#include "engine/model/json_file.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<uint32_t> gguf_file_type(DType t) {
    switch (t) {
        case DType::F32: return 0;
        case DType::F16: return 1;
        case DType::Q4_0: return 2;
        case DType::Q4_1: return 3;
        case DType::Q8_0: return 7;
        case DType::Q5_0: return 8;
        case DType::Q5_1: return 9;
        case DType::Q4_K: return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S: every linear Q4_K
        case DType::Q5_K: return 16;  // LLAMA_FTYPE_MOSTLY_Q5_K_S
        case DType::Q6_K: return 18;
        case DType::BF16: return 32;
        default: return std::nullopt;
    }
}

namespace {

struct OutTensor {
    DType type = DType::F32;
    std::vector<int64_t> ne;  // [n_dims] ne[0] contiguous
    const void* data = nullptr;
    size_t n_bytes = 0;
};

OutTensor matrix_tensor(const WeightView& w) {
    return {w.dtype, {w.n_in, w.n_out}, w.data, row_bytes(w.dtype, w.n_in) * size_t(w.n_out)};
}
OutTensor vector_tensor(const float* p, int64_t n) { return {DType::F32, {n}, p, size_t(n) * sizeof(float)}; }

// The seven per-layer linears with their GGUF and Hugging Face names.
struct Linear {
    const char* gguf;
    const char* hf;
    const WeightView LayerWeights::*view;
};
constexpr Linear kLinears[] = {
    {"attn_q", "self_attn.q_proj", &LayerWeights::wq},    {"attn_k", "self_attn.k_proj", &LayerWeights::wk},
    {"attn_v", "self_attn.v_proj", &LayerWeights::wv},    {"attn_output", "self_attn.o_proj", &LayerWeights::wo},
    {"ffn_gate", "mlp.gate_proj", &LayerWeights::w_gate}, {"ffn_up", "mlp.up_proj", &LayerWeights::w_up},
    {"ffn_down", "mlp.down_proj", &LayerWeights::w_down},
};

// Every tensor the engine uses, under its GGUF name.
std::map<std::string, OutTensor> gguf_tensors(const Model& m) {
    const ModelConfig& c = m.config;
    const int64_t q_dim = int64_t(c.n_head) * c.head_dim, kv_dim = int64_t(c.n_kv_head) * c.head_dim;
    std::map<std::string, OutTensor> t;
    t["token_embd.weight"] = matrix_tensor(m.token_embd);
    t["output_norm.weight"] = vector_tensor(m.output_norm, c.n_embd);
    if (!c.tied_embeddings) t["output.weight"] = matrix_tensor(m.output);
    for (size_t il = 0; il < m.layers.size(); ++il) {
        const LayerWeights& l = m.layers[il];
        const std::string p = "blk." + std::to_string(il) + ".";
        t[p + "attn_norm.weight"] = vector_tensor(l.attn_norm, c.n_embd);
        t[p + "ffn_norm.weight"] = vector_tensor(l.ffn_norm, c.n_embd);
        for (const Linear& lin : kLinears) t[p + lin.gguf + ".weight"] = matrix_tensor(l.*lin.view);
        if (c.attn_bias) {
            t[p + "attn_q.bias"] = vector_tensor(l.bq, q_dim);
            t[p + "attn_k.bias"] = vector_tensor(l.bk, kv_dim);
            t[p + "attn_v.bias"] = vector_tensor(l.bv, kv_dim);
        }
    }
    return t;
}

// The type most linear weights have (by count).
DType dominant_linear_type(const Model& m) {
    std::map<DType, int> n;
    for (const LayerWeights& l : m.layers)
        for (const Linear& lin : kLinears) n[(l.*lin.view).dtype] += 1;
    DType best = DType::F32;
    int most = -1;
    for (const auto& [t, k] : n)
        if (k > most) best = t, most = k;
    return best;
}

bool same_path(const std::string& a, const std::string& b) {
    std::error_code ec;
    return fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

int64_t size_of(const fs::path& p) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return int64_t(fs::file_size(p, ec));
    int64_t total = 0;
    for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file(ec)) total += int64_t(e.file_size(ec));
    return total;
}

Result<SavedModel> save_gguf(const Model& m, const std::string& out) {
    for (size_t il = 0; il < m.layers.size(); ++il)
        for (const Linear& lin : kLinears)
            if ((m.layers[il].*lin.view).in_perm)
                return Status::error(out + ": layer " + std::to_string(il) + " " + lin.gguf +
                                     " has permuted input columns (GPTQ act-order: desc_act with a permuted g_idx), "
                                     "which GGUF cannot hold; save it to a folder (a GPTQ checkpoint) instead");
    std::map<std::string, OutTensor> mine = gguf_tensors(m);
    // KV Scope's own INT4 / INT8 rows re-expressed in GGML blocks (Q4_1 / Q8_0), so
    // llama.cpp and every GGUF reader can run the file
    std::vector<std::vector<uint8_t>> converted;  // keeps the re-expressed tensors alive until the write
    for (auto& [name, t] : mine) {
        const std::optional<DType> g = cpu::ggml_equivalent(t.type);
        if (!g || t.ne.size() != 2) continue;
        const int64_t n_in = t.ne[0], n_out = t.ne[1];
        const size_t src_row = row_bytes(t.type, n_in), dst_row = row_bytes(*g, n_in);
        std::vector<uint8_t> buf(dst_row * size_t(n_out));  // [n_out, row_bytes(g, n_in)]
        for (int64_t r = 0; r < n_out; ++r)
            cpu::to_ggml_equivalent_row(t.type, static_cast<const uint8_t*>(t.data) + size_t(r) * src_row,
                                        buf.data() + size_t(r) * dst_row, n_in);
        converted.push_back(std::move(buf));
        t = OutTensor{*g, t.ne, converted.back().data(), converted.back().size()};
    }
    for (const auto& [name, t] : mine)
        if (!dtype_info(t.type).ggml)
            return Status::error(out + ": tensor '" + name + "' is " + std::string(dtype_name(t.type)) +
                                 ", which is KV Scope's own format, not a GGML type: no GGUF file can hold it "
                                 "(save to a folder for an AWQ checkpoint, or pick a GGML scheme such as q4_k)");
    std::error_code ec;
    if (!fs::is_regular_file(m.path, ec))
        return Status::error(out +
                             ": saving as GGUF needs a model loaded from a GGUF file (its metadata and "
                             "tokenizer are copied); '" +
                             m.path + "' is a " + m.format + " model");
    if (same_path(m.path, out)) return Status::error(out + ": is the source model itself; pick another path");
    auto src = GgufFile::open(m.path);
    if (!src) return src.status();
    const GgufFile& f = *src.value();
    GgufWriter w(f.version() == 2 ? 2 : 3);
    for (const auto& [key, value] : f.metadata())
        if (key != "general.alignment") w.set(key, value);
    w.set_alignment(f.alignment());
    const DType linear_type = cpu::ggml_equivalent(dominant_linear_type(m)).value_or(dominant_linear_type(m));
    if (auto ft = gguf_file_type(linear_type)) w.set_u32("general.file_type", *ft);
    if (dtype_info(linear_type).block_size > 1 && !f.find("general.quantization_version"))
        w.set_u32("general.quantization_version", 2);
    size_t n_used = 0;
    for (const GgufTensorInfo& t : f.tensors()) {
        auto it = mine.find(t.name);
        if (it == mine.end()) {  // a tensor the engine does not use (e.g. rope_freqs): as it was
            w.add_tensor_view(t.name, t.type, t.ne, t.data, t.n_bytes);
            continue;
        }
        ++n_used;
        const OutTensor& o = it->second;
        std::vector<int64_t> ne = o.ne;
        if (ne.size() < t.ne.size() && t.ne.size() == 2 && t.ne[1] == 1) ne.push_back(1);  // keep [n, 1] vectors
        w.add_tensor_view(t.name, o.type, ne, o.data, o.n_bytes);
    }
    if (n_used != mine.size())
        return Status::error(m.path + ": the model has " + std::to_string(mine.size()) + " tensors but only " +
                             std::to_string(n_used) + " of them are in the source file");
    KVS_RETURN_IF_ERROR(w.write(out));
    return SavedModel{out, "gguf", size_of(out)};
}

// ---- AutoAWQ folder

struct StTensor {
    std::string name;
    std::string dtype;           // "F32", "F16", "BF16", "I32"
    std::vector<int64_t> shape;  // PyTorch order
    const void* data = nullptr;
    size_t n_bytes = 0;
};

const char* st_dtype(DType t) { return t == DType::F16 ? "F16" : t == DType::BF16 ? "BF16" : "F32"; }

Status write_safetensors(const fs::path& path, const std::vector<StTensor>& tensors) {
    json header = json::object();
    size_t offset = 0;
    for (const StTensor& t : tensors) {
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.n_bytes}}};
        offset += t.n_bytes;
    }
    std::string h = header.dump();
    h.resize((h.size() + 7) / 8 * 8, ' ');
    std::ofstream o(path, std::ios::binary);
    if (!o) return Status::error(path.string() + ": cannot create");
    const uint64_t n = h.size();
    o.write(reinterpret_cast<const char*>(&n), 8);
    o.write(h.data(), std::streamsize(h.size()));
    for (const StTensor& t : tensors) o.write(static_cast<const char*>(t.data), std::streamsize(t.n_bytes));
    if (!o) return Status::error(path.string() + ": write failed");
    return Status::ok();
}

Status write_awq_config(const fs::path& src_dir, const fs::path& out, int group_size) {
    auto read = read_json_object((src_dir / "config.json").string());
    if (!read) return read.status();
    json config = std::move(*read);
    config["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4},         {"group_size", group_size},
                                     {"zero_point", true},    {"version", "gemm"}, {"modules_to_not_convert", nullptr}};
    std::ofstream o(out / "config.json", std::ios::binary);
    o << config.dump(2) << "\n";
    if (!o) return Status::error((out / "config.json").string() + ": write failed");
    return Status::ok();
}

// GPTQ: quantize_config.json (and config.json's quantization_config) with quant_method
// "gptq", checkpoint_format "gptq" (zeros minus one) unless a zero point is 0 (then "gptq_v2",
// which stores it as it is), and qweight / qzeros / scales / g_idx per linear.
Status write_gptq_config(const fs::path& src_dir, const fs::path& out, int group_size, bool v1, bool permuted) {
    auto read = read_json_object((src_dir / "config.json").string());
    if (!read) return read.status();
    json config = std::move(*read);
    const json q = {{"quant_method", "gptq"},
                    {"bits", 4},
                    {"group_size", group_size},
                    {"desc_act", permuted},
                    {"static_groups", false},
                    {"sym", false},
                    {"true_sequential", false},
                    {"checkpoint_format", v1 ? "gptq" : "gptq_v2"}};
    config["quantization_config"] = q;
    std::ofstream o(out / "config.json", std::ios::binary);
    o << config.dump(2) << "\n";
    std::ofstream oq(out / "quantize_config.json", std::ios::binary);
    oq << q.dump(2) << "\n";
    if (!o || !oq) return Status::error((out / "config.json").string() + ": write failed");
    return Status::ok();
}

// m with groups of `group` (a divisor of its own group size): each of its groups split into
// several sharing the scale and zero (the same weights). An act-order g_idx splits each group
// along the columns' order in the group-sorted layout (gptq_group_permutation): column i at
// position pos(i) there gets group pos(i) / group.
Result<GptqMatrix> regroup(const GptqMatrix& m, int group) {
    if (group == m.group) return m;
    auto perm = gptq_group_permutation(m);  // empty: position = column
    if (!perm) return perm.status();
    GptqMatrix r = m;
    const int split = m.group / group;
    r.group = group;
    r.scales.assign(size_t(m.n_in / group * m.n_out), 0.0f);
    r.zeros.assign(r.scales.size(), 0);
    for (int64_t g = 0; g < m.n_in / group; ++g)
        for (int64_t o = 0; o < m.n_out; ++o) {
            r.scales[size_t(g * m.n_out + o)] = m.scales[size_t((g / split) * m.n_out + o)];
            r.zeros[size_t(g * m.n_out + o)] = m.zeros[size_t((g / split) * m.n_out + o)];
        }
    for (int64_t p = 0; p < m.n_in; ++p) r.g_idx[size_t(perm->empty() ? p : (*perm)[size_t(p)])] = int32_t(p / group);
    return r;
}

bool is_gptq(const Model& m) { return m.format.rfind("variant:int4-gptq", 0) == 0 || m.format == "safetensors (GPTQ)"; }

Result<SavedModel> save_awq_folder(const Model& m, const std::string& out, const Progress& progress) {
    const bool gptq = is_gptq(m);
    std::error_code ec;
    if (!fs::is_directory(m.path, ec) || !fs::exists(fs::path(m.path) / "tokenizer.json", ec))
        return Status::error(
            out +
            ": an INT4 (I4_G128 / I4_G64) model is saved as an AutoAWQ safetensors folder, "
            "which needs the source's config.json and tokenizer.json; '" +
            m.path +
            "' is not a Hugging Face folder (save a GGUF model's INT4 variant to a path ending in .gguf: its "
            "groups become Q4_1 blocks of 32 with the same scale and zero point)");
    // AutoAWQ's config has one group_size: 128 when every linear is I4_G128, else 64 (an
    // I4_G128 group is written as two groups of 64 with its scale and zero, the same weights)
    int group_size = kAwqGroupSize;
    for (size_t il = 0; il < m.layers.size(); ++il)
        for (const Linear& lin : kLinears) {
            const DType t = (m.layers[il].*lin.view).dtype;
            const int g = t == DType::Q4_1 && gptq ? 32 : i4_group_size(t);
            if (g == 0)
                return Status::error(out + ": layer " + std::to_string(il) + " " + lin.hf + " is " +
                                     std::string(dtype_name(t)) + "; an " + (gptq ? "GPTQ" : "AWQ") +
                                     " folder needs every linear in I4_G128 or I4_G64" + (gptq ? " or Q4_1" : ""));
            group_size = std::min(group_size, g);
        }
    for (const WeightView* w : {&m.token_embd, &m.output})
        if (w->dtype != DType::F32 && w->dtype != DType::F16 && w->dtype != DType::BF16)
            return Status::error(out + ": the embedding / output head is " + std::string(dtype_name(w->dtype)) +
                                 " (a safetensors folder holds F32, F16 or BF16 there)");
    if (same_path(m.path, out)) return Status::error(out + ": is the source model itself; pick another folder");
    // Written into a sibling temporary folder, its files moved into `out` only when all of
    // them are written: an error or a cancel leaves no partial checkpoint behind.
    fs::path final_dir = fs::path(out);
    if (!final_dir.has_filename()) final_dir = final_dir.parent_path();
    const fs::path tmp_dir = final_dir.string() + ".partial-" + std::to_string(::getpid());
    fs::remove_all(tmp_dir, ec);
    fs::create_directories(tmp_dir, ec);
    if (ec) return Status::error(out + ": cannot create the folder " + tmp_dir.string() + ": " + ec.message());
    struct RemoveTmp {
        fs::path dir;
        ~RemoveTmp() {
            std::error_code e;
            fs::remove_all(dir, e);
        }
    } remove_tmp{tmp_dir};

    const ModelConfig& c = m.config;
    const int64_t q_dim = int64_t(c.n_head) * c.head_dim, kv_dim = int64_t(c.n_kv_head) * c.head_dim;
    std::vector<StTensor> st;
    std::vector<AwqPacked> packed;  // keeps the packed words alive until the write
    packed.reserve(m.layers.size() * std::size(kLinears));
    std::vector<GptqPacked> gptq_packed;
    gptq_packed.reserve(m.layers.size() * std::size(kLinears));
    std::vector<GptqMatrix> gptq_mats;  // unpacked first: the zero layout depends on every zero
    bool v1 = true, permuted = false;   // permuted: some g_idx is an act-order permutation
    if (gptq)
        for (size_t il = 0; il < m.layers.size(); ++il)
            for (const Linear& lin : kLinears) {
                auto g = gptq_matrix_from_weight(lin.hf, m.layers[il].*lin.view);
                if (!g) return Status::error(out + ": layer " + std::to_string(il) + " " + g.message());
                auto r = regroup(g.value(), group_size);
                if (!r) return Status::error(out + ": layer " + std::to_string(il) + " " + lin.hf + ": " + r.message());
                gptq_mats.push_back(std::move(r).value());
                for (int32_t z : gptq_mats.back().zeros) v1 = v1 && z > 0;
                permuted = permuted || !gptq_mats.back().trivial_g_idx();
            }
    auto add_matrix = [&](const std::string& name, const WeightView& w) {
        st.push_back(
            {name, st_dtype(w.dtype), {w.n_out, w.n_in}, w.data, row_bytes(w.dtype, w.n_in) * size_t(w.n_out)});
    };
    auto add_vector = [&](const std::string& name, const float* p, int64_t n) {
        st.push_back({name, "F32", {n}, p, size_t(n) * sizeof(float)});
    };
    add_matrix("model.embed_tokens.weight", m.token_embd);
    add_vector("model.norm.weight", m.output_norm, c.n_embd);
    if (!c.tied_embeddings) add_matrix("lm_head.weight", m.output);
    for (size_t il = 0; il < m.layers.size(); ++il) {
        const LayerWeights& l = m.layers[il];
        const std::string p = "model.layers." + std::to_string(il) + ".";
        add_vector(p + "input_layernorm.weight", l.attn_norm, c.n_embd);
        add_vector(p + "post_attention_layernorm.weight", l.ffn_norm, c.n_embd);
        if (c.attn_bias) {
            add_vector(p + "self_attn.q_proj.bias", l.bq, q_dim);
            add_vector(p + "self_attn.k_proj.bias", l.bk, kv_dim);
            add_vector(p + "self_attn.v_proj.bias", l.bv, kv_dim);
        }
        for (const Linear& lin : kLinears) {
            const WeightView& w = l.*lin.view;
            const std::string module = p + lin.hf;
            if (gptq) {
                const GptqMatrix& gm = gptq_mats[il * std::size(kLinears) + size_t(&lin - kLinears)];
                gptq_packed.push_back(pack_gptq_linear(gm, v1));
                const GptqPacked& a = gptq_packed.back();
                const int64_t n_groups = w.n_in / group_size;
                st.push_back(
                    {module + ".qweight", "I32", {w.n_in / 8, w.n_out}, a.qweight.data(), a.qweight.size() * 4});
                st.push_back(
                    {module + ".qzeros", "I32", {n_groups, w.n_out / 8}, a.qzeros.data(), a.qzeros.size() * 4});
                st.push_back({module + ".scales", "F16", {n_groups, w.n_out}, a.scales.data(), a.scales.size() * 2});
                st.push_back({module + ".g_idx", "I32", {w.n_in}, a.g_idx.data(), a.g_idx.size() * 4});
                continue;
            }
            auto linear = awq_linear_from_i4(module, w, group_size);
            if (!linear) return Status::error(out + ": " + linear.message());
            packed.push_back(pack_awq_linear(*linear));
            const AwqPacked& a = packed.back();
            const int64_t n_groups = w.n_in / group_size;
            st.push_back({module + ".qweight", "I32", {w.n_in, w.n_out / 8}, a.qweight.data(), a.qweight.size() * 4});
            st.push_back({module + ".qzeros", "I32", {n_groups, w.n_out / 8}, a.qzeros.data(), a.qzeros.size() * 4});
            st.push_back({module + ".scales", "F16", {n_groups, w.n_out}, a.scales.data(), a.scales.size() * 2});
        }
    }
    KVS_RETURN_IF_ERROR(progress.check("saving " + out));
    if (gptq) KVS_RETURN_IF_ERROR(write_gptq_config(m.path, tmp_dir, group_size, v1, permuted));
    else
        KVS_RETURN_IF_ERROR(write_awq_config(m.path, tmp_dir, group_size));
    for (const char* f :
         {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"})
        if (fs::exists(fs::path(m.path) / f, ec)) {
            fs::copy_file(fs::path(m.path) / f, tmp_dir / f, fs::copy_options::overwrite_existing, ec);
            if (ec) return Status::error(out + ": cannot copy " + f + ": " + ec.message());
        }
    KVS_RETURN_IF_ERROR(write_safetensors(tmp_dir / "model.safetensors", st));
    KVS_RETURN_IF_ERROR(progress.check("saving " + out));
    fs::create_directories(final_dir, ec);
    if (ec) return Status::error(out + ": cannot create the folder: " + ec.message());
    for (const auto& e : fs::directory_iterator(tmp_dir, ec)) {
        fs::rename(e.path(), final_dir / e.path().filename(), ec);
        if (ec)
            return Status::error(out + ": cannot move " + e.path().filename().string() + " into it: " + ec.message());
    }
    progress.report("saved " + out, 1.0);
    return SavedModel{out, gptq ? "gptq" : "awq", size_of(out)};
}

}  // namespace

Result<SavedModel> save_variant(const Model& model, const std::string& out, const Progress& progress) {
    if (out.empty()) return Status::error("save: no output path given");
    KVS_RETURN_IF_ERROR(progress.check("saving " + out));
    if (fs::path(out).extension() == ".gguf") {
        auto saved = save_gguf(model, out);  // GgufWriter writes a temporary file and renames it
        if (saved) progress.report("saved " + out, 1.0);
        return saved;
    }
    for (const LayerWeights& l : model.layers)
        for (const Linear& lin : kLinears)
            if ((l.*lin.view).dtype == DType::I8_ROW)
                return Status::error(out +
                                     ": an INT8 per-channel (I8_ROW) variant is saved as GGUF (its rows "
                                     "become Q8_0 blocks with the row's scale): give a path ending in .gguf");
    if (i4_group_size(dominant_linear_type(model)) != 0 || is_gptq(model)) return save_awq_folder(model, out, progress);
    return Status::error(out + ": a " + std::string(dtype_name(dominant_linear_type(model))) +
                         " model is saved as GGUF: give a path ending in .gguf (folders are for INT4 AWQ checkpoints)");
}

}  // namespace kvs
