#include "tests/support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/llama_forward.h"
#include "engine/tokenizer/vocab_data.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* kCorpus =
    "the quick brown fox jumps over the lazy dog. the dog sleeps in the sun and the fox runs into the woods. "
    "hello world! this is a tiny model for testing the whole pipeline: tokenize, forward, sample and "
    "detokenize. there are 3 cats and 12 dogs in the house; they are the best of friends. what is the time? "
    "it is 10 past 4 in the afternoon. the weather is nice and the sky is blue. we write tests that can fail "
    "and we read them with care. the model reads the text and then it writes the next word.";

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest to U+0100 + k.
std::vector<std::string> byte_to_unicode() {
    std::vector<int> cps(256, -1);
    auto keep = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 256;
    for (int b = 0; b < 256; ++b) cps[b] = keep(b) ? b : next++;
    std::vector<std::string> out(256);
    for (int b = 0; b < 256; ++b) {
        const int cp = cps[b];
        std::string s;
        if (cp < 0x80) {
            s += static_cast<char>(cp);
        } else {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        out[b] = s;
    }
    return out;
}

// Words as symbol sequences in byte-to-unicode form; words after the first carry their space.
std::vector<std::vector<std::string>> corpus_words() {
    const auto b2u = byte_to_unicode();
    std::vector<std::vector<std::string>> words;
    std::string text = kCorpus;
    size_t i = 0;
    while (i < text.size()) {
        size_t j = text.find(' ', i + 1);
        if (j == std::string::npos) j = text.size();
        std::vector<std::string> w;
        for (size_t k = i; k < j; ++k) w.push_back(b2u[static_cast<unsigned char>(text[k])]);
        words.push_back(std::move(w));
        i = j;
    }
    return words;
}

// A splitmix64 stream with Box-Muller normals: the same numbers on every platform.
class Rng {
public:
    explicit Rng(uint64_t seed) : m_state(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
    uint64_t next() {
        uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) / 9007199254740992.0; }  // (0, 1)
    float normal() {
        const double u1 = uniform(), u2 = uniform();
        return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }

private:
    uint64_t m_state;
};

struct GenTensor {
    std::string hf_name, gguf_name;
    std::vector<int64_t> shape;  // PyTorch order: [n_out, n_in] or [n]
    std::vector<float> values;   // [n_out * n_in] row-major
    bool matrix = false;
    bool embd = false;      // token_embd / output
    int permute_heads = 0;  // GGUF llama Q/K: heads to permute rows over (0: none)
};

float round_to(DType t, float x) {
    if (t == DType::F16) return cpu::fp16_to_fp32(cpu::fp32_to_fp16(x));
    if (t == DType::BF16) return cpu::bf16_to_fp32(cpu::fp32_to_bf16(x));
    return x;
}

Status check_spec(const TinyModelSpec& s) {
    if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "gemma3")
        return Status::error("tiny model: arch must be llama, qwen2 or gemma3");
    if (s.n_layer <= 0 || s.n_embd <= 0 || s.n_head <= 0 || s.n_kv_head <= 0 || s.n_ff <= 0 ||
        s.n_embd % s.n_head != 0 || s.n_head % s.n_kv_head != 0 || (s.n_embd / s.n_head) % 2 != 0)
        return Status::error("tiny model: inconsistent sizes");
    for (DType t : {s.weight_type, s.embd_type.value_or(s.weight_type)}) {
        const auto& info = dtype_info(t);
        if (!info.weight_type || s.n_embd % info.block_size != 0 || s.n_ff % info.block_size != 0)
            return Status::error("tiny model: n_embd and n_ff must be multiples of the " + std::string(info.name) +
                                 " block size " + std::to_string(info.block_size));
    }
    return Status::ok();
}

