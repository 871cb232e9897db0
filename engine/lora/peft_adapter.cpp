// Hugging Face PEFT LoRA folders: adapter_config.json (peft_type LORA, r, lora_alpha,
// target_modules, use_rslora, layers_to_transform) and adapter_model.safetensors with keys
// such as base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight ([r, n_in]) and
// ...lora_B.weight ([n_out, r]).
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "engine/lora/lora_adapter.h"
#include "engine/model/json_file.h"
#include "engine/model/safetensors_reader.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

using json = nlohmann::json;

namespace {

struct PeftConfig {
    int r = 0;
    double alpha = 0;
    bool rslora = false;
    std::set<std::string> targets;  // empty: target_modules is a regular expression
    std::set<int> layers;           // layers_to_transform; empty: every layer
};

Result<PeftConfig> read_peft_config(const std::string& file) {
    using R = Result<PeftConfig>;
    auto read = read_json_object(file);
    if (!read) return R::error("LoRA adapter: " + read.status().message());
    const json& j = *read;
    PeftConfig c;
    if (j.contains("peft_type") && j["peft_type"] != "LORA")
        return R::error(file + ": peft_type is " + j["peft_type"].dump() + ", only LORA adapters are supported");
    if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1 || j["r"].get<int64_t>() > 4096)
        return R::error(file + ": field r (the rank) must be an integer from 1 to 4096");
    c.r = j["r"].get<int>();
    if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number())
        return R::error(file + ": field lora_alpha must be a number");
    c.alpha = j["lora_alpha"].get<double>();
    if (j.contains("use_rslora") && !j["use_rslora"].is_null()) {
        if (!j["use_rslora"].is_boolean()) return R::error(file + ": field use_rslora must be true or false");
        c.rslora = j["use_rslora"].get<bool>();
    }
    auto flag = [&](const char* key) { return j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); };
    if (flag("use_dora")) return R::error(file + ": DoRA adapters (use_dora) are not supported");
    if (flag("fan_in_fan_out"))
        return R::error(file + ": fan_in_fan_out (GPT-2 style Conv1D weights) is not supported");
    for (const char* key : {"rank_pattern", "alpha_pattern"})
        if (j.contains(key) && j[key].is_object() && !j[key].empty())
            return R::error(file + ": per-module " + key + " is not supported");
    if (j.contains("modules_to_save") && j["modules_to_save"].is_array() && !j["modules_to_save"].empty())
        return R::error(file + ": modules_to_save (fully trained copies of " + j["modules_to_save"].dump() +
                        ") is not supported");
    const json& tm = j.contains("target_modules") ? j["target_modules"] : json();
    if (tm.is_array()) {
        for (const auto& m : tm) {
            if (!m.is_string()) return R::error(file + ": target_modules must list module names");
            c.targets.insert(m.get<std::string>());
        }
        if (c.targets.empty()) return R::error(file + ": target_modules is empty");
    } else if (!tm.is_string()) {
        return R::error(file + ": field target_modules must be a list of module names or a regular expression");
    }
    if (j.contains("layers_to_transform") && !j["layers_to_transform"].is_null()) {
        const json& l = j["layers_to_transform"];
        if (l.is_number_integer()) c.layers.insert(l.get<int>());
        else if (l.is_array())
            for (const auto& x : l) {
                if (!x.is_number_integer()) return R::error(file + ": layers_to_transform must list layer numbers");
                c.layers.insert(x.get<int>());
            }
        else
            return R::error(file + ": layers_to_transform must be a layer number or a list of them");
    }
    return c;
}

// "base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight" -> layer N, q, A.
struct PeftKey {
    int layer = -1;
    LoraTarget target = LoraTarget::q;
    bool is_a = true;
};
Result<PeftKey> parse_key(const std::string& name, const std::string& file) {
    static const std::regex re(
        R"(^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.lora_(A|B)\.weight$)");
    std::smatch m;
    if (!std::regex_match(name, m, re)) {
        if (name.find("lora_embedding") != std::string::npos || name.find("embed_tokens") != std::string::npos ||
            name.find("lm_head") != std::string::npos)
            return Result<PeftKey>::error(file + ": tensor " + name +
                                          " adapts the embedding or the output head, which is not supported "
                                          "(only the q/k/v/o/gate/up/down projections)");
        return Result<PeftKey>::error(file + ": unexpected tensor " + name +
                                      " (expected base_model.model.model.layers.N.{self_attn,mlp}.<proj>.lora_{A,B}."
                                      "weight of a Llama-family model)");
    }
    PeftKey k;
    k.layer = std::stoi(m[1].str());
    for (int t = 0; t < kLoraTargets; ++t)
        if (m[3].str() == lora_target_name(static_cast<LoraTarget>(t))) k.target = static_cast<LoraTarget>(t);
    const bool attn = k.target == LoraTarget::q || k.target == LoraTarget::k || k.target == LoraTarget::v ||
                      k.target == LoraTarget::o;
    if (attn != (m[2].str() == "self_attn"))
        return Result<PeftKey>::error(file + ": tensor " + name + " puts " + m[3].str() + " under " + m[2].str());
    k.is_a = m[4].str() == "A";
    return k;
}

Result<std::vector<float>> to_floats(const SafetensorsTensor& t, const std::string& file) {
    if (t.integer || t.shape.size() != 2)
        return Result<std::vector<float>>::error(file + ": tensor " + t.name +
                                                 " must be a 2-D F32, F16 or BF16 matrix, " + "it is " + t.dtype +
                                                 " with " + std::to_string(t.shape.size()) + " dimensions");
    std::vector<float> out(static_cast<size_t>(t.n_elements));
    cpu::dequantize_row(t.type, t.data, out.data(), t.n_elements);
    return out;
}

}  // namespace

