#include "app/engine_bridge.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>

#include "engine/runtime/session.h"
#include "engine/sampling/watermark.h"

namespace kvs::app {

namespace {
QString qs(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<int>(s.size())); }

// A seed no earlier reply used (well, with 2^-63 odds): what a reply without a fixed seed gets.
uint64_t freshSeed() {
    static std::mt19937_64 gen{std::random_device{}()};
    static std::mutex mu;
    std::lock_guard<std::mutex> lk(mu);
    return gen() >> 1;  // fits the chat settings' qint64 seed field when the user copies it
}

const char* finishWord(FinishReason why) {
    switch (why) {
        case FinishReason::stop: return "stop";
        case FinishReason::length: return "max tokens";
        case FinishReason::cancelled: return "cancelled";
        default: return "done";
    }
}
}  // namespace

EngineBridge::EngineBridge() {
    qRegisterMetaType<QList<ChatTurn>>("QList<kvs::app::ChatTurn>");
    qRegisterMetaType<ChatSettings>("kvs::app::ChatSettings");
    qRegisterMetaType<EngineSettings>("kvs::app::EngineSettings");
}

EngineBridge::~EngineBridge() {
    stopServer();  // before its engine goes: its streams end with "abort"
    std::unique_ptr<EngineLoop> loop;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        loop = std::move(m_loop);
    }
    loop.reset();  // joins the engine thread: no callback runs after this
}

void EngineBridge::loadModel(const QString& nameOrPath) { loadModelAt(nameOrPath, 0, 0, 0); }

qint64 EngineBridge::newLoadTicket() {
    static std::atomic<qint64> next{1};
    return next++;
}

void EngineBridge::cancelLoad(qint64 ticket) {
    std::lock_guard<std::mutex> lk(m_mu);
    if (ticket > 0) m_cancelledLoads.insert(ticket);
}

bool EngineBridge::loadCancelled(qint64 ticket) {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_cancelledLoads.erase(ticket) > 0;
}

void EngineBridge::loadModelAt(const QString& nameOrPath, int contextTokens, int batch, qint64 ticket) {
    constexpr int kStages = 3;
    auto cancelled = [&] {
        if (!loadCancelled(ticket)) return false;
        Q_EMIT modelLoadCancelled(ticket);
        return true;
    };
    if (cancelled()) return;
    Q_EMIT loadProgress(ticket, 1, kStages, tr("reading %1 (mapping it and checking every tensor)").arg(nameOrPath));
    SessionOptions so;
    so.self_drafts = true;  // layer-skip and (small models) int4 self-drafts for the chats
    auto session = Session::open(nameOrPath.toStdString(), so);
    if (!session) {
        loadCancelled(ticket);
        Q_EMIT modelLoadFailed(qs(session.message()));
        return;
    }
    if (cancelled()) return;
    const Model& m = (*session)->model();
    const auto& c = m.config;
    Q_EMIT loadProgress(ticket, 2, kStages, tr("checking the memory it needs"));
    EngineSettings es;
    const int ctx = contextTokens > 0 ? contextTokens : (*session)->default_max_model_len();
    if (contextTokens > 0 && c.n_ctx_train > 0 && contextTokens > c.n_ctx_train) {
        loadCancelled(ticket);
        Q_EMIT modelLoadFailed(tr("%1: a context of %2 tokens is more than the %3 it was trained on; choose at most %3")
                                   .arg(nameOrPath)
                                   .arg(contextTokens)
                                   .arg(c.n_ctx_train));
        return;
    }
    if (batch > 0) es.kvBlocks = batch * ((ctx + es.blockSize - 1) / es.blockSize);
    {
        EngineOptions eo;
        eo.block_size = es.blockSize;
        eo.kv_blocks = es.kvBlocks;
        eo = (*session)->engine_options(eo);
        const qint64 kv = qint64(eo.kv_blocks) * eo.block_size * (*session)->kv_bytes_per_token(eo.kv_type);
        // The weights and KV go to the GPU's memory with the CUDA backend, else to RAM.
        const Session::ComputeMemory mem = Session::compute_memory();
        const qint64 avail = mem.gpu ? mem.free_bytes : mem.total_bytes;
        if (avail > 0 && m.weight_bytes + kv > avail) {
            loadCancelled(ticket);
            const QString has =
                mem.gpu ? tr("the GPU (%1) has %2 MiB free").arg(QString::fromStdString(mem.device)).arg(avail >> 20)
                        : tr("this machine has %1 MiB of RAM").arg(avail >> 20);
            Q_EMIT modelLoadFailed(tr("%1 needs %2 MiB (weights %3 MiB + KV cache %4 MiB) but %5; choose a smaller "
                                      "context or batch")
                                       .arg(nameOrPath)
                                       .arg((m.weight_bytes + kv) >> 20)
                                       .arg(m.weight_bytes >> 20)
                                       .arg(kv >> 20)
                                       .arg(has));
            return;
        }
    }
    if (cancelled()) return;
    Q_EMIT loadProgress(ticket, 3, kStages, tr("starting the engine"));
    int previousChoice = 0;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        previousChoice = m_contextChoice;
        m_contextChoice = contextTokens;
    }
    QString backend;
    const QString err = startEngine(session.value(), es, &backend);
    if (!err.isEmpty()) {
        std::lock_guard<std::mutex> lk(m_mu);
        m_contextChoice = previousChoice;
    }
    loadCancelled(ticket);  // too late to cancel now
    if (!err.isEmpty()) {
        Q_EMIT modelLoadFailed(err);
        return;
    }
    Q_EMIT modelShape(qs(c.name), c.n_layer, c.n_kv_head, c.head_dim, m.weight_bytes, c.n_head);
    for (const auto& w : m.warnings) Q_EMIT modelWarning(qs(w));
    // The context is named with what the model was trained on, so a default below it is seen.
    const QString ctxText = contextTokens > 0 || c.n_ctx_train <= 0 || ctx == c.n_ctx_train
                                ? tr("context %1").arg(ctx)
                                : tr("context %1 of %2 trained (choose another in File ▸ Models)").arg(ctx).arg(c.n_ctx_train);
    Q_EMIT modelLoaded(QString("%1 · %2 · %3 layers · %4 M params · %5 · %6")
                           .arg(qs(c.name), qs(m.file_type))
                           .arg(c.n_layer)
                           .arg(m.n_params / 1e6, 0, 'f', 0)
                           .arg(backend, ctxText));
}

