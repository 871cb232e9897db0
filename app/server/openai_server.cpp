#include "app/server/openai_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <functional>
#include <future>
#include <optional>

#include "app/server/http_reply.h"
#include "app/server/telemetry_stream.h"
#include "app/server/worker_pool.h"
#include "engine/sampling/watermark.h"

namespace kvs::server {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Compares without an early exit, so the time taken does not tell how much of a key matched.
bool same_secret(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
    return diff == 0 && !b.empty();
}

// The body of a JSON route as an object whose optional "model" field is checked with
// check_model (when given); nullopt once the error (not JSON, not an object, a "model" that
// is not a string or not served here) has been sent.
std::optional<json> read_body(const httplib::Request& req, httplib::Response& res,
                              const std::function<std::optional<ApiError>(const std::string&)>& check_model) {
    json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded()) {
        send_error(res, bad_request("the request body is not valid JSON (or not valid UTF-8)", "", "invalid_json"));
        return std::nullopt;
    }
    if (!j.is_object()) {
        send_error(res, bad_request("the request body must be a JSON object"));
        return std::nullopt;
    }
    if (check_model) {
        FieldReader f(j);
        std::string model;
        if (!f.string("model", &model)) {
            send_error(res, *f.error());
            return std::nullopt;
        }
        if (auto e = check_model(model)) {
            send_error(res, *e);
            return std::nullopt;
        }
    }
    return j;
}

}  // namespace

