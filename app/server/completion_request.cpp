#include "app/server/completion_request.h"

#include "app/server/beam_search_fields.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>

namespace kvs::server {

using json = nlohmann::json;

namespace {

std::string type_name(const json& v) {
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
}

std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
}

uint64_t fresh_seed() {
    static std::mutex mu;
    static std::random_device rd;
    std::lock_guard<std::mutex> lk(mu);
    return (uint64_t{rd()} << 32) ^ rd();
}

// One message's content: a string, or a list of {"type": "text", "text": ...} parts.
bool message_content(const json& m, size_t i, std::string* out, FieldReader& f) {
    const std::string param = "messages[" + std::to_string(i) + "].content";
    if (!m.contains("content") || m["content"].is_null()) {
        f.fail(bad_request(param + " is missing: every message needs text content", param));
        return false;
    }
    const json& c = m["content"];
    if (c.is_string()) {
        *out = c.get<std::string>();
        return true;
    }
    if (!c.is_array()) {
        f.fail(bad_request(param + " must be a string or a list of text parts, got " + type_name(c), param));
        return false;
    }
    std::string text;
    for (size_t k = 0; k < c.size(); ++k) {
        const json& part = c[k];
        const std::string pp = param + "[" + std::to_string(k) + "]";
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
            f.fail(bad_request(pp + " must be an object with a \"type\"", pp));
            return false;
        }
        if (part["type"] != "text") {
            f.fail(bad_request(
                pp + " has type \"" + part["type"].get<std::string>() + "\": this server takes text parts only", pp));
            return false;
        }
        if (!part.contains("text") || !part["text"].is_string()) {
            f.fail(bad_request(pp + ".text must be a string", pp + ".text"));
            return false;
        }
        if (!text.empty()) text += "\n";
        text += part["text"].get<std::string>();
    }
    *out = std::move(text);
    return true;
}

}  // namespace

std::vector<ChatMessage> read_chat_messages(const json& body, FieldReader& f) {
    if (!body.contains("messages") || body["messages"].is_null()) {
        f.fail(bad_request("messages is missing: a chat completion needs a list of messages", "messages"));
        return {};
    }
    const json& ms = body["messages"];
    if (!ms.is_array()) {
        f.fail(bad_request("messages must be a list of messages, got " + type_name(ms), "messages"));
        return {};
    }
    if (ms.empty()) {
        f.fail(bad_request("messages is empty: at least one message is needed", "messages"));
        return {};
    }
    std::vector<ChatMessage> msgs;
    for (size_t i = 0; i < ms.size(); ++i) {
        const json& m = ms[i];
        const std::string param = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) {
            f.fail(bad_request(param + " must be an object with role and content, got " + type_name(m), param));
            return {};
        }
        if (!m.contains("role") || !m["role"].is_string()) {
            f.fail(bad_request(param + ".role must be a string", param + ".role"));
            return {};
        }
        std::string role = m["role"].get<std::string>();
        if (role == "developer") role = "system";
        if (role != "system" && role != "user" && role != "assistant") {
            f.fail(
                bad_request(param + ".role \"" + role + "\" is not supported: use system, developer, user or assistant",
                            param + ".role"));
            return {};
        }
        std::string content;
        if (!message_content(m, i, &content, f)) return {};
        msgs.push_back({role, std::move(content)});
    }
    return msgs;
}

