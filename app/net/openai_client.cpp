#include "app/net/openai_client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "app/net/sse_parser.h"

namespace kvs::net {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ParsedUrl {
    std::string host;  // scheme://host[:port]
    std::string path;  // "" or "/prefix" without a trailing slash
};

Result<ParsedUrl> parse_url(const std::string& url) {
    const size_t sep = url.find("://");
    if (sep == std::string::npos) return Status::error("the URL '" + url + "' has no scheme (write http://HOST:PORT)");
    const std::string scheme = url.substr(0, sep);
    if (scheme != "http" && scheme != "https") return Status::error("the URL '" + url + "' is not http:// or https://");
    const size_t path_at = url.find('/', sep + 3);
    ParsedUrl p;
    p.host = url.substr(0, path_at);
    if (p.host.size() <= sep + 3) return Status::error("the URL '" + url + "' has no host");
    if (path_at != std::string::npos) p.path = url.substr(path_at);
    while (!p.path.empty() && p.path.back() == '/') p.path.pop_back();
    if (p.path.size() >= 3 && p.path.compare(p.path.size() - 3, 3, "/v1") == 0) p.path.resize(p.path.size() - 3);
    return p;
}

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", s);
    return buf;
}

std::string clip(const std::string& s, size_t n = 200) {
    std::string out = s.size() > n ? s.substr(0, n) + "..." : s;
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n') c = ' ';
    return out;
}

Result<json> parse_json(const std::string& text, const std::string& what) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return Status::error("invalid JSON in " + what + ": '" + clip(text) + "'");
    return j;
}

void read_usage(const json& j, Usage* u) {
    if (!j.contains("usage") || !j["usage"].is_object()) return;
    const json& us = j["usage"];
    if (us.contains("prompt_tokens") && us["prompt_tokens"].is_number_integer())
        u->prompt_tokens = us["prompt_tokens"].get<int64_t>();
    if (us.contains("completion_tokens") && us["completion_tokens"].is_number_integer())
        u->completion_tokens = us["completion_tokens"].get<int64_t>();
}

// Text and finish reason of choice 0 of a response or a chunk. An error when the JSON has
// no "choices" list (and is not a usage-only chunk, which has an empty one).
Status read_choice(const json& j, bool chat, bool streamed, StreamDelta* out, bool* has_choice) {
    *has_choice = false;
    if (!j.is_object()) return Status::error("a completion that is not a JSON object");
    if (j.contains("error")) {
        const std::string m = error_message_of(j.dump());
        return Status::error("the server reported an error: " + (m.empty() ? clip(j.dump()) : m));
    }
    if (!j.contains("choices") || !j["choices"].is_array())
        return Status::error("a completion without a \"choices\" list: '" + clip(j.dump()) + "'");
    const json& choices = j["choices"];
    if (choices.empty()) return Status::ok();
    const json& c = choices[0];
    if (!c.is_object()) return Status::error("a choice that is not a JSON object");
    *has_choice = true;
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) out->finish_reason = c["finish_reason"];
    const json* holder = &c;
    if (chat) {
        const char* key = streamed ? "delta" : "message";
        if (!c.contains(key) || !c[key].is_object())
            return Status::error(std::string("a chat choice without a \"") + key + "\" object: '" + clip(c.dump()) +
                                 "'");
        holder = &c[key];
        if (holder->contains("content") && (*holder)["content"].is_string()) out->text = (*holder)["content"];
    } else if (c.contains("text") && c["text"].is_string()) {
        out->text = c["text"];
    } else if (!streamed || !c.contains("finish_reason")) {
        return Status::error("a completion choice without \"text\": '" + clip(c.dump()) + "'");
    }
    return Status::ok();
}

}  // namespace

std::string error_message_of(const std::string& body) {
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return "";
    if (j.contains("error")) {
        const json& e = j["error"];
        if (e.is_string()) return e.get<std::string>();
        if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    }
    if (j.contains("detail")) return j["detail"].is_string() ? j["detail"].get<std::string>() : j["detail"].dump();
    return "";
}

