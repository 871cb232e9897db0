#include "engine/runtime/session.h"

#include <algorithm>
#include <chrono>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/model_registry.h"
#include "engine/speculative/draft_runner.h"

namespace kvs {

Result<std::shared_ptr<Session>> Session::open(const std::string& name_or_path, const SessionOptions& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    auto path = resolve_model(name_or_path);
    if (!path) return path.status();
    auto model = load_model(path.value());
    if (!model) return model.status();
    auto s = from_model(std::move(model.value()), opt);
    if (!s) return s;
    (*s)->m_load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return s;
}

Result<std::shared_ptr<Session>> Session::from_model(std::shared_ptr<const Model> model, const SessionOptions& opt) {
    if (!model) return Status::error("no model");
    auto tok = Tokenizer::create(model->vocab);
    if (!tok) return Status::error("the tokenizer of " + model->path + ": " + tok.message());
    std::shared_ptr<Session> s(new Session());
    s->m_model = std::move(model);
    s->m_tok = std::make_shared<const Tokenizer>(std::move(tok.value()));
    const VocabData& vocab = s->m_model->vocab;
    s->m_chat_format = detect_chat_format(vocab.chat_template, vocab);
    s->m_default_system = default_system_prompt(vocab.chat_template);
    if (opt.self_drafts) s->make_self_drafts(opt);
    return s;
}

std::vector<InstalledModel> Session::installed_models() {
    std::vector<InstalledModel> out;
    for (const ModelEntry& e : list_models()) out.push_back({e.name, e.path});
    return out;
}

std::string Session::default_model_name() { return std::string(kDefaultModelName); }

std::string Session::models_dir() { return kvs::models_dir(); }

int64_t Session::machine_ram_bytes() { return physical_ram_bytes(); }

Session::ComputeMemory Session::compute_memory() {
    ComputeMemory m;
    const DeviceMemory d = cuda_device_memory();
    if (d.ok) {
        m.gpu = true;
        m.device = d.device;
        m.free_bytes = d.free_bytes;
        m.total_bytes = d.total_bytes;
        return m;
    }
    m.free_bytes = m.total_bytes = machine_ram_bytes();
    m.note = d.why;
    return m;
}

void Session::make_self_drafts(const SessionOptions& opt) {
    const int n_layer = m_model->config.n_layer;
    if (n_layer >= 2) {
        const std::string name = "layer-skip:" + std::to_string(std::max(1, n_layer / 3));
        if (Status st = add_draft(name)) m_layer_skip = name;
        else
            m_draft_note += st.message() + "; ";
    } else {
        m_draft_note += "layer-skip needs a model of at least 2 layers; ";
    }
    if (m_model->weight_bytes <= opt.int4_draft_max_weight_bytes) {
        if (Status st = add_draft("int4"); !st) m_draft_note += st.message() + "; ";
    } else {
        m_draft_note += "the int4 self-draft is only built for models up to " +
                        std::to_string(opt.int4_draft_max_weight_bytes >> 20) + " MiB of weights; ";
    }
}

std::string Session::chat_text(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
    return apply_chat_template(m_chat_format, messages, add_generation_prompt, m_default_system);
}

std::vector<int32_t> Session::encode_chat(const std::vector<ChatMessage>& messages) const {
    return m_tok->encode(chat_text(messages, true), true, true);
}

std::vector<int32_t> Session::encode_user(const std::string& text, const std::string& system) const {
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", text});
    return encode_chat(msgs);
}

std::vector<int32_t> Session::encode_text(const std::string& text) const { return m_tok->encode(text, true, false); }

std::string Session::decode(const std::vector<int32_t>& ids, bool skip_control) const {
    std::string text;
    for (int32_t id : ids) {
        if (skip_control && m_tok->is_control(id)) continue;
        text += m_tok->token_to_piece(id);
    }
    return text;
}

Status Session::add_draft(const std::string& name) {
    if (has_draft(name)) return Status::ok();
    auto m = make_draft_model(name, m_model);
    if (!m) return m.status();
    m_drafts.emplace_back(name, std::move(m.value()));
    return Status::ok();
}

bool Session::has_draft(const std::string& name) const {
    return std::any_of(m_drafts.begin(), m_drafts.end(), [&](const auto& d) { return d.first == name; });
}

Result<SpecParams> Session::spec_params(const std::string& choice, int k, bool adaptive) const {
    SpecParams p;
    if (choice.empty()) return p;
    p.proposer = choice == "layer-skip" ? m_layer_skip : choice;
    if (choice != "ngram" && (p.proposer.empty() || !has_draft(p.proposer)))
        return Status::error("speculative decoding with " + choice + " is not available for this model" +
                             (m_draft_note.empty() ? std::string() : ": " + m_draft_note));
    p.k = std::clamp(k, 1, 8);
    p.adaptive = adaptive;
    p.k_min = 1;
    p.k_max = std::max(8, p.k);
    return p;
}

int64_t Session::kv_bytes_per_token(DType kv_type) const { return kv_cache_bytes_per_token(m_model->config, kv_type); }

int64_t Session::kv_bytes_per_token(int n_layer, int n_kv_head, int head_dim, DType kv_type) {
    ModelConfig c;
    c.n_layer = n_layer;
    c.n_kv_head = n_kv_head;
    c.head_dim = head_dim;
    return kv_cache_bytes_per_token(c, kv_type);
}

int Session::default_max_model_len() const { return std::min(4096, std::max(256, m_model->config.n_ctx_train)); }

EngineOptions Session::engine_options(EngineOptions opt) const {
    if (opt.max_model_len <= 0) opt.max_model_len = default_max_model_len();
    if (opt.drafts.empty()) opt.drafts = m_drafts;
    if (opt.kv_blocks <= 0 && opt.kv_bytes <= 0 && opt.kv_ram_fraction <= 0) {
        const int64_t block_bytes = std::max<int64_t>(1, kv_bytes_per_token(opt.kv_type) * opt.block_size);
        opt.kv_blocks = static_cast<int>(std::min<int64_t>(pool_default_max_blocks, pool_default_bytes / block_bytes));
    }
    return opt;
}

Result<std::unique_ptr<Engine>> Session::make_engine(const EngineOptions& opt, bool stream_text) const {
    return Engine::create(m_model, stream_text ? m_tok : nullptr, engine_options(opt));
}

Result<std::unique_ptr<EngineLoop>> Session::start_loop(const EngineOptions& opt) const {
    auto engine = make_engine(opt);
    if (!engine) return engine.status();
    return std::make_unique<EngineLoop>(std::move(engine.value()));
}

Result<std::unique_ptr<SequenceRunner>> Session::make_runner(RunnerOptions opt) const {
    if (opt.n_ctx <= 0) opt.n_ctx = default_max_model_len();
    return SequenceRunner::create(m_model, opt);
}

Result<std::unique_ptr<SequenceRunner>> Session::make_runner(RunnerOptions opt, std::shared_ptr<Backend> shared) const {
    if (opt.n_ctx <= 0) opt.n_ctx = default_max_model_len();
    return SequenceRunner::create(m_model, opt, std::move(shared));
}

Result<AdapterInfo> Session::load_adapter(const std::string& name, const std::string& path, float user_scale) const {
    return m_adapters->load(name, path, m_model->config, user_scale);
}

bool Session::unload_adapter(const std::string& name) const { return m_adapters->unload(name); }

std::vector<AdapterInfo> Session::adapters() const { return m_adapters->list(); }

Result<std::shared_ptr<const LoraAdapter>> Session::adapter(const std::string& name) const {
    if (name.empty()) return std::shared_ptr<const LoraAdapter>();
    return m_adapters->find(name);
}

}  // namespace kvs
