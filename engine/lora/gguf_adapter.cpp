// llama.cpp GGUF LoRA adapters (convert_lora_to_gguf.py): general.type = "adapter",
// adapter.type = "lora", adapter.lora.alpha, general.architecture = the base's; tensors
// "<base tensor>.lora_a" with ne [n_in, r] and ".lora_b" with ne [r, n_out], B's Q/K rows
// permuted like the base GGUF's for "llama".
#include <map>

#include "engine/lora/lora_adapter.h"
#include "engine/model/gguf_reader.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace {

const char* gguf_target_name(LoraTarget t) {
    switch (t) {
        case LoraTarget::q: return "attn_q";
        case LoraTarget::k: return "attn_k";
        case LoraTarget::v: return "attn_v";
        case LoraTarget::o: return "attn_output";
        case LoraTarget::gate: return "ffn_gate";
        case LoraTarget::up: return "ffn_up";
        case LoraTarget::down: return "ffn_down";
    }
    return "?";
}

// "blk.N.attn_q.weight.lora_a" -> (N, q, a); false when the name is not of that form.
bool parse_name(const std::string& name, int* layer, LoraTarget* target, bool* is_a) {
    const std::string sa = ".weight.lora_a", sb = ".weight.lora_b";
    if (name.rfind("blk.", 0) != 0 || name.size() < sa.size() + 5) return false;
    const std::string tail = name.substr(name.size() - sa.size());
    if (tail != sa && tail != sb) return false;
    *is_a = tail == sa;
    const std::string mid = name.substr(4, name.size() - sa.size() - 4);  // "N.attn_q"
    const size_t dot = mid.find('.');
    if (dot == std::string::npos || dot == 0 || dot > 6) return false;
    for (size_t i = 0; i < dot; ++i)
        if (mid[i] < '0' || mid[i] > '9') return false;
    *layer = std::stoi(mid.substr(0, dot));
    const std::string proj = mid.substr(dot + 1);
    for (int t = 0; t < kLoraTargets; ++t)
        if (proj == gguf_target_name(static_cast<LoraTarget>(t))) {
            *target = static_cast<LoraTarget>(t);
            return true;
        }
    return false;
}

}  // namespace

Result<std::shared_ptr<LoraAdapter>> load_gguf_adapter(const std::string& file, const ModelConfig& base,
                                                       const std::string& name, float user_scale) {
    using R = Result<std::shared_ptr<LoraAdapter>>;
    auto g = GgufFile::open(file);
    if (!g) return R::error("LoRA adapter: " + g.message());
    const GgufFile& f = **g;
    auto type = f.get_string("general.type");
    if (!type) return R::error(file + ": " + type.message());
    if (!type->has_value() || **type != "adapter")
        return R::error(file + ": not a LoRA adapter (general.type is " +
                        (type->has_value() ? "'" + **type + "'" : std::string("missing")) + ", expected 'adapter')");
    auto atype = f.get_string("adapter.type");
    if (!atype) return R::error(file + ": " + atype.message());
    if (atype->has_value() && **atype != "lora")
        return R::error(file + ": adapter.type is '" + **atype + "', only 'lora' adapters are supported");
    auto arch = f.get_string("general.architecture");
    if (!arch) return R::error(file + ": " + arch.message());
    if (!arch->has_value()) return R::error(file + ": general.architecture is missing");
    if (**arch != base.arch)
        return R::error(file + ": the adapter is for a " + **arch + " model, model " + base.name + " is " + base.arch);
    auto alpha = f.get_double("adapter.lora.alpha");
    if (!alpha) return R::error(file + ": " + alpha.message());

    auto a = std::make_shared<LoraAdapter>();
    a->name = name;
    a->path = file;
    a->format = "gguf";
    a->alpha = alpha->has_value() ? static_cast<float>(**alpha) : 0.0f;
    a->user_scale = user_scale;
    a->base = lora_base_shape(base);
    a->layers.resize(static_cast<size_t>(base.n_layer));
    std::map<std::pair<int, int>, const GgufTensorInfo*> half_a, half_b;
    for (const GgufTensorInfo& t : f.tensors()) {
        int layer = 0;
        LoraTarget target = LoraTarget::q;
        bool is_a = true;
        if (!parse_name(t.name, &layer, &target, &is_a))
            return R::error(file + ": unexpected tensor " + t.name +
                            " (expected blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight."
                            "lora_a / .lora_b)");
        if (layer >= base.n_layer)
            return R::error(file + ": tensor " + t.name + " is for layer " + std::to_string(layer) + ", model " +
                            base.name + " has " + std::to_string(base.n_layer) + " layers");
        (is_a ? half_a : half_b)[{layer, static_cast<int>(target)}] = &t;
    }
    for (const auto* m : {&half_a, &half_b})
        for (const auto& [key, t] : *m)
            if (!half_a.count(key) || !half_b.count(key)) {
                const std::string base_name =
                    "blk." + std::to_string(key.first) + "." + gguf_target_name(static_cast<LoraTarget>(key.second));
                return R::error(file + ": missing tensor " + base_name + ".weight.lora_" +
                                (half_a.count(key) ? "b" : "a") + " (each LoRA pair needs both halves)");
            }
    for (const auto& [key, ta] : half_a) {
        const GgufTensorInfo* tb = half_b.at(key);
        const auto target = static_cast<LoraTarget>(key.second);
        auto [n_out, n_in] = lora_target_shape(base, target);
        if (ta->ne.size() != 2 || tb->ne.size() != 2 || ta->ne[0] != n_in || tb->ne[1] != n_out)
            return R::error(file + ": tensors " + ta->name + " / " + tb->name + " do not fit " + base.name +
                            "'s projection of [" + std::to_string(n_out) + ", " + std::to_string(n_in) +
                            "] (lora_a must be ne [" + std::to_string(n_in) + ", r], lora_b ne [r, " +
                            std::to_string(n_out) + "]): an adapter for another base model?");
        if (ta->ne[1] != tb->ne[0])
            return R::error(file + ": rank mismatch: " + ta->name + " has rank " + std::to_string(ta->ne[1]) + ", " +
                            tb->name + " rank " + std::to_string(tb->ne[0]));
        if (ta->ne[1] < 1 || ta->ne[1] > 4096)
            return R::error(file + ": tensor " + ta->name + " has rank " + std::to_string(ta->ne[1]) +
                            " (expected 1 to 4096)");
        LoraPair& p = a->layers[static_cast<size_t>(key.first)][static_cast<size_t>(key.second)];
        p.rank = static_cast<int>(ta->ne[1]);
        p.n_in = n_in;
        p.n_out = n_out;
        p.a.resize(static_cast<size_t>(ta->n_elements));
        p.b.resize(static_cast<size_t>(tb->n_elements));
        cpu::dequantize_row(ta->type, ta->data, p.a.data(), ta->n_elements);
        cpu::dequantize_row(tb->type, tb->data, p.b.data(), tb->n_elements);
        // convert_lora_to_gguf.py permutes B's Q/K rows for "llama"; a base that is not in
        // that order (a Hugging Face folder) gets them back in Hugging Face order.
        if (base.arch == "llama" && base.rope_style != RopeStyle::Normal) {
            if (target == LoraTarget::q) lora_permute_rows(p.b, n_out, p.rank, base.n_head, false);
            if (target == LoraTarget::k) lora_permute_rows(p.b, n_out, p.rank, base.n_kv_head, false);
        }
    }
    KVS_RETURN_IF_ERROR(finish_lora_adapter(*a));
    return a;
}

}  // namespace kvs