namespace {

bool token_list(const json& a, const std::string& param, int n_vocab, std::vector<int32_t>* out, FieldReader& f) {
    for (size_t k = 0; k < a.size(); ++k) {
        const json& t = a[k];
        if (!t.is_number_integer()) {
            f.fail(bad_request(
                param + "[" + std::to_string(k) + "] must be a token id (an integer), got " + type_name(t), param));
            return false;
        }
        const int64_t id = t.get<int64_t>();
        if (id < 0 || id >= n_vocab) {
            f.fail(bad_request(param + "[" + std::to_string(k) + "] = " + std::to_string(id) +
                                   " is not a token id of this model (0 to " + std::to_string(n_vocab - 1) + ")",
                               param));
            return false;
        }
        out->push_back(static_cast<int32_t>(id));
    }
    return true;
}

std::vector<std::vector<int32_t>> completion_prompts(const json& body, const Session& s, const RequestLimits& lim,
                                                     FieldReader& f) {
    std::vector<std::vector<int32_t>> out;
    if (!body.contains("prompt") || body["prompt"].is_null()) {
        f.fail(bad_request("prompt is missing", "prompt"));
        return out;
    }
    const json& p = body["prompt"];
    const int n_vocab = s.model().config.n_vocab;
    auto text_prompt = [&](const std::string& text) {
        if (text.empty()) {
            f.fail(bad_request("prompt is empty: give some text to complete", "prompt"));
            return false;
        }
        out.push_back(s.encode_text(text));
        return true;
    };
    if (p.is_string()) {
        text_prompt(p.get<std::string>());
        return out;
    }
    if (!p.is_array()) {
        f.fail(
            bad_request("prompt must be a string, a list of strings, a list of token ids or a list of such lists, "
                        "got " +
                            type_name(p),
                        "prompt"));
        return out;
    }
    if (p.empty()) {
        f.fail(bad_request("prompt is an empty list", "prompt"));
        return out;
    }
    if (p[0].is_number()) {  // one prompt of token ids
        std::vector<int32_t> ids;
        if (token_list(p, "prompt", n_vocab, &ids, f)) out.push_back(std::move(ids));
        return out;
    }
    if (static_cast<int>(p.size()) > lim.max_engine_requests) {
        f.fail(bad_request("prompt has " + std::to_string(p.size()) + " prompts; at most " +
                               std::to_string(lim.max_engine_requests) + " are taken in one request",
                           "prompt"));
        return out;
    }
    for (size_t i = 0; i < p.size(); ++i) {
        const json& e = p[i];
        const std::string param = "prompt[" + std::to_string(i) + "]";
        if (e.is_string()) {
            if (!text_prompt(e.get<std::string>())) return {};
        } else if (e.is_array()) {
            if (e.empty()) {
                f.fail(bad_request(param + " is an empty list of token ids", param));
                return {};
            }
            std::vector<int32_t> ids;
            if (!token_list(e, param, n_vocab, &ids, f)) return {};
            out.push_back(std::move(ids));
        } else {
            f.fail(bad_request(param + " must be a string or a list of token ids, got " + type_name(e), param));
            return {};
        }
    }
    return out;
}

// Fields whose features the engine does not have: refused, never silently ignored.
void refuse_unsupported(FieldReader& f, bool beam_search) {
    auto refuse = [&](const char* name, const std::string& why) {
        f.fail(bad_request(std::string(name) + " is not supported by this server: " + why, name, "unsupported"));
    };
    bool echo = false;
    if (f.boolean("echo", &echo) && echo) refuse("echo", "the reply holds the generated text only");
    int64_t best_of = 1;
    if (!beam_search && f.integer("best_of", &best_of, 1, 1 << 20) && best_of > 1)
        refuse("best_of", "use n for several choices (each is returned), or use_beam_search");
    if (f.has("suffix")) refuse("suffix", "the engine does not fill in the middle");
    if (f.has("logit_bias")) {
        const json& v = f.at("logit_bias");
        if (!v.is_object()) f.fail(bad_request("logit_bias must be an object", "logit_bias"));
        else if (!v.empty())
            refuse("logit_bias", "the sampler has no per-token bias");
    }
    if (f.has("tools")) {
        const json& v = f.at("tools");
        if (!v.is_array()) f.fail(bad_request("tools must be a list", "tools"));
        else if (!v.empty())
            refuse("tools", "tool calling is not implemented");
    }
    if (f.has("response_format")) {
        const json& v = f.at("response_format");
        if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
            f.fail(bad_request("response_format must be an object with a type", "response_format"));
        else if (v["type"] != "text")
            refuse("response_format", "only {\"type\": \"text\"} (no constrained decoding)");
    }
}

// logprobs / top_logprobs as the OpenAI API takes them: chat `logprobs: true` with
// `top_logprobs: 0..20` (which needs logprobs true), completions `logprobs: 0..20`.
void read_logprobs(FieldReader& f, ApiKind kind, int* top) {
    if (kind == ApiKind::completion) {
        if (f.has("top_logprobs")) {
            f.fail(bad_request("top_logprobs is a chat completions field; /v1/completions takes logprobs: <int>",
                               "top_logprobs"));
            return;
        }
        if (f.has("logprobs") && f.at("logprobs").is_boolean()) {
            f.fail(bad_request("logprobs must be an integer (0 to " + std::to_string(kMaxLogprobs) +
                                   ") on /v1/completions, got a boolean",
                               "logprobs"));
            return;
        }
        int64_t k = -1;
        if (f.integer("logprobs", &k, 0, kMaxLogprobs) && k >= 0) *top = static_cast<int>(k);
        return;
    }
    bool on = false;
    if (f.has("logprobs") && !f.at("logprobs").is_boolean()) {
        f.fail(bad_request("logprobs must be a boolean on chat completions (top_logprobs gives the count), got " +
                               type_name(f.at("logprobs")),
                           "logprobs"));
        return;
    }
    f.boolean("logprobs", &on);
    int64_t k = 0;
    if (!f.integer("top_logprobs", &k, 0, kMaxLogprobs)) return;
    if (f.has("top_logprobs") && !on) {
        f.fail(bad_request("top_logprobs needs logprobs: true", "top_logprobs"));
        return;
    }
    if (on) *top = static_cast<int>(k);
}

void read_spec(FieldReader& f, const Session& s, SpecParams* out) {
    if (!f.has("speculative")) return;
    const json& v = f.at("speculative");
    std::string method;
    int64_t k = 4;
    bool adaptive = false;
    if (v.is_string()) {
        method = v.get<std::string>();
    } else if (v.is_object()) {
        FieldReader sub(v);
        sub.string("method", &method);
        sub.integer("k", &k, 1, 8);
        sub.boolean("adaptive", &adaptive);
        if (sub.error()) {
            ApiError e = *sub.error();
            e.param = "speculative." + e.param;
            e.message = "speculative." + e.message;
            f.fail(e);
            return;
        }
    } else {
        f.fail(bad_request("speculative must be a method name or {\"method\", \"k\", \"adaptive\"}", "speculative"));
        return;
    }
    if (method.empty() || method == "off") return;
    auto sp = s.spec_params(method, static_cast<int>(k), adaptive);
    if (!sp) {
        f.fail(bad_request(sp.message(), "speculative"));
        return;
    }
    *out = *sp;
}

// "kv_eviction": "POLICY[:BUDGET]" or {"policy", "budget", "window", "sinks"}; errors name the field.
void read_kv_eviction(FieldReader& f, KvEvictionSetting* out) {
    if (!f.has("kv_eviction")) return;
    const json& v = f.at("kv_eviction");
    if (v.is_string()) {
        auto s = parse_kv_eviction(v.get<std::string>());
        if (!s) return f.fail(bad_request("kv_eviction: " + s.message(), "kv_eviction"));
        *out = *s;
        return;
    }
    if (!v.is_object())
        return f.fail(bad_request("kv_eviction must be \"POLICY:BUDGET\" or {\"policy\", \"budget\"}, got " +
                                      type_name(v),
                                  "kv_eviction"));
    FieldReader sub(v);
    std::string policy;
    double budget = 0.5;
    int64_t window = -1, sinks = 4;
    sub.string("policy", &policy);
    sub.number("budget", &budget, 0, 1e7, /*lo_open=*/true);
    sub.integer("window", &window, 0, 10000000);
    sub.integer("sinks", &sinks, 0, 1024);
    if (sub.error()) {
        ApiError e = *sub.error();
        e.param = "kv_eviction." + e.param;
        e.message = "kv_eviction." + e.message;
        return f.fail(e);
    }
    if (policy.empty())
        return f.fail(bad_request("kv_eviction.policy is missing (streaming, h2o, snapkv, merge or none)",
                                  "kv_eviction.policy"));
    auto p = parse_kv_evict_policy(policy);
    if (!p) return f.fail(bad_request("kv_eviction.policy: " + p.message(), "kv_eviction.policy"));
    KvEvictionSetting s;
    s.policy = *p;
    if (budget < 1) s.budget_fraction = budget;
    else if (budget == std::floor(budget))
        s.budget_tokens = static_cast<int>(budget);
    else
        return f.fail(bad_request("kv_eviction.budget " + std::to_string(budget) +
                                      " must be whole tokens (512) or a fraction below 1 (0.5)",
                                  "kv_eviction.budget"));
    s.window = static_cast<int>(window);
    s.sinks = static_cast<int>(sinks);
    if (Status st = check_kv_eviction(s); !st) return f.fail(bad_request("kv_eviction: " + st.message(), "kv_eviction.budget"));
    *out = s;
}

}  // namespace