Status OpenAIClient::check_url(const std::string& base_url) {
    auto p = parse_url(base_url);
    return p ? Status::ok() : p.status();
}

OpenAIClient::OpenAIClient(ClientOptions opt) : m_opt(std::move(opt)) {
    // Debian's cpp-httplib (0.11) writes with send(..., 0), not MSG_NOSIGNAL: a server that
    // closes the connection while a request is being written would end the whole program with
    // SIGPIPE (seen: tst_remote_llama_window against llama-server). Ignored, the write fails
    // with EPIPE and the request ends with an error like any other broken connection.
    std::signal(SIGPIPE, SIG_IGN);
    auto p = parse_url(m_opt.base_url);
    if (p) {
        m_host = p->host;
        m_base_path = p->path;
    }
}

OpenAIClient::~OpenAIClient() = default;

std::string OpenAIClient::v1(const std::string& tail) const { return m_base_path + "/v1" + tail; }
std::string OpenAIClient::url(const std::string& path) const { return m_host + path; }

void OpenAIClient::cancel() {
    m_cancel = true;
    std::lock_guard<std::mutex> lock(m_http_mutex);
    if (m_http) m_http->stop();  // shuts the socket of a request in flight down
}

Result<OpenAIClient::Reply> OpenAIClient::send(const std::string& method, const std::string& path,
                                               const std::string& body,
                                               const std::function<bool(const char*, size_t)>& on_bytes,
                                               bool any_status) {
    const std::string where = method + " " + url(path);
    if (m_host.empty()) return parse_url(m_opt.base_url).status();
    if (m_cancel) return Status::error(where + ": cancelled");
    {
        std::lock_guard<std::mutex> lock(m_http_mutex);
        if (!m_http) {
            m_http = std::make_unique<httplib::Client>(m_host);
            if (!m_http->is_valid()) return Status::error("cannot make a client for '" + m_host + "'");
            auto us = [](double s) { return std::chrono::microseconds(static_cast<int64_t>(s * 1e6)); };
            m_http->set_connection_timeout(us(m_opt.connect_timeout_s));
            m_http->set_read_timeout(us(m_opt.read_timeout_s));
            m_http->set_write_timeout(us(m_opt.read_timeout_s));
            m_http->set_keep_alive(true);
        }
    }
    httplib::Request req;
    req.method = method;
    req.path = path;
    req.body = body;
    if (!body.empty()) req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "application/json, text/event-stream");
    if (!m_opt.api_key.empty()) req.set_header("Authorization", "Bearer " + m_opt.api_key);

    Reply reply;
    std::string fault;  // why our receiver stopped the transfer
    const auto t0 = Clock::now();
    req.response_handler = [&](const httplib::Response& r) {
        reply.status = r.status;
        return true;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        if (m_cancel) {
            fault = "cancelled";
            return false;
        }
        if (m_opt.total_timeout_s > 0 &&
            std::chrono::duration<double>(Clock::now() - t0).count() > m_opt.total_timeout_s) {
            fault = "no complete answer within " + seconds(m_opt.total_timeout_s);
            return false;
        }
        if (reply.status != 200 || !on_bytes) {
            if (reply.body.size() + n > m_opt.max_body_bytes) {
                fault = "the response body is over the " + std::to_string(m_opt.max_body_bytes) + "-byte limit";
                return false;
            }
            reply.body.append(data, n);
            return true;
        }
        if (!on_bytes(data, n)) {
            fault = "stopped";
            return false;
        }
        return true;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    bool ok = m_http->send(req, res, err);
    // A kept-alive connection the server closed while idle (llama-server does between
    // requests) fails before any answer: the request never reached it, so send it once more
    // on a new connection.
    const double failed_after_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!ok && !m_cancel && fault.empty() && reply.status == 0 &&
        (err == httplib::Error::Read || err == httplib::Error::Write) &&
        failed_after_s < std::min(1.0, 0.5 * m_opt.read_timeout_s)) {  // at once, not a read timeout
        res = httplib::Response();
        err = httplib::Error::Success;
        ok = m_http->send(req, res, err);
    }
    if (m_cancel) return Status::error(where + ": cancelled");
    if (!fault.empty() && fault != "stopped") return Status::error(where + ": " + fault);
    if (fault == "stopped") {  // the caller's receiver said stop; it knows why
        reply.status = 200;
        return reply;
    }
    if (!ok) {
        std::string why = httplib::to_string(err);
        if (err == httplib::Error::Read)
            why += " (the connection closed, or no data came for " + seconds(m_opt.read_timeout_s) + ")";
        if (err == httplib::Error::Connection || err == httplib::Error::ConnectionTimeout)
            why += " (is a server listening at " + m_host + "?)";
        return Status::error(where + ": " + why);
    }
    if (reply.status == 0) reply.status = res.status;
    if (reply.status != 200 && !any_status) {
        const std::string m = error_message_of(reply.body);
        return Status::error(where + ": HTTP " + std::to_string(reply.status) + (res.reason.empty() ? "" : " ") +
                             res.reason +
                             (m.empty() ? (reply.body.empty() ? "" : ": '" + clip(reply.body) + "'") : ": " + m));
    }
    return reply;
}

