#pragma once
// Testing a remote connection on the spot: is the server reachable, is the API key accepted
// (or none needed), which server it is (vLLM, llama.cpp's llama-server, KV Scope), which
// models it serves (/v1/models), and which telemetry it offers (/metrics in vLLM's or
// llama-server's names, llama-server's /slots). No Qt; blocking, so callers run it on a
// worker thread. The kind is read from the answers themselves: /v1/models' owned_by
// ("vllm", "llamacpp", "kvscope"), then /version ({"version": "kvscope ..."} or vLLM's
// bare version number) and llama-server's /props.
#include <string>
#include <vector>

#include "app/net/openai_client.h"

namespace kvs::remote {

enum class ServerKind { Unknown, Vllm, LlamaServer, KvScope };
const char* server_kind_name(ServerKind k);  // "vLLM", "llama-server", "KV Scope", "OpenAI-compatible"
ServerKind server_kind_from_name(const std::string& name);

struct ProbeResult {
    bool reachable = false;     // an HTTP answer came
    bool key_accepted = false;  // /v1/models answered 200 (with the key given, or none needed)
    bool key_needed = false;    // 401 / 403 without a key, or the key given was refused
    ServerKind kind = ServerKind::Unknown;
    std::string version;              // what /version said, if anything
    std::vector<std::string> models;  // ids of /v1/models
    bool has_metrics = false;         // /metrics with vllm:* or llamacpp:* names
    bool has_slots = false;           // llama-server's /slots answered
    std::string message;              // one line for the window: what works, or what is wrong
    bool ok() const { return reachable && key_accepted && !models.empty(); }
};

ProbeResult probe_server(const net::ClientOptions& opt);

}  // namespace kvs::remote
