#include "engine/model/model_config_io.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/core/quote.h"
#include "engine/model/json_file.h"

namespace kvs {

using json = nlohmann::json;

namespace {

constexpr int64_t kMaxDim = 1 << 20;

// Checks the config's numbers are sane and consistent; `where` names the source.
Status validate_config(const ModelConfig& c, const std::string& where) {
    auto bad = [&](const std::string& what) { return Status::error(where + ": " + what); };
    if (c.n_layer <= 0 || c.n_layer > 4096)
        return bad("layer count " + std::to_string(c.n_layer) + " (expected 1..4096)");
    if (c.n_embd <= 0 || c.n_embd > kMaxDim)
        return bad("embedding length " + std::to_string(c.n_embd) + " out of range");
    if (c.n_ff <= 0 || c.n_ff > kMaxDim) return bad("feed-forward length " + std::to_string(c.n_ff) + " out of range");
    if (c.n_head <= 0 || c.n_head > 4096) return bad("head count " + std::to_string(c.n_head) + " out of range");
    if (c.n_kv_head <= 0 || c.n_kv_head > c.n_head || c.n_head % c.n_kv_head != 0)
        return bad("kv head count " + std::to_string(c.n_kv_head) + " must divide the head count " +
                   std::to_string(c.n_head));
    if (c.head_dim <= 0 || c.head_dim % 2 != 0 || int64_t(c.head_dim) * c.n_head > kMaxDim)
        return bad("head dimension " + std::to_string(c.head_dim) + " (expected a positive even number)");
    if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0)
        return bad("rope dimension count " + std::to_string(c.n_rot) + " (expected even, 1.." +
                   std::to_string(c.head_dim) + ")");
    if (c.n_vocab <= 0 || c.n_vocab > (1 << 24))
        return bad("vocabulary size " + std::to_string(c.n_vocab) + " out of range");
    if (c.n_ctx_train <= 0) return bad("context length " + std::to_string(c.n_ctx_train) + " (expected > 0)");
    if (!(c.rms_eps > 0.0f) || !std::isfinite(c.rms_eps) || c.rms_eps > 1.0f)
        return bad("RMS norm epsilon " + std::to_string(c.rms_eps) + " (expected in (0, 1])");
    if (!(c.rope_freq_base > 0.0f) || !std::isfinite(c.rope_freq_base))
        return bad("rope frequency base " + std::to_string(c.rope_freq_base) + " (expected > 0)");
    return Status::ok();
}

// An integer key that must be present and within [lo, hi].
Status gguf_int(const GgufFile& f, const std::string& key, bool required, int64_t lo, int64_t hi, int& out) {
    const GgufValue* v = f.find(key);
    if (v && v->is_array())
        return Status::error(f.path() + ": metadata key '" + key +
                             "' is an array (per-layer values are not supported)");
    auto r = f.get_int(key);
    if (!r) return r.status();
    if (!r.value()) {
        if (required) return Status::error(f.path() + ": missing metadata key '" + key + "' (expected an integer)");
        return Status::ok();
    }
    const int64_t x = *r.value();
    if (x < lo || x > hi)
        return Status::error(f.path() + ": metadata key '" + key + "' = " + std::to_string(x) + " (expected " +
                             std::to_string(lo) + ".." + std::to_string(hi) + ")");
    out = static_cast<int>(x);
    return Status::ok();
}

Status gguf_float(const GgufFile& f, const std::string& key, float& out) {
    auto r = f.get_double(key);
    if (!r) return r.status();
    if (r.value()) out = static_cast<float>(*r.value());
    return Status::ok();
}

// Gemma 3 as llama.cpp's llama_model_gemma3 reads it: NeoX RoPE, embeddings scaled by
// sqrt(n_embd), queries by 1/sqrt(head_dim), and with attention.sliding_window set, every
// layer local except each 6th (attention.sliding_window_pattern overrides the 6), local
// layers on RoPE base rope.freq_base_swa (10000 when absent).
Status read_gemma3_config(const GgufFile& f, ModelConfig& c) {
    c.gemma = true;
    c.rope_style = RopeStyle::Neox;
    c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    if (f.find("gemma3.final_logit_softcapping"))
        return Status::error(f.path() + ": metadata key 'gemma3.final_logit_softcapping' is set; final logit "
                             "soft-capping is not implemented (Gemma 3 files do not use it)");
    KVS_RETURN_IF_ERROR(gguf_int(f, "gemma3.attention.sliding_window", false, 0, int64_t(1) << 30, c.sliding_window));
    if (c.sliding_window <= 0) return Status::ok();
    int pattern = 6;
    KVS_RETURN_IF_ERROR(gguf_int(f, "gemma3.attention.sliding_window_pattern", false, 0, 4096, pattern));
    c.layer_swa.assign(static_cast<size_t>(c.n_layer), 0);
    for (int il = 0; il < c.n_layer; ++il)
        c.layer_swa[static_cast<size_t>(il)] = pattern == 0 || il % pattern < pattern - 1;
    KVS_RETURN_IF_ERROR(gguf_float(f, "gemma3.rope.freq_base_swa", c.rope_freq_base_swa));
    if (!(c.rope_freq_base_swa > 0.0f) || !std::isfinite(c.rope_freq_base_swa))
        return Status::error(f.path() + ": metadata key 'gemma3.rope.freq_base_swa' = " +
                             std::to_string(c.rope_freq_base_swa) + " (expected > 0)");
    return Status::ok();
}

}  // namespace

