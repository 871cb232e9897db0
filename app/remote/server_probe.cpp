#include "app/remote/server_probe.h"

#include <nlohmann/json.hpp>

#include "app/remote/prometheus_text.h"
#include "app/remote/vllm_metrics.h"

namespace kvs::remote {

using json = nlohmann::json;

const char* server_kind_name(ServerKind k) {
    switch (k) {
        case ServerKind::Vllm: return "vLLM";
        case ServerKind::LlamaServer: return "llama-server";
        case ServerKind::KvScope: return "KV Scope";
        case ServerKind::Unknown: break;
    }
    return "OpenAI-compatible";
}

ServerKind server_kind_from_name(const std::string& name) {
    for (ServerKind k : {ServerKind::Vllm, ServerKind::LlamaServer, ServerKind::KvScope})
        if (name == server_kind_name(k)) return k;
    return ServerKind::Unknown;
}

namespace {

json parse(const std::string& body) { return json::parse(body, nullptr, false); }

}  // namespace

ProbeResult probe_server(const net::ClientOptions& opt) {
    ProbeResult r;
    if (Status st = net::OpenAIClient::check_url(opt.base_url); !st) {
        r.message = st.message();
        return r;
    }
    net::ClientOptions o = opt;
    o.max_body_bytes = std::min<size_t>(o.max_body_bytes, size_t{16} << 20);
    net::OpenAIClient client(o);
    auto models = client.get("/v1/models");
    if (!models) {
        r.message = "not reachable: " + models.message();
        return r;
    }
    r.reachable = true;
    if (models->status == 401 || models->status == 403) {
        r.key_needed = true;
        const std::string why = net::error_message_of(models->body);
        r.message = std::string(opt.api_key.empty() ? "the server wants an API key" : "the API key was refused") +
                    " (HTTP " + std::to_string(models->status) + (why.empty() ? "" : ": " + why) + ")";
    } else if (models->status != 200) {
        const std::string why = net::error_message_of(models->body);
        r.message = "GET /v1/models answered HTTP " + std::to_string(models->status) + (why.empty() ? "" : ": " + why) +
                    " (is this an OpenAI-compatible server?)";
    } else {
        const json j = parse(models->body);
        if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
            r.message = "GET /v1/models did not answer an OpenAI model list (is this an OpenAI-compatible server?)";
        } else {
            r.key_accepted = true;
            for (const json& m : j["data"]) {
                if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
                r.models.push_back(m["id"]);
                const std::string owner = m.value("owned_by", json("")).is_string() ? m.value("owned_by", "") : "";
                if (owner == "vllm") r.kind = ServerKind::Vllm;
                else if (owner == "llamacpp")
                    r.kind = ServerKind::LlamaServer;
                else if (owner == "kvscope")
                    r.kind = ServerKind::KvScope;
            }
        }
    }
    // /version, /props: the kind when owned_by did not say, and the version either way.
    if (auto v = client.get("/version"); v && v->status == 200) {
        const json j = parse(v->body);
        if (j.is_object() && j.contains("version") && j["version"].is_string()) {
            r.version = j["version"];
            if (r.kind == ServerKind::Unknown)
                r.kind = r.version.rfind("kvscope", 0) == 0 ? ServerKind::KvScope : ServerKind::Vllm;
        }
    }
    if (r.kind == ServerKind::Unknown || r.kind == ServerKind::LlamaServer) {
        if (auto p = client.get("/props"); p && p->status == 200) {
            const json j = parse(p->body);
            if (j.is_object() && (j.contains("default_generation_settings") || j.contains("build_info"))) {
                r.kind = ServerKind::LlamaServer;
                if (j.contains("build_info") && j["build_info"].is_string()) r.version = j["build_info"];
            }
        }
    }
    if (auto m = client.get("/metrics"); m && m->status == 200) {
        if (auto page = parse_prometheus_text(m->body); page) r.has_metrics = read_vllm_metrics(*page).is_ok();
    }
    if (r.kind == ServerKind::LlamaServer)
        if (auto s = client.get("/slots"); s && s->status == 200) r.has_slots = parse(s->body).is_array();
    if (r.key_accepted) {
        r.message = std::string(server_kind_name(r.kind)) + (r.version.empty() ? "" : " " + r.version) + ", " +
                    std::to_string(r.models.size()) + " model" + (r.models.size() == 1 ? "" : "s") +
                    (opt.api_key.empty() ? ", no API key needed" : ", API key accepted") +
                    (r.has_metrics ? ", /metrics readable" : ", no /metrics (engine views unavailable)") +
                    (r.has_slots ? ", /slots readable" : "");
        if (r.models.empty()) r.message += "; but it serves no model";
    }
    return r;
}

}  // namespace kvs::remote
