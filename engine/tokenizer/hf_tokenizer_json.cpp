#include "engine/tokenizer/hf_tokenizer_json.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/spm.h"

namespace kvs {

namespace {

using json = nlohmann::json;

Result<json> read_json(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Result<json>::error(path + ": cannot open file");
    std::stringstream buffer;
    buffer << in.rdbuf();
    try {
        return json::parse(buffer.str());
    } catch (const json::parse_error& e) {
        return Result<json>::error(path + ": not valid JSON: " + e.what());
    }
}

// Every pre-tokenizer / normalizer step, with Sequence flattened.
void flatten(const json& node, const char* list_key, std::vector<const json*>& out) {
    if (!node.is_object()) return;
    if (node.value("type", "") == "Sequence" && node.contains(list_key) && node[list_key].is_array()) {
        for (const json& child : node[list_key]) flatten(child, list_key, out);
    } else {
        out.push_back(&node);
    }
}

struct Shape {
    bool byte_level = false;         // a ByteLevel pre-tokenizer
    bool byte_level_regex = false;   // ... that applies the GPT-2 regex itself
    bool digits_individual = false;  // Digits(individual_digits=true)
    std::vector<std::string> split_regexes;
    bool metaspace = false;     // Metaspace pre-tokenizer or ▁ normalizer
    bool space_prefix = false;  // Metaspace prepends ▁ / Prepend("▁") normalizer
};

Shape describe(const json& root) {
    Shape s;
    std::vector<const json*> steps;
    if (root.contains("pre_tokenizer")) flatten(root["pre_tokenizer"], "pretokenizers", steps);
    for (const json* step : steps) {
        const std::string type = step->value("type", "");
        if (type == "ByteLevel") {
            s.byte_level = true;
            s.byte_level_regex |= step->value("use_regex", true);
        } else if (type == "Digits") {
            s.digits_individual |= step->value("individual_digits", false);
        } else if (type == "Split" && step->contains("pattern") && (*step)["pattern"].contains("Regex")) {
            s.split_regexes.push_back((*step)["pattern"]["Regex"].get<std::string>());
        } else if (type == "Metaspace") {
            s.metaspace = true;
            const std::string scheme =
                step->value("prepend_scheme", step->value("add_prefix_space", true) ? "always" : "never");
            s.space_prefix |= scheme != "never";
        }
    }
    std::vector<const json*> norms;
    if (root.contains("normalizer")) flatten(root["normalizer"], "normalizers", norms);
    for (const json* n : norms) {
        const std::string type = n->value("type", "");
        if (type == "Prepend" && n->value("prepend", "") == kSpmSpace) {
            s.metaspace = true;
            s.space_prefix = true;
        } else if (type == "Replace" && n->value("content", "") == kSpmSpace) {
            s.metaspace = true;
        }
    }
    return s;
}

std::string pre_name(const Shape& s) {
    if (s.split_regexes.empty()) {
        if (s.digits_individual && s.byte_level_regex) return "smollm";
        if (!s.digits_individual && s.byte_level_regex) return "gpt-2";
        return "custom";
    }
    if (s.split_regexes.size() == 1 && !s.byte_level_regex && !s.digits_individual) {
        if (s.split_regexes[0] == kLlama3Regex) return "llama3";
        if (s.split_regexes[0] == kQwen2Regex) return "qwen2";
        if (s.split_regexes[0] == kGpt2Regex) return "gpt-2";
    }
    return "custom";
}

// A special token written as "text", {"content": "text"} or null ("" = none).
Result<std::string> token_field(const json& cfg, const char* field, const std::string& path) {
    if (!cfg.contains(field) || cfg[field].is_null()) return std::string();
    const json& v = cfg[field];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return Result<std::string>::error(path + ": field '" + field + "': expected a string or {\"content\": string}");
}

struct Builder {
    const std::string& path;
    VocabData vocab;
    std::unordered_map<std::string, int32_t> ids;

    Status set_token(int64_t id, const std::string& text, TokenType type, const char* where) {
        if (id < 0 || id > 10'000'000)
            return Status::error(path + ": " + where + " '" + text + "': id " + std::to_string(id) +
                                 " out of range (expected 0..10000000)");
        if (static_cast<size_t>(id) >= vocab.tokens.size()) {
            const size_t old = vocab.tokens.size();
            vocab.tokens.resize(id + 1);
            vocab.token_types.resize(id + 1, TokenType::Unused);
            for (size_t i = old; i < vocab.tokens.size(); ++i) vocab.tokens[i] = "[PAD" + std::to_string(i) + "]";
        }
        vocab.tokens[id] = text;
        vocab.token_types[id] = type;
        ids[text] = static_cast<int32_t>(id);
        return Status::ok();
    }