Result<OpenAIClient::HttpReply> OpenAIClient::get(const std::string& path) {
    auto r = send("GET", m_base_path + path, "", {}, true);
    if (!r) return r.status();
    return HttpReply{r->status, std::move(r->body)};
}

Status OpenAIClient::get_stream(const std::string& path,
                                const std::function<bool(const char*, size_t)>& on_bytes) {
    auto r = send("GET", m_base_path + path, "", on_bytes);
    return r ? Status::ok() : r.status();
}

Result<std::vector<std::string>> OpenAIClient::list_models() {
    auto r = send("GET", v1("/models"), "", {});
    if (!r) return r.status();
    auto j = parse_json(r->body, "the answer of " + url(v1("/models")));
    if (!j) return j.status();
    if (!j->is_object() || !j->contains("data") || !(*j)["data"].is_array())
        return Status::error("the answer of " + url(v1("/models")) + " has no \"data\" list: '" + clip(r->body) + "'");
    std::vector<std::string> ids;
    for (const json& m : (*j)["data"])
        if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"]);
    return ids;
}

json OpenAIClient::request_body(const CompletionRequest& req) {
    json b = json::object();
    if (!req.model.empty()) b["model"] = req.model;
    if (req.is_chat()) {
        json msgs = json::array();
        for (const ChatTurn& t : req.messages) msgs.push_back({{"role", t.role}, {"content", t.content}});
        b["messages"] = msgs;
    } else if (!req.prompt_ids.empty()) {
        b["prompt"] = req.prompt_ids;
    } else {
        b["prompt"] = req.prompt;
    }
    if (req.max_tokens) b["max_tokens"] = *req.max_tokens;
    if (req.temperature) b["temperature"] = *req.temperature;
    if (req.top_p) b["top_p"] = *req.top_p;
    if (req.top_k) b["top_k"] = *req.top_k;
    if (req.seed) b["seed"] = *req.seed;
    if (!req.stop.empty()) b["stop"] = req.stop;
    if (req.ignore_eos) b["ignore_eos"] = true;
    b["stream"] = req.stream;
    if (req.stream && req.include_usage) b["stream_options"] = {{"include_usage", true}};
    if (req.extra.is_object())
        for (auto it = req.extra.begin(); it != req.extra.end(); ++it) b[it.key()] = it.value();
    return b;
}

