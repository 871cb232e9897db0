#pragma once
// The only place Qt meets the engine. The bridge QObject lives on its own QThread (model
// loading is slow and runs there); the engine itself runs on the EngineLoop's thread.
// Chats submit requests from the GUI thread (a queue post, never a wait), tokens come back
// as queued signals, and the views read the newest telemetry snapshot on a timer.
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "app/lesson.h"
#include "app/local_server.h"
#include "engine/telemetry/snapshot.h"

namespace kvs {
struct Model;
struct GenerationRequest;
struct LatencySummary;
struct RequestMetrics;
class EngineLoop;
class Session;
class SnapshotRing;
}  // namespace kvs
namespace kvs::server {
class OpenAiServer;
}

namespace kvs::app {

struct ChatTurn {
    QString role;  // "system", "user", "assistant"
    QString content;
};

// Sampling settings of one chat.
struct ChatSettings {
    double temperature = 0.7;
    int topK = 40;
    double topP = 0.95;
    double minP = 0.05;
    double repeatPenalty = 1.0;
    int maxTokens = 512;
    qint64 seed = -1;      // -1: a fresh seed per reply (named in the reply's summary)
    QString systemPrompt;  // empty: the model's default system prompt
    // Speculative decoding: "" (off), "ngram" (prompt lookup), "layer-skip" (the first third
    // of the target's layers as the draft) or "int4" (the target re-quantized to Q4_0).
    QString speculative;
    int specK = 4;              // drafts per step, 1..8
    bool specAdaptive = false;  // k moves within 1..8 with the acceptance
    // When the conversation no longer fits the context: "stop" (refuse the message, saying
    // so) or "drop-oldest" (the oldest exchanges leave what the model sees; app/chat_controller).
    QString contextPolicy = "stop";
    // The LoRA adapter the chat's replies run with ("": the base model) and where it was loaded
    // from, so a saved chat can load it again (submitChat does, when the session lacks it).
    QString adapter;
    QString adapterPath;
    // Beam search (app/beam_search_form.h): 1 off, 2..8 beams (the reply is the best
    // hypothesis by summed log-probability / length^lengthPenalty); minNewTokens: no end of
    // the reply before that many tokens (with or without beams).
    int beams = 1;
    double lengthPenalty = 1.0;
    int minNewTokens = 0;
    // TGI's green-list watermark on the replies (engine/sampling/watermark.h, gamma 0.5,
    // delta 2): each token's green or red list shows in the chat and the slot timeline.
    bool watermark = false;
    // KV eviction of the replies (engine/kv_cache/kv_eviction.h): "POLICY:BUDGET" such as
    // "h2o:512" or "streaming:0.5" (a fraction of prompt + max tokens); "" : off.
    QString kvEviction;
};

// The KV tiers below the device pool for the window's engine (engine/kv_cache/kv_tiers.h;
// the CLI's --kv-cpu-mib / --kv-disk-mib / --kv-disk-dir): 0 MiB turns a tier off; an empty
// folder is the default store (~/.cache/kvscope/kv). app/kv_tiers_dialog edits and keeps them.
struct KvTierSettings {
    qint64 cpuMiB = 0;
    qint64 diskMiB = 0;
    QString diskDir;
    bool enabled() const { return cpuMiB > 0 || diskMiB > 0; }
    bool operator==(const KvTierSettings&) const = default;
};

// A LoRA adapter loaded in the session (EngineBridge::adapters).
struct AdapterEntry {
    QString name;
    QString path;
    QString format;  // "peft" or "gguf"
    int rank = 0;
};

// How much of the context a conversation takes, as the model sees it (template, system
// prompt and the generation prompt included). limit 0: no model is loaded.
struct ContextUse {
    int used = 0;
    int limit = 0;
};

// What submitChat returns: the request's id (> 0) once it is queued, or why it could not be.
struct SubmitResult {
    qint64 id = 0;
    QString error;  // empty when id > 0
    bool ok() const { return id > 0; }
    // The prompt's tokens and the context's size, once the conversation was encoded (also when
    // it was refused for not fitting: then promptTokens >= contextTokens).
    int promptTokens = 0;
    int contextTokens = 0;
    bool tooLong() const { return !ok() && contextTokens > 0 && promptTokens >= contextTokens; }
};

class EngineBridge : public QObject {
    Q_OBJECT
public:
    EngineBridge();
    ~EngineBridge() override;

