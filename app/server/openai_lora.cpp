// LoRA adapters on the local server, as vLLM serves them: every adapter loaded in the Session
// (`kvscope serve --lora-modules name=path`, the window's chats, or POST /v1/load_lora_adapter)
// is a model of its own: `/v1/models` lists it after the base model (id = the adapter's
// name, parent = the base model, root = its path), and a request whose `model` is its name
// runs with it, batched with the base model's requests. An unknown name is a 404
// `model_not_found`. The runtime routes answer as vLLM's do (plain-text "Success: ..."),
// and only when the server was started with them allowed (ServerOptions::allow_runtime_lora).
#include <httplib.h>

#include "app/server/http_reply.h"
#include "app/server/openai_server.h"

namespace kvs::server {

using json = nlohmann::json;

namespace {

// The body's lora_name / lora_path (strings), or the error naming the field.
std::optional<ApiError> read_lora_body(const std::string& body, bool need_path, std::string* name, std::string* path) {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) return bad_request("the request body is not valid JSON (or not valid UTF-8)", "", "invalid_json");
    if (!j.is_object()) return bad_request("the request body must be a JSON object");
    FieldReader f(j);
    f.string("lora_name", name);
    if (need_path) f.string("lora_path", path);
    if (f.error()) return *f.error();
    if (name->empty() || (need_path && path->empty()))
        return bad_request(need_path ? "Both 'lora_name' and 'lora_path' must be provided." : "'lora_name' must be provided.",
                           name->empty() ? "lora_name" : "lora_path");
    return std::nullopt;
}

}  // namespace

std::optional<ApiError> OpenAiServer::check_model(const std::string& model,
                                                  std::shared_ptr<const LoraAdapter>* adapter) const {
    if (model.empty() || model == m_opt.served_model_name) return std::nullopt;
    if (auto a = m_session->adapter(model)) {
        if (adapter) *adapter = std::move(a.value());
        return std::nullopt;
    }
    std::string served = "`" + m_opt.served_model_name + "`";
    for (const AdapterInfo& a : m_session->adapters()) served += ", `" + a.name + "`";
    return ApiError{404, "The model `" + model + "` does not exist (this server serves " + served + ").",
                    "invalid_request_error", "model", "model_not_found"};
}

void OpenAiServer::handle_models(httplib::Response& res) const {
    json data = json::array();
    data.push_back({{"id", m_opt.served_model_name},
                    {"object", "model"},
                    {"created", m_created},
                    {"owned_by", "kvscope"},
                    {"root", m_opt.served_model_name},
                    {"parent", nullptr},
                    {"max_model_len", m_limits.max_model_len}});
    for (const AdapterInfo& a : m_session->adapters())
        data.push_back({{"id", a.name},
                        {"object", "model"},
                        {"created", m_created},
                        {"owned_by", "kvscope"},
                        {"root", a.path},
                        {"parent", m_opt.served_model_name},
                        {"max_model_len", m_limits.max_model_len}});
    send_json(res, {{"object", "list"}, {"data", data}});
}

void OpenAiServer::handle_load_lora(const httplib::Request& req, httplib::Response& res) {
    if (!m_opt.allow_runtime_lora)
        return send_error(res, not_found("loading LoRA adapters at run time is off on this server (start it with "
                                         "kvscope serve --enable-lora-runtime)"));
    std::string name, path;
    if (auto e = read_lora_body(req.body, true, &name, &path)) return send_error(res, *e);
    if (name == m_opt.served_model_name)
        return send_error(res, bad_request("'" + name + "' is the base model's name; give the adapter another",
                                           "lora_name"));
    if (m_session->adapter(name))
        return send_error(res, bad_request("The lora adapter '" + name + "' has already been loaded.", "lora_name"));
    auto info = m_session->load_adapter(name, path);
    if (!info) return send_error(res, bad_request(info.message(), "lora_path"));
    res.status = 200;
    res.set_content("Success: LoRA adapter '" + name + "' added successfully.", "text/plain; charset=utf-8");
}

void OpenAiServer::handle_unload_lora(const httplib::Request& req, httplib::Response& res) {
    if (!m_opt.allow_runtime_lora)
        return send_error(res, not_found("unloading LoRA adapters at run time is off on this server (start it "
                                         "with kvscope serve --enable-lora-runtime)"));
    std::string name, path;
    if (auto e = read_lora_body(req.body, false, &name, &path)) return send_error(res, *e);
    // Requests running with it keep it (they hold it) and finish; new ones may no longer name it.
    if (!m_session->unload_adapter(name))
        return send_error(res, not_found("The lora adapter '" + name + "' cannot be found.", "lora_name"));
    res.status = 200;
    res.set_content("Success: LoRA adapter '" + name + "' removed successfully.", "text/plain; charset=utf-8");
}

}  // namespace kvs::server