// Every tensor of the model, HF layout, values already rounded to what both formats store.
std::vector<GenTensor> make_tensors(const TinyModelSpec& s, int n_vocab) {
    Rng rng(s.seed);
    const DType float_type = dtype_info(s.weight_type).block_size == 1 ? s.weight_type : DType::F32;
    const int64_t hd = s.n_embd / s.n_head, q_dim = s.n_head * hd, kv_dim = s.n_kv_head * hd;
    std::vector<GenTensor> out;
    auto add = [&](std::string hf, std::string gg, std::vector<int64_t> shape, bool matrix, float mean, float std_) {
        GenTensor t{std::move(hf), std::move(gg), std::move(shape), {}, matrix, false, 0};
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        t.values.resize(static_cast<size_t>(n));
        for (float& v : t.values) v = round_to(float_type, mean + std_ * rng.normal());
        out.push_back(std::move(t));
        return &out.back();
    };
    add("model.embed_tokens.weight", "token_embd.weight", {n_vocab, s.n_embd}, true, 0.0f, s.weight_std)->embd = true;
    add("model.norm.weight", "output_norm.weight", {s.n_embd}, false, 1.0f, 0.1f);
    if (!s.tied) add("lm_head.weight", "output.weight", {n_vocab, s.n_embd}, true, 0.0f, s.weight_std)->embd = true;
    const bool llama = s.arch == "llama";
    for (int il = 0; il < s.n_layer; ++il) {
        const std::string hf = "model.layers." + std::to_string(il), gg = "blk." + std::to_string(il);
        add(hf + ".input_layernorm.weight", gg + ".attn_norm.weight", {s.n_embd}, false, 1.0f, 0.1f);
        add(hf + ".self_attn.q_proj.weight", gg + ".attn_q.weight", {q_dim, s.n_embd}, true, 0.0f, s.weight_std)
            ->permute_heads = llama ? s.n_head : 0;
        add(hf + ".self_attn.k_proj.weight", gg + ".attn_k.weight", {kv_dim, s.n_embd}, true, 0.0f, s.weight_std)
            ->permute_heads = llama ? s.n_kv_head : 0;
        add(hf + ".self_attn.v_proj.weight", gg + ".attn_v.weight", {kv_dim, s.n_embd}, true, 0.0f, s.weight_std);
        if (s.arch == "qwen2") {
            add(hf + ".self_attn.q_proj.bias", gg + ".attn_q.bias", {q_dim}, false, 0.0f, 0.02f);
            add(hf + ".self_attn.k_proj.bias", gg + ".attn_k.bias", {kv_dim}, false, 0.0f, 0.02f);
            add(hf + ".self_attn.v_proj.bias", gg + ".attn_v.bias", {kv_dim}, false, 0.0f, 0.02f);
        }
        add(hf + ".self_attn.o_proj.weight", gg + ".attn_output.weight", {s.n_embd, q_dim}, true, 0.0f, s.weight_std);
        add(hf + ".post_attention_layernorm.weight", gg + ".ffn_norm.weight", {s.n_embd}, false, 1.0f, 0.1f);
        add(hf + ".mlp.gate_proj.weight", gg + ".ffn_gate.weight", {s.n_ff, s.n_embd}, true, 0.0f, s.weight_std);
        add(hf + ".mlp.up_proj.weight", gg + ".ffn_up.weight", {s.n_ff, s.n_embd}, true, 0.0f, s.weight_std);
        add(hf + ".mlp.down_proj.weight", gg + ".ffn_down.weight", {s.n_embd, s.n_ff}, true, 0.0f, s.weight_std);
        if (s.arch == "gemma3") {  // norms as the GGUF stores them (the converter's +1 folded in)
            add(hf + ".self_attn.q_norm.weight", gg + ".attn_q_norm.weight", {hd}, false, 1.0f, 0.1f);
            add(hf + ".self_attn.k_norm.weight", gg + ".attn_k_norm.weight", {hd}, false, 1.0f, 0.1f);
            add(hf + ".post_attention_layernorm.weight", gg + ".post_attention_norm.weight", {s.n_embd}, false, 1.0f,
                0.1f);
            add(hf + ".post_feedforward_layernorm.weight", gg + ".post_ffw_norm.weight", {s.n_embd}, false, 1.0f,
                0.1f);
        }
    }
    return out;
}

// convert_hf_to_gguf.py's permute(): within each head, row j*hd/2 + i moves to 2*i + j.
std::vector<float> permute_rows(const GenTensor& t) {
    const int64_t n_out = t.shape[0], n_in = t.shape[1], hd = n_out / t.permute_heads;
    std::vector<float> out(t.values.size());  // [n_out, n_in]
    for (int64_t h = 0; h < t.permute_heads; ++h)
        for (int64_t i = 0; i < hd / 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
                std::memcpy(&out[static_cast<size_t>((h * hd + 2 * i + j) * n_in)],
                            &t.values[static_cast<size_t>((h * hd + j * hd / 2 + i) * n_in)],
                            static_cast<size_t>(n_in) * sizeof(float));
    return out;
}

// n rows of values converted to type t, row by row.
std::vector<uint8_t> encode(DType t, const std::vector<float>& values, int64_t n_in) {
    const int64_t n_rows = static_cast<int64_t>(values.size()) / n_in;
    const size_t rb = row_bytes(t, n_in);
    std::vector<uint8_t> out(rb * static_cast<size_t>(n_rows));  // [n_rows, rb]
    for (int64_t r = 0; r < n_rows; ++r)
        cpu::quantize_row(t, &values[static_cast<size_t>(r * n_in)], &out[r * rb], n_in);
    return out;
}

Status write_text(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
    out.close();
    if (!out) return Status::error(p.string() + ": cannot write");
    return Status::ok();
}

}  // namespace