    // Thread-safe. Queues the assistant's reply to the conversation; returns its request id,
    // or the reason it could not be queued (no model, a draft the model lacks, a conversation
    // longer than the context: the message names both sizes). Errors that
    // come later (the engine rejects the prompt) arrive as requestFailed with that id.
    SubmitResult submitChat(const QList<kvs::app::ChatTurn>& turns, const kvs::app::ChatSettings& settings);
    void cancel(qint64 requestId);  // frees its blocks at once; unknown ids are ignored
    // Thread-safe: the conversation's size in tokens as submitChat would encode it, and the
    // context's (both 0 without a model). Tokenizes the whole conversation: call it when a chat
    // is shown or a reply ends, not per token.
    ContextUse countContext(const QList<kvs::app::ChatTurn>& turns, const kvs::app::ChatSettings& settings) const;
    // Lesson mode: n requests of random prompt tokens that generate exactly outputLen
    // tokens each (end-of-generation ignored). Returns their ids (empty without a model).
    // sharedPrefix: that many tokens, the same in every call, come before each prompt.
    // speculative / specK: as in ChatSettings.
    QVector<qint64> injectSynthetic(int n, int promptLen, int outputLen, int priority, quint64 seed,
                                    int sharedPrefix = 0, const QString& speculative = {}, int specK = 4);
    // Lesson mode: one greedy chat request whose user message is `text`, at most outputLen
    // tokens. Returns its id (0 without a model).
    // adapter: the LoRA adapter it runs with ("" none; one the session has loaded).
    qint64 injectText(const QString& text, int outputLen, int priority, const QString& speculative = {}, int specK = 4,
                      const QString& adapter = {});
    // LoRA adapters of the loaded model's session (thread-safe): load one (a PEFT folder or a
    // GGUF adapter file) under a name, "" on success or why not (nothing changes then; no model,
    // a bad name, a name taken, an adapter for another model); unload one (requests running
    // with it finish with it); the loaded ones by name. A new model starts with none.
    QString loadAdapter(const QString& name, const QString& path);
    bool unloadAdapter(const QString& name);
    QList<kvs::app::AdapterEntry> adapters() const;
    // The settings the engine runs with now (thread-safe): a lesson puts them back when it ends.
    EngineSettings engineSettings() const;
    // The KV tiers the next engine starts with (a model load, a lesson, configureEngine); the
    // running engine keeps the ones it started with (runningKvTiers). Any thread.
    void setKvTiers(const KvTierSettings& t);
    KvTierSettings kvTiers() const;
    KvTierSettings runningKvTiers() const;
    // Lesson controls of the engine thread.
    void pause();
    void resume();
    void singleStep();
    void setStepDelayMs(int ms);

