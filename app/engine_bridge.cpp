#include "app/engine_bridge.h"

#include <algorithm>
#include <chrono>

#include "engine/model/model.h"
#include "engine/model/model_registry.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/engine_loop.h"
#include "engine/speculative/draft_runner.h"
#include "engine/telemetry/latency_stats.h"
#include "engine/telemetry/snapshot_ring.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs::app {

namespace {
using Clock = std::chrono::steady_clock;

// The int4 self-draft is a re-quantized copy of every linear: built at load (seconds for a
// small model), only for models up to this size so a large model loads without the wait
// and the extra memory.
constexpr int64_t kInt4DraftMaxWeightBytes = 1LL << 30;

struct DraftSet {
    std::vector<std::pair<std::string, std::shared_ptr<const Model>>> drafts;
    std::string layerSkip;  // its name, empty when there is none
    QString note;           // drafts that could not be made, and why
};

// Draft models for speculative decoding, made from the target: its first third of layers
// (shares the weights: free), and the int4 self-draft for small models.
DraftSet make_drafts(const std::shared_ptr<Model>& model) {
    DraftSet d;
    const int n_layer = model->config.n_layer;
    if (n_layer >= 2) {
        const std::string name = "layer-skip:" + std::to_string(std::max(1, n_layer / 3));
        auto m = make_draft_model(name, model);
        if (m) {
            d.drafts.emplace_back(name, m.value());
            d.layerSkip = name;
        } else {
            d.note += QString::fromStdString(m.message()) + "; ";
        }
    } else {
        d.note += QStringLiteral("layer-skip needs a model of at least 2 layers; ");
    }
    if (model->weight_bytes <= kInt4DraftMaxWeightBytes) {
        auto m = make_draft_model("int4", model);
        if (m) d.drafts.emplace_back("int4", m.value());
        else d.note += QString::fromStdString(m.message()) + "; ";
    } else {
        d.note += QStringLiteral("the int4 self-draft is only built for models up to %1 MiB of weights; ")
                      .arg(kInt4DraftMaxWeightBytes >> 20);
    }
    return d;
}
}  // namespace

// Per request, on the engine thread: what the final summary and the metrics report.
struct ReplyStats {
    Clock::time_point submitted = Clock::now();
    Clock::time_point first;
    int n_tokens = 0;
};

EngineBridge::EngineBridge() {
    qRegisterMetaType<QList<ChatTurn>>("QList<kvs::app::ChatTurn>");
    qRegisterMetaType<ChatSettings>("kvs::app::ChatSettings");
    qRegisterMetaType<EngineSettings>("kvs::app::EngineSettings");
}

EngineBridge::~EngineBridge() {
    std::unique_ptr<EngineLoop> loop;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        loop = std::move(m_loop);
    }
    loop.reset();  // joins the engine thread: no callback runs after this
}

void EngineBridge::loadModel(const QString& nameOrPath) {
    auto path = resolve_model(nameOrPath.toStdString());
    if (!path) {
        Q_EMIT modelLoadFailed(QString::fromStdString(path.message()));
        return;
    }
    auto model = load_model(path.value());
    if (!model) {
        Q_EMIT modelLoadFailed(QString::fromStdString(model.message()));
        return;
    }
    auto tok = Tokenizer::create(model.value()->vocab);
    if (!tok) {
        Q_EMIT modelLoadFailed(QString::fromStdString("tokenizer: " + tok.message()));
        return;
    }
    auto tokenizer = std::make_shared<const Tokenizer>(std::move(tok.value()));
    DraftSet drafts = make_drafts(model.value());
    {
        std::lock_guard<std::mutex> lk(m_mu);
        m_layerSkipName = drafts.layerSkip;
        m_draftNote = drafts.note;
    }
    QString backend;
    const QString err = startEngine(model.value(), tokenizer, std::move(drafts.drafts), EngineSettings{}, &backend);
    if (!err.isEmpty()) {
        Q_EMIT modelLoadFailed(err);
        return;
    }
    const auto& c = m_model->config;
    Q_EMIT modelShape(QString::fromStdString(c.name), c.n_layer, c.n_kv_head, c.head_dim, m_model->weight_bytes);
    for (const auto& w : m_model->warnings) Q_EMIT modelWarning(QString::fromStdString(w));
    Q_EMIT modelLoaded(QString("%1 · %2 · %3 layers · %4 M params · %5")
                         .arg(QString::fromStdString(c.name), QString::fromStdString(m_model->file_type))
                         .arg(c.n_layer)
                         .arg(m_model->n_params / 1e6, 0, 'f', 0)
                         .arg(backend));
}