bool FieldReader::has(const char* name) const { return m_obj.contains(name) && !m_obj[name].is_null(); }

bool FieldReader::number(const char* name, double* out, double lo, double hi, bool lo_open) {
    if (!has(name)) return true;
    const json& v = m_obj[name];
    if (!v.is_number()) {
        fail(bad_request(std::string(name) + " must be a number, got " + type_name(v), name));
        return false;
    }
    const double x = v.get<double>();
    if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo)) {
        fail(bad_request(
            std::string(name) + " must be in " + (lo_open ? "(" : "[") + num(lo) + ", " + num(hi) + "], got " + num(x),
            name));
        return false;
    }
    *out = x;
    return true;
}

bool FieldReader::integer(const char* name, int64_t* out, int64_t lo, int64_t hi) {
    if (!has(name)) return true;
    const json& v = m_obj[name];
    bool ok = v.is_number_integer();
    if (!ok && v.is_number_float()) {
        const double d = v.get<double>();
        ok = std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15;
    }
    if (!ok) {
        fail(bad_request(
            std::string(name) + " must be an integer, got " + (v.is_number() ? num(v.get<double>()) : type_name(v)),
            name));
        return false;
    }
    // Unsigned values above int64's range and floats are compared as doubles first.
    const double d = v.get<double>();
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
        fail(bad_request(std::string(name) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                             ", got " + num(d),
                         name));
        return false;
    }
    *out = v.is_number_float() ? static_cast<int64_t>(d) : v.get<int64_t>();
    return true;
}

