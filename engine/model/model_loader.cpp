// load_model(): a GGUF file or a Hugging Face safetensors folder -> Model.
//
// Both formats go through the same builder: a table of raw tensors (GGUF order, ne[0]
// contiguous) and a naming scheme. Every tensor's shape is checked against the config.
//
// RoPE: GGUF "llama" files come from convert_hf_to_gguf.py, which permutes the rows of
// Q and K so that adjacent pairs rotate together: RopeStyle::Normal. Hugging Face Llama
// checkpoints are unpermuted and rotate halves: RopeStyle::Neox. qwen2 is Neox in both.
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <set>

#include "engine/model/awq_checkpoint.h"
#include "engine/model/gguf_reader.h"
#include "engine/model/gptq_checkpoint.h"
#include "engine/model/model.h"
#include "engine/model/model_config_io.h"
#include "engine/model/safetensors_reader.h"
#include "engine/tokenizer/hf_tokenizer_json.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace fs = std::filesystem;

namespace {

struct RawTensor {
    DType type = DType::F32;
    std::vector<int64_t> ne;  // [n_dims] ne[0] contiguous
    const uint8_t* data = nullptr;
    uint64_t n_bytes = 0;
    int64_t n_elements = 0;
    const int32_t* in_perm = nullptr;  // [ne[0]] or null: WeightView::in_perm (GPTQ act-order)
};

// What keeps a model's memory alive: the mapped files and converted vectors.
struct Storage {
    std::shared_ptr<const void> source;             // GgufFile or SafetensorsSet
    std::vector<std::unique_ptr<float[]>> owned;    // F32 copies of F16/BF16 norms and biases
    std::vector<std::vector<uint8_t>> owned_bytes;  // converted weights (AWQ linears as I4_G128 / I4_G64)
    std::vector<std::vector<int32_t>> owned_perms;  // input permutations of GPTQ act-order linears
};

struct Names {
    std::string token_embd, output_norm, output;
    std::string layer_prefix;  // followed by the layer index
    std::string attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, w_gate, w_up, w_down;
};

const Names kGgufNames{"token_embd.weight",   "output_norm.weight", "output.weight",  "blk.",
                       ".attn_norm.weight",   ".attn_q.weight",     ".attn_k.weight", ".attn_v.weight",
                       ".attn_output.weight", ".attn_q.bias",       ".attn_k.bias",   ".attn_v.bias",
                       ".ffn_norm.weight",    ".ffn_gate.weight",   ".ffn_up.weight", ".ffn_down.weight"};
const Names kHfNames{"model.embed_tokens.weight",
                     "model.norm.weight",
                     "lm_head.weight",
                     "model.layers.",
                     ".input_layernorm.weight",
                     ".self_attn.q_proj.weight",
                     ".self_attn.k_proj.weight",
                     ".self_attn.v_proj.weight",
                     ".self_attn.o_proj.weight",
                     ".self_attn.q_proj.bias",
                     ".self_attn.k_proj.bias",
                     ".self_attn.v_proj.bias",
                     ".post_attention_layernorm.weight",
                     ".mlp.gate_proj.weight",
                     ".mlp.up_proj.weight",
                     ".mlp.down_proj.weight"};

std::string shape_str(const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

// Builds the weight views of a Model from a tensor table, checking every shape.
class WeightBuilder {
public:
    WeightBuilder(const std::string& file, const std::map<std::string, RawTensor>& tensors, const Names& names,
                  Storage& storage)
        : m_file(file), m_tensors(tensors), m_names(names), m_storage(storage) {}

    Status build(Model& m);

private:
    const RawTensor* get(const std::string& name) const {
        auto it = m_tensors.find(name);
        return it == m_tensors.end() ? nullptr : &it->second;
    }
    Status missing(const std::string& name, const std::string& shape) const {
        return Status::error(m_file + ": missing tensor '" + name + "' (expected shape " + shape + ")");
    }
    Status check_shape(const std::string& name, const RawTensor& t, const std::vector<int64_t>& want) const;
    Status matrix(const std::string& name, int64_t n_in, int64_t n_out, WeightView& out) const;
    Status vector(const std::string& name, int64_t n, const float*& out);

    std::string m_file;
    const std::map<std::string, RawTensor>& m_tensors;
    const Names& m_names;
    Storage& m_storage;
};

Status WeightBuilder::check_shape(const std::string& name, const RawTensor& t, const std::vector<int64_t>& want) const {
    std::vector<int64_t> ne = t.ne;
    while (ne.size() > want.size() && ne.back() == 1) ne.pop_back();  // trailing 1s do not change the layout
    if (ne != want)
        return Status::error(m_file + ": tensor '" + name + "' has shape " + shape_str(t.ne) + ", expected " +
                             shape_str(want) + " (ne[0] first)");
    return Status::ok();
}

Status WeightBuilder::matrix(const std::string& name, int64_t n_in, int64_t n_out, WeightView& out) const {
    const RawTensor* t = get(name);
    if (!t) return missing(name, shape_str({n_in, n_out}));
    KVS_RETURN_IF_ERROR(check_shape(name, *t, {n_in, n_out}));
    if (!dtype_info(t->type).weight_type)
        return Status::error(m_file + ": tensor '" + name + "' has type " + std::string(dtype_name(t->type)) +
                             ", which is not a weight type");
    out = WeightView{t->type, t->data, n_in, n_out};
    out.in_perm = t->in_perm;
    return Status::ok();
}

Status WeightBuilder::vector(const std::string& name, int64_t n, const float*& out) {
    const RawTensor* t = get(name);
    if (!t) return missing(name, shape_str({n}));
    KVS_RETURN_IF_ERROR(check_shape(name, *t, {n}));
    const bool aligned = reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0;
    if (t->type == DType::F32 && aligned) {
        out = reinterpret_cast<const float*>(t->data);
        return Status::ok();
    }
    if (t->type != DType::F32 && t->type != DType::F16 && t->type != DType::BF16)
        return Status::error(m_file + ": tensor '" + name + "' has type " + std::string(dtype_name(t->type)) +
                             " (expected F32, F16 or BF16 for a norm or bias vector)");
    auto buf = std::make_unique<float[]>(static_cast<size_t>(n));  // [n]
    if (t->type == DType::F32) std::memcpy(buf.get(), t->data, static_cast<size_t>(n) * sizeof(float));
    else
        cpu::dequantize_row(t->type, t->data, buf.get(), n);
    out = buf.get();
    m_storage.owned.push_back(std::move(buf));
    return Status::ok();
}

Status WeightBuilder::build(Model& m) {
    const ModelConfig& c = m.config;
    const int64_t q_dim = int64_t(c.n_head) * c.head_dim, kv_dim = int64_t(c.n_kv_head) * c.head_dim;
    KVS_RETURN_IF_ERROR(matrix(m_names.token_embd, c.n_embd, c.n_vocab, m.token_embd));
    KVS_RETURN_IF_ERROR(vector(m_names.output_norm, c.n_embd, m.output_norm));
    if (c.tied_embeddings) {
        m.output = m.token_embd;
    } else {
        KVS_RETURN_IF_ERROR(matrix(m_names.output, c.n_embd, c.n_vocab, m.output));
    }
    m.layers.resize(static_cast<size_t>(c.n_layer));
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = m_names.layer_prefix + std::to_string(il);
        LayerWeights& l = m.layers[static_cast<size_t>(il)];
        KVS_RETURN_IF_ERROR(vector(p + m_names.attn_norm, c.n_embd, l.attn_norm));
        KVS_RETURN_IF_ERROR(matrix(p + m_names.wq, c.n_embd, q_dim, l.wq));
        KVS_RETURN_IF_ERROR(matrix(p + m_names.wk, c.n_embd, kv_dim, l.wk));
        KVS_RETURN_IF_ERROR(matrix(p + m_names.wv, c.n_embd, kv_dim, l.wv));
        KVS_RETURN_IF_ERROR(matrix(p + m_names.wo, q_dim, c.n_embd, l.wo));
        if (c.attn_bias) {
            KVS_RETURN_IF_ERROR(vector(p + m_names.bq, q_dim, l.bq));
            KVS_RETURN_IF_ERROR(vector(p + m_names.bk, kv_dim, l.bk));
            KVS_RETURN_IF_ERROR(vector(p + m_names.bv, kv_dim, l.bv));
        }
        KVS_RETURN_IF_ERROR(vector(p + m_names.ffn_norm, c.n_embd, l.ffn_norm));
        KVS_RETURN_IF_ERROR(matrix(p + m_names.w_gate, c.n_embd, c.n_ff, l.w_gate));
        KVS_RETURN_IF_ERROR(matrix(p + m_names.w_up, c.n_embd, c.n_ff, l.w_up));
        KVS_RETURN_IF_ERROR(matrix(p + m_names.w_down, c.n_ff, c.n_embd, l.w_down));
        if (c.gemma) {  // GGUF names (gemma3 loads from GGUF only)
            KVS_RETURN_IF_ERROR(vector(p + ".attn_q_norm.weight", c.head_dim, l.attn_q_norm));
            KVS_RETURN_IF_ERROR(vector(p + ".attn_k_norm.weight", c.head_dim, l.attn_k_norm));
            KVS_RETURN_IF_ERROR(vector(p + ".post_attention_norm.weight", c.n_embd, l.attn_post_norm));
            KVS_RETURN_IF_ERROR(vector(p + ".post_ffw_norm.weight", c.n_embd, l.ffn_post_norm));
        }
    }
    return Status::ok();
}

// n_params, weight_bytes, tensor_types and file_type (the type of most matrices).
void fill_stats(Model& m, const std::map<std::string, RawTensor>& tensors) {
    std::map<std::string, std::pair<int, int64_t>> matrices;  // type -> (count, bytes)
    for (const auto& [name, t] : tensors) {
        const std::string type(dtype_name(t.type));
        m.n_params += t.n_elements;
        m.weight_bytes += static_cast<int64_t>(t.n_bytes);
        m.tensor_types[type] += 1;
        if (t.ne.size() >= 2 && t.ne[1] > 1) {
            matrices[type].first += 1;
            matrices[type].second += static_cast<int64_t>(t.n_bytes);
        }
    }
    m.n_tensors = static_cast<int64_t>(tensors.size());
    std::pair<int, int64_t> best{-1, 0};
    for (const auto& [type, stat] : matrices)
        if (stat > best) {
            best = stat;
            m.file_type = type;
        }
}

// Q/K/V biases: qwen2 always has them; a llama file may (all three or none).
Status decide_attn_bias(Model& m, const std::map<std::string, RawTensor>& tensors, const Names& names) {
    if (m.config.arch == "qwen2") {
        m.config.attn_bias = true;
        return Status::ok();
    }
    m.config.attn_bias = tensors.count(names.layer_prefix + "0" + names.bq) > 0;
    return Status::ok();
}

Result<std::shared_ptr<Model>> load_gguf(const std::string& path) {
    auto file = GgufFile::open(path);
    if (!file) return file.status();
    std::shared_ptr<GgufFile> f = std::move(file).value();
    auto model = std::make_shared<Model>();
    auto storage = std::make_shared<Storage>();
    storage->source = f;
    model->path = path;
    model->format = "gguf";
    std::map<std::string, RawTensor> tensors;
    for (const GgufTensorInfo& t : f->tensors())
        tensors[t.name] = RawTensor{t.type, t.ne, t.data, t.n_bytes, t.n_elements};
    auto config = read_gguf_config(*f);
    if (!config) return config.status();
    model->config = std::move(config).value();
    if (model->config.name.empty()) model->config.name = fs::path(path).stem().string();
    auto vocab = read_gguf_vocab(*f, model->config.n_vocab);
    if (!vocab) return vocab.status();
    model->vocab = std::move(vocab).value();
    model->config.tied_embeddings = tensors.count(kGgufNames.output) == 0;
    KVS_RETURN_IF_ERROR(decide_attn_bias(*model, tensors, kGgufNames));
    WeightBuilder builder(path, tensors, kGgufNames, *storage);
    KVS_RETURN_IF_ERROR(builder.build(*model));
    fill_stats(*model, tensors);
    model->storage = storage;
    return model;
}

Result<std::shared_ptr<Model>> load_safetensors_folder(const std::string& dir) {
    const std::string config_path = (fs::path(dir) / "config.json").string();
    auto config = read_hf_config(config_path);
    if (!config) return config.status();
    auto set = SafetensorsSet::open_folder(dir);
    if (!set) return set.status();
    auto model = std::make_shared<Model>();
    auto storage = std::make_shared<Storage>();
    storage->source = set.value();
    model->path = dir;
    model->format = "safetensors";
    model->config = std::move(config).value();
    model->config.name = fs::path(dir).filename().string();
    if (model->config.name.empty()) model->config.name = fs::path(dir).parent_path().filename().string();
    std::map<std::string, RawTensor> tensors;
    // An AWQ or GPTQ checkpoint: its packed linears become tensors named <module>.weight in
    // the kernels' group formats (I4_G128 / I4_G64, GPTQ also Q4_1 / Q8_0).
    auto gptq = read_gptq_config(dir);
    if (!gptq) return gptq.status();
    auto awq = gptq.value() ? Result<std::optional<AwqConfig>>(std::optional<AwqConfig>()) : read_awq_config(dir);
    if (!awq) return awq.status();
    std::set<std::string> consumed;
    if (awq.value() || gptq.value()) {
        std::vector<std::string> names;
        auto linears = gptq.value() ? convert_gptq_linears(*set.value(), model->config, *gptq.value(), dir, names)
                                    : convert_awq_linears(*set.value(), model->config, *awq.value(), dir, names);
        if (!linears) return linears.status();
        consumed.insert(names.begin(), names.end());
        for (AwqTensor& t : linears.value()) {
            storage->owned_bytes.push_back(std::move(t.data));
            const std::vector<uint8_t>& bytes = storage->owned_bytes.back();
            const int32_t* perm = nullptr;
            if (!t.in_perm.empty()) {
                storage->owned_perms.push_back(std::move(t.in_perm));
                perm = storage->owned_perms.back().data();
            }
            tensors[t.name] = RawTensor{t.dtype, t.ne, bytes.data(), bytes.size(), t.ne[0] * t.ne[1], perm};
        }
        model->format = gptq.value() ? "safetensors (GPTQ)" : "safetensors (AWQ)";
    }
    for (const auto& [name, t] : set.value()->tensors()) {
        if (consumed.count(name)) continue;
        if (t.integer)
            return Status::error(t.file + ": tensor '" + name + "' has dtype " + t.dtype +
                                 "; integer tensors are only read as an AWQ checkpoint's qweight / qzeros "
                                 "(config.json quantization_config with quant_method \"awq\")");
        std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());  // PyTorch [out, in] -> GGUF [in, out]
        if (ne.empty()) ne.push_back(1);
        tensors[name] = RawTensor{t.type, std::move(ne), t.data, t.n_bytes, t.n_elements};
    }
    // An absent lm_head means the head is tied, whatever config.json says.
    if (tensors.count(kHfNames.output) == 0) model->config.tied_embeddings = true;
    KVS_RETURN_IF_ERROR(decide_attn_bias(*model, tensors, kHfNames));
    const fs::path tok_json = fs::path(dir) / "tokenizer.json", tok_config = fs::path(dir) / "tokenizer_config.json";
    std::error_code ec;
    if (!fs::exists(tok_json, ec)) return Status::error(dir + ": missing tokenizer.json (the model's tokenizer)");
    auto vocab = vocab_from_tokenizer_json(tok_json.string(), fs::exists(tok_config, ec) ? tok_config.string() : "");
    if (!vocab) return vocab.status();
    model->vocab = std::move(vocab).value();
    KVS_RETURN_IF_ERROR(finish_hf_vocab(model->vocab, model->config.n_vocab, tok_json.string()));
    WeightBuilder builder(dir, tensors, kHfNames, *storage);
    KVS_RETURN_IF_ERROR(builder.build(*model));
    fill_stats(*model, tensors);
    model->storage = storage;
    return model;
}

}  // namespace

Result<std::shared_ptr<Model>> load_model(const std::string& path) {
    // Every check returns a Status; this catch is the last line for the unforeseen
    // (std::bad_alloc, a filesystem error while listing a folder).
    try {
        std::error_code ec;
        if (!fs::exists(path, ec)) return Status::error(path + ": no such file or folder");
        Result<std::shared_ptr<Model>> r = Status::error("unreachable");
        if (fs::is_directory(path, ec)) r = load_safetensors_folder(path);
        else if (fs::path(path).extension() == ".safetensors" || fs::path(path).filename() == "config.json")
            r = load_safetensors_folder(fs::path(path).parent_path().string());
        else
            r = load_gguf(path);
        if (r && !r.value()->config.rope_scaling.empty())
            r.value()->warnings.push_back(path + ": RoPE scaling (" + r.value()->config.rope_scaling +
                                          ") is not applied by this engine; output differs from the reference "
                                          "implementation, most at long contexts");
        return r;
    } catch (const std::exception& e) {
        return Status::error(path + ": cannot load: " + e.what());
    }
}

}  // namespace kvs