QString EngineBridge::startEngine(std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tokenizer,
                                  Drafts drafts, const EngineSettings& es, QString* backend) {
    EngineOptions eo;
    eo.drafts = drafts;
    eo.max_model_len = std::min(4096, std::max(256, model->config.n_ctx_train));
    eo.block_size = es.blockSize;
    eo.prefix_caching = es.prefixCaching;
    // Default pool: 512 MiB of KV, at most 4096 blocks, so the block map stays readable and
    // cheap to snapshot every step even for a tiny model (a few bytes per token).
    const int64_t block_bytes = Engine::kv_bytes_per_token(model->config) * eo.block_size;
    eo.kv_blocks = es.kvBlocks > 0 ? es.kvBlocks
                                   : static_cast<int>(std::min<int64_t>(4096, (512LL << 20) / std::max<int64_t>(1, block_bytes)));
    eo.scheduler.max_num_seqs = es.maxSeqs;
    eo.scheduler.static_batch_size = es.maxSeqs;
    eo.scheduler.max_num_batched_tokens = es.stepBudget;
    eo.scheduler.policy = es.staticBatching ? BatchingPolicy::static_batch : BatchingPolicy::continuous;
    eo.scheduler.preemption = es.swap ? PreemptionMode::swap : PreemptionMode::recompute;
    eo.scheduler.n_host_blocks = es.swap ? 4 * eo.kv_blocks : 0;
    auto engine = Engine::create(model, tokenizer, eo);
    if (!engine) return QString::fromStdString(engine.message());
    *backend = QString::fromStdString((*engine)->backend().name());
    auto ring = (*engine)->telemetry();
    auto loop = std::make_unique<EngineLoop>(std::move(*engine));
    std::unique_ptr<EngineLoop> old;
    std::set<qint64> orphaned;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        old = std::move(m_loop);
        orphaned.swap(m_inFlight);
        m_model = std::move(model);
        m_tokenizer = std::move(tokenizer);
        m_drafts = std::move(drafts);
        m_loop = std::move(loop);
        m_ring = ring;
        m_kvBytesPerBlock = block_bytes;
        m_latencies.clear();
    }
    old.reset();
    for (qint64 id : orphaned) Q_EMIT requestFailed(id, tr("the engine was restarted"));
    return {};
}

void EngineBridge::configureEngine(const EngineSettings& settings) {
    std::shared_ptr<Model> model;
    std::shared_ptr<const Tokenizer> tok;
    Drafts drafts;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        model = m_model;
        tok = m_tokenizer;
        drafts = m_drafts;
    }
    if (!model) {
        Q_EMIT modelLoadFailed(tr("no model is loaded"));
        return;
    }
    QString backend;
    const QString err = startEngine(model, tok, std::move(drafts), settings, &backend);
    if (!err.isEmpty()) {
        Q_EMIT modelLoadFailed(err);
        return;
    }
    Q_EMIT engineConfigured(tr("%1 blocks of %2 · %3 seats · budget %4 · %5 · %6")
                                .arg(settings.kvBlocks)
                                .arg(settings.blockSize)
                                .arg(settings.maxSeqs)
                                .arg(settings.stepBudget)
                                .arg(settings.staticBatching ? tr("static batching") : tr("continuous batching"))
                                .arg(backend));
}

void EngineBridge::recordLatency(const ReplyStats& st) {
    if (st.n_tokens == 0) return;
    const double ttft = std::chrono::duration<double, std::milli>(st.first - st.submitted).count();
    const double decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - st.first).count();
    std::lock_guard<std::mutex> lk(m_mu);
    m_latencies.emplace_back(ttft, st.n_tokens > 1 ? decode_ms / (st.n_tokens - 1) : 0.0);
    if (m_latencies.size() > 64) m_latencies.erase(m_latencies.begin());
}

void EngineBridge::forget(qint64 id) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_inFlight.erase(id);
}