    // Telemetry for the views (thread-safe; null / empty before a model is loaded).
    std::shared_ptr<const EngineSnapshot> latestSnapshot() const;
    // Full snapshots newer than `step`, oldest first (the ring keeps the last 64).
    std::vector<std::shared_ptr<const EngineSnapshot>> snapshotsAfter(int64_t step) const;
    // TTFT and TPOT of the most recently finished requests (up to kRecentRequests), from the
    // engine's RequestMetrics with the definitions bench and the trace use (summarize()).
    LatencySummary recentLatency() const;
    static constexpr size_t kRecentRequests = 64;
    // Writes the trace file (the format of `kvscope bench --trace`): the steps and last
    // snapshot the ring holds, and the recently finished requests. False with *error set.
    bool writeTrace(const QString& path, const QString& modelLabel, QString* error) const;
    int64_t kvBytesPerBlock() const;
    // The engine's KV bytes per token for a shape (F16 or INT8), for the memory planners.
    static qint64 kvBytesPerToken(int nLayer, int nKvHead, int headDim, bool int8);
    // Text of token ids with the loaded model's tokenizer (control tokens shown as is).
    QString decodeTokens(const std::vector<int32_t>& ids) const;
    // Each token's own piece of text (one string per id; empty for control tokens).
    QStringList tokenPieces(const std::vector<int32_t>& ids) const;
    // Speculative decoding telemetry after the newest step that changed it (null before a
    // model is loaded).
    std::shared_ptr<const SpecSnapshot> specSnapshot() const;
    // The draft models the engine has, by the names ChatSettings::speculative uses.
    QStringList draftChoices() const;
    std::vector<StepRecord> stepsAfter(int64_t step) const;
    int64_t weightBytes() const;
    // The loaded model (null before one is loaded), for views that run it beside the engine.
    std::shared_ptr<const Model> model() const;
    // The Local server (app/server's OpenAiServer) on this bridge's Session and EngineLoop, so
    // HTTP requests are requests of the engine the chats use (engine_bridge_server.cpp).
    // Thread-safe. Returns "" or the error, which names the address (a port in use). A new
    // engine (another model, a lesson's settings) stops the server - its streams end with
    // finish_reason "abort" - and starts it again at the same address on the new engine;
    // serverStopped says so when that fails.
    QString startServer(const kvs::app::LocalServerSettings& settings);
    void stopServer();  // lets the replies in flight end (at most 5 s); no-op when off
    LocalServerState serverState() const;
    // The loaded model's file or folder ("" before one is loaded) and its context in tokens.
    QString modelPath() const;
    int contextTokens() const;
    // A load the window follows (loadProgress) and may cancel: a ticket per load. cancelLoad
    // is thread-safe; the load stops before its next stage and the previous model keeps
    // running (a load past its last stage, the engine's start, is no longer cancelled).
    static qint64 newLoadTicket();
    void cancelLoad(qint64 ticket);

public Q_SLOTS:
    void loadModel(const QString& nameOrPath);
    // Loads with a chosen context (tokens per sequence; 0: the session's default, the
    // training context up to 4096, which modelLoaded's description names) and batch (the KV
    // pool then holds exactly batch sequences of that context; 0: the default pool). A context
    // beyond the model's training context, or weights + KV beyond this machine's RAM, is
    // refused with both numbers: the context is never reduced behind the user's back. Every
    // failure leaves the previous model loaded and running.
    void loadModelAt(const QString& nameOrPath, int contextTokens, int batch, qint64 ticket);
    // A fresh engine for the loaded model with these settings (lessons); requests in flight
    // fail with "the engine was reconfigured". Emits engineConfigured or modelLoadFailed.
    void configureEngine(const kvs::app::EngineSettings& settings);

Q_SIGNALS:
    void modelLoaded(const QString& description);
    void modelLoadFailed(const QString& message);
    // A ticketed load's stage (1-based, of `stages`) as it begins, and its cancellation.
    void loadProgress(qint64 ticket, int stage, int stages, const QString& what);
    void modelLoadCancelled(qint64 ticket);
    void engineConfigured(const QString& description);
    void modelWarning(const QString& message);  // loaded, but something is not applied (see Model::warnings)
    void modelShape(const QString& name, int layers, int kvHeads, int headDim, qint64 weightBytes, int heads);
    // green: the piece's token is in the watermark's green list (1) or not (0); -1 when the
    // reply is not watermarked (ChatSettings::watermark).
    void tokenText(qint64 requestId, const QString& piece, int green = -1);
    void requestFinished(qint64 requestId, const QString& summary);
    void requestFailed(qint64 requestId, const QString& message);
    void serverStopped(const QString& why);  // the Local server could not go on with a new engine

private:
    void forget(qint64 id);
    // Submits a request whose final event records its latencies (m_mu held, m_loop set);
    // chat replies also get a requestFinished summary.
    qint64 submitLocked(GenerationRequest req, bool chatReply);
    void recordLatency(const RequestMetrics& m);  // TTFT and TPOT of a finished request, for the metrics
    // Builds an engine for the session with the settings and swaps it in; the error, or "".
    QString startEngine(std::shared_ptr<const Session> session, const EngineSettings& s, QString* backend);
    bool loadCancelled(qint64 ticket);  // and forgets the ticket when it was

    mutable std::mutex m_mu;  // guards everything below
    std::shared_ptr<const Session> m_session;
    std::unique_ptr<EngineLoop> m_loop;
    std::shared_ptr<const SnapshotRing> m_ring;
    std::set<qint64> m_inFlight;
    std::vector<RequestMetrics> m_recent;  // finished requests, newest last, at most kRecentRequests
    int64_t m_kvBytesPerBlock = 0;
    int m_maxModelLen = 0;      // the engine's prompt + output limit in tokens
    EngineSettings m_settings;  // the engine's

    KvTierSettings m_kvTiers;         // for the next engine
    KvTierSettings m_kvTiersRunning;  // the running engine's (none when its settings turn prefix caching off)

    // The Local server (engine_bridge_server.cpp). m_serverMu orders start / stop / engine swaps
    // and is never taken with m_mu held (stopping waits for engine events, whose callbacks
    // take m_mu); m_serverPtrMu only guards reading the pointer (serverState never waits).
    std::unique_lock<std::mutex> suspendServer(bool* wasServing);  // before an engine swap
    void resumeServer(std::unique_lock<std::mutex> lock, bool wasServing);
    QString startServerLocked();  // m_serverMu held
    void setServer(std::shared_ptr<server::OpenAiServer> s);
    std::mutex m_serverMu;
    mutable std::mutex m_serverPtrMu;
    std::shared_ptr<server::OpenAiServer> m_server;
    LocalServerSettings m_serverSettings;
    int m_contextChoice = 0;    // the context the user chose at load (0: the default), kept by configureEngine
    std::set<qint64> m_cancelledLoads;
};

}  // namespace kvs::app

Q_DECLARE_METATYPE(kvs::app::ChatTurn)
Q_DECLARE_METATYPE(kvs::app::ChatSettings)
Q_DECLARE_METATYPE(kvs::app::EngineSettings)