int32_t find_eot_token(const std::vector<std::string>& tokens) {
    for (const char* name : {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"})
        for (size_t i = 0; i < tokens.size(); ++i)
            if (tokens[i] == name) return static_cast<int32_t>(i);
    return -1;
}

Result<ModelConfig> read_gguf_config(const GgufFile& f) {
    ModelConfig c;
    auto arch = f.get_string("general.architecture");
    if (!arch) return arch.status();
    if (!arch.value())
        return Status::error(f.path() + ": missing metadata key 'general.architecture' (expected a string)");
    c.arch = *arch.value();
    if (c.arch != "llama" && c.arch != "qwen2" && c.arch != "gemma3")
        return Status::error(f.path() + ": unsupported architecture " + quote_untrusted(c.arch) +
                             " (general.architecture; supported: llama, qwen2, gemma3)");
    if (auto name = f.get_string("general.name"); name && name.value()) c.name = *name.value();
    const std::string a = c.arch + ".";
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "block_count", true, 1, 4096, c.n_layer));
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "embedding_length", true, 1, kMaxDim, c.n_embd));
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "feed_forward_length", true, 1, kMaxDim, c.n_ff));
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "attention.head_count", true, 1, 4096, c.n_head));
    c.n_kv_head = c.n_head;
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "attention.head_count_kv", false, 1, 4096, c.n_kv_head));
    c.head_dim = c.n_embd / c.n_head;
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "attention.key_length", false, 1, kMaxDim, c.head_dim));
    c.n_rot = c.head_dim;
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "rope.dimension_count", false, 1, kMaxDim, c.n_rot));
    c.n_ctx_train = 4096;
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "context_length", false, 1, int64_t(1) << 30, c.n_ctx_train));
    KVS_RETURN_IF_ERROR(gguf_float(f, a + "attention.layer_norm_rms_epsilon", c.rms_eps));
    KVS_RETURN_IF_ERROR(gguf_float(f, a + "rope.freq_base", c.rope_freq_base));
    if (const GgufValue* t = f.find("tokenizer.ggml.tokens"); t && t->is_array())
        c.n_vocab = static_cast<int>(std::min<uint64_t>(t->n_elems, 1u << 30));
    if (const GgufTensorInfo* e = f.tensor("token_embd.weight"); e && c.n_vocab == 0 && e->ne.size() >= 2)
        c.n_vocab = static_cast<int>(std::min<int64_t>(e->ne[1], 1 << 30));
    KVS_RETURN_IF_ERROR(gguf_int(f, a + "vocab_size", false, 1, 1 << 24, c.n_vocab));
    c.rope_style = c.arch == "qwen2" ? RopeStyle::Neox : RopeStyle::Normal;
    if (c.arch == "gemma3") KVS_RETURN_IF_ERROR(read_gemma3_config(f, c));
    if (f.tensor("rope_freqs.weight")) c.rope_scaling = "rope_freqs";
    else if (f.find(a + "rope.scaling.type"))
        c.rope_scaling = a + "rope.scaling.type";
    KVS_RETURN_IF_ERROR(validate_config(c, f.path()));
    return c;
}