OpenAiServer::OpenAiServer(std::shared_ptr<const Session> session, EngineLoop& loop, ServerOptions opt)
    : m_session(std::move(session)), m_loop(loop), m_opt(std::move(opt)) {
    std::promise<std::tuple<int, int, int>> info;
    auto fut = info.get_future();
    m_loop.post([&info](Engine& e) { info.set_value({e.max_model_len(), e.block_size(), e.kv_cache().n_blocks()}); });
    std::tie(m_limits.max_model_len, m_block_size, m_n_blocks) = fut.get();
    m_limits.max_n = m_opt.max_n;
    m_limits.max_stop = m_opt.max_stop;
    m_limits.max_engine_requests = std::max(1, std::min(64, m_opt.max_pending));
    if (m_opt.served_model_name.empty()) m_opt.served_model_name = m_session->model().config.name;
    if (m_opt.served_model_name.empty()) m_opt.served_model_name = "kvscope";
    m_metrics = std::make_shared<ServerMetrics>(m_opt.served_model_name, m_limits.max_model_len);
    m_created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

OpenAiServer::~OpenAiServer() { stop(); }

std::string OpenAiServer::client_label(const std::string& remote_addr, const std::string& user) {
    std::string s = user.empty() ? "HTTP " + remote_addr : user;
    constexpr size_t kMax = 48;
    if (s.size() > kMax) {
        size_t cut = kMax;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
        s.resize(cut);
    }
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    return s;
}

std::string OpenAiServer::url() const {
    const bool v6 = m_opt.host.find(':') != std::string::npos;
    return "http://" + (v6 ? "[" + m_opt.host + "]" : m_opt.host) + ":" + std::to_string(m_port);
}

Status OpenAiServer::start() {
    if (m_running) return Status::error("the server is already running at " + url());
    m_http = std::make_unique<httplib::Server>();
    const size_t max_threads = static_cast<size_t>(std::max(4, m_opt.max_http_threads));
    m_http->new_task_queue = [max_threads] { return new WorkerPool(max_threads); };
    m_http->set_payload_max_length(m_opt.max_body_bytes);
    m_http->set_read_timeout(30, 0);
    m_http->set_write_timeout(30, 0);
    install_routes();
    // cpp-httplib listens with a backlog of 5 (compiled into Debian's library): a burst of
    // clients connecting at once would see resets. Keep the socket, raise the backlog after.
    int listen_fd = -1;
    // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT on Linux, which lets a
    // second server (another kvscope, the window's Local server) bind a port one already
    // listens on and take half its connections, instead of failing with "port in use".
    m_http->set_socket_options([&listen_fd](socket_t sock) {
        int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        listen_fd = sock;
    });
    const std::string addr = m_opt.host + ":" + std::to_string(m_opt.port);
    if (m_opt.port == 0) {
        m_port = m_http->bind_to_any_port(m_opt.host);
        if (m_port <= 0) return Status::error("cannot listen on " + m_opt.host + " (any port)");
    } else {
        if (!m_http->bind_to_port(m_opt.host, m_opt.port))
            return Status::error("cannot listen on " + addr +
                                 " (is the port in use, or the address not one of this machine's?)");
        m_port = m_opt.port;
    }
    if (listen_fd >= 0) ::listen(listen_fd, 4096);
    m_stopping = false;
    m_running = true;
    // Returns once the library is accepting: its stop() does nothing before then, so a stop()
    // right after start() (a loaded machine may not run the new thread for a while) would leave
    // the thread blocked in accept() and stop() waiting on it forever.
    auto listen_ended = std::make_shared<std::atomic<bool>>(false);
    m_thread = std::thread([this, listen_ended] {
        m_http->listen_after_bind();
        *listen_ended = true;
    });
    while (!m_http->is_running() && !*listen_ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::ok();
}

void OpenAiServer::stop() {
    if (!m_running.exchange(false)) return;
    m_stopping = true;
    {
        std::vector<std::shared_ptr<ApiCall>> calls;
        {
            std::lock_guard<std::mutex> lk(m_calls_mu);
            for (auto& w : m_calls)
                if (auto c = w.lock()) calls.push_back(std::move(c));
            m_calls.clear();
        }
        for (auto& c : calls) cancel(*c);
    }
    const auto deadline = Clock::now() + std::chrono::milliseconds(m_opt.shutdown_grace_ms);
    while (m_handlers > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m_http->stop();
    if (m_thread.joinable()) m_thread.join();
    m_http.reset();
}

bool OpenAiServer::origin_allowed(const std::string& origin) const {
    for (const auto& o : m_opt.allowed_origins)
        if (o == "*" || o == origin) return true;
    return false;
}

void OpenAiServer::add_cors(const httplib::Request& req, httplib::Response& res) const {
    const std::string origin = req.get_header_value("Origin");
    if (origin.empty() || !origin_allowed(origin)) return;
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
}

bool OpenAiServer::check_access(const httplib::Request& req, httplib::Response& res) {
    if (req.method == "OPTIONS") {  // CORS preflight: answered here, no key needed
        const std::string origin = req.get_header_value("Origin");
        if (origin.empty() || !origin_allowed(origin)) {
            send_error(res, ApiError{403,
                                     "origin " + (origin.empty() ? std::string("(none)") : "'" + origin + "'") +
                                         " is not allowed (kvscope serve --allowed-origins)",
                                     "invalid_request_error", "", "cors_origin_not_allowed"});
            return true;
        }
        res.status = 204;
        add_cors(req, res);
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string want = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers", want.empty() ? "Authorization, Content-Type" : want);
        res.set_header("Access-Control-Max-Age", "600");
        return true;
    }
    if (!m_opt.api_key.empty() && req.path.rfind("/v1", 0) == 0) {
        const std::string auth = req.get_header_value("Authorization");
        const std::string prefix = "Bearer ";
        const bool ok = auth.rfind(prefix, 0) == 0 && same_secret(auth.substr(prefix.size()), m_opt.api_key);
        if (!ok) {
            send_error(res, ApiError{401,
                                     auth.empty() ? "no API key given: send Authorization: Bearer <key>"
                                                  : "incorrect API key provided",
                                     "invalid_request_error", "", "invalid_api_key"});
            add_cors(req, res);
            return true;
        }
    }
    return false;
}

void OpenAiServer::install_routes() {
    using httplib::Request;
    using httplib::Response;
    httplib::Server& s = *m_http;
    s.set_pre_routing_handler([this](const Request& req, Response& res) {
        return check_access(req, res) ? httplib::Server::HandlerResponse::Handled
                                      : httplib::Server::HandlerResponse::Unhandled;
    });
    s.set_post_routing_handler([this](const Request& req, Response& res) { add_cors(req, res); });
    s.set_error_handler([this](const Request& req, Response& res) {
        if (!res.body.empty()) return;
        ApiError e{res.status, "", "invalid_request_error", "", ""};
        if (res.status == 404) e.message = "no route " + req.method + " " + req.path;
        else if (res.status == 413)
            e.message = "the request body is over the limit of " + std::to_string(m_opt.max_body_bytes) + " bytes";
        else
            e.message = "HTTP " + std::to_string(res.status);
        if (res.status == 413) e.code = "request_too_large";
        send_error(res, e);
    });
    s.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& ex) {
            what = ex.what();
        } catch (...) {
        }
        send_error(res, ApiError{500, "internal error: " + what, "server_error", "", ""});
    });

    s.Get("/health", [this](const Request&, Response& res) {
        res.status = m_stopping ? 503 : 200;
        res.set_content("", "text/plain");
    });
    s.Get("/version", [](const Request&, Response& res) { send_json(res, {{"version", "kvscope 0.1.0"}}); });
    s.Get("/v1/models", [this](const Request&, Response& res) { handle_models(res); });
    s.Get("/metrics", [this](const Request&, Response& res) { handle_metrics(res); });
    install_telemetry_route(s, m_session, m_loop, m_opt.served_model_name, &m_stopping);  // GET /v1/kvscope/telemetry
    s.Post("/tokenize", [this](const Request& req, Response& res) { handle_tokenize(req, res); });
    s.Post("/detokenize", [this](const Request& req, Response& res) { handle_detokenize(req, res); });
    s.Post("/v1/completions",
           [this](const Request& req, Response& res) { handle_completion(req, res, ApiKind::completion); });
    s.Post("/v1/chat/completions",
           [this](const Request& req, Response& res) { handle_completion(req, res, ApiKind::chat); });
    s.Post("/", [this](const Request& req, Response& res) { handle_tgi_generate(req, res, TgiRoute::compat); });
    s.Post("/generate",
           [this](const Request& req, Response& res) { handle_tgi_generate(req, res, TgiRoute::generate); });
    s.Post("/generate_stream",
           [this](const Request& req, Response& res) { handle_tgi_generate(req, res, TgiRoute::stream); });
    s.Get("/info", [this](const Request&, Response& res) { handle_tgi_info(res); });
    s.Post("/watermark/detect", [this](const Request& req, Response& res) { handle_watermark_detect(req, res); });
    s.Post("/v1/load_lora_adapter", [this](const Request& req, Response& res) { handle_load_lora(req, res); });
    s.Post("/v1/unload_lora_adapter", [this](const Request& req, Response& res) { handle_unload_lora(req, res); });
}

void OpenAiServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) const {
    const auto body = read_body(req, res, [this](const std::string& m) { return check_model(m); });
    if (!body) return;
    const json& j = *body;
    FieldReader f(j);
    bool add_special = true, add_generation_prompt = true;
    f.boolean("add_special_tokens", &add_special);
    f.boolean("add_generation_prompt", &add_generation_prompt);
    if (f.error()) return send_error(res, *f.error());
    std::vector<int32_t> ids;
    if (f.has("messages")) {
        const std::vector<ChatMessage> msgs = read_chat_messages(j, f);
        if (f.error()) return send_error(res, *f.error());
        ids = m_session->tokenizer().encode(m_session->chat_text(msgs, add_generation_prompt), add_special, true);
    } else {
        std::string prompt;
        if (!f.has("prompt")) return send_error(res, bad_request("prompt (or messages) is missing", "prompt"));
        if (!f.string("prompt", &prompt)) return send_error(res, *f.error());
        ids = m_session->tokenizer().encode(prompt, add_special, false);
    }
    json tokens = json::array();
    for (int32_t t : ids) tokens.push_back(t);
    send_json(res, {{"count", ids.size()}, {"max_model_len", m_limits.max_model_len}, {"tokens", tokens}});
}

void OpenAiServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) const {
    const auto body = read_body(req, res, [this](const std::string& m) { return check_model(m); });
    if (!body) return;
    const json& j = *body;
    FieldReader f(j);
    if (!f.has("tokens") || !j["tokens"].is_array())
        return send_error(res, bad_request("tokens must be a list of token ids", "tokens"));
    const int n_vocab = m_session->model().config.n_vocab;
    std::vector<int32_t> ids;
    for (const json& t : j["tokens"]) {
        if (!t.is_number_integer()) return send_error(res, bad_request("tokens must hold integers only", "tokens"));
        const int64_t id = t.get<int64_t>();
        if (id < 0 || id >= n_vocab)
            return send_error(res,
                              bad_request("token id " + std::to_string(id) + " is not a token of this model (0 to " +
                                              std::to_string(n_vocab - 1) + ")",
                                          "tokens"));
        ids.push_back(static_cast<int32_t>(id));
    }
    send_json(res, {{"prompt", m_session->decode(ids)}});
}

