#pragma once
// Tiny random Llama / qwen2 / gemma3 models that tests generate themselves, as a GGUF file or a
// Hugging Face safetensors folder (config.json, *.safetensors, tokenizer.json,
// tokenizer_config.json). Same spec and seed -> the same weights in both formats (Q/K
// rows permuted for GGUF llama, as convert_hf_to_gguf.py does). The vocabulary is a
// usable byte-level BPE: specials <|endoftext|> <|im_start|> <|im_end|> (ids 0..2), the
// 256 byte tokens in GPT-2 byte-to-unicode form, then tokens learned by a small BPE
// training run over built-in English text; a ChatML chat template.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"
#include "kernels/dtype.h"

namespace kvs::test {

struct TinyModelSpec {
    std::string arch = "llama";  // "llama", "qwen2" (q/k/v biases) or "gemma3" (GGUF only: Q/K norms,
                                 // post-norms, GeGLU, NeoX RoPE, sliding-window local layers)
    int n_layer = 2;
    int n_embd = 64;
    int n_head = 4;
    int n_kv_head = 2;
    int n_ff = 128;
    int n_ctx_train = 512;
    int n_merges = 64;  // BPE merges learned (n_vocab = 259 + new tokens)
    float rms_eps = 1e-5f;
    float rope_freq_base = 10000.0f;
    float weight_std = 0.05f;        // matrices ~ N(0, std); norms ~ 1 + N(0, 0.1)
    DType weight_type = DType::F32;  // matrices; safetensors folders: F32, F16 or BF16
    std::optional<DType> embd_type;  // token_embd (and output); default weight_type
    bool tied = true;                // no output.weight / lm_head.weight
    uint32_t seed = 1;
    uint32_t gguf_version = 3;
    uint32_t gguf_alignment = 32;
    int n_shards = 1;  // safetensors: >1 writes model.safetensors.index.json
    int sliding_window = 0;  // gemma3: attention.sliding_window (0: not written, all layers global)
    int swa_pattern = 0;     // gemma3: attention.sliding_window_pattern (0: not written, llama.cpp's 6)
};

// A preset big enough that quantizing it (GPTQ / AWQ calibration above all) takes seconds,
// not milliseconds, so a test can signal a run while it is under way (Ctrl+C): 8 layers,
// n_embd 384, 6 heads (2 KV heads), n_ff 1024, a 2048-token context, F32 weights.
inline TinyModelSpec slow_to_quantize_spec() {
    TinyModelSpec s;
    s.n_layer = 8;
    s.n_embd = 384;
    s.n_head = 6;
    s.n_kv_head = 2;
    s.n_ff = 1024;
    s.n_ctx_train = 2048;
    return s;
}

// The default spec with heads of 32 instead of 16 (n_embd 128, 4 heads, 2 KV heads: kv_dim
// 64): the INT8 KV cache takes it (head_dim a multiple of its 32-value blocks), where it
// refuses the default spec's head_dim 16.
inline TinyModelSpec head_dim_32_spec() {
    TinyModelSpec s;
    s.n_embd = 128;
    s.n_head = 4;
    s.n_kv_head = 2;
    return s;
}

// The tiny vocabulary (tokens in id order) and merges ("a b", by priority).
struct TinyVocab {
    std::vector<std::string> tokens;
    std::vector<std::string> merges;
};
TinyVocab make_tiny_vocab(int n_merges);
inline const char* tiny_chat_template() {
    return "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
           "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
}

Status write_tiny_gguf(const std::string& path, const TinyModelSpec& spec);
// write_tiny_gguf, then load_model of that file.
Result<std::shared_ptr<Model>> write_and_load_tiny_gguf(const std::string& path, const TinyModelSpec& spec);
// Next-token logits [n_vocab] of model m after 8 fixed tokens (ids below 292) on `backend`
// (null: the scalar CPU backend); empty when the forward pass fails.
std::vector<float> last_logits(std::shared_ptr<Model> m, Backend* backend = nullptr);
Status write_tiny_safetensors_folder(const std::string& dir, const TinyModelSpec& spec);

}  // namespace kvs::test