qint64 EngineBridge::submitChat(const QList<ChatTurn>& turns, const ChatSettings& s) {
    std::unique_lock<std::mutex> lk(m_mu);
    if (!m_loop) {
        lk.unlock();
        Q_EMIT requestFailed(0, tr("no model is loaded"));
        return 0;
    }
    const QString missing = missingDraft(s.speculative);
    if (!missing.isEmpty()) {
        lk.unlock();
        Q_EMIT requestFailed(0, missing);
        return 0;
    }
    std::vector<ChatMessage> msgs;
    if (!s.systemPrompt.isEmpty()) msgs.push_back({"system", s.systemPrompt.toStdString()});
    for (const auto& t : turns) msgs.push_back({t.role.toStdString(), t.content.toStdString()});
    const auto& vocab = m_model->vocab;
    const ChatFormat fmt = detect_chat_format(vocab.chat_template, vocab);
    const std::string text = apply_chat_template(fmt, msgs, true, default_system_prompt(vocab.chat_template));
    GenerationRequest req;
    req.prompt = m_tokenizer->encode(text, true, true);
    req.params.temperature = static_cast<float>(s.temperature);
    req.params.top_k = s.topK;
    req.params.top_p = static_cast<float>(s.topP);
    req.params.min_p = static_cast<float>(s.minP);
    req.params.repeat_penalty = static_cast<float>(s.repeatPenalty);
    req.params.max_tokens = s.maxTokens;
    if (s.seed >= 0) req.params.seed = static_cast<uint64_t>(s.seed);
    req.spec = specParams(s.speculative, s.specK, s.specAdaptive);
    auto stats = std::make_shared<ReplyStats>();
    // Runs on the engine thread; the signals are queued to the GUI thread.
    req.on_event = [this, stats](const TokenEvent& ev) {
        if (ev.token >= 0 && stats->n_tokens++ == 0) stats->first = Clock::now();
        if (!ev.text.empty()) Q_EMIT tokenText(ev.id, QString::fromStdString(ev.text));
        if (!ev.finished) return;
        forget(ev.id);
        if (ev.finish_reason == FinishReason::rejected) {
            Q_EMIT requestFailed(ev.id, QString::fromStdString(ev.error));
            return;
        }
        const auto now = Clock::now();
        const double ttft = stats->n_tokens ? std::chrono::duration<double, std::milli>(stats->first - stats->submitted).count() : 0;
        const double decode_s = std::chrono::duration<double>(now - stats->first).count();
        const double tps = stats->n_tokens > 1 && decode_s > 0 ? (stats->n_tokens - 1) / decode_s : 0;
        recordLatency(*stats);
        const char* why = ev.finish_reason == FinishReason::stop        ? "stop"
                          : ev.finish_reason == FinishReason::length    ? "max tokens"
                          : ev.finish_reason == FinishReason::cancelled ? "cancelled"
                                                                        : "done";
        Q_EMIT requestFinished(ev.id, QString("%1 tokens · %2 tok/s · TTFT %3 ms · %4")
                                          .arg(stats->n_tokens)
                                          .arg(tps, 0, 'f', 1)
                                          .arg(ttft, 0, 'f', 0)
                                          .arg(QString::fromLatin1(why)));
    };
    const qint64 id = m_loop->submit(std::move(req));
    m_inFlight.insert(id);
    return id;
}

QVector<qint64> EngineBridge::injectSynthetic(int n, int promptLen, int outputLen, int priority, quint64 seed,
                                              int sharedPrefix, const QString& speculative, int specK) {
    std::lock_guard<std::mutex> lk(m_mu);
    QVector<qint64> ids;
    if (!m_loop || n <= 0 || promptLen <= 0 || outputLen <= 0) return ids;
    const SpecParams spec = specParams(speculative, specK, false);
    const int n_vocab = m_model->config.n_vocab;
    const int first = std::min(32, n_vocab - 1);  // above the special tokens of the usual vocabularies
    auto draw = [&](uint64_t& x) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        return first + static_cast<int32_t>(x % static_cast<uint64_t>(n_vocab - first));
    };
    std::vector<int32_t> prefix;
    uint64_t px = 0x5DEECE66Dull;  // the same shared prefix in every call
    for (int t = 0; t < sharedPrefix; ++t) prefix.push_back(draw(px));
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; ++i) {
        GenerationRequest req;
        req.prompt = prefix;
        for (int t = 0; t < promptLen; ++t) {
            req.prompt.push_back(draw(x));
        }
        req.params.temperature = 0;
        req.params.max_tokens = outputLen;
        req.params.ignore_eos = true;
        req.priority = priority;
        req.spec = spec;
        const qint64 id = submitSynthetic(std::move(req));
        ids.push_back(id);
    }
    return ids;
}

qint64 EngineBridge::submitSynthetic(GenerationRequest req) {
    auto stats = std::make_shared<ReplyStats>();
    req.on_event = [this, stats](const TokenEvent& ev) {
        if (ev.token >= 0 && stats->n_tokens++ == 0) stats->first = Clock::now();
        if (!ev.finished) return;
        forget(ev.id);
        if (ev.finish_reason == FinishReason::rejected) Q_EMIT requestFailed(ev.id, QString::fromStdString(ev.error));
        else recordLatency(*stats);
    };
    const qint64 id = m_loop->submit(std::move(req));
    m_inFlight.insert(id);
    return id;
}