QString EngineBridge::startEngine(std::shared_ptr<const Session> session, const EngineSettings& es, QString* backend) {
    EngineOptions eo;
    eo.block_size = es.blockSize;
    eo.prefix_caching = es.prefixCaching;
    eo.kv_blocks = std::max(0, es.kvBlocks);  // 0: the session's default pool
    eo.scheduler.max_num_seqs = es.maxSeqs;
    eo.scheduler.static_batch_size = es.maxSeqs;
    eo.scheduler.max_num_batched_tokens = es.stepBudget;
    eo.scheduler.policy = es.staticBatching ? BatchingPolicy::static_batch : BatchingPolicy::continuous;
    eo.scheduler.preemption = es.swap ? PreemptionMode::swap : PreemptionMode::recompute;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        eo.max_model_len = m_contextChoice;  // 0: the session's default
    }
    eo = session->engine_options(eo);
    eo.scheduler.n_host_blocks = es.swap ? 4 * eo.kv_blocks : 0;
    KvTierSettings tiers;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        if (es.prefixCaching) tiers = m_kvTiers;  // the tiers keep prefix-cached blocks
    }
    eo.kv_cpu_tier_bytes = tiers.cpuMiB * 1048576;
    eo.kv_disk_bytes = tiers.diskMiB * 1048576;
    eo.kv_disk_dir = tiers.diskDir.toStdString();
    auto engine = session->make_engine(eo);
    if (!engine && tiers.enabled()) {  // tiers that cannot open (their folder): the engine runs without, and says why
        const QString why = qs(engine.message());
        eo.kv_cpu_tier_bytes = eo.kv_disk_bytes = 0;
        eo.kv_disk_dir.clear();
        tiers = {};
        engine = session->make_engine(eo);
        if (engine) Q_EMIT modelWarning(tr("the KV tiers are off: %1").arg(why));
    }
    if (!engine) return qs(engine.message());
    *backend = qs((*engine)->backend().name());
    auto ring = (*engine)->telemetry();
    auto loop = std::make_unique<EngineLoop>(std::move(engine.value()));
    const int64_t blockBytes = session->kv_bytes_per_token(eo.kv_type) * eo.block_size;
    std::unique_ptr<EngineLoop> old;
    std::set<qint64> orphaned;
    bool serving = false;
    auto serverLock = suspendServer(&serving);  // the Local server leaves the old engine first
    {
        std::lock_guard<std::mutex> lk(m_mu);
        old = std::move(m_loop);
        orphaned.swap(m_inFlight);
        m_session = std::move(session);
        m_loop = std::move(loop);
        m_ring = std::move(ring);
        m_kvBytesPerBlock = blockBytes;
        m_maxModelLen = eo.max_model_len;
        m_settings = es;
        m_kvTiersRunning = tiers;
        m_recent.clear();
    }
    old.reset();
    resumeServer(std::move(serverLock), serving);
    for (qint64 id : orphaned) Q_EMIT requestFailed(id, tr("the engine was restarted"));
    return {};
}

