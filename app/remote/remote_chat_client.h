#pragma once
// Chats through a remote OpenAI-compatible server (vLLM, llama-server, kvscope serve):
// POST /v1/chat/completions, streamed, with a chat's sampling settings. Each reply runs on
// its own worker thread with its own app/net client, so a dead, slow or hostile server never
// blocks the GUI thread; pieces of text, the end and failures come back as queued signals
// with the request id, like the local engine's (app/engine_bridge). cancel() closes the
// stream at once (the server sees the hang-up and cancels the request). A failure is
// described for the chat in words (unreachable, key refused, busy, server error, stream cut,
// no answer in time) with the client's exact message after it; the text streamed so far is
// the caller's to keep.
#include <QHash>
#include <QObject>
#include <QString>
#include <QVector>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "app/net/openai_client.h"

namespace kvs::remote {

struct RemoteSampling {
    double temperature = 0.7;
    int topK = 40;  // <= 0: not sent
    double topP = 0.95;
    double minP = 0.05;          // 0: not sent
    double repeatPenalty = 1.0;  // 1: not sent (sent as repetition_penalty, vLLM's and KV Scope's name)
    int maxTokens = 512;
    qint64 seed = -1;        // -1: not sent
    QString systemPrompt;    // empty: none sent (the server's template default applies)
    bool ignoreEos = false;  // sent as ignore_eos (vLLM, KV Scope): generate max_tokens whatever comes
};

struct RemoteTurn {
    QString role;  // user, assistant
    QString content;
};

// The request body fields for these settings (for tests and the chat's summary line).
net::CompletionRequest make_chat_request(const QString& model, const QVector<RemoteTurn>& turns,
                                         const RemoteSampling& s);
// A failure of the client as the chat shows it: what happened in words, then the detail.
QString describe_failure(const QString& clientMessage);

class RemoteChatClient : public QObject {
    Q_OBJECT
public:
    explicit RemoteChatClient(QObject* parent = nullptr);
    ~RemoteChatClient() override;  // cancels every reply in flight and waits for its thread

    // base URL, API key, timeouts: used by the next submit.
    void setOptions(const net::ClientOptions& opt) { m_opt = opt; }
    const net::ClientOptions& options() const { return m_opt; }
    // Starts a reply; returns its id at once (the connection is made on the worker thread).
    qint64 submit(const QString& model, const QVector<RemoteTurn>& turns, const RemoteSampling& s);
    void cancel(qint64 id);
    int inFlight() const;

Q_SIGNALS:
    void token(qint64 id, const QString& piece);
    // summary: "N tokens · TTFT x ms · y tok/s · finish_reason"
    void finished(qint64 id, const QString& summary);
    void failed(qint64 id, const QString& message);

private:
    struct Job {
        std::shared_ptr<net::OpenAIClient> client;
        std::thread thread;
        std::atomic<bool> done{false};
    };
    void reap();  // joins finished threads

    net::ClientOptions m_opt;
    qint64 m_next = 1;
    mutable std::mutex m_mutex;
    QHash<qint64, std::shared_ptr<Job>> m_jobs;
};

}  // namespace kvs::remote