Result<CompletionResult> OpenAIClient::complete(const CompletionRequest& req,
                                                const std::function<bool(const StreamDelta&)>& on_delta) {
    const bool chat = req.is_chat();
    const std::string path = v1(chat ? "/chat/completions" : "/completions");
    const std::string where = "POST " + url(path);
    const std::string body = request_body(req).dump();
    CompletionResult out;
    if (!req.stream) {
        auto r = send("POST", path, body, {});
        if (!r) return r.status();
        auto j = parse_json(r->body, "the answer of " + where);
        if (!j) return j.status();
        StreamDelta d;
        bool has = false;
        if (Status s = read_choice(*j, chat, false, &d, &has); !s) return Status::error(where + ": " + s.message());
        if (!has) return Status::error(where + ": the answer has no choices");
        out.text = d.text;
        out.finish_reason = d.finish_reason;
        read_usage(*j, &out.usage);
        out.last = std::move(*j);
        return out;
    }

    SseParser parser(m_opt.max_event_bytes);
    bool done = false;
    std::string fault;
    bool caller_stopped = false;
    auto on_event = [&](const SseEvent& ev) {
        if (ev.data == "[DONE]") {
            done = true;
            return false;
        }
        if (ev.event == "error") {
            const std::string m = error_message_of(ev.data);
            fault = "the server sent an error event: " + (m.empty() ? clip(ev.data) : m);
            return false;
        }
        auto j = parse_json(ev.data, "a streamed chunk");
        if (!j) {
            fault = j.message();
            return false;
        }
        StreamDelta d;
        bool has = false;
        if (Status s = read_choice(*j, chat, true, &d, &has); !s) {
            fault = s.message();
            return false;
        }
        read_usage(*j, &out.usage);
        out.last = std::move(*j);
        if (!has) return true;  // a usage-only chunk
        if (!d.finish_reason.empty()) out.finish_reason = d.finish_reason;
        if (d.text.empty() && d.finish_reason.empty()) return true;  // e.g. the role-only first chat chunk
        if (!d.text.empty()) ++out.n_chunks;
        out.text += d.text;
        if (on_delta && !on_delta(d)) {
            caller_stopped = true;
            return false;
        }
        return true;
    };
    auto r = send("POST", path, body, [&](const char* data, size_t n) {
        if (Status s = parser.feed(std::string_view(data, n), on_event); !s) {
            fault = s.message();
            return false;
        }
        return !parser.stopped() || done;  // after [DONE], read the body to its end: the connection stays open
    });
    if (!r && !done) return r.status();  // after data: [DONE], a connection cut before the body's end loses nothing
    if (caller_stopped) return Status::error(where + ": cancelled by the caller");
    if (!fault.empty()) return Status::error(where + ": " + fault);
    if (!done) {
        if (Status s = parser.finish(); !s) return Status::error(where + ": " + s.message());
        if (out.finish_reason.empty())
            return Status::error(where + ": the stream ended without \"data: [DONE]\" or a finish_reason (after " +
                                 std::to_string(parser.events()) + " events)");
    }
    return out;
}

Result<std::vector<int32_t>> OpenAIClient::tokenize(const std::string& model, const std::string& text) {
    json b = {{"prompt", text}, {"content", text}, {"add_special_tokens", false}};
    if (!model.empty()) b["model"] = model;
    const std::string path = m_base_path + "/tokenize";
    auto r = send("POST", path, b.dump(), {});
    if (!r) return r.status();
    auto j = parse_json(r->body, "the answer of " + url(path));
    if (!j) return j.status();
    if (!j->is_object() || !j->contains("tokens") || !(*j)["tokens"].is_array())
        return Status::error("the answer of " + url(path) + " has no \"tokens\" list");
    std::vector<int32_t> ids;
    for (const json& t : (*j)["tokens"]) {
        if (t.is_number_integer()) ids.push_back(t.get<int32_t>());
        else if (t.is_object() && t.contains("id") && t["id"].is_number_integer())
            ids.push_back(t["id"].get<int32_t>());  // llama-server with_pieces
        else
            return Status::error("the answer of " + url(path) + " has a token that is not an id");
    }
    return ids;
}

}  // namespace kvs::net