TinyVocab make_tiny_vocab(int n_merges) {
    TinyVocab v;
    v.tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (const auto& s : byte_to_unicode()) v.tokens.push_back(s);
    auto words = corpus_words();
    for (int m = 0; m < n_merges; ++m) {
        std::map<std::pair<std::string, std::string>, int> counts;
        for (const auto& w : words)
            for (size_t i = 0; i + 1 < w.size(); ++i) counts[{w[i], w[i + 1]}] += 1;
        if (counts.empty()) break;
        // Most frequent pair; ties go to the smallest pair (std::map order): deterministic.
        auto best = counts.begin();
        for (auto it = counts.begin(); it != counts.end(); ++it)
            if (it->second > best->second) best = it;
        const auto [a, b] = best->first;
        v.merges.push_back(a + " " + b);
        if (std::find(v.tokens.begin(), v.tokens.end(), a + b) == v.tokens.end()) v.tokens.push_back(a + b);
        for (auto& w : words) {
            std::vector<std::string> merged;
            for (size_t i = 0; i < w.size(); ++i) {
                if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
                    merged.push_back(a + b);
                    ++i;
                } else {
                    merged.push_back(w[i]);
                }
            }
            w = std::move(merged);
        }
    }
    return v;
}

Status write_tiny_gguf(const std::string& path, const TinyModelSpec& s) {
    KVS_RETURN_IF_ERROR(check_spec(s));
    const TinyVocab vocab = make_tiny_vocab(s.n_merges);
    const int n_vocab = static_cast<int>(vocab.tokens.size());
    GgufWriter w(s.gguf_version);
    if (s.gguf_alignment != 32) w.set_alignment(s.gguf_alignment);
    const std::string a = s.arch + ".";
    w.set_string("general.architecture", s.arch);
    w.set_string("general.name", "tiny-" + s.arch);
    w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
    w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx_train));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv_head));
    w.set_f32(a + "rope.freq_base", s.rope_freq_base);
    w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.n_embd / s.n_head));
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
    if (s.arch == "gemma3" && s.sliding_window > 0) {
        w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
        if (s.swa_pattern > 0) w.set_u32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(s.swa_pattern));
    }
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "smollm");
    w.set("tokenizer.ggml.tokens", GgufValue::array_of(vocab.tokens));
    std::vector<int32_t> types(vocab.tokens.size(), static_cast<int32_t>(TokenType::Normal));
    for (int i = 0; i < 3; ++i) types[i] = static_cast<int32_t>(TokenType::Control);
    w.set("tokenizer.ggml.token_type", GgufValue::array_of(types));
    w.set("tokenizer.ggml.merges", GgufValue::array_of(vocab.merges));
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
    w.set_u32("tokenizer.ggml.padding_token_id", 2);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
    w.set_string("tokenizer.chat_template", tiny_chat_template());
    for (const GenTensor& t : make_tensors(s, n_vocab)) {
        const DType type = !t.matrix ? DType::F32 : t.embd ? s.embd_type.value_or(s.weight_type) : s.weight_type;
        const int64_t n_in = t.shape.back();
        const auto bytes = encode(type, t.permute_heads ? permute_rows(t) : t.values, n_in);
        std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
        w.add_tensor(t.gguf_name, type, std::move(ne), bytes.data(), bytes.size());
    }
    return w.write(path);
}

namespace {

const char* safetensors_dtype(DType t) { return t == DType::F16 ? "F16" : t == DType::BF16 ? "BF16" : "F32"; }

// One .safetensors file: 8-byte header length, JSON header padded to 8 bytes, data.
Status write_safetensors(const fs::path& p, const std::vector<const GenTensor*>& tensors, DType type) {
    json header = json::object();
    std::vector<uint8_t> data;
    for (const GenTensor* t : tensors) {
        const auto bytes = encode(type, t->values, t->shape.back());
        header[t->hf_name] = {{"dtype", safetensors_dtype(type)},
                              {"shape", t->shape},
                              {"data_offsets", {data.size(), data.size() + bytes.size()}}};
        data.insert(data.end(), bytes.begin(), bytes.end());
    }
    header["__metadata__"] = {{"format", "pt"}};
    std::string h = header.dump();
    h.resize((h.size() + 7) / 8 * 8, ' ');
    const uint64_t n = h.size();
    std::string file(reinterpret_cast<const char*>(&n), 8);
    file += h;
    file.append(reinterpret_cast<const char*>(data.data()), data.size());
    return write_text(p, file);
}

json tokenizer_json(const TinyVocab& v) {
    json added = json::array();
    for (int i = 0; i < 3; ++i)
        added.push_back({{"id", i},
                         {"content", v.tokens[i]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    json vocab = json::object();
    for (size_t i = 0; i < v.tokens.size(); ++i) vocab[v.tokens[i]] = i;
    json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    return {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", added},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}}},
        {"post_processor", nullptr},
        {"decoder", byte_level},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"vocab", vocab},
          {"merges", v.merges}}}};
}

}  // namespace

