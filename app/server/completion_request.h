#pragma once
// An OpenAI completion or chat-completion request body, checked field by field and turned
// into what the engine runs: token ids per prompt (the chat template applied through the
// Session), SamplingParams, n, streaming options. Every field a client can get wrong gives
// an ApiError naming the field (param) and what was expected; nothing here throws.
//
// Fields: model, prompt (string, list of strings, token ids, list of token-id lists) or
// messages (system / developer / user / assistant; content a string or text parts),
// max_tokens / max_completion_tokens, temperature, top_p, top_k, min_p, presence_penalty,
// frequency_penalty, repetition_penalty, seed, stop, n, stream, stream_options.include_usage,
// ignore_eos, user, logprobs (chat: a boolean, with top_logprobs 0..20; completions: an
// integer 0..20), the extensions return_token_ids (vLLM's) and `speculative` ("ngram" | "layer-skip" | "int4" | a
// draft name, or {"method", "k", "adaptive"}), vLLM's min_tokens, use_beam_search, best_of
// and length_penalty (app/server/beam_search_fields.h). echo, best_of > 1 without beam search,
// suffix, logit_bias, tools and non-text response formats are refused by name (the engine
// does not give what they need).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/server/api_error.h"
#include "engine/runtime/session.h"

namespace kvs::server {

enum class ApiKind { chat, completion };

// What a request may ask for (server options and the engine's context).
struct RequestLimits {
    int max_model_len = 2048;
    int max_n = 16;                // choices per prompt
    int max_engine_requests = 64;  // prompts x n of one HTTP request
    int max_stop = 64;             // stop strings
    int max_stop_bytes = 256;      // bytes of one stop string
};

struct CompletionJob {
    ApiKind kind = ApiKind::completion;
    std::string model;                          // as requested ("" when the request named none)
    std::shared_ptr<const LoraAdapter> adapter;  // the LoRA adapter `model` names (null: the base model)
    std::vector<std::vector<int32_t>> prompts;  // [n_prompts][n_tokens]
    SamplingParams params;                      // max_tokens -1: up to the context (chat without a limit)
    bool seed_given = false;
    int n = 1;
    bool stream = false;
    bool include_usage = false;
    std::string user;
    SpecParams spec;
    bool return_token_ids = false;  // vLLM's extension: prompt_token_ids and each choice's token_ids
    // logprobs asked for (params.logprobs >= 0): how many alternatives each token lists
    // (chat: top_logprobs; completions: the logprobs integer).
    int top_logprobs = -1;
    // KV Scope's extension "kv_eviction": {"policy": "h2o", "budget": 512} or "h2o:512"
    // (engine/kv_cache/kv_eviction.h); a budget below 1 is a fraction of prompt + max_tokens.
    KvEvictionSetting kv_eviction;
    // vLLM's use_beam_search (app/server/beam_search_fields.h): the beams of each prompt's
    // one engine request (2..8), whose n best hypotheses are its choices; 1: sampling.
    int beam_width = 1;
};

// A helper that reads optional, typed fields of a JSON object; the first mistake is kept.
class FieldReader {
public:
    explicit FieldReader(const nlohmann::json& obj) : m_obj(obj) {}
    // Each returns false (and records the error) when the field is present, not null and
    // not of the type; an absent or null field leaves *out alone and returns true.
    bool number(const char* name, double* out, double lo, double hi, bool lo_open = false);
    bool integer(const char* name, int64_t* out, int64_t lo, int64_t hi);
    bool boolean(const char* name, bool* out);
    bool string(const char* name, std::string* out);
    bool has(const char* name) const;  // present and not null
    const nlohmann::json& at(const char* name) const { return m_obj.at(name); }
    void fail(ApiError e) {
        if (!m_error) m_error = std::move(e);
    }
    const std::optional<ApiError>& error() const { return m_error; }

private:
    const nlohmann::json& m_obj;
    std::optional<ApiError> m_error;
};

// Parses a request body (already valid JSON text or not): the job, or the error to send.
struct ParsedJob {
    std::optional<ApiError> error;
    CompletionJob job;
};
ParsedJob parse_completion_request(const std::string& body, ApiKind kind, const Session& session,
                                   const RequestLimits& limits);

// The messages of a chat request (system / developer -> system, user, assistant; text
// content); empty with the error recorded in f when they are not right.
std::vector<ChatMessage> read_chat_messages(const nlohmann::json& body, FieldReader& f);

// The sampling fields shared with other front ends (TGI's parameters use the same checks):
// temperature, top_p, top_k, min_p, penalties, seed, stop, ignore_eos. Defaults are
// OpenAI's (temperature 1, top_p 1, top_k and min_p off, no penalties).
void read_sampling_fields(FieldReader& f, const RequestLimits& limits, SamplingParams* p, bool* seed_given);

// The stop field: a string or a list of strings, at most limits.max_stop, none empty.
void read_stop(FieldReader& f, const char* name, const RequestLimits& limits, std::vector<std::string>* out);

// Checks the prompt length and max_tokens against the context, filling max_tokens for a
// chat request without one (-1: as many as fit).
std::optional<ApiError> check_lengths(const std::vector<int32_t>& prompt, int max_tokens, int max_model_len,
                                      const char* max_tokens_param);

// OpenAI's and vLLM's spelling of why a choice ended: stop, length, abort.
const char* finish_reason_text(FinishReason r);

}  // namespace kvs::server