namespace {

Status gguf_token_id(const GgufFile& f, const std::string& key, int n_tokens, int32_t& out) {
    int id = -1;
    KVS_RETURN_IF_ERROR(gguf_int(f, key, false, 0, (int64_t(1) << 31) - 1, id));
    if (id >= n_tokens)
        return Status::error(f.path() + ": metadata key '" + key + "' = " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(n_tokens) + " tokens");
    out = id;
    return Status::ok();
}

// A typed array key: nullptr when absent, an error when it is not an array of `elem` of length n.
Result<const GgufValue*> gguf_array(const GgufFile& f, const std::string& key, GgufType elem, int64_t n) {
    const GgufValue* v = f.find(key);
    if (!v) return static_cast<const GgufValue*>(nullptr);
    if (!v->is_array() || v->elem_type != elem)
        return Status::error(f.path() + ": metadata key '" + key + "' is not an array of " +
                             std::string(gguf_type_name(elem)));
    if (n >= 0 && v->n_elems != static_cast<uint64_t>(n))
        return Status::error(f.path() + ": metadata key '" + key + "' has " + std::to_string(v->n_elems) +
                             " elements (expected one per token: " + std::to_string(n) + ")");
    return v;
}

}  // namespace

Result<VocabData> read_gguf_vocab(const GgufFile& f, int n_vocab) {
    VocabData v;
    auto model = f.get_string("tokenizer.ggml.model");
    if (!model) return model.status();
    if (!model.value())
        return Status::error(f.path() + ": missing metadata key 'tokenizer.ggml.model' (expected a string)");
    v.model = *model.value();
    auto pre = f.get_string("tokenizer.ggml.pre");
    if (!pre) return pre.status();
    v.pre = pre.value().value_or("default");
    auto tokens = gguf_array(f, "tokenizer.ggml.tokens", GgufType::String, n_vocab);
    if (!tokens) return tokens.status();
    if (!tokens.value()) return Status::error(f.path() + ": missing metadata key 'tokenizer.ggml.tokens'");
    v.tokens = tokens.value()->strings;
    const int n = static_cast<int>(v.tokens.size());
    auto scores = gguf_array(f, "tokenizer.ggml.scores", GgufType::Float32, n);
    if (!scores) return scores.status();
    if (const GgufValue* s = scores.value()) {
        v.scores.resize(v.tokens.size());
        std::memcpy(v.scores.data(), s->raw.data(), s->raw.size());
    }
    auto types = gguf_array(f, "tokenizer.ggml.token_type", GgufType::Int32, n);
    if (!types) return types.status();
    if (const GgufValue* t = types.value()) {
        v.token_types.resize(v.tokens.size());
        for (int i = 0; i < n; ++i) {
            const int64_t x = t->int_at(i).value_or(-1);
            if (x < 0 || x > 6)
                return Status::error(f.path() + ": tokenizer.ggml.token_type[" + std::to_string(i) +
                                     "] = " + std::to_string(x) + " (expected 0..6)");
            v.token_types[i] = static_cast<TokenType>(x);
        }
    }
    auto merges = gguf_array(f, "tokenizer.ggml.merges", GgufType::String, -1);
    if (!merges) return merges.status();
    if (merges.value()) v.merges = merges.value()->strings;
    KVS_RETURN_IF_ERROR(gguf_token_id(f, "tokenizer.ggml.bos_token_id", n, v.bos_id));
    KVS_RETURN_IF_ERROR(gguf_token_id(f, "tokenizer.ggml.eos_token_id", n, v.eos_id));
    KVS_RETURN_IF_ERROR(gguf_token_id(f, "tokenizer.ggml.unknown_token_id", n, v.unk_id));
    KVS_RETURN_IF_ERROR(gguf_token_id(f, "tokenizer.ggml.padding_token_id", n, v.pad_id));
    KVS_RETURN_IF_ERROR(gguf_token_id(f, "tokenizer.ggml.eot_token_id", n, v.eot_id));
    if (v.eot_id < 0) v.eot_id = find_eot_token(v.tokens);
    // SentencePiece models add BOS and a space prefix unless the file says otherwise (as llama.cpp).
    const bool spm = v.model == "llama";
    auto add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
    if (!add_bos) return add_bos.status();
    v.add_bos = add_bos.value().value_or(spm);
    auto add_space = f.get_bool("tokenizer.ggml.add_space_prefix");
    if (!add_space) return add_space.status();
    v.add_space_prefix = add_space.value().value_or(spm);
    auto tmpl = f.get_string("tokenizer.chat_template");
    if (!tmpl) return tmpl.status();
    v.chat_template = tmpl.value().value_or("");
    return v;
}

