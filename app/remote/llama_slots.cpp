#include "app/remote/llama_slots.h"

#include <nlohmann/json.hpp>

namespace kvs::remote {

using json = nlohmann::json;

namespace {

int int_of(const json& o, const char* key) {
    if (!o.is_object() || !o.contains(key) || !o[key].is_number()) return 0;
    const double v = o[key].get<double>();
    return v >= 0 && v < 1e9 ? int(v) : 0;
}

bool bool_of(const json& o, const char* key) {
    return o.is_object() && o.contains(key) && o[key].is_boolean() && o[key].get<bool>();
}

}  // namespace

Result<std::vector<LlamaSlot>> parse_llama_slots(const std::string& body) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return Status::error("/slots is not JSON");
    if (!j.is_array()) return Status::error("/slots is not a list of slots");
    if (j.size() > 4096) return Status::error("/slots lists " + std::to_string(j.size()) + " slots (more than 4096)");
    std::vector<LlamaSlot> out;
    for (const json& s : j) {
        if (!s.is_object()) continue;
        LlamaSlot x;
        x.id = int_of(s, "id");
        x.n_ctx = int_of(s, "n_ctx");
        x.processing = bool_of(s, "is_processing") || int_of(s, "state") != 0;
        x.speculative = bool_of(s, "speculative");
        x.n_prompt = int_of(s, "n_prompt_tokens");
        if (s.contains("next_token")) {
            const json& n = s["next_token"];
            x.n_decoded = int_of(n.is_array() && !n.empty() ? n[0] : n, "n_decoded");
        }
        out.push_back(x);
    }
    return out;
}

}  // namespace kvs::remote