bool FieldReader::boolean(const char* name, bool* out) {
    if (!has(name)) return true;
    const json& v = m_obj[name];
    if (!v.is_boolean()) {
        fail(bad_request(std::string(name) + " must be true or false, got " + type_name(v), name));
        return false;
    }
    *out = v.get<bool>();
    return true;
}

bool FieldReader::string(const char* name, std::string* out) {
    if (!has(name)) return true;
    const json& v = m_obj[name];
    if (!v.is_string()) {
        fail(bad_request(std::string(name) + " must be a string, got " + type_name(v), name));
        return false;
    }
    *out = v.get<std::string>();
    return true;
}

void read_stop(FieldReader& f, const char* name, const RequestLimits& lim, std::vector<std::string>* out) {
    if (!f.has(name)) return;
    const json& v = f.at(name);
    std::vector<std::string> stops;
    if (v.is_string()) {
        stops.push_back(v.get<std::string>());
    } else if (v.is_array()) {
        if (static_cast<int>(v.size()) > lim.max_stop) {
            f.fail(bad_request(std::string(name) + " has " + std::to_string(v.size()) + " strings; at most " +
                                   std::to_string(lim.max_stop) + " are allowed",
                               name));
            return;
        }
        for (const json& s : v) {
            if (!s.is_string()) {
                f.fail(bad_request(std::string(name) + " must hold strings only, got " + type_name(s), name));
                return;
            }
            stops.push_back(s.get<std::string>());
        }
    } else {
        f.fail(bad_request(std::string(name) + " must be a string or a list of strings, got " + type_name(v), name));
        return;
    }
    for (const std::string& s : stops) {
        if (s.empty()) {
            f.fail(bad_request(std::string(name) + " holds an empty string", name));
            return;
        }
        if (static_cast<int>(s.size()) > lim.max_stop_bytes) {
            f.fail(bad_request(std::string(name) + " holds a string of " + std::to_string(s.size()) +
                                   " bytes; at most " + std::to_string(lim.max_stop_bytes) + " are allowed",
                               name));
            return;
        }
    }
    *out = std::move(stops);
}

void read_sampling_fields(FieldReader& f, const RequestLimits& lim, SamplingParams* p, bool* seed_given) {
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->penalty_last_n = -1;  // the whole history (prompt and output)
    double d = p->temperature;
    if (f.number("temperature", &d, 0.0, 100.0)) p->temperature = static_cast<float>(d);
    d = p->top_p;
    if (f.number("top_p", &d, 0.0, 1.0, /*lo_open=*/true)) p->top_p = static_cast<float>(d);
    int64_t k = 0;
    if (f.integer("top_k", &k, -1, 1 << 30)) p->top_k = static_cast<int32_t>(std::max<int64_t>(0, k));
    d = p->min_p;
    if (f.number("min_p", &d, 0.0, 1.0)) p->min_p = static_cast<float>(d);
    d = 0;
    if (f.number("presence_penalty", &d, -2.0, 2.0)) p->presence_penalty = static_cast<float>(d);
    d = 0;
    if (f.number("frequency_penalty", &d, -2.0, 2.0)) p->frequency_penalty = static_cast<float>(d);
    d = 1;
    if (f.number("repetition_penalty", &d, 0.0, 100.0, /*lo_open=*/true)) p->repeat_penalty = static_cast<float>(d);
    int64_t seed = 0;
    *seed_given = f.has("seed");
    if (f.integer("seed", &seed, INT64_MIN, INT64_MAX) && *seed_given) p->seed = static_cast<uint64_t>(seed);
    if (!*seed_given) p->seed = fresh_seed();
    read_stop(f, "stop", lim, &p->stop);
    f.boolean("ignore_eos", &p->ignore_eos);
}

