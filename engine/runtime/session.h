#pragma once
// The engine's front door. A Session is one loaded model with everything a front end needs
// to run it: its tokenizer, its chat encoding (template -> token ids), the draft models
// speculative decoding may name, and the policy that turns a front end's wishes into
// EngineOptions (context length, KV pool size, drafts). It hands out the three ways to
// run the model: an Engine (many requests, the caller steps it), an EngineLoop (the Engine
// on its own thread: the window, the server) and a SequenceRunner (one sequence: generate,
// single-stream bench, the quantization compare).
//
// The window, every CLI command, the quantization compare worker and the local server use
// this header (with it come the telemetry types and the two telemetry functions a front end
// needs: summarize() and write_trace()); nothing outside engine/ needs to load a model, create a tokenizer, apply a
// chat template or size a KV pool by hand. A Session is immutable after open() and the
// add_draft() calls that follow it (but for its LoRA adapters, which have their own lock),
// so threads may share it (std::shared_ptr).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/lora/lora_registry.h"
#include "engine/model/model.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/engine_loop.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/telemetry/latency_stats.h"  // summarize(): TTFT / TPOT with bench's definitions
#include "engine/telemetry/snapshot.h"       // what the engine publishes (EngineSnapshot, RequestMetrics)
#include "engine/telemetry/snapshot_ring.h"  // where it publishes them (any thread reads)
#include "engine/telemetry/trace_json.h"     // write_trace(): the trace file bench --trace writes
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs {

struct SessionOptions {
    // Build the drafts a chat may pick without naming a file: the layer-skip draft (the
    // first third of the target's layers; shares the weights) and, for models up to
    // int4_draft_max_weight_bytes, the int4 self-draft (a re-quantized copy: seconds and
    // memory, so only for small models). Others are added by name with add_draft().
    bool self_drafts = false;
    int64_t int4_draft_max_weight_bytes = int64_t{1} << 30;
};

// One installed model (model_registry's list, for model pickers).
struct InstalledModel {
    std::string name;
    std::string path;
};

class Session {
public:
    // Resolves a name (`smollm2-135m`) or path, loads the model and its tokenizer.
    static Result<std::shared_ptr<Session>> open(const std::string& name_or_path, const SessionOptions& opt = {});
    // A session around a model already in memory (a quantized variant, a test model).
    static Result<std::shared_ptr<Session>> from_model(std::shared_ptr<const Model> model,
                                                       const SessionOptions& opt = {});

    static std::vector<InstalledModel> installed_models();
    static std::string default_model_name();  // what `kvscope` and every command open by default
    static std::string models_dir();
    static int64_t machine_ram_bytes();  // physical RAM, what the KV pool policy sizes against (0: unknown)
    // Where a model's weights and KV cache go with the default ("auto") backend: the CUDA GPU's
    // memory (its name, free and total bytes) when the CUDA backend is available, else this
    // machine's RAM (free = total = machine_ram_bytes()); `note` says why CUDA is not used.
    struct ComputeMemory {
        bool gpu = false;
        std::string device;  // the GPU's name ("" for RAM)
        int64_t free_bytes = 0;
        int64_t total_bytes = 0;
        std::string note;
    };
    static ComputeMemory compute_memory();

    const Model& model() const { return *m_model; }
    const std::shared_ptr<const Model>& model_ptr() const { return m_model; }
    const Tokenizer& tokenizer() const { return *m_tok; }
    const std::shared_ptr<const Tokenizer>& tokenizer_ptr() const { return m_tok; }
    double load_ms() const { return m_load_ms; }
    const std::vector<std::string>& warnings() const { return m_model->warnings; }

    // --- chat encoding: the model's own chat format (detected from its template), its
    // default system prompt when the messages have none, then token ids (BOS added and
    // special tokens parsed as the template writes them).
    ChatFormat chat_format() const { return m_chat_format; }
    std::string chat_text(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
    std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages) const;
    // One user message (and an optional system prompt), as encode_chat.
    std::vector<int32_t> encode_user(const std::string& text, const std::string& system = {}) const;
    // Plain text, no template: BOS added, special-token text taken literally.
    std::vector<int32_t> encode_text(const std::string& text) const;
    // Text of ids, piece by piece (control tokens such as an end-of-turn give "").
    std::string decode(const std::vector<int32_t>& ids, bool skip_control = false) const;

    // --- drafts for speculative decoding (engine/speculative/draft_runner.h spellings:
    // "layer-skip:N", "int4", "int4@V", a model path). add_draft is for set-up, before the
    // session is shared.
    Status add_draft(const std::string& name);
    const std::vector<std::pair<std::string, std::shared_ptr<const Model>>>& drafts() const { return m_drafts; }
    bool has_draft(const std::string& name) const;
    // The self-draft built by open() with self_drafts ("layer-skip:N"; empty without one),
    // and why any self-draft is missing ("" when none is).
    const std::string& layer_skip_name() const { return m_layer_skip; }
    const std::string& draft_note() const { return m_draft_note; }
    // A chat's speculative choice ("", "ngram", "layer-skip", "int4", or any draft name)
    // as the request's SpecParams; an error naming what is missing when this session has
    // no such draft.
    Result<SpecParams> spec_params(const std::string& choice, int k, bool adaptive) const;

    // --- LoRA adapters (engine/lora): PEFT folders or GGUF adapter files, checked against
    // this model, served by name. Unlike the rest of a Session they load and unload while
    // it is shared (thread-safe); a request holds its adapter, so unloading one never
    // disturbs a request running with it. An error (bad name, name taken, bad adapter)
    // changes nothing. user_scale multiplies the adapter's own alpha / r.
    Result<AdapterInfo> load_adapter(const std::string& name, const std::string& path, float user_scale = 1.0f) const;
    bool unload_adapter(const std::string& name) const;  // false: no such adapter
    std::vector<AdapterInfo> adapters() const;           // by name
    // What GenerationRequest::adapter takes for a request that names an adapter ("" gives
    // null: the base model); an unknown name is an error listing the loaded ones.
    Result<std::shared_ptr<const LoraAdapter>> adapter(const std::string& name) const;

    // --- sizes, one definition each (engine/kv_cache/kv_tensors.h)
    int64_t kv_bytes_per_token(DType kv_type = DType::F16) const;
    // The same for a shape that is not loaded (a memory planner's what-if).
    static int64_t kv_bytes_per_token(int n_layer, int n_kv_head, int head_dim, DType kv_type);
    // The context a front end gets when it asks for none: the model's training context,
    // at least 256 and at most 4096 tokens.
    int default_max_model_len() const;

    // --- the policy: a front end's options with what it left unset filled in. Fills
    // max_model_len (0 -> default_max_model_len()), the drafts (every draft of the session
    // unless opt.drafts names its own), and the KV pool when no size was given (kv_blocks,
    // kv_bytes and kv_ram_fraction all 0): pool_default_bytes of KV, at most
    // pool_default_max_blocks blocks, so the block map stays readable and cheap to snapshot.
    static constexpr int64_t pool_default_bytes = int64_t{512} << 20;
    static constexpr int pool_default_max_blocks = 4096;
    EngineOptions engine_options(EngineOptions opt) const;
    // Engine / EngineLoop with engine_options(opt) applied. stream_text false: an engine of
    // token ids only (no text, no end-of-generation detection), for benchmarks that replay
    // id workloads and should not pay for detokenizing.
    Result<std::unique_ptr<Engine>> make_engine(const EngineOptions& opt, bool stream_text = true) const;
    Result<std::unique_ptr<EngineLoop>> start_loop(const EngineOptions& opt) const;
    // One sequence; n_ctx 0 means default_max_model_len().
    Result<std::unique_ptr<SequenceRunner>> make_runner(RunnerOptions opt) const;
    Result<std::unique_ptr<SequenceRunner>> make_runner(RunnerOptions opt, std::shared_ptr<Backend> shared) const;

private:
    Session() = default;
    void make_self_drafts(const SessionOptions& opt);

    std::shared_ptr<const Model> m_model;
    std::shared_ptr<const Tokenizer> m_tok;
    ChatFormat m_chat_format = ChatFormat::Plain;
    std::string m_default_system;
    double m_load_ms = 0;
    std::vector<std::pair<std::string, std::shared_ptr<const Model>>> m_drafts;
    std::string m_layer_skip;
    std::string m_draft_note;
    std::shared_ptr<LoraRegistry> m_adapters = std::make_shared<LoraRegistry>();
};

}  // namespace kvs