qint64 EngineBridge::injectText(const QString& text, int outputLen, int priority, const QString& speculative, int specK) {
    std::lock_guard<std::mutex> lk(m_mu);
    if (!m_loop || text.isEmpty() || outputLen <= 0) return 0;
    const auto& vocab = m_model->vocab;
    const ChatFormat fmt = detect_chat_format(vocab.chat_template, vocab);
    const std::string prompt = apply_chat_template(fmt, {{"user", text.toStdString()}}, true,
                                                   default_system_prompt(vocab.chat_template));
    GenerationRequest req;
    req.prompt = m_tokenizer->encode(prompt, true, true);
    req.params.temperature = 0;
    req.params.max_tokens = outputLen;
    req.priority = priority;
    req.spec = specParams(speculative, specK, false);
    return submitSynthetic(std::move(req));
}

SpecParams EngineBridge::specParams(const QString& choice, int k, bool adaptive) const {
    SpecParams p;
    if (choice.isEmpty()) return p;
    p.proposer = choice == "layer-skip" ? m_layerSkipName : choice.toStdString();
    p.k = std::clamp(k, 1, 8);
    p.adaptive = adaptive;
    p.k_min = 1;
    p.k_max = 8;
    return p;
}

QString EngineBridge::missingDraft(const QString& choice) const {
    if (choice.isEmpty() || choice == "ngram") return {};
    const std::string name = specParams(choice, 1, false).proposer;
    for (const auto& d : m_drafts)
        if (d.first == name) return {};
    return tr("speculative decoding with %1 is not available for this model: %2").arg(choice, m_draftNote);
}

QStringList EngineBridge::draftChoices() const {
    std::lock_guard<std::mutex> lk(m_mu);
    QStringList v;
    for (const auto& d : m_drafts) v << (d.first == m_layerSkipName ? QStringLiteral("layer-skip") : QString::fromStdString(d.first));
    return v;
}

std::shared_ptr<const SpecSnapshot> EngineBridge::specSnapshot() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_loop ? m_loop->spec_snapshot() : nullptr;
}

QStringList EngineBridge::tokenPieces(const std::vector<int32_t>& ids) const {
    std::shared_ptr<const Tokenizer> tok;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        tok = m_tokenizer;
    }
    QStringList out;
    if (!tok) return out;
    out.reserve(static_cast<int>(ids.size()));
    for (int32_t id : ids) {
        // control tokens (an end-of-turn that stopped the reply) are not text: the chat
        // does not show them, so neither does a token view
        const std::string p = tok->is_control(id) ? std::string() : tok->token_to_piece(id);
        out << QString::fromUtf8(p.data(), static_cast<int>(p.size()));
    }
    return out;
}

void EngineBridge::cancel(qint64 requestId) {
    std::lock_guard<std::mutex> lk(m_mu);
    if (m_loop) m_loop->cancel(requestId);
}

void EngineBridge::pause() {
    std::lock_guard<std::mutex> lk(m_mu);
    if (m_loop) m_loop->pause();
}

void EngineBridge::resume() {
    std::lock_guard<std::mutex> lk(m_mu);
    if (m_loop) m_loop->resume();
}

void EngineBridge::singleStep() {
    std::lock_guard<std::mutex> lk(m_mu);
    if (m_loop) m_loop->single_step();
}

void EngineBridge::setStepDelayMs(int ms) {
    std::lock_guard<std::mutex> lk(m_mu);
    if (m_loop) m_loop->set_step_delay_ms(ms);
}

std::shared_ptr<const EngineSnapshot> EngineBridge::latestSnapshot() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_ring ? m_ring->latest() : nullptr;
}

std::vector<std::shared_ptr<const EngineSnapshot>> EngineBridge::snapshotsAfter(int64_t step) const {
    std::shared_ptr<const SnapshotRing> ring;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        ring = m_ring;
    }
    std::vector<std::shared_ptr<const EngineSnapshot>> out;
    if (!ring) return out;
    for (auto& s : ring->recent(ring->capacity()))
        if (s->step.step > step) out.push_back(std::move(s));
    return out;
}

std::vector<std::pair<double, double>> EngineBridge::recentLatencies() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_latencies;
}

QString EngineBridge::decodeTokens(const std::vector<int32_t>& ids) const {
    std::shared_ptr<const Tokenizer> tok;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        tok = m_tokenizer;
    }
    if (!tok) return {};
    std::string text;
    for (int32_t id : ids) text += tok->token_to_piece(id);  // piece by piece: a block may split a character
    return QString::fromUtf8(text.data(), static_cast<int>(text.size()));
}

int64_t EngineBridge::kvBytesPerBlock() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_kvBytesPerBlock;
}

std::vector<StepRecord> EngineBridge::stepsAfter(int64_t step) const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_ring ? m_ring->steps_after(step) : std::vector<StepRecord>{};
}

int64_t EngineBridge::weightBytes() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_model ? m_model->weight_bytes : 0;
}

std::shared_ptr<const Model> EngineBridge::model() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_model;
}

}  // namespace kvs::app