void OpenAiServer::handle_metrics(httplib::Response& res) {
    std::lock_guard<std::mutex> lk(m_metrics_scrape_mu);  // one scrape at a time: the step cursor
    auto prom = std::make_shared<std::promise<EngineGauges>>();
    auto fut = prom->get_future();
    const int64_t after = m_metrics->last_step();
    m_loop.post([prom, after](Engine& e) { prom->set_value(read_engine_gauges(e, after)); });
    if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
        return send_error(res, ApiError{503, "the engine did not answer within 10 s", "server_error", "", ""});
    res.status = 200;
    res.set_content(m_metrics->render(fut.get()), "text/plain; version=0.0.4; charset=utf-8");
}

void OpenAiServer::handle_watermark_detect(const httplib::Request& req, httplib::Response& res) const {
    const auto body = read_body(req, res, nullptr);
    if (!body) return;
    const json& j = *body;
    FieldReader f(j);
    std::string text;
    f.string("text", &text);
    double gamma = 0.5, delta = 2.0;
    f.number("gamma", &gamma, 0.0, 1.0, /*lo_open=*/true);
    f.number("delta", &delta, 0.0, 100.0);
    if (f.error()) return send_error(res, *f.error());
    std::vector<int32_t> ids;
    if (f.has("tokens")) {
        if (!j["tokens"].is_array())
            return send_error(res, bad_request("tokens must be a list of token ids", "tokens"));
        for (const json& t : j["tokens"]) {
            if (!t.is_number_integer()) return send_error(res, bad_request("tokens must hold integers only", "tokens"));
            ids.push_back(static_cast<int32_t>(std::clamp<int64_t>(t.get<int64_t>(), INT32_MIN, INT32_MAX)));
        }
    } else if (f.has("text")) {
        ids = m_session->tokenizer().encode(text, false, false);  // as the text was generated: no BOS
    } else {
        return send_error(res, bad_request("give text or tokens to score", "text"));
    }
    WatermarkParams p;
    p.gamma = static_cast<float>(gamma);
    p.delta = static_cast<float>(delta);
    if (gamma >= 1.0) return send_error(res, bad_request("gamma must be below 1", "gamma"));
    auto r = detect_watermark(ids, m_session->model().config.n_vocab, p);
    if (!r) return send_error(res, bad_request(r.message(), "tokens"));
    send_json(res, {{"n_tokens", ids.size()},
                    {"n_scored", r->n_scored},
                    {"n_green", r->n_green},
                    {"z", std::isfinite(r->z) ? json(r->z) : json(nullptr)},
                    {"p_value", r->p_value},
                    {"gamma", gamma}});
}

bool OpenAiServer::admit(int k) {
    int cur = m_pending->load();
    while (cur + k <= m_opt.max_pending)
        if (m_pending->compare_exchange_weak(cur, cur + k)) return true;
    return false;
}

void OpenAiServer::release(int k) { *m_pending -= k; }

void OpenAiServer::cancel(const ApiCall& call) {
    for (RequestId id : call.unfinished_ids()) m_loop.cancel(id);
}

}  // namespace kvs::server
