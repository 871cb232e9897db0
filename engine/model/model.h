#pragma once
// A loaded Llama-family model: hyper-parameters, weight views (pointing into the
// memory-mapped file or loader-owned buffers) and the tokenizer's raw data.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/tokenizer/vocab_data.h"
#include "kernels/backend.h"

namespace kvs {

struct ModelConfig {
    std::string arch;  // "llama", "qwen2" or "gemma3"
    std::string name;  // general.name or the folder name
    int n_layer = 0;
    int n_embd = 0;
    int n_ff = 0;
    int n_head = 0;
    int n_kv_head = 0;
    int head_dim = 0;  // n_embd / n_head unless the file says otherwise
    int n_rot = 0;     // rotated dims per head (head_dim for these families)
    int n_vocab = 0;
    int n_ctx_train = 0;
    float rms_eps = 1e-5f;
    float rope_freq_base = 10000.0f;
    RopeStyle rope_style = RopeStyle::Normal;
    bool tied_embeddings = false;  // output head shares token_embd
    bool attn_bias = false;        // q/k/v projections have biases (qwen2)
    std::string rope_scaling;      // RoPE scaling the file asks for ("" none); not applied yet

    // ---- gemma3 (Gemma 3): the switches its forward needs beyond Llama's
    bool gemma = false;              // GeGLU (gelu_tanh) MLP, Q/K RMSNorm, post-attention / post-MLP norms
    float embd_scale = 1.0f;         // token embeddings are multiplied by it (gemma: sqrt(n_embd))
    float attn_scale = 0.0f;         // query scale; 0: 1/sqrt(head_dim)
    int sliding_window = 0;          // local layers attend to the last sliding_window positions; 0: none
    std::vector<uint8_t> layer_swa;  // [n_layer] 1 = local (sliding-window) layer; empty: all global
    float rope_freq_base_swa = 10000.0f;  // the local layers' RoPE base
    bool is_swa(int il) const { return il >= 0 && static_cast<size_t>(il) < layer_swa.size() && layer_swa[il]; }
    float rope_base(int il) const { return is_swa(il) ? rope_freq_base_swa : rope_freq_base; }
};

struct LayerWeights {
    const float* attn_norm = nullptr;  // [n_embd]
    WeightView wq;                     // [n_head*head_dim, n_embd]
    WeightView wk;                     // [n_kv_head*head_dim, n_embd]
    WeightView wv;                     // [n_kv_head*head_dim, n_embd]
    WeightView wo;                     // [n_embd, n_head*head_dim]
    const float* bq = nullptr;         // [n_head*head_dim] or null
    const float* bk = nullptr;         // [n_kv_head*head_dim] or null
    const float* bv = nullptr;         // [n_kv_head*head_dim] or null
    const float* ffn_norm = nullptr;   // [n_embd]
    WeightView w_gate;                 // [n_ff, n_embd]
    WeightView w_up;                   // [n_ff, n_embd]
    WeightView w_down;                 // [n_embd, n_ff]
    // gemma3 only (null elsewhere)
    const float* attn_q_norm = nullptr;     // [head_dim] RMSNorm of each query head
    const float* attn_k_norm = nullptr;     // [head_dim] RMSNorm of each key head
    const float* attn_post_norm = nullptr;  // [n_embd] on the attention output before the residual add
    const float* ffn_post_norm = nullptr;   // [n_embd] on the MLP output before the residual add
};

struct Model {
    ModelConfig config;
    WeightView token_embd;               // [n_vocab, n_embd]
    const float* output_norm = nullptr;  // [n_embd]
    WeightView output;                   // [n_vocab, n_embd] (== token_embd when tied)
    std::vector<LayerWeights> layers;    // [n_layer]
    VocabData vocab;

    std::string path;                         // file or folder it came from
    std::string format;                       // "gguf" or "safetensors"
    std::string file_type;                    // dominant weight type, e.g. "Q4_1"
    std::map<std::string, int> tensor_types;  // type name -> tensor count
    int64_t n_params = 0;
    int64_t weight_bytes = 0;  // bytes of all weight tensors as stored
    int64_t n_tensors = 0;

    // Things the file asks for that this engine loads but does not apply (e.g. RoPE
    // scaling); the CLI and GUI show them so nobody mistakes the output for exact.
    std::vector<std::string> warnings;

    std::shared_ptr<void> storage;  // keeps the mapping / owned buffers alive
};

// Loads a GGUF file or a Hugging Face safetensors folder (config.json,
// tokenizer.json, *.safetensors). Errors name the file, the field and what was expected.
Result<std::shared_ptr<Model>> load_model(const std::string& path);

}  // namespace kvs
