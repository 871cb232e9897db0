#pragma once
// KV Scope's local HTTP server: vLLM-style OpenAI API routes (/v1/models,
// /v1/completions, /v1/chat/completions, /tokenize, /detokenize, /health, /metrics,
// /version), TGI's (/generate, /generate_stream, POST /, /info) and /watermark/detect, on
// one shared Session and one EngineLoop. It owns neither: the CLI's
// `kvscope serve` makes both, and the desktop window can host the same server on the
// EngineLoop its chats use, so HTTP requests batch with chats and show in the same views.
//
// Threads: cpp-httplib serves each connection on a worker of a pool that grows on demand
// (up to ServerOptions::max_http_threads); a handler submits to the EngineLoop and waits on
// its ApiCall, never touching the Engine itself except through EngineLoop::post (for
// /metrics). Every bad input is a 4xx with an OpenAI-style JSON error.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/server/api_call.h"
#include "app/server/completion_request.h"
#include "app/server/prometheus_metrics.h"
#include "engine/runtime/session.h"

namespace httplib {
class DataSink;
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kvs::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;                           // 0: any free port (tests)
    std::string served_model_name;             // the "model" clients send and see
    std::string api_key;                       // "": no key; else Authorization: Bearer on /v1/*
    std::vector<std::string> allowed_origins;  // CORS; "*" allows every origin; empty: none
    size_t max_body_bytes = size_t{8} << 20;   // larger bodies get 413
    int max_pending = 512;                     // engine requests queued or running before 429
    int max_http_threads = 600;                // connection workers at most
    int max_n = 16;                            // n per prompt
    int max_stop = 64;                         // stop strings per request
    int shutdown_grace_ms = 5000;              // stop(): how long cancelled requests get to end
    // Called on the engine thread with each finished engine request's metrics (the window's
    // metrics view counts HTTP requests with its chats); must be cheap.
    std::function<void(const RequestMetrics&)> on_request_finished;
    // POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's routes, which vLLM opens
    // with VLLM_ALLOW_RUNTIME_LORA_UPDATING): off unless `kvscope serve --enable-lora-runtime`,
    // since they read any path the server's user can read; when off they answer 404 saying so.
    bool allow_runtime_lora = false;
};

// Counts an HTTP handler in flight from construction to destruction (a streaming reply's
// copy lives until its last byte is written).
struct HandlerToken {
    std::atomic<int>* counter;
    explicit HandlerToken(std::atomic<int>* c) : counter(c) { ++*counter; }
    ~HandlerToken() { --*counter; }
    HandlerToken(const HandlerToken&) = delete;
    HandlerToken& operator=(const HandlerToken&) = delete;
};

class OpenAiServer {
public:
    // Reads the engine's context and pool through the loop (a posted command).
    OpenAiServer(std::shared_ptr<const Session> session, EngineLoop& loop, ServerOptions opt);
    ~OpenAiServer();  // stop()
    OpenAiServer(const OpenAiServer&) = delete;
    OpenAiServer& operator=(const OpenAiServer&) = delete;

    // Binds host:port and starts serving on its own thread; the error names the address.
    Status start();
    // Stops taking requests (503), cancels those in flight, lets their replies end (their
    // streams get finish_reason "abort" and [DONE]) within shutdown_grace_ms, then closes.
    void stop();
    bool running() const { return m_running; }

    int port() const { return m_port; }
    std::string url() const;
    const std::string& model_name() const { return m_opt.served_model_name; }
    int max_model_len() const { return m_limits.max_model_len; }
    int requests_in_flight() const { return *m_pending; }  // engine requests not finished
    int clients_connected() const { return m_handlers; }   // HTTP requests being served

    // How the engine's views name a request (GenerationRequest::client): the request's `user`
    // field when it has one, else "HTTP <remote address>"; control bytes become spaces, and
    // it is cut (at a character boundary) to 48 bytes.
    static std::string client_label(const std::string& remote_addr, const std::string& user);

private:
    void install_routes();
    // Pre-routing: CORS preflight, the API key.
    bool check_access(const httplib::Request& req, httplib::Response& res);
    void add_cors(const httplib::Request& req, httplib::Response& res) const;
    bool origin_allowed(const std::string& origin) const;

    void handle_completion(const httplib::Request& req, httplib::Response& res, ApiKind kind);
    // TGI's routes (tgi_api.cpp): POST / (compat), /generate, /generate_stream; GET /info.
    enum class TgiRoute { compat, generate, stream };
    struct TgiJob;
    std::string parse_tgi(const std::string& body, TgiJob* t) const;
    void handle_tgi_generate(const httplib::Request& req, httplib::Response& res, TgiRoute route);
    void handle_tgi_info(httplib::Response& res) const;
    // POST /watermark/detect: the z-score of a text or token ids (engine/sampling/watermark.h).
    void handle_watermark_detect(const httplib::Request& req, httplib::Response& res) const;
    struct StreamState;
    bool stream_events(StreamState& st, httplib::DataSink& sink);
    // openai_lora.cpp: the base model and the Session's LoRA adapters as models.
    void handle_models(httplib::Response& res) const;
    void handle_load_lora(const httplib::Request& req, httplib::Response& res);
    void handle_unload_lora(const httplib::Request& req, httplib::Response& res);
    void handle_tokenize(const httplib::Request& req, httplib::Response& res) const;
    void handle_detokenize(const httplib::Request& req, httplib::Response& res) const;
    void handle_metrics(httplib::Response& res);

    // Admission: reserve k engine requests, or false when the queue is full.
    bool admit(int k);
    void release(int k);
    std::shared_ptr<ApiCall> submit(const CompletionJob& job, const std::string& client);
    // use_beam_search (openai_beam.cpp): one beam request per prompt, its n best hypotheses the choices.
    std::shared_ptr<ApiCall> submit_beam(const CompletionJob& job, const std::string& client);
    void cancel(const ApiCall& call);
    // The unknown-model error (404 model_not_found), or nullopt when the request names this
    // server's model, one of the Session's LoRA adapters (then *adapter is set, if given) or none.
    std::optional<ApiError> check_model(const std::string& model,
                                        std::shared_ptr<const LoraAdapter>* adapter = nullptr) const;

    std::shared_ptr<const Session> m_session;
    EngineLoop& m_loop;
    ServerOptions m_opt;
    RequestLimits m_limits;
    int m_block_size = 0, m_n_blocks = 0;
    int64_t m_created = 0;                     // unix time the server started (the models list's "created")
    std::shared_ptr<ServerMetrics> m_metrics;  // shared with engine callbacks
    std::unique_ptr<httplib::Server> m_http;
    std::thread m_thread;
    int m_port = 0;
    std::atomic<bool> m_running{false};
    std::atomic<bool> m_stopping{false};
    std::shared_ptr<std::atomic<int>> m_pending = std::make_shared<std::atomic<int>>(0);  // shared with callbacks
    std::atomic<int> m_handlers{0};
    std::atomic<uint64_t> m_next_call{1};
    mutable std::mutex m_calls_mu;
    std::vector<std::weak_ptr<ApiCall>> m_calls;  // in flight, for stop()
    std::mutex m_metrics_scrape_mu;
};

}  // namespace kvs::server
