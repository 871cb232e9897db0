// kvscope serve: the OpenAI-compatible local server (app/server/openai_server.h) on one
// model, headless. Binds 127.0.0.1 unless told otherwise, prints the URL and the model,
// and on Ctrl+C / SIGTERM stops taking requests, cancels those in flight (their replies
// end well-formed with finish_reason "abort") and exits 0.
#include <pthread.h>
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli_options.h"
#include "app/cli/commands.h"
#include "app/server/openai_server.h"

namespace kvs::app {

CLI::App* add_serve_command(CLI::App& app, ServeOptions& o) {
    auto* s = app.add_subcommand("serve", "serve the model over HTTP: OpenAI API (vLLM's routes) and /metrics");
    s->add_option("-m,--model", o.model, "model: a .gguf file, a safetensors folder, or an installed name");
    s->add_option("--host", o.host, "address to listen on (default 127.0.0.1: this machine only)");
    s->add_option("--port", o.port, "TCP port (0: any free port; the URL printed says which)")
        ->check(CLI::Range(0, 65535));
    auto* key = s->add_option("--api-key", o.api_key, "require Authorization: Bearer KEY on /v1/*");
    s->add_option("--api-key-file", o.api_key_file, "read the API key from the first line of this file")
        ->check(CLI::ExistingFile)
        ->excludes(key);
    s->add_option("--served-model-name", o.served_model_name, "the model name clients send and see");
    s->add_option("--allowed-origins", o.allowed_origins, "CORS: origins browsers may call from (\"*\": any)")
        ->delimiter(',');
    s->add_option("--max-seqs", o.max_seqs, "most sequences per engine step")->check(CLI::Range(1, 4096));
    s->add_option("--kv-mib", o.kv_mib, "KV pool size in MiB (default: the engine's pool)")
        ->check(CLI::Range(1.0, 1048576.0));
    s->add_option("--max-queue", o.max_queue, "requests queued or running before 429 (Retry-After)")
        ->check(CLI::Range(1, 1 << 20));
    s->add_option("--max-body-mib", o.max_body_mib, "largest request body in MiB (larger: 413)")
        ->check(CLI::Range(1, 1024));
    s->add_option("--lora-modules", o.lora_modules,
                  "LoRA adapters served as models: NAME=PATH or '{\"name\": NAME, \"path\": PATH}' "
                  "(PEFT folder or GGUF adapter), several after one flag; a request's \"model\" picks one")
        ->expected(1, -1);
    s->add_flag("--enable-lora-runtime", o.enable_lora_runtime,
                "allow POST /v1/load_lora_adapter and /v1/unload_lora_adapter (they load any path this "
                "user can read)");
    add_runner_options(s, o.runner);
    add_kv_tier_options(s, o.tiers);
    o.runner.n_ctx = 0;  // the session's default context unless --ctx is given
    return s;
}

namespace {

bool read_key_file(const std::string& path, std::string* key) {
    std::ifstream f(path);
    std::getline(f, *key);
    while (!key->empty() && (key->back() == '\r' || key->back() == ' ' || key->back() == '\t')) key->pop_back();
    if (!f && !f.eof()) {
        std::fprintf(stderr, "error: cannot read the API key file %s\n", path.c_str());
        return false;
    }
    if (key->empty()) {
        std::fprintf(stderr, "error: the API key file %s has no key on its first line\n", path.c_str());
        return false;
    }
    return true;
}

// One --lora-modules value, vLLM's two spellings: NAME=PATH, or a JSON object with "name" and
// "path" (vLLM's "base_model_name" is accepted and must be the served model, if given).
// False with the reason in *err when it is neither.
bool parse_lora_module(const std::string& spec, const std::string& served, std::string* name, std::string* path,
                       std::string* err) {
    const std::string what = "--lora-modules '" + spec + "'";
    if (!spec.empty() && spec.front() == '{') {
        const auto j = nlohmann::json::parse(spec, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
            *err = what + ": not a JSON object";
            return false;
        }
        for (const char* key : {"name", "path"})
            if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty()) {
                *err = what + ": \"" + key + "\" must be a non-empty string";
                return false;
            }
        if (j.contains("base_model_name") &&
            (!j["base_model_name"].is_string() || j["base_model_name"].get<std::string>() != served)) {
            *err = what + ": base_model_name must be the served model, '" + served + "'";
            return false;
        }
        *name = j["name"].get<std::string>();
        *path = j["path"].get<std::string>();
        return true;
    }
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
        *err = what + ": expected NAME=PATH or {\"name\": ..., \"path\": ...}";
        return false;
    }
    *name = spec.substr(0, eq);
    *path = spec.substr(eq + 1);
    return true;
}