void EngineBridge::configureEngine(const EngineSettings& settings) {
    std::shared_ptr<const Session> session;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        session = m_session;
    }
    if (!session) {
        Q_EMIT modelLoadFailed(tr("no model is loaded"));
        return;
    }
    QString backend;
    const QString err = startEngine(std::move(session), settings, &backend);
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

void EngineBridge::recordLatency(const RequestMetrics& m) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_recent.push_back(m);
    if (m_recent.size() > kRecentRequests) m_recent.erase(m_recent.begin());
}

void EngineBridge::forget(qint64 id) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_inFlight.erase(id);
}

SubmitResult EngineBridge::submitChat(const QList<ChatTurn>& turns, const ChatSettings& s) {
    std::lock_guard<std::mutex> lk(m_mu);
    if (!m_loop) return {0, tr("no model is loaded")};
    auto spec = m_session->spec_params(s.speculative.toStdString(), s.specK, s.specAdaptive);
    if (!spec) return {0, qs(spec.message())};
    std::vector<ChatMessage> msgs;
    if (!s.systemPrompt.isEmpty()) msgs.push_back({"system", s.systemPrompt.toStdString()});
    for (const auto& t : turns) msgs.push_back({t.role.toStdString(), t.content.toStdString()});
    GenerationRequest req;
    req.prompt = m_session->encode_chat(msgs);
    const int promptTokens = static_cast<int>(req.prompt.size());
    if (promptTokens >= m_maxModelLen) {
        const int lastTurn =
            turns.isEmpty() ? 0 : static_cast<int>(m_session->encode_text(turns.back().content.toStdString()).size());
        return {0,
                tr("the conversation is %1 tokens (your message %2), but the context holds %3 tokens with room "
                   "for the reply; shorten the message or start a new chat")
                    .arg(req.prompt.size())
                    .arg(lastTurn)
                    .arg(m_maxModelLen - 1),
                promptTokens, m_maxModelLen};
    }
    req.params.temperature = static_cast<float>(s.temperature);
    req.params.top_k = s.topK;
    req.params.top_p = static_cast<float>(s.topP);
    req.params.min_p = static_cast<float>(s.minP);
    req.params.repeat_penalty = static_cast<float>(s.repeatPenalty);
    req.params.max_tokens = s.maxTokens;
    req.params.watermark = s.watermark;
    if (!s.kvEviction.isEmpty()) {
        auto ev = parse_kv_eviction(s.kvEviction.toStdString());
        if (!ev) return {0, tr("KV eviction: %1").arg(qs(ev.message()))};
        req.kv_eviction = *ev;
    }
    req.params.min_new_tokens = std::min(s.minNewTokens, s.maxTokens);
    req.params.length_penalty = static_cast<float>(s.lengthPenalty);
    req.beam_width = std::clamp(s.beams, 1, 8);
    // No fixed seed: a fresh one per reply, so Regenerate draws a new sample; the summary
    // names the seed used, so a reply can be reproduced by fixing it.
    req.params.seed = s.seed >= 0 ? static_cast<uint64_t>(s.seed) : freshSeed();
    req.spec = std::move(spec.value());
    if (!s.adapter.isEmpty()) {
        const std::string name = s.adapter.toStdString();
        if (!m_session->adapter(name) && !s.adapterPath.isEmpty()) {  // a saved chat's adapter: load it again
            auto info = m_session->load_adapter(name, s.adapterPath.toStdString());
            if (!info) return {0, tr("the chat's adapter '%1' could not be loaded: %2").arg(s.adapter, qs(info.message()))};
        }
        auto adapter = m_session->adapter(name);
        if (!adapter) return {0, qs(adapter.message())};
        req.adapter = std::move(adapter.value());
    }
    return {submitLocked(std::move(req), true), {}, promptTokens, m_maxModelLen};
}

