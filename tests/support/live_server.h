#pragma once
// A live KV Scope server for the net tests (label "net", linked with kvscope_server):
// a tiny model the test writes (tiny_model.h) or the installed default model, an EngineLoop
// from the Session, and app/server's OpenAiServer on 127.0.0.1 with an ephemeral port; and
// readers of what comes back (JSON, Server-Sent Events). Header-only: only net tests
// include it.
#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/server/openai_server.h"
#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

namespace kvs::test {

struct LiveServer {
    std::shared_ptr<Session> session;
    std::unique_ptr<EngineLoop> loop;
    std::unique_ptr<server::OpenAiServer> server;

    ~LiveServer() {
        if (server) server->stop();
        server.reset();
        loop.reset();
    }
    std::unique_ptr<httplib::Client> client(int timeout_s = 60) const {
        auto c = std::make_unique<httplib::Client>("127.0.0.1", server->port());
        c->set_read_timeout(timeout_s, 0);
        c->set_write_timeout(timeout_s, 0);
        c->set_connection_timeout(5, 0);
        return c;
    }
};

// The tiny GGUF model written once per test process under the test output folder.
inline std::string tiny_server_model(const std::string& name = "server_tiny.gguf") {
    const std::string path = output_path(name);
    static bool written = false;
    if (!written) {
        TinyModelSpec spec;
        spec.n_ctx_train = 512;
        if (Status st = write_tiny_gguf(path, spec); !st) return {};
        written = true;
    }
    return path;
}

// Opens the model, starts an engine loop (small pool unless eo says otherwise) and the
// server on an ephemeral loopback port.
inline Result<std::unique_ptr<LiveServer>> start_live_server(const std::string& model_path,
                                                             server::ServerOptions so = {}, EngineOptions eo = {}) {
    auto ls = std::make_unique<LiveServer>();
    auto session = Session::open(model_path);
    if (!session) return session.status();
    ls->session = std::move(session.value());
    if (eo.n_threads == 0) eo.n_threads = 2;
    eo.snapshot_every = 0;
    auto loop = ls->session->start_loop(eo);
    if (!loop) return loop.status();
    ls->loop = std::move(loop.value());
    so.host = "127.0.0.1";
    so.port = 0;
    if (so.served_model_name.empty()) so.served_model_name = "tiny";
    ls->server = std::make_unique<server::OpenAiServer>(ls->session, *ls->loop, so);
    if (Status st = ls->server->start(); !st) return st;
    return ls;
}

// A reply body as JSON (discarded when it is not JSON).
inline nlohmann::json body_json(const std::string& body) { return nlohmann::json::parse(body, nullptr, false); }

// True when j is {"error": {"message": string, "type": string, "param": string|null, "code": string|null}}.
inline bool is_openai_error(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return false;
    const auto& e = j["error"];
    return e.contains("message") && e["message"].is_string() && !e["message"].get<std::string>().empty() &&
           e.contains("type") && e["type"].is_string() && e.contains("param") &&
           (e["param"].is_null() || e["param"].is_string()) && e.contains("code") &&
           (e["code"].is_null() || e["code"].is_string());
}

// An SSE body: its `data:` JSON chunks in order, whether it ended with `data: [DONE]`, and
// every line that is neither (malformed lines; comments and blank lines are fine).
struct SseBody {
    std::vector<nlohmann::json> chunks;
    bool done = false;
    bool data_after_done = false;
    std::vector<std::string> bad_lines;
};

inline SseBody parse_sse(const std::string& body) {
    SseBody out;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t nl = body.find('\n', pos);
        if (nl == std::string::npos) nl = body.size();
        std::string line = body.substr(pos, nl - pos);
        pos = nl + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == ':') continue;
        if (line.rfind("data: ", 0) != 0) {
            out.bad_lines.push_back(line);
            continue;
        }
        const std::string data = line.substr(6);
        if (out.done) out.data_after_done = true;
        if (data == "[DONE]") {
            out.done = true;
            continue;
        }
        auto j = nlohmann::json::parse(data, nullptr, false);
        if (j.is_discarded()) out.bad_lines.push_back(line);
        else
            out.chunks.push_back(std::move(j));
    }
    return out;
}

// One metric's value from Prometheus text: the first sample whose name and labels start with
// `prefix` (e.g. "vllm:num_requests_running{"); -1 when absent.
inline double metric_value(const std::string& text, const std::string& prefix) {
    size_t pos = 0;
    while ((pos = text.find(prefix, pos)) != std::string::npos) {
        if (pos == 0 || text[pos - 1] == '\n') {
            const size_t eol = text.find('\n', pos);
            const std::string line = text.substr(pos, eol - pos);
            const size_t sp = line.rfind(' ');
            return std::stod(line.substr(sp + 1));
        }
        pos += prefix.size();
    }
    return -1;
}

}  // namespace kvs::test