    int32_t id_of(const std::string& text) const {
        auto it = ids.find(text);
        return it == ids.end() ? -1 : it->second;
    }
};

Status read_model(const json& root, Builder& b, std::vector<std::pair<std::string, std::string>>& merges) {
    const std::string& path = b.path;
    if (!root.contains("model") || !root["model"].is_object())
        return Status::error(path + ": field 'model': expected an object");
    const json& model = root["model"];
    const std::string type = model.value("type", "BPE");
    if (type != "BPE")
        return Status::error(path + ": model.type = '" + type +
                             "': expected 'BPE' (WordPiece/Unigram are not supported)");
    if (!model.contains("vocab") || !model["vocab"].is_object())
        return Status::error(path + ": field 'model.vocab': expected an object {token: id}");
    for (const auto& [text, id] : model["vocab"].items()) {
        if (!id.is_number_integer())
            return Status::error(path + ": model.vocab['" + text + "']: expected an integer id");
        KVS_RETURN_IF_ERROR(b.set_token(id.get<int64_t>(), text, TokenType::Normal, "model.vocab"));
    }
    if (!model.contains("merges") || !model["merges"].is_array())
        return Status::error(path + ": field 'model.merges': expected an array");
    const json& list = model["merges"];
    merges.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
        const json& m = list[i];
        if (m.is_string()) {
            const std::string s = m.get<std::string>();
            const size_t space = s.find(' ', 1);
            if (space != std::string::npos) {
                merges.emplace_back(s.substr(0, space), s.substr(space + 1));
                continue;
            }
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
            continue;
        }
        return Status::error(path + ": model.merges[" + std::to_string(i) + "]: expected \"a b\" or [\"a\", \"b\"]");
    }
    if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
        for (const json& t : root["added_tokens"]) {
            if (!t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
                !t["content"].is_string())
                return Status::error(path + ": added_tokens entry: expected {\"id\": integer, \"content\": string}");
            const bool special = t.value("special", false);
            KVS_RETURN_IF_ERROR(b.set_token(t["id"].get<int64_t>(), t["content"].get<std::string>(),
                                            special ? TokenType::Control : TokenType::UserDefined, "added_tokens"));
        }
    }
    if (b.vocab.tokens.empty()) return Status::error(path + ": model.vocab: expected at least one token, got none");
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
        b.vocab.unk_id = b.id_of(model["unk_token"].get<std::string>());
        if (b.vocab.unk_id >= 0) b.vocab.token_types[b.vocab.unk_id] = TokenType::Unknown;
    }
    return Status::ok();
}

// BOS added by a TemplateProcessing post-processor ("single": [{"SpecialToken": ...}, ...]).
int32_t post_processor_bos(const json& root, const Builder& b) {
    if (!root.contains("post_processor")) return -1;
    std::vector<const json*> steps;
    flatten(root["post_processor"], "processors", steps);
    for (const json* p : steps) {
        if (p->value("type", "") != "TemplateProcessing" || !p->contains("single")) continue;
        const json& single = (*p)["single"];
        if (single.is_array() && !single.empty() && single[0].contains("SpecialToken"))
            return b.id_of(single[0]["SpecialToken"].value("id", ""));
    }
    return -1;
}