ContextUse EngineBridge::countContext(const QList<ChatTurn>& turns, const ChatSettings& s) const {
    std::shared_ptr<const Session> session;
    int limit = 0;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        if (!m_loop) return {};
        session = m_session;
        limit = m_maxModelLen;
    }
    // Encoded outside the lock: a long chat takes milliseconds the engine thread need not wait.
    std::vector<ChatMessage> msgs;
    if (!s.systemPrompt.isEmpty()) msgs.push_back({"system", s.systemPrompt.toStdString()});
    for (const auto& t : turns) msgs.push_back({t.role.toStdString(), t.content.toStdString()});
    return {static_cast<int>(session->encode_chat(msgs).size()), limit};
}

qint64 EngineBridge::submitLocked(GenerationRequest req, bool chatReply) {
    // Runs on the engine thread; the signals are queued to the GUI thread. Timings come
    // from the engine's RequestMetrics, the same numbers bench and the metrics view report.
    const quint64 seed = req.params.seed;
    const double gamma = req.params.watermark ? req.params.watermark_gamma : -1.0;
    auto green = std::make_shared<std::pair<int, int>>(0, 0);  // watermarked reply: green and scored tokens
    req.on_event = [this, chatReply, seed, gamma, green](const TokenEvent& ev) {
        if (ev.green >= 0) green->first += ev.green, ++green->second;
        if (chatReply && !ev.text.empty()) Q_EMIT tokenText(ev.id, qs(ev.text), ev.green);
        if (!ev.finished) return;
        forget(ev.id);
        if (ev.finish_reason == FinishReason::rejected) {
            Q_EMIT requestFailed(ev.id, qs(ev.error));
            return;
        }
        if (!ev.metrics) return;
        const RequestMetrics& m = *ev.metrics;
        recordLatency(m);
        if (!chatReply) return;
        const double tpot = m.tpot_ms();
        QString summary = QString("%1 tokens · %2 tok/s · TTFT %3 ms · %4 · seed %5")
                              .arg(m.n_output)
                              .arg(tpot > 0 ? 1000.0 / tpot : 0.0, 0, 'f', 1)
                              .arg(std::max(0.0, m.ttft_ms()), 0, 'f', 0)
                              .arg(QString::fromLatin1(finishWord(ev.finish_reason)))
                              .arg(seed);
        if (gamma > 0 && green->second > 0)  // the detector's z-score (engine/sampling/watermark.h)
            summary += tr(" · watermark: %1 of %2 tokens green, z = %3")
                           .arg(green->first)
                           .arg(green->second)
                           .arg(watermark_z(green->first, green->second, gamma), 0, 'f', 1);
        Q_EMIT requestFinished(ev.id, summary);
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
    auto spec = m_session->spec_params(speculative.toStdString(), specK, false);
    if (!spec) return ids;
    const int n_vocab = m_session->model().config.n_vocab;
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
        req.spec = spec.value();
        const qint64 id = submitLocked(std::move(req), false);
        ids.push_back(id);
    }
    return ids;
}

qint64 EngineBridge::injectText(const QString& text, int outputLen, int priority, const QString& speculative,
                                int specK, const QString& adapter) {
    std::lock_guard<std::mutex> lk(m_mu);
    if (!m_loop || text.isEmpty() || outputLen <= 0) return 0;
    auto spec = m_session->spec_params(speculative.toStdString(), specK, false);
    if (!spec) return 0;
    GenerationRequest req;
    if (!adapter.isEmpty()) {
        auto a = m_session->adapter(adapter.toStdString());
        if (!a) return 0;
        req.adapter = std::move(a.value());
    }
    req.prompt = m_session->encode_user(text.toStdString());
    req.params.temperature = 0;
    req.params.max_tokens = outputLen;
    req.priority = priority;
    req.spec = spec.value();
    return submitLocked(std::move(req), false);
}

