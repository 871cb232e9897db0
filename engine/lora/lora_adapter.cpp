#include "engine/lora/lora_adapter.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace kvs {

const char* lora_target_name(LoraTarget t) {
    switch (t) {
        case LoraTarget::q: return "q_proj";
        case LoraTarget::k: return "k_proj";
        case LoraTarget::v: return "v_proj";
        case LoraTarget::o: return "o_proj";
        case LoraTarget::gate: return "gate_proj";
        case LoraTarget::up: return "up_proj";
        case LoraTarget::down: return "down_proj";
    }
    return "?";
}

std::pair<int, int> lora_target_shape(const ModelConfig& c, LoraTarget t) {
    const int q_dim = c.n_head * c.head_dim, kv_dim = c.n_kv_head * c.head_dim;
    switch (t) {
        case LoraTarget::q: return {q_dim, c.n_embd};
        case LoraTarget::k: return {kv_dim, c.n_embd};
        case LoraTarget::v: return {kv_dim, c.n_embd};
        case LoraTarget::o: return {c.n_embd, q_dim};
        case LoraTarget::gate: return {c.n_ff, c.n_embd};
        case LoraTarget::up: return {c.n_ff, c.n_embd};
        case LoraTarget::down: return {c.n_embd, c.n_ff};
    }
    return {0, 0};
}

LoraBaseShape lora_base_shape(const ModelConfig& c) {
    LoraBaseShape s;
    s.arch = c.arch;
    s.n_layer = c.n_layer;
    s.n_embd = c.n_embd;
    s.n_ff = c.n_ff;
    s.n_head = c.n_head;
    s.n_kv_head = c.n_kv_head;
    s.head_dim = c.head_dim;
    s.rope_style = c.rope_style;
    return s;
}

void lora_permute_rows(std::vector<float>& b, int n_out, int rank, int n_heads, bool to_gguf) {
    if (n_heads < 1 || n_out % (2 * n_heads) != 0) return;
    const int hd = n_out / n_heads, half = hd / 2;
    std::vector<float> out(b.size());
    for (int h = 0; h < n_heads; ++h)
        for (int j = 0; j < 2; ++j)
            for (int i = 0; i < half; ++i) {
                const int hf = h * hd + j * half + i;  // Hugging Face row
                const int gg = h * hd + 2 * i + j;     // GGUF llama row
                const int src = to_gguf ? hf : gg, dst = to_gguf ? gg : hf;
                std::copy_n(b.begin() + static_cast<ptrdiff_t>(src) * rank, rank,
                            out.begin() + static_cast<ptrdiff_t>(dst) * rank);
            }
    b = std::move(out);
}

Status finish_lora_adapter(LoraAdapter& a) {
    a.targets.clear();
    a.n_params = 0;
    a.rank = 0;
    std::array<bool, kLoraTargets> seen{};
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    for (size_t il = 0; il < a.layers.size(); ++il)
        for (int t = 0; t < kLoraTargets; ++t) {
            LoraPair& p = a.layers[il][static_cast<size_t>(t)];
            if (!p.present()) continue;
            const double base = a.alpha == 0 && a.format == "gguf"
                                    ? 1.0
                                    : a.alpha / (a.use_rslora ? std::sqrt(static_cast<double>(p.rank)) : p.rank);
            p.scale = static_cast<float>(base * a.user_scale);
            seen[static_cast<size_t>(t)] = true;
            a.rank = std::max(a.rank, p.rank);
            a.n_params += static_cast<int64_t>(p.a.size() + p.b.size());
            const int32_t head[3] = {static_cast<int32_t>(il), t, p.rank};
            XXH3_64bits_update(st, head, sizeof head);
            XXH3_64bits_update(st, &p.scale, sizeof p.scale);
            XXH3_64bits_update(st, p.a.data(), p.a.size() * sizeof(float));
            XXH3_64bits_update(st, p.b.data(), p.b.size() * sizeof(float));
        }
    a.cache_salt = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    if (a.n_params == 0) return Status::error("LoRA adapter " + a.path + ": it has no LoRA tensor pair at all");
    for (int t = 0; t < kLoraTargets; ++t)
        if (seen[static_cast<size_t>(t)]) a.targets.push_back(lora_target_name(static_cast<LoraTarget>(t)));
    const double base = a.alpha == 0 && a.format == "gguf"
                            ? 1.0
                            : a.alpha / (a.use_rslora ? std::sqrt(static_cast<double>(a.rank)) : a.rank);
    a.scale = static_cast<float>(base * a.user_scale);
    return Status::ok();
}

Status check_lora_fits(const LoraAdapter& adapter, const ModelConfig& c) {
    const LoraBaseShape want = lora_base_shape(c);
    if (adapter.base == want) return Status::ok();
    const LoraBaseShape& h = adapter.base;
    return Status::error("LoRA adapter '" + adapter.name + "' was loaded for a " + h.arch + " model of " +
                         std::to_string(h.n_layer) + " layers, width " + std::to_string(h.n_embd) + ", " +
                         std::to_string(h.n_head) + "/" + std::to_string(h.n_kv_head) + " heads" + ", not for model " +
                         c.name + " (" + want.arch + ", " + std::to_string(want.n_layer) + " layers, width " +
                         std::to_string(want.n_embd) + ", " + std::to_string(want.n_head) + "/" +
                         std::to_string(want.n_kv_head) + " heads" +
                         (h.rope_style != want.rope_style ? ", another Q/K row order" : "") + ")");
}

Result<std::shared_ptr<LoraAdapter>> load_lora_adapter(const std::string& path, const ModelConfig& base,
                                                       const std::string& name, float user_scale) {
    using R = Result<std::shared_ptr<LoraAdapter>>;
    namespace fs = std::filesystem;
    if (!std::isfinite(user_scale)) return R::error("LoRA adapter " + path + ": the scale is not a finite number");
    if (base.arch != "llama" && base.arch != "qwen2")
        return R::error("LoRA adapters need a llama or qwen2 base model, " + base.name + " is " + base.arch);
    std::error_code ec;
    fs::path p(path);
    if (fs::is_directory(p, ec)) return load_peft_adapter(path, base, name, user_scale);
    if (!fs::exists(p, ec)) return R::error("LoRA adapter " + path + ": no such file or folder");
    if (p.filename() == "adapter_config.json" || p.filename() == "adapter_model.safetensors")
        return load_peft_adapter(p.parent_path().string(), base, name, user_scale);
    return load_gguf_adapter(path, base, name, user_scale);
}

}  // namespace kvs
