// Text Generation Inference's routes, so TGI clients (huggingface_hub's InferenceClient,
// the course's text_generation(...) calls) run unchanged: POST /generate (with details),
// POST /generate_stream (SSE), POST / (TGI's compat route: a list for stream false, the
// stream otherwise), GET /info. Errors here are TGI's {"error", "error_type"} (422 for a bad
// field), which those clients read.
// Log-probabilities (TGI's details): every generated token's `logprob`, `top_n_tokens`
// alternatives per token (details.top_tokens, or a stream event's top_tokens), and with
// decoder_input_details the prompt tokens' (details.prefill; the first has none: null). They
// are the model's raw distribution (engine/sampling/logprobs.h, vLLM's default), where TGI
// reports them after its logit processors (watermark, repetition penalty, temperature, top-k/p):
// the two agree for greedy requests without penalties.
#include <httplib.h>

#include <chrono>
#include <cmath>

#include "app/server/http_reply.h"
#include "app/server/logprobs_json.h"
#include "app/server/openai_server.h"

namespace kvs::server {

using json = nlohmann::json;

namespace {

void send_tgi_error(httplib::Response& res, int status, const std::string& message, const std::string& type) {
    res.status = status;
    if (status == 429 || status == 503) res.set_header("Retry-After", "1");
    res.set_content(dump_json({{"error", message}, {"error_type", type}}), "application/json");
}

// TGI's names for why generation ended: an end-of-generation token or a stop sequence.
const char* tgi_finish_reason(FinishReason r, bool last_is_eog) {
    if (r == FinishReason::length) return "length";
    if (r == FinishReason::stop) return last_is_eog ? "eos_token" : "stop_sequence";
    return "length";  // cancelled: TGI has no word for it
}

}  // namespace

struct OpenAiServer::TgiJob {
    CompletionJob job;
    bool details = false;
    bool decoder_input_details = false;  // details.prefill with the prompt tokens' logprobs
    int top_n = 0;                       // top_n_tokens
    std::vector<int32_t> prompt;         // the prompt's ids, for details.prefill
    bool return_full_text = false;
    std::string inputs;
    bool sampled = false;
};

// Parses {"inputs", "parameters", "stream"}; the error message, or "" when all is well.
std::string OpenAiServer::parse_tgi(const std::string& body, TgiJob* t) const {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return "the request body is not valid JSON (or not valid UTF-8)";
    if (!j.is_object()) return "the request body must be a JSON object with inputs and parameters";
    FieldReader top(j);
    if (!top.has("inputs") || !j["inputs"].is_string()) return "inputs must be a string";
    t->inputs = j["inputs"].get<std::string>();
    if (t->inputs.empty()) return "inputs is empty";
    top.boolean("stream", &t->job.stream);
    if (top.error()) return top.error()->message;
    static const json kEmpty = json::object();
    const json& params = j.contains("parameters") && !j["parameters"].is_null() ? j["parameters"] : kEmpty;
    if (!params.is_object()) return "parameters must be an object";
    FieldReader f(params);
    CompletionJob& job = t->job;
    job.kind = ApiKind::completion;
    bool seed_given = false;
    read_sampling_fields(f, m_limits, &job.params, &seed_given);
    job.seed_given = seed_given;
    read_stop(f, "stop", m_limits, &job.params.stop);
    bool do_sample = false;
    f.boolean("do_sample", &do_sample);
    // TGI samples when asked to or when any sampling knob is set; otherwise it is greedy.
    t->sampled = do_sample || f.has("temperature") || f.has("top_p") || f.has("top_k");
    if (f.has("temperature") && job.params.temperature <= 0)
        f.fail(bad_request("temperature must be strictly positive", "temperature"));
    if (!t->sampled) job.params.temperature = 0;
    int64_t max_new = -1;
    f.integer("max_new_tokens", &max_new, 1, INT32_MAX);
    job.params.max_tokens = static_cast<int32_t>(max_new);
    f.boolean("details", &t->details);
    f.boolean("return_full_text", &t->return_full_text);
    f.boolean("watermark", &job.params.watermark);
    int64_t truncate = 0;
    f.integer("truncate", &truncate, 1, INT32_MAX);
    int64_t best_of = 1;
    if (f.integer("best_of", &best_of, 1, 1 << 20) && best_of > 1)
        f.fail(bad_request("best_of is not supported by this server", "best_of"));
    int64_t top_n = 0;
    f.integer("top_n_tokens", &top_n, 0, kMaxLogprobs);
    t->top_n = static_cast<int>(top_n);
    f.boolean("decoder_input_details", &t->decoder_input_details);  // not with a stream (the route decides)
    // Every token's logprob and top_n alternatives; the prompt's with decoder_input_details.
    job.params.logprobs = t->top_n;
    if (t->decoder_input_details) job.params.prompt_logprobs = 0;
    if (f.has("grammar")) f.fail(bad_request("grammar is not supported (no constrained decoding)", "grammar"));
    if (f.error()) return f.error()->message;
    std::vector<int32_t> ids = m_session->encode_text(t->inputs);
    if (truncate > 0 && static_cast<int64_t>(ids.size()) > truncate)
        ids.erase(ids.begin(), ids.end() - truncate);  // TGI keeps the last `truncate` tokens
    if (auto e = check_lengths(ids, job.params.max_tokens, m_limits.max_model_len, "max_new_tokens")) return e->message;
    t->prompt = ids;
    job.prompts.push_back(std::move(ids));
    return {};
}

void OpenAiServer::handle_tgi_generate(const httplib::Request& req, httplib::Response& res, TgiRoute route) {
    auto handler = std::make_shared<HandlerToken>(&m_handlers);
    if (m_stopping) return send_tgi_error(res, 503, "the server is shutting down", "unhealthy");
    auto t = std::make_shared<TgiJob>();
    if (std::string err = parse_tgi(req.body, t.get()); !err.empty())
        return send_tgi_error(res, 422, err, "validation");
    if (route == TgiRoute::stream) t->job.stream = true;
    if (route == TgiRoute::generate) t->job.stream = false;
    if (t->decoder_input_details && t->job.stream)  // TGI's rule too: the prefill comes with the whole reply
        return send_tgi_error(res, 422, "decoder_input_details is not supported when streaming tokens", "validation");
    if (!admit(1)) return send_tgi_error(res, 429, "Model is overloaded", "overloaded");
    auto call = submit(t->job, client_label(req.remote_addr, {}));
    const Tokenizer& tok = m_session->tokenizer();
    const uint64_t seed = t->job.params.seed;
    const auto lj = std::make_shared<LogprobsJson>(tok, t->top_n);
    auto details_json = [t, seed, &tok, lj](const ApiCall::Choice& c, bool with_tokens) {
        const bool eog = !c.tokens.empty() && tok.is_eog(c.tokens.back());
        json d = {{"finish_reason", tgi_finish_reason(c.reason, eog)},
                  {"generated_tokens", c.tokens.size()},
                  {"seed", t->sampled ? json(seed) : json(nullptr)}};
        if (with_tokens) {
            json toks = json::array(), tops = json::array();
            for (size_t i = 0; i < c.tokens.size(); ++i) {
                const bool has = i < c.logprobs.size();
                toks.push_back(lj->tgi_token(c.tokens[i], has ? c.logprobs[i].logprob : NAN));
                if (t->top_n > 0) tops.push_back(has ? lj->tgi_top_tokens(c.logprobs[i]) : json::array());
            }
            json prefill = json::array();
            if (t->decoder_input_details)  // the first prompt token has no logprob (TGI: null)
                for (size_t i = 0; i < t->prompt.size(); ++i) {
                    const bool has = i > 0 && i - 1 < c.prompt_logprobs.size();
                    prefill.push_back(lj->tgi_token(t->prompt[i], has ? c.prompt_logprobs[i - 1].logprob : NAN, true));
                }
            d["prefill"] = std::move(prefill);
            d["tokens"] = std::move(toks);
            if (t->top_n > 0) d["top_tokens"] = std::move(tops);
        }
        return d;
    };

    if (!t->job.stream) {
        while (!call->wait_all(std::chrono::milliseconds(200)))
            if (m_stopping) cancel(*call);
        const ApiCall::Choice c = call->choices()[0];
        if (!c.error.empty()) return send_tgi_error(res, 422, c.error, "validation");
        json out = {{"generated_text", t->return_full_text ? t->inputs + c.text : c.text}};
        if (t->details) out["details"] = details_json(c, true);
        m_metrics->on_api_request_finished(1, static_cast<int>(c.tokens.size()));
        send_json(res, route == TgiRoute::compat ? json::array({out}) : out);
        return;
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, t, call, details_json, lj](size_t, httplib::DataSink& sink) {
            auto write = [&](const json& j) {
                const std::string s = "data:" + dump_json(j) + "\n\n";
                return sink.write(s.data(), s.size());
            };
            int index = 0;
            int idle_ms = 0;
            bool cancelled = false;
            for (bool last_round = false;;) {
                const bool all_done = call->all_finished();
                auto events = call->take(std::chrono::milliseconds(all_done ? 0 : 250));
                if (m_stopping && !cancelled) {
                    cancel(*call);
                    cancelled = true;
                }
                if (events.empty() && !all_done) {
                    if ((idle_ms += 250) >= 1000) {
                        const std::string ping = ":\n\n";
                        if (!sink.write(ping.data(), ping.size())) {
                            cancel(*call);
                            return false;
                        }
                        idle_ms = 0;
                    }
                    continue;
                }
                idle_ms = 0;
                for (const ApiCall::Event& ev : events) {
                    if (!ev.error.empty()) {
                        if (!write({{"error", ev.error}, {"error_type", "validation"}})) return false;
                        continue;
                    }
                    if (ev.token < 0 && !ev.finished) continue;
                    json token = lj->tgi_token(ev.token, ev.logprobs ? ev.logprobs->logprob : NAN);
                    token["text"] = ev.text;  // the text that became safe to show with this token
                    if (ev.token < 0) token["special"] = false;
                    json e = {{"index", ++index},
                              {"token", std::move(token)},
                              {"generated_text", nullptr},
                              {"details", nullptr}};
                    if (t->top_n > 0 && ev.logprobs) e["top_tokens"] = lj->tgi_top_tokens(*ev.logprobs);
                    if (ev.finished) {
                        const ApiCall::Choice c = call->choices()[0];
                        e["generated_text"] = t->return_full_text ? t->inputs + c.text : c.text;
                        e["details"] = details_json(c, false);
                        m_metrics->on_api_request_finished(1, static_cast<int>(c.tokens.size()));
                    }
                    if (!write(e)) {
                        cancel(*call);
                        return false;
                    }
                }
                if (last_round) break;
                if (all_done) last_round = true;
            }
            sink.done();
            return true;
        },
        [this, call, handler](bool success) {
            if (!success) cancel(*call);
        });
}

void OpenAiServer::handle_tgi_info(httplib::Response& res) const {
    send_json(res, {{"model_id", m_opt.served_model_name},
                    {"model_sha", nullptr},
                    {"model_dtype", "auto"},
                    {"model_device_type", "cpu"},
                    {"model_pipeline_tag", "text-generation"},
                    {"max_concurrent_requests", m_opt.max_pending},
                    {"max_best_of", 1},
                    {"max_stop_sequences", m_opt.max_stop},
                    {"max_input_tokens", m_limits.max_model_len - 1},
                    {"max_input_length", m_limits.max_model_len - 1},
                    {"max_total_tokens", m_limits.max_model_len},
                    {"validation_workers", 1},
                    {"max_client_batch_size", 1},
                    {"router", "kvscope"},
                    {"version", "kvscope 0.1.0"},
                    {"sha", nullptr},
                    {"docker_label", nullptr}});
}

}  // namespace kvs::server
