#pragma once
// A client of OpenAI-compatible servers (kvscope serve, llama.cpp's llama-server, vLLM,
// anything that speaks /v1): GET /v1/models, POST /v1/chat/completions and /v1/completions,
// streaming (server-sent events, app/net/sse_parser.h) or not, POST /tokenize. Qt-free:
// the CLI's `bench --serve` and the window's remote chats use it alike.
//
// One client runs one request at a time (make one per thread); cancel() may be called from
// any other thread and ends the request in flight (its socket is shut down, so even a
// server that never answers lets go at once) and every later one until reset_cancel().
//
// Every fault is an error Status naming the URL and what was wrong, never an exception or a
// hang: the connection refused or timed out, no byte for read_timeout_s, the whole request
// over total_timeout_s, an HTTP error (with the server's OpenAI-style error message when it
// sent one), a body over max_body_bytes, an SSE event over max_event_bytes, invalid JSON, a
// response without the fields a completion has, a stream that stopped mid-event or ended
// without "data: [DONE]" and without a finish_reason, cancellation.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace httplib {
class Client;
}

namespace kvs::net {

struct ClientOptions {
    std::string base_url = "http://127.0.0.1:8000";  // with or without a trailing /v1
    std::string api_key;                             // sent as "Authorization: Bearer KEY" when set
    double connect_timeout_s = 10;
    double read_timeout_s = 120;  // longest wait for the next bytes
    double total_timeout_s = 0;   // whole request; 0: no limit
    size_t max_event_bytes = size_t{1} << 20;
    size_t max_body_bytes = size_t{64} << 20;
};

struct ChatTurn {
    std::string role;  // system, user, assistant
    std::string content;
};

// One completion request: chat when `messages` is set, else text completion of `prompt`
// (or of `prompt_ids`, token ids, when that is non-empty). Unset options are not sent.
struct CompletionRequest {
    std::string model;
    std::vector<ChatTurn> messages;
    std::string prompt;
    std::vector<int32_t> prompt_ids;
    std::optional<int> max_tokens;
    std::optional<double> temperature, top_p;
    std::optional<int> top_k;
    std::optional<uint64_t> seed;
    std::vector<std::string> stop;
    bool ignore_eos = false;
    bool stream = true;
    bool include_usage = true;  // stream_options.include_usage (the token counts in the last chunk)
    nlohmann::json extra = nlohmann::json::object();  // merged into the body last (e.g. "watermark": true)
    bool is_chat() const { return !messages.empty(); }
};

struct Usage {
    int64_t prompt_tokens = -1;  // -1: the server did not say
    int64_t completion_tokens = -1;
};

// A piece of streamed text as it arrives (one SSE chunk of choice 0).
struct StreamDelta {
    std::string text;
    std::string finish_reason;  // set on the chunk that ends the choice
};

struct CompletionResult {
    std::string text;           // choice 0, whole
    std::string finish_reason;  // stop, length, abort, ...
    Usage usage;
    int n_chunks = 0;     // streamed chunks that carried text
    nlohmann::json last;  // the response (non-streaming) or the last chunk
};

class OpenAIClient {
public:
    explicit OpenAIClient(ClientOptions opt);
    ~OpenAIClient();
    OpenAIClient(const OpenAIClient&) = delete;
    OpenAIClient& operator=(const OpenAIClient&) = delete;

    // Checks the URL (http or https, a host): an error naming what is wrong.
    static Status check_url(const std::string& base_url);
    const ClientOptions& options() const { return m_opt; }

    // The ids of GET /v1/models.
    Result<std::vector<std::string>> list_models();
    // A completion. With req.stream, on_delta is called for every chunk with text or a
    // finish reason; returning false cancels the request (the result is then an error
    // saying so). Without streaming on_delta is not called.
    Result<CompletionResult> complete(const CompletionRequest& req,
                                      const std::function<bool(const StreamDelta&)>& on_delta = {});
    // GET of another path of the server (base path + path, e.g. "/metrics", "/version",
    // "/slots"): the status and body whatever the status; an error only when no answer came
    // (refused, timed out, cancelled, over max_body_bytes).
    struct HttpReply {
        int status = 0;
        std::string body;
    };
    Result<HttpReply> get(const std::string& path);
    // GET of a streamed path (base path + path, e.g. "/v1/kvscope/telemetry"): while the
    // status is 200 on_bytes gets the body as it arrives (false from it stops the transfer,
    // and the result is ok); any other status is an error with the server's message.
    Status get_stream(const std::string& path, const std::function<bool(const char*, size_t)>& on_bytes);
    // POST /tokenize (vLLM's {"prompt"} and llama-server's {"content"} shapes): token ids of
    // text as the server counts them, without special tokens.
    Result<std::vector<int32_t>> tokenize(const std::string& model, const std::string& text);

    // Thread-safe: ends the request in flight and makes later ones fail until reset_cancel().
    void cancel();
    void reset_cancel() { m_cancel = false; }
    bool cancelled() const { return m_cancel; }

    // The JSON body complete() would send (for tests and --verbose).
    static nlohmann::json request_body(const CompletionRequest& req);

private:
    struct Reply {
        int status = 0;
        std::string body;
    };
    Result<Reply> send(const std::string& method, const std::string& path, const std::string& body,
                       const std::function<bool(const char*, size_t)>& on_bytes, bool any_status = false);
    std::string v1(const std::string& tail) const;  // base path + /v1 + tail
    std::string url(const std::string& path) const;

    ClientOptions m_opt;
    std::string m_host;       // scheme://host:port
    std::string m_base_path;  // path of base_url without a trailing "/" or "/v1"
    std::unique_ptr<httplib::Client> m_http;
    std::mutex m_http_mutex;  // guards m_http against cancel() while it is created
    std::atomic<bool> m_cancel{false};
};

// The message of an OpenAI-style error body {"error": {"message": ...}} (or TGI's
// {"error": "..."}, or {"detail": ...}); "" when the body is none of these.
std::string error_message_of(const std::string& body);

}  // namespace kvs::net