Result<std::shared_ptr<LoraAdapter>> load_peft_adapter(const std::string& dir, const ModelConfig& base,
                                                       const std::string& name, float user_scale) {
    using R = Result<std::shared_ptr<LoraAdapter>>;
    const std::string cfg_file = dir + "/adapter_config.json";
    const std::string st_file = dir + "/adapter_model.safetensors";
    auto cfg = read_peft_config(cfg_file);
    if (!cfg) return cfg.status();
    std::set<std::string> known;
    for (int t = 0; t < kLoraTargets; ++t) known.insert(lora_target_name(static_cast<LoraTarget>(t)));
    for (const auto& m : cfg->targets)
        if (!known.count(m))
            return R::error(cfg_file + ": target module '" + m + "' is not a projection of a " + base.arch +
                            " model (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj): an adapter "
                            "for another architecture?");
    for (int l : cfg->layers)
        if (l < 0 || l >= base.n_layer)
            return R::error(cfg_file + ": layers_to_transform names layer " + std::to_string(l) + ", model " +
                            base.name + " has " + std::to_string(base.n_layer));
    auto set = SafetensorsSet::open_file(st_file);
    if (!set) return R::error("LoRA adapter: " + set.message());

    auto a = std::make_shared<LoraAdapter>();
    a->name = name;
    a->path = dir;
    a->format = "peft";
    a->alpha = static_cast<float>(cfg->alpha);
    a->use_rslora = cfg->rslora;
    a->user_scale = user_scale;
    a->base = lora_base_shape(base);
    a->layers.resize(static_cast<size_t>(base.n_layer));
    std::map<std::pair<int, int>, int> halves;  // (layer, target) -> 1 A, 2 B, 3 both
    for (const auto& [tname, t] : (*set)->tensors()) {
        auto key = parse_key(tname, st_file);
        if (!key) return key.status();
        if (key->layer >= base.n_layer)
            return R::error(st_file + ": tensor " + tname + " is for layer " + std::to_string(key->layer) + ", model " +
                            base.name + " has " + std::to_string(base.n_layer) + " layers");
        const char* module = lora_target_name(key->target);
        if (!cfg->targets.empty() && !cfg->targets.count(module))
            return R::error(st_file + ": tensor " + tname + " adapts " + module +
                            ", which adapter_config.json's target_modules does not list");
        auto [n_out, n_in] = lora_target_shape(base, key->target);
        const int64_t want0 = key->is_a ? cfg->r : n_out, want1 = key->is_a ? n_in : cfg->r;
        if (t.shape.size() != 2 || t.shape[0] != want0 || t.shape[1] != want1) {
            std::string got;
            for (int64_t d : t.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
            const bool rank_off = t.shape.size() == 2 && (key->is_a ? t.shape[1] == n_in && t.shape[0] != cfg->r
                                                                    : t.shape[0] == n_out && t.shape[1] != cfg->r);
            return R::error(st_file + ": tensor " + tname + " has shape [" + got + "], expected [" +
                            std::to_string(want0) + ", " + std::to_string(want1) + "]" +
                            (rank_off
                                 ? " (its rank differs from r = " + std::to_string(cfg->r) + " in adapter_config.json)"
                                 : " (an adapter for another base model?)"));
        }
        auto floats = to_floats(t, st_file);
        if (!floats) return floats.status();
        LoraPair& p = a->layers[static_cast<size_t>(key->layer)][static_cast<size_t>(key->target)];
        p.rank = cfg->r;
        p.n_in = n_in;
        p.n_out = n_out;
        (key->is_a ? p.a : p.b) = std::move(floats.value());
        halves[{key->layer, static_cast<int>(key->target)}] |= key->is_a ? 1 : 2;
    }
    // Every target module of every adapted layer needs both halves.
    for (int l = 0; l < base.n_layer; ++l) {
        if (!cfg->layers.empty() && !cfg->layers.count(l)) continue;
        for (int t = 0; t < kLoraTargets; ++t) {
            const char* module = lora_target_name(static_cast<LoraTarget>(t));
            const int have = halves.count({l, t}) ? halves[{l, t}] : 0;
            const bool wanted = cfg->targets.count(module) > 0;
            if ((wanted && have != 3) || (have != 0 && have != 3)) {
                const std::string attn = t <= static_cast<int>(LoraTarget::o) ? "self_attn" : "mlp";
                return R::error(st_file + ": missing tensor base_model.model.model.layers." + std::to_string(l) + "." +
                                attn + "." + module + ".lora_" + ((have & 1) ? "B" : "A") + ".weight");
            }
        }
    }
    // B rows follow the base's layout: GGUF llama files hold Q/K permuted for their RoPE.
    if (base.arch == "llama" && base.rope_style == RopeStyle::Normal)
        for (auto& layer : a->layers) {
            LoraPair& q = layer[static_cast<size_t>(LoraTarget::q)];
            LoraPair& k = layer[static_cast<size_t>(LoraTarget::k)];
            if (q.present()) lora_permute_rows(q.b, q.n_out, q.rank, base.n_head, true);
            if (k.present()) lora_permute_rows(k.b, k.n_out, k.rank, base.n_kv_head, true);
        }
    KVS_RETURN_IF_ERROR(finish_lora_adapter(*a));
    return a;
}

}  // namespace kvs
