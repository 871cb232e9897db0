#include "engine/runtime/weight_support.h"

#include <string>

namespace kvs {

Status check_weight_support(const Model& model, const Backend& backend) {
    auto check = [&](const WeightView& w, const std::string& what) {
        if (w.in_perm && !backend.supports_input_permutation())
            return Status::error(model.path + ": backend " + backend.name() + " cannot run " + what +
                                 ": its input columns are permuted (a GPTQ act-order checkpoint, desc_act with a "
                                 "permuted g_idx); use the CPU backend, which gathers the activations first");
        if (backend.supports(w.dtype)) return Status::ok();
        return Status::error(model.path + ": backend " + backend.name() + " cannot run weights of type " +
                             std::string(dtype_name(w.dtype)) + " (" + what + "); use a backend that supports " +
                             std::string(dtype_name(w.dtype)) + " (the CPU backend runs every weight type)");
    };
    KVS_RETURN_IF_ERROR(check(model.token_embd, "token_embd"));
    KVS_RETURN_IF_ERROR(check(model.output, "output"));
    for (size_t l = 0; l < model.layers.size(); ++l) {
        const LayerWeights& L = model.layers[l];
        const std::pair<const WeightView*, const char*> mats[] = {
            {&L.wq, "attn_q"},       {&L.wk, "attn_k"},   {&L.wv, "attn_v"},      {&L.wo, "attn_output"},
            {&L.w_gate, "ffn_gate"}, {&L.w_up, "ffn_up"}, {&L.w_down, "ffn_down"}};
        for (const auto& [w, name] : mats) KVS_RETURN_IF_ERROR(check(*w, "blk." + std::to_string(l) + "." + name));
    }
    return Status::ok();
}

}  // namespace kvs