Status write_tiny_safetensors_folder(const std::string& dir, const TinyModelSpec& s) {
    if (s.arch == "gemma3") return Status::error("tiny model: gemma3 is written as GGUF only");
    KVS_RETURN_IF_ERROR(check_spec(s));
    const DType type = s.weight_type;
    if (type != DType::F32 && type != DType::F16 && type != DType::BF16)
        return Status::error("tiny model: safetensors folders hold F32, F16 or BF16 weights, not " +
                             std::string(dtype_name(type)));
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::error(dir + ": cannot create folder: " + ec.message());
    const TinyVocab vocab = make_tiny_vocab(s.n_merges);
    const int n_vocab = static_cast<int>(vocab.tokens.size());
    const auto tensors = make_tensors(s, n_vocab);
    const int n_shards = std::max(1, s.n_shards);
    json weight_map = json::object();
    for (int k = 0; k < n_shards; ++k) {
        const std::string name = n_shards == 1 ? "model.safetensors"
                                               : "model-0000" + std::to_string(k + 1) + "-of-0000" +
                                                     std::to_string(n_shards) + ".safetensors";
        std::vector<const GenTensor*> part;
        for (size_t i = static_cast<size_t>(k); i < tensors.size(); i += static_cast<size_t>(n_shards)) {
            part.push_back(&tensors[i]);
            weight_map[tensors[i].hf_name] = name;
        }
        KVS_RETURN_IF_ERROR(write_safetensors(fs::path(dir) / name, part, type));
    }
    if (n_shards > 1)
        KVS_RETURN_IF_ERROR(write_text(fs::path(dir) / "model.safetensors.index.json",
                                       json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2)));
    const bool llama = s.arch == "llama";
    json config = {{"architectures", {llama ? "LlamaForCausalLM" : "Qwen2ForCausalLM"}},
                   {"model_type", s.arch},
                   {"hidden_size", s.n_embd},
                   {"intermediate_size", s.n_ff},
                   {"num_hidden_layers", s.n_layer},
                   {"num_attention_heads", s.n_head},
                   {"num_key_value_heads", s.n_kv_head},
                   {"max_position_embeddings", s.n_ctx_train},
                   {"rms_norm_eps", s.rms_eps},
                   {"rope_theta", s.rope_freq_base},
                   {"vocab_size", n_vocab},
                   {"tie_word_embeddings", s.tied},
                   {"bos_token_id", 1},
                   {"eos_token_id", 2},
                   {"torch_dtype", type == DType::F32   ? "float32"
                                   : type == DType::F16 ? "float16"
                                                        : "bfloat16"}};
    KVS_RETURN_IF_ERROR(write_text(fs::path(dir) / "config.json", config.dump(2)));
    KVS_RETURN_IF_ERROR(write_text(fs::path(dir) / "tokenizer.json", tokenizer_json(vocab).dump(2)));
    json tok_config = {{"add_bos_token", false},           {"bos_token", "<|im_start|>"},
                       {"eos_token", "<|im_end|>"},        {"pad_token", "<|im_end|>"},
                       {"unk_token", "<|endoftext|>"},     {"chat_template", tiny_chat_template()},
                       {"model_max_length", s.n_ctx_train}};
    return write_text(fs::path(dir) / "tokenizer_config.json", tok_config.dump(2));
}

Result<std::shared_ptr<Model>> write_and_load_tiny_gguf(const std::string& path, const TinyModelSpec& spec) {
    KVS_RETURN_IF_ERROR(write_tiny_gguf(path, spec));
    return load_model(path);
}

std::vector<float> last_logits(std::shared_ptr<Model> m, Backend* backend) {
    std::unique_ptr<Backend> scalar;
    if (!backend) {
        scalar = make_cpu_backend(1, "scalar");
        backend = scalar.get();
    }
    KvTensors kv(*backend, m->config, 4, 16);
    auto fw = LlamaForward::create(m, *backend, kv, 8);
    if (!fw) return {};
    ForwardBatch b;
    b.tokens = {1, 120, 118, 291, 13, 119, 260, 35};
    for (int i = 0; i < 8; ++i) {
        b.positions.push_back(i);
        b.token_seq.push_back(0);
    }
    b.block_tables = {0, 1};
    b.n_seqs = 1;
    b.max_blocks_per_seq = 2;
    b.logit_rows = {7};
    std::vector<float> logits;  // [1, n_vocab]
    const Status s = (*fw)->forward(b, &logits);
    return s.is_ok() ? logits : std::vector<float>();
}

}  // namespace kvs::test