Status read_config(const std::string& cfg_path, const std::string& tok_path, Builder& b) {
    auto cfg = read_json(cfg_path);
    if (!cfg) return cfg.status();
    const json& c = cfg.value();
    if (!c.is_object()) return Status::error(cfg_path + ": expected a JSON object");
    struct Field {
        const char* name;
        int32_t* id;
    };
    for (Field f : {Field{"bos_token", &b.vocab.bos_id}, Field{"eos_token", &b.vocab.eos_id},
                    Field{"pad_token", &b.vocab.pad_id}}) {
        auto text = token_field(c, f.name, cfg_path);
        if (!text) return text.status();
        if (text->empty()) continue;
        const int32_t id = b.id_of(text.value());
        if (id < 0)
            return Status::error(cfg_path + ": field '" + f.name + "' = '" + text.value() + "': not a token of " +
                                 tok_path);
        *f.id = id;
    }
    if (c.contains("add_bos_token")) {
        if (!c["add_bos_token"].is_boolean())
            return Status::error(cfg_path + ": field 'add_bos_token': expected true or false");
        b.vocab.add_bos = c["add_bos_token"].get<bool>();
    }
    if (c.contains("chat_template")) {
        const json& t = c["chat_template"];
        if (t.is_string()) {
            b.vocab.chat_template = t.get<std::string>();
        } else if (t.is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
            for (const json& e : t) {
                if (!e.is_object() || !e.contains("template") || !e["template"].is_string())
                    return Status::error(cfg_path +
                                         ": field 'chat_template': expected a string or a list of "
                                         "{\"name\", \"template\"}");
                if (b.vocab.chat_template.empty() || e.value("name", "") == "default")
                    b.vocab.chat_template = e["template"].get<std::string>();
            }
        } else if (!t.is_null()) {
            return Status::error(cfg_path + ": field 'chat_template': expected a string or a list");
        }
    }
    if (b.vocab.chat_template.empty()) {  // newer repositories keep it in its own file
        const auto jinja = std::filesystem::path(cfg_path).parent_path() / "chat_template.jinja";
        std::ifstream in(jinja, std::ios::binary);
        if (in) b.vocab.chat_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return Status::ok();
}

void derive_spm_scores(const std::vector<std::pair<std::string, std::string>>& merges, Builder& b) {
    b.vocab.scores.assign(b.vocab.tokens.size(), 0.0f);
    std::vector<uint8_t> scored(b.vocab.tokens.size(), 0);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const int32_t id = b.id_of(merges[rank].first + merges[rank].second);
        if (id < 0 || scored[id]) continue;
        scored[id] = 1;
        b.vocab.scores[id] = -static_cast<float>(rank + 1);
    }
    for (int byte = 0; byte < 256; ++byte) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", byte);
        const int32_t id = b.id_of(name);
        if (id >= 0 && b.vocab.token_types[id] == TokenType::Normal) b.vocab.token_types[id] = TokenType::Byte;
    }
}

Result<VocabData> read_vocab(const std::string& tokenizer_json_path, const std::string& tokenizer_config_path) {
    auto root = read_json(tokenizer_json_path);
    if (!root) return root.status();
    Builder b{tokenizer_json_path, {}, {}};
    std::vector<std::pair<std::string, std::string>> merges;  // [n_merges] highest priority first
    KVS_RETURN_IF_ERROR(read_model(root.value(), b, merges));

    const Shape shape = describe(root.value());
    const bool byte_fallback = root.value()["model"].value("byte_fallback", false);
    if (shape.byte_level) {
        b.vocab.model = "gpt2";
        b.vocab.pre = pre_name(shape);
        b.vocab.merges.reserve(merges.size());
        for (const auto& [l, r] : merges) b.vocab.merges.push_back(l + " " + r);
    } else if (shape.metaspace || byte_fallback) {
        b.vocab.model = "llama";
        b.vocab.pre = "default";
        b.vocab.add_space_prefix = shape.space_prefix;
        derive_spm_scores(merges, b);
    } else {
        return Result<VocabData>::error(tokenizer_json_path +
                                        ": field 'pre_tokenizer': expected ByteLevel (byte-level BPE) or Metaspace / "
                                        "a \"▁\" normalizer with byte_fallback (SentencePiece-style BPE)");
    }
    const int32_t pp_bos = post_processor_bos(root.value(), b);
    if (pp_bos >= 0) {
        b.vocab.bos_id = pp_bos;
        b.vocab.add_bos = true;
    }
    if (!tokenizer_config_path.empty()) KVS_RETURN_IF_ERROR(read_config(tokenizer_config_path, tokenizer_json_path, b));
    return std::move(b.vocab);
}

}  // namespace

Result<VocabData> vocab_from_tokenizer_json(const std::string& tokenizer_json_path,
                                            const std::string& tokenizer_config_path) {
    try {
        return read_vocab(tokenizer_json_path, tokenizer_config_path);
    } catch (const nlohmann::json::exception& e) {  // a field of an unexpected JSON type
        return Result<VocabData>::error(tokenizer_json_path + ": unexpected structure: " + e.what());
    }
}

}  // namespace kvs