namespace {

// A required (or defaulted) integer field of config.json within [lo, hi].
Status hf_int(const json& j, const std::string& path, const char* key, bool required, int64_t lo, int64_t hi,
              int& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (required) return Status::error(path + ": missing field '" + key + "' (expected an integer)");
        return Status::ok();
    }
    if (!it->is_number_integer()) return Status::error(path + ": field '" + key + "' is not an integer");
    const int64_t x = it->get<int64_t>();
    if (x < lo || x > hi)
        return Status::error(path + ": field '" + std::string(key) + "' = " + std::to_string(x) + " (expected " +
                             std::to_string(lo) + ".." + std::to_string(hi) + ")");
    out = static_cast<int>(x);
    return Status::ok();
}

Status hf_float(const json& j, const std::string& path, const char* key, float& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::ok();
    if (!it->is_number()) return Status::error(path + ": field '" + std::string(key) + "' is not a number");
    out = it->get<float>();
    return Status::ok();
}

}  // namespace

Result<ModelConfig> read_hf_config(const std::string& path) {
    auto parsed = read_json_object(path);
    if (!parsed) {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec))
            return Status::error(path + ": cannot open (a safetensors model folder needs config.json)");
        return parsed.status();
    }
    const json& j = *parsed;
    const auto mt = j.find("model_type");
    const std::string type = mt != j.end() && mt->is_string() ? mt->get<std::string>() : std::string();
    ModelConfig c;
    if (type == "llama" || type == "mistral") c.arch = "llama";
    else if (type == "qwen2")
        c.arch = "qwen2";
    else
        return Status::error(path + ": unsupported model_type '" + type + "' (supported: llama, mistral, qwen2)");
    KVS_RETURN_IF_ERROR(hf_int(j, path, "num_hidden_layers", true, 1, 4096, c.n_layer));
    KVS_RETURN_IF_ERROR(hf_int(j, path, "hidden_size", true, 1, kMaxDim, c.n_embd));
    KVS_RETURN_IF_ERROR(hf_int(j, path, "intermediate_size", true, 1, kMaxDim, c.n_ff));
    KVS_RETURN_IF_ERROR(hf_int(j, path, "num_attention_heads", true, 1, 4096, c.n_head));
    c.n_kv_head = c.n_head;
    KVS_RETURN_IF_ERROR(hf_int(j, path, "num_key_value_heads", false, 1, 4096, c.n_kv_head));
    c.head_dim = c.n_embd / c.n_head;
    KVS_RETURN_IF_ERROR(hf_int(j, path, "head_dim", false, 1, kMaxDim, c.head_dim));
    c.n_rot = c.head_dim;
    KVS_RETURN_IF_ERROR(hf_int(j, path, "vocab_size", true, 1, 1 << 24, c.n_vocab));
    c.n_ctx_train = 2048;
    KVS_RETURN_IF_ERROR(hf_int(j, path, "max_position_embeddings", false, 1, int64_t(1) << 30, c.n_ctx_train));
    c.rms_eps = 1e-6f;
    KVS_RETURN_IF_ERROR(hf_float(j, path, "rms_norm_eps", c.rms_eps));
    KVS_RETURN_IF_ERROR(hf_float(j, path, "rope_theta", c.rope_freq_base));
    auto tie = j.find("tie_word_embeddings");
    c.tied_embeddings = tie != j.end() && tie->is_boolean() && tie->get<bool>();
    // Hugging Face checkpoints keep Q/K unpermuted: rotate halves.
    c.rope_style = RopeStyle::Neox;
    if (auto rs = j.find("rope_scaling"); rs != j.end() && !rs->is_null()) c.rope_scaling = "rope_scaling";
    KVS_RETURN_IF_ERROR(validate_config(c, path));
    return c;
}

Status finish_hf_vocab(VocabData& v, int n_vocab, const std::string& path) {
    if (v.tokens.size() > static_cast<size_t>(n_vocab))
        return Status::error(path + ": the tokenizer has " + std::to_string(v.tokens.size()) +
                             " tokens, more than the model's vocab_size " + std::to_string(n_vocab));
    if (!v.token_types.empty()) v.token_types.resize(v.tokens.size(), TokenType::Normal);
    if (!v.scores.empty()) v.scores.resize(v.tokens.size(), 0.0f);
    for (size_t i = v.tokens.size(); i < static_cast<size_t>(n_vocab); ++i) {
        v.tokens.push_back("[PAD" + std::to_string(i) + "]");
        if (!v.token_types.empty()) v.token_types.push_back(TokenType::Unused);
        if (!v.scores.empty()) v.scores.push_back(-1e9f);
    }
    if (v.eot_id < 0) v.eot_id = find_eot_token(v.tokens);
    return Status::ok();
}

}  // namespace kvs
