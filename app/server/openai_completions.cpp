// POST /v1/completions and /v1/chat/completions: parse, admit, submit every choice to the
// EngineLoop, then either wait and answer once or stream Server-Sent Events
// (`data: {chunk}` ... `data: [DONE]`) as the engine produces text.
#include <httplib.h>

#include <chrono>
#include <random>

#include "app/server/client_socket.h"
#include "app/server/http_reply.h"
#include "app/server/logprobs_json.h"
#include "app/server/openai_server.h"

namespace kvs::server {

using json = nlohmann::json;

namespace {

std::string new_id(const char* prefix) {
    static std::mutex mu;
    static std::mt19937_64 rng{std::random_device{}()};
    std::lock_guard<std::mutex> lk(mu);
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%016llx%08llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng() & 0xffffffffu));
    return std::string(prefix) + buf;
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

json usage_json(int64_t prompt, int64_t completion) {
    return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json ids_json(const std::vector<int32_t>& ids) {
    json a = json::array();
    for (int32_t t : ids) a.push_back(t);
    return a;
}

int64_t prompt_tokens_of(const CompletionJob& job) {
    int64_t n = 0;
    for (const auto& p : job.prompts) n += static_cast<int64_t>(p.size());
    return n;
}

}  // namespace

struct OpenAiServer::StreamState {
    std::shared_ptr<ApiCall> call;
    CompletionJob job;
    std::string id;
    int64_t created = 0;
    std::shared_ptr<HandlerToken> handler;
    std::vector<TextOffset> text_offsets;  // [choices] completions' logprobs.text_offset so far
};

std::shared_ptr<ApiCall> OpenAiServer::submit(const CompletionJob& job, const std::string& client) {
    const int n_choices = static_cast<int>(job.prompts.size()) * job.n;
    auto call = std::make_shared<ApiCall>(n_choices);
    {
        std::lock_guard<std::mutex> lk(m_calls_mu);
        std::erase_if(m_calls, [](const std::weak_ptr<ApiCall>& w) { return w.expired(); });
        m_calls.push_back(call);
    }
    const int max_tokens_param = std::max(0, job.params.max_tokens);
    auto on_event = [&](int index) {
        return call->callback(index,
                              [metrics = m_metrics, pending = m_pending, max_tokens_param,
                               hook = m_opt.on_request_finished](const TokenEvent& ev) {
                                  if (ev.metrics) metrics->on_request_finished(*ev.metrics, max_tokens_param);
                                  if (ev.metrics && hook) hook(*ev.metrics);
                                  --*pending;
                              });
    };
    // n > 1: one engine request computes the prompt once and the other choices fork from it
    // copy-on-write (GenerationRequest::choices); with speculative decoding, n requests.
    const bool fork = job.n > 1 && !job.spec.enabled() && !job.kv_eviction.enabled();  // evicting caches are their own
    for (size_t p = 0; p < job.prompts.size(); ++p) {
        for (int i = 0; i < job.n; ++i) {
            const int index = static_cast<int>(p) * job.n + i;
            GenerationRequest g;
            g.prompt = job.prompts[p];
            g.params = job.params;
            g.params.seed = job.params.seed + static_cast<uint64_t>(i);  // vLLM: child i gets seed + i
            g.spec = job.spec;
            g.kv_eviction = job.kv_eviction;
            g.adapter = job.adapter;
            g.client = client;
            g.on_event = on_event(index);
            if (fork)
                for (int k = 1; k < job.n; ++k)
                    g.choices.push_back({0, job.params.seed + static_cast<uint64_t>(k), on_event(index + k)});
            std::vector<RequestId> choice_ids;
            call->set_id(index, m_loop.submit(std::move(g), &choice_ids), static_cast<int>(p));
            for (size_t k = 0; k < choice_ids.size(); ++k)
                call->set_id(index + 1 + static_cast<int>(k), choice_ids[k], static_cast<int>(p));
            if (fork) break;
        }
    }
    return call;
}

void OpenAiServer::handle_completion(const httplib::Request& req, httplib::Response& res, ApiKind kind) {
    auto handler = std::make_shared<HandlerToken>(&m_handlers);
    if (m_stopping) return send_error(res, ApiError{503, "the server is shutting down", "server_error", "", ""});
    ParsedJob pj = parse_completion_request(req.body, kind, *m_session, m_limits);
    if (pj.error) return send_error(res, *pj.error);
    CompletionJob& job = pj.job;
    if (auto e = check_model(job.model, &job.adapter)) return send_error(res, *e);
    if (job.model.empty()) job.model = m_opt.served_model_name;  // replies name the model (or adapter) that ran
    const int n_choices = static_cast<int>(job.prompts.size()) * job.n;
    if (!admit(n_choices))
        return send_error(res, ApiError{429,
                                        "the server is busy: " + std::to_string(*m_pending) +
                                            " requests are queued or running (limit " +
                                            std::to_string(m_opt.max_pending) + "); retry later",
                                        "server_overloaded", "", "too_many_requests"});
    // The connection of a non-streamed reply, found before the engine starts on it.
    const int client_fd =
        job.stream ? -1 : find_client_socket(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    const std::string client = client_label(req.remote_addr, job.user);
    auto call = job.beam_width > 1 ? submit_beam(job, client) : submit(job, client);
    const bool chat = kind == ApiKind::chat;
    const std::string id = new_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = unix_now();

    if (job.stream) {
        auto st = std::make_shared<StreamState>(StreamState{call, std::move(job), id, created, handler, {}});
        st->text_offsets.assign(static_cast<size_t>(n_choices), TextOffset{});
        res.status = 200;
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        res.set_chunked_content_provider(
            "text/event-stream", [this, st](size_t, httplib::DataSink& sink) { return stream_events(*st, sink); },
            [this, st](bool success) {
                if (!success) cancel(*st->call);  // the client went away: free its blocks now
                st->handler.reset();
            });
        return;
    }

    // Waits, looking at the connection after every step's events: a client that hung up
    // (cpp-httplib 0.11 tells a handler nothing) has its requests cancelled within one step.
    bool cancelled = false;
    while (!call->all_finished()) {
        if (!cancelled && (m_stopping || peer_closed(client_fd))) {
            cancel(*call);
            cancelled = true;
        }
        call->take(std::chrono::milliseconds(100));  // what arrived is already folded into choices()
    }
    const std::vector<ApiCall::Choice> choices = call->choices();
    int64_t completion_tokens = 0;
    int max_gen = 0;
    json arr = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        const ApiCall::Choice& c = choices[i];
        if (!c.error.empty())  // the engine refused it (e.g. more KV than the whole pool)
            return send_error(res, bad_request(c.error, "prompt"));
        completion_tokens += static_cast<int64_t>(c.tokens.size());
        max_gen = std::max(max_gen, static_cast<int>(c.tokens.size()));
        json ch = {{"index", i}, {"logprobs", nullptr}, {"finish_reason", finish_reason_text(c.reason)}};
        if (job.top_logprobs >= 0) {
            const LogprobsJson lj(m_session->tokenizer(), job.top_logprobs);
            TextOffset offset;
            ch["logprobs"] = chat ? json{{"content", lj.chat_content(c.tokens, c.logprobs)}}
                                  : lj.completion(c.tokens, c.logprobs, &offset);
        }
        if (chat) ch["message"] = {{"role", "assistant"}, {"content", c.text}};
        else
            ch["text"] = c.text;
        if (job.return_token_ids) ch["token_ids"] = ids_json(c.tokens);
        arr.push_back(std::move(ch));
    }
    m_metrics->on_api_request_finished(job.n, max_gen);
    json out = {{"id", id},           {"object", chat ? "chat.completion" : "text_completion"},
                {"created", created}, {"model", job.model},
                {"choices", arr},     {"usage", usage_json(prompt_tokens_of(job), completion_tokens)}};
    if (job.return_token_ids) {
        json pids = json::array();
        for (const auto& p : job.prompts) pids.push_back(ids_json(p));
        out["prompt_token_ids"] = job.prompts.size() == 1 ? pids[0] : pids;
    }
    send_json(res, out);
}

bool OpenAiServer::stream_events(StreamState& st, httplib::DataSink& sink) {
    const bool chat = st.job.kind == ApiKind::chat;
    const int n_choices = static_cast<int>(st.job.prompts.size()) * st.job.n;
    auto chunk = [&](json choices) {
        json j = {{"id", st.id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", st.created},
                  {"model", st.job.model},
                  {"choices", std::move(choices)}};
        if (st.job.include_usage) j["usage"] = nullptr;
        return j;
    };
    auto write_text = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    auto write = [&](const json& j) { return write_text("data: " + dump_json(j) + "\n\n"); };
    auto gone = [&] {
        cancel(*st.call);
        return false;
    };
    if (chat)
        for (int i = 0; i < n_choices; ++i)
            if (!write(chunk(json::array({{{"index", i},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}}))))
                return gone();
    bool cancelled = false;
    int idle_ms = 0;
    bool last_round = false;
    while (true) {
        const bool all_done = st.call->all_finished();  // final events are queued before this turns true
        auto events = st.call->take(std::chrono::milliseconds(all_done ? 0 : 250));
        if (m_stopping && !cancelled) {
            cancel(*st.call);
            cancelled = true;
        }
        if (events.empty() && !all_done) {
            idle_ms += 250;
            if (idle_ms >= 1000) {  // an SSE comment: finds a client that has gone while nothing streams
                if (!write_text(": keep-alive\n\n")) return gone();
                idle_ms = 0;
            }
            continue;
        }
        idle_ms = 0;
        for (const ApiCall::Event& ev : events) {
            if (!ev.error.empty()) {
                if (!write(bad_request(ev.error, "prompt").to_json())) return gone();
                continue;
            }
            if (ev.text.empty() && !ev.finished && !ev.logprobs) continue;
            json c = {{"index", ev.index},
                      {"logprobs", nullptr},
                      {"finish_reason", ev.finished ? json(finish_reason_text(ev.reason)) : json(nullptr)}};
            if (ev.logprobs && ev.token >= 0) {
                const LogprobsJson lj(m_session->tokenizer(), st.job.top_logprobs);
                c["logprobs"] = chat ? json{{"content", lj.chat_content({ev.token}, {*ev.logprobs})}}
                                     : lj.completion({ev.token}, {*ev.logprobs},
                                                     &st.text_offsets[static_cast<size_t>(ev.index)]);
            }
            if (chat) c["delta"] = ev.text.empty() ? json::object() : json{{"content", ev.text}};
            else
                c["text"] = ev.text;
            if (st.job.return_token_ids && ev.token >= 0) c["token_ids"] = json::array({ev.token});
            if (!write(chunk(json::array({c})))) return gone();
        }
        if (last_round) break;
        if (all_done) last_round = true;  // one more take drains what came with the last event
    }
    const std::vector<ApiCall::Choice> choices = st.call->choices();
    int64_t completion_tokens = 0;
    int max_gen = 0;
    for (const auto& c : choices) {
        completion_tokens += static_cast<int64_t>(c.tokens.size());
        max_gen = std::max(max_gen, static_cast<int>(c.tokens.size()));
    }
    m_metrics->on_api_request_finished(st.job.n, max_gen);
    if (st.job.include_usage) {
        json u = chunk(json::array());
        u["usage"] = usage_json(prompt_tokens_of(st.job), completion_tokens);
        if (!write(u)) return gone();
    }
    if (!write_text("data: [DONE]\n\n")) return gone();
    sink.done();
    return true;
}

}  // namespace kvs::server