QString EngineBridge::loadAdapter(const QString& name, const QString& path) {
    std::shared_ptr<const Session> session;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        session = m_session;
    }
    if (!session) return tr("no model is loaded");
    auto info = session->load_adapter(name.toStdString(), path.toStdString());  // the registry has its own lock
    return info ? QString() : qs(info.message());
}

bool EngineBridge::unloadAdapter(const QString& name) {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_session && m_session->unload_adapter(name.toStdString());
}

QList<AdapterEntry> EngineBridge::adapters() const {
    std::lock_guard<std::mutex> lk(m_mu);
    QList<AdapterEntry> v;
    if (!m_session) return v;
    for (const AdapterInfo& a : m_session->adapters()) v.push_back({qs(a.name), qs(a.path), qs(a.format), a.rank});
    return v;
}

QStringList EngineBridge::draftChoices() const {
    std::lock_guard<std::mutex> lk(m_mu);
    QStringList v;
    if (!m_session) return v;
    for (const auto& d : m_session->drafts())
        v << (d.first == m_session->layer_skip_name() ? QStringLiteral("layer-skip") : qs(d.first));
    return v;
}

std::shared_ptr<const SpecSnapshot> EngineBridge::specSnapshot() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_loop ? m_loop->spec_snapshot() : nullptr;
}

QStringList EngineBridge::tokenPieces(const std::vector<int32_t>& ids) const {
    std::shared_ptr<const Session> session;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        session = m_session;
    }
    QStringList out;
    if (!session) return out;
    out.reserve(static_cast<int>(ids.size()));
    // control tokens (an end-of-turn that stopped the reply) are not text: the chat does
    // not show them, so neither does a token view
    for (int32_t id : ids) out << qs(session->decode({id}, true));
    return out;
}

void EngineBridge::cancel(qint64 requestId) {
    std::lock_guard<std::mutex> lk(m_mu);
    if (m_loop) m_loop->cancel(requestId);
}

EngineSettings EngineBridge::engineSettings() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_settings;
}

void EngineBridge::setKvTiers(const KvTierSettings& t) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_kvTiers = t;
}

KvTierSettings EngineBridge::kvTiers() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_kvTiers;
}

KvTierSettings EngineBridge::runningKvTiers() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_kvTiersRunning;
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

LatencySummary EngineBridge::recentLatency() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return summarize(m_recent);
}

bool EngineBridge::writeTrace(const QString& path, const QString& modelLabel, QString* error) const {
    std::shared_ptr<const SnapshotRing> ring;
    std::vector<RequestMetrics> requests;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        ring = m_ring;
        requests = m_recent;
    }
    if (!ring) {
        *error = tr("no model is loaded");
        return false;
    }
    const nlohmann::json meta = {{"source", "kvscope GUI"}, {"model", modelLabel.toStdString()}};
    std::vector<std::shared_ptr<const EngineSnapshot>> last;
    if (auto s = ring->latest()) last.push_back(std::move(s));
    const Status st = write_trace(path.toStdString(), meta, ring->steps_after(-1), last, requests);
    if (!st) *error = qs(st.message());
    return st.is_ok();
}

QString EngineBridge::decodeTokens(const std::vector<int32_t>& ids) const {
    std::shared_ptr<const Session> session;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        session = m_session;
    }
    // piece by piece: a block may split a character
    return session ? qs(session->decode(ids)) : QString();
}

qint64 EngineBridge::kvBytesPerToken(int nLayer, int nKvHead, int headDim, bool int8) {
    return Session::kv_bytes_per_token(nLayer, nKvHead, headDim, int8 ? DType::Q8_0 : DType::F16);
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
    return m_session ? m_session->model().weight_bytes : 0;
}

std::shared_ptr<const Model> EngineBridge::model() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_session ? m_session->model_ptr() : nullptr;
}

QString EngineBridge::modelPath() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_session ? qs(m_session->model().path) : QString();
}

int EngineBridge::contextTokens() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_maxModelLen;
}

}  // namespace kvs::app