std::optional<ApiError> check_lengths(const std::vector<int32_t>& prompt, int max_tokens, int max_model_len,
                                      const char* max_tokens_param) {
    const int n = static_cast<int>(prompt.size());
    if (n == 0) return bad_request("the prompt has no tokens", "prompt");
    if (n >= max_model_len)
        return bad_request("This model's maximum context length is " + std::to_string(max_model_len) +
                               " tokens. However, your request has " + std::to_string(n) +
                               " input tokens (at least one must be left to generate). Please reduce the length of "
                               "the input.",
                           "prompt", "context_length_exceeded");
    if (max_tokens > 0 && n + max_tokens > max_model_len)
        return bad_request("This model's maximum context length is " + std::to_string(max_model_len) +
                               " tokens. However, you requested " + std::to_string(n + max_tokens) + " tokens (" +
                               std::to_string(n) + " in the input, " + std::to_string(max_tokens) +
                               " in the completion). Please reduce the length of the input or " + max_tokens_param +
                               ".",
                           max_tokens_param, "context_length_exceeded");
    return std::nullopt;
}

const char* finish_reason_text(FinishReason r) {
    switch (r) {
        case FinishReason::stop: return "stop";
        case FinishReason::length: return "length";
        case FinishReason::cancelled: return "abort";
        case FinishReason::rejected: return "abort";
        case FinishReason::none: return "abort";
    }
    return "abort";
}

ParsedJob parse_completion_request(const std::string& body, ApiKind kind, const Session& s, const RequestLimits& lim) {
    ParsedJob out;
    CompletionJob& job = out.job;
    job.kind = kind;
    json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        out.error = bad_request("the request body is not valid JSON (or not valid UTF-8)", "", "invalid_json");
        return out;
    }
    if (!j.is_object()) {
        out.error = bad_request("the request body must be a JSON object, got " + type_name(j));
        return out;
    }
    FieldReader f(j);
    f.string("model", &job.model);
    f.boolean("stream", &job.stream);
    if (f.has("stream_options")) {
        const json& so = f.at("stream_options");
        if (!so.is_object()) {
            f.fail(bad_request("stream_options must be an object", "stream_options"));
        } else if (!job.stream) {
            f.fail(bad_request("stream_options is only allowed with stream: true", "stream_options"));
        } else {
            FieldReader sf(so);
            sf.boolean("include_usage", &job.include_usage);
            if (sf.error())
                f.fail(bad_request("stream_options." + sf.error()->message, "stream_options.include_usage"));
        }
    }
    int64_t n = 1;
    f.integer("n", &n, 1, lim.max_n);
    job.n = static_cast<int>(n);
    f.string("user", &job.user);
    f.boolean("return_token_ids", &job.return_token_ids);
    f.boolean("watermark", &job.params.watermark);  // extension: TGI's green-list watermark
    read_sampling_fields(f, lim, &job.params, &job.seed_given);
    int64_t max_tokens = -1;
    const char* mt_param = "max_tokens";
    if (kind == ApiKind::chat && f.has("max_completion_tokens")) mt_param = "max_completion_tokens";
    f.integer(mt_param, &max_tokens, 1, INT32_MAX);
    if (kind == ApiKind::completion && max_tokens < 0) max_tokens = 16;  // OpenAI's default for completions
    job.params.max_tokens = static_cast<int32_t>(max_tokens);
    refuse_unsupported(f, f.has("use_beam_search") && f.at("use_beam_search") == true);
    read_logprobs(f, kind, &job.top_logprobs);
    job.params.logprobs = job.top_logprobs;
    // vLLM's penalties: repetition over prompt and output, presence / frequency over the output.
    job.params.penalty_scope = SamplingParams::PenaltyScope::vllm;
    read_spec(f, s, &job.spec);
    read_kv_eviction(f, &job.kv_eviction);
    read_beam_search_fields(f, &job);
    if (f.error()) {
        out.error = f.error();
        return out;
    }
    if (kind == ApiKind::chat) {
        const std::vector<ChatMessage> msgs = read_chat_messages(j, f);
        if (!f.error()) job.prompts.push_back(s.encode_chat(msgs));
    } else {
        job.prompts = completion_prompts(j, s, lim, f);
    }
    if (f.error()) {
        out.error = f.error();
        return out;
    }
    if (static_cast<int>(job.prompts.size()) * job.n > lim.max_engine_requests) {
        out.error = bad_request("n x prompts = " + std::to_string(job.prompts.size() * job.n) + " choices; at most " +
                                    std::to_string(lim.max_engine_requests) + " are generated for one request",
                                "n");
        return out;
    }
    for (const auto& p : job.prompts) {
        if (auto e = check_lengths(p, job.params.max_tokens, lim.max_model_len, mt_param)) {
            out.error = e;
            return out;
        }
    }
    return out;
}

}  // namespace kvs::server
