#pragma once
// A LoRA adapter in memory: for some of a Llama-family model's projections (q, k, v, o,
// gate, up, down) of some layers, the low-rank pair (A, B) whose product s * B * A is added
// to the frozen weight W (y = W x + s * B (A x)), kept unmerged so one base model serves
// many adapters at once (engine/lora/lora_apply.h runs them grouped per adapter).
//
// Loaded from a Hugging Face PEFT folder (adapter_config.json + adapter_model.safetensors)
// or a llama.cpp GGUF adapter (general.type = adapter, *.lora_a / *.lora_b), always against
// a base model: the architecture and every shape are checked, and B is laid out like the
// base's own rows (GGUF "llama" files permute Q/K rows for their RoPE; so does llama.cpp's
// convert_lora_to_gguf.py for B, and an adapter in the other layout is converted on load).
// Scale s = alpha / r (alpha / sqrt(r) with rsLoRA; llama.cpp: 1 when its alpha is 0)
// times a user scale.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model.h"

namespace kvs {

enum class LoraTarget { q, k, v, o, gate, up, down };
inline constexpr int kLoraTargets = 7;
// PEFT's module names: "q_proj", "k_proj", ... "down_proj".
const char* lora_target_name(LoraTarget t);
// The projection's [n_out, n_in] in a model of this shape.
std::pair<int, int> lora_target_shape(const ModelConfig& c, LoraTarget t);

// One projection's low-rank pair, in float.
struct LoraPair {
    int rank = 0;
    int n_in = 0;
    int n_out = 0;
    std::vector<float> a;  // [rank, n_in]
    std::vector<float> b;  // [n_out, rank] rows in the base model's row order
    float scale = 0;       // what multiplies B (A x): alpha / rank (or / sqrt(rank)) * user scale
    bool present() const { return rank > 0; }
};

// What an adapter was checked against; Engine::submit compares it with the engine's model.
struct LoraBaseShape {
    std::string arch;
    int n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
    RopeStyle rope_style = RopeStyle::Normal;  // Normal: Q/K rows in GGUF "llama" order
    bool operator==(const LoraBaseShape&) const = default;
};
LoraBaseShape lora_base_shape(const ModelConfig& c);

struct LoraAdapter {
    std::string name;    // what requests and the server call it
    std::string path;    // folder or file it came from
    std::string format;  // "peft" or "gguf"
    int rank = 0;        // the largest rank of its pairs (the config's r for PEFT)
    float alpha = 0;
    bool use_rslora = false;
    float user_scale = 1.0f;
    float scale = 0;                   // alpha / r (or / sqrt(r)) * user_scale of its rank-r pairs
    std::vector<std::string> targets;  // PEFT module names present, e.g. {"q_proj", "v_proj"}
    LoraBaseShape base;
    std::vector<std::array<LoraPair, kLoraTargets>> layers;  // [n_layer]
    uint64_t cache_salt = 0;  // hash of scale and every A, B: the prefix cache's key for this adapter
    int64_t n_params = 0;     // floats in every A and B

    const LoraPair& pair(int layer, LoraTarget t) const {
        return layers[static_cast<size_t>(layer)][static_cast<size_t>(t)];
    }
};

// Loads a PEFT folder (or its adapter_config.json) or a GGUF adapter file for `base`.
// user_scale multiplies the adapter's own scale. Errors name the file, the tensor or field
// and what was expected (rank mismatch, another architecture, missing or extra tensors,
// a truncated file, unsupported PEFT features such as DoRA or embedding adapters).
Result<std::shared_ptr<LoraAdapter>> load_lora_adapter(const std::string& path, const ModelConfig& base,
                                                       const std::string& name, float user_scale = 1.0f);

// Whether the adapter fits a model of this shape (the error says what differs).
Status check_lora_fits(const LoraAdapter& adapter, const ModelConfig& c);

// The two formats (peft_adapter.cpp, gguf_adapter.cpp); load_lora_adapter picks one.
Result<std::shared_ptr<LoraAdapter>> load_peft_adapter(const std::string& dir, const ModelConfig& base,
                                                       const std::string& name, float user_scale);
Result<std::shared_ptr<LoraAdapter>> load_gguf_adapter(const std::string& file, const ModelConfig& base,
                                                       const std::string& name, float user_scale);

// ---- shared by the two loaders (lora_adapter.cpp)
// Reorders B's rows between Hugging Face order and GGUF "llama" Q/K order (llama.cpp's
// permute: within each head, row j * head_dim/2 + i goes to 2 i + j); `to_gguf` false undoes it.
void lora_permute_rows(std::vector<float>& b, int n_out, int rank, int n_heads, bool to_gguf);
// Fills each pair's scale (from its own rank, as llama.cpp does), the adapter's scale, rank,
// targets, n_params and cache_salt from the pairs, alpha and user_scale; an adapter without
// any pair is an error.
Status finish_lora_adapter(LoraAdapter& a);

}  // namespace kvs