// Loads every --lora-modules adapter into the session; false after printing why one failed.
bool load_lora_modules(const ServeOptions& o, const std::string& served, const Session& session) {
    for (const std::string& spec : o.lora_modules) {
        std::string name, path, err;
        if (!parse_lora_module(spec, served, &name, &path, &err)) {
            std::fprintf(stderr, "error: %s\n", err.c_str());
            return false;
        }
        if (name == served) {
            std::fprintf(stderr, "error: --lora-modules: '%s' is the served model's name; give the adapter another\n",
                         name.c_str());
            return false;
        }
        auto info = session.load_adapter(name, path);
        if (!info) {
            std::fprintf(stderr, "error: --lora-modules %s: %s\n", name.c_str(), info.message().c_str());
            return false;
        }
        std::printf("  LoRA adapter %s: %s, rank %d, scale %g, %s\n", info->name.c_str(), info->format.c_str(),
                    info->rank, static_cast<double>(info->scale), info->path.c_str());
    }
    return true;
}

bool is_loopback(const std::string& host) {
    return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

int cmd_serve(const ServeOptions& o) {
    server::ServerOptions so;
    so.host = o.host;
    so.port = o.port;
    so.api_key = o.api_key;
    if (!o.api_key_file.empty() && !read_key_file(o.api_key_file, &so.api_key)) return 1;
    so.allowed_origins = o.allowed_origins;
    so.served_model_name = o.served_model_name.empty() ? o.model : o.served_model_name;
    so.max_pending = o.max_queue;
    so.max_http_threads = o.max_queue + 64;
    so.max_body_bytes = static_cast<size_t>(o.max_body_mib) << 20;
    so.allow_runtime_lora = o.enable_lora_runtime;

    // SIGINT / SIGTERM are taken by sigwait below: blocked here, before any thread starts,
    // so every thread inherits the mask and none is interrupted. A client that hangs up
    // must not kill the server with SIGPIPE.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    if (!load_lora_modules(o, so.served_model_name, *session)) return 1;
    EngineOptions eo = engine_options_from(o.runner);
    o.tiers.apply(eo);
    eo.scheduler.max_num_seqs = o.max_seqs;
    eo.scheduler.max_num_batched_tokens = o.runner.n_batch;
    if (o.kv_mib > 0) eo.kv_bytes = static_cast<int64_t>(o.kv_mib * 1048576.0);
    eo.snapshot_every = 0;  // nobody draws block maps here; /metrics reads the engine directly
    auto loop = session->start_loop(eo);
    if (!loop) {
        std::fprintf(stderr, "error: %s\n", loop.message().c_str());
        return 1;
    }
    int code = 0;
    {
        server::OpenAiServer srv(session, **loop, so);
        if (Status st = srv.start(); !st) {
            std::fprintf(stderr, "error: %s\n", st.message().c_str());
            return 1;
        }
        if (!is_loopback(o.host) && so.api_key.empty())
            std::fprintf(stderr, "warning: listening on %s without --api-key: anyone who can reach it may use it\n",
                         o.host.c_str());
        std::printf("kvscope serve: %s  model %s  context %d tokens\n", srv.url().c_str(), srv.model_name().c_str(),
                    srv.max_model_len());
        std::printf("  try: curl %s/v1/models\n", srv.url().c_str());
        std::fflush(stdout);
        int sig = 0;
        sigwait(&stop_signals, &sig);
        std::printf("kvscope serve: %s, stopping (%d requests in flight are cancelled)\n",
                    sig == SIGINT ? "interrupted" : "terminated", srv.requests_in_flight());
        std::fflush(stdout);
        srv.stop();
    }
    loop->reset();
    std::printf("kvscope serve: stopped\n");
    std::fflush(stdout);
    return code;
}

}  // namespace kvs::app
