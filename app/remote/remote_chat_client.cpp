#include "app/remote/remote_chat_client.h"

#include <QMetaObject>
#include <QPointer>
#include <chrono>

namespace kvs::remote {

net::CompletionRequest make_chat_request(const QString& model, const QVector<RemoteTurn>& turns,
                                         const RemoteSampling& s) {
    net::CompletionRequest r;
    r.model = model.toStdString();
    if (!s.systemPrompt.trimmed().isEmpty()) r.messages.push_back({"system", s.systemPrompt.toStdString()});
    for (const RemoteTurn& t : turns) r.messages.push_back({t.role.toStdString(), t.content.toStdString()});
    r.stream = true;
    r.include_usage = true;
    r.temperature = s.temperature;
    if (s.topP > 0 && s.topP <= 1) r.top_p = s.topP;
    if (s.topK > 0) r.top_k = s.topK;
    if (s.maxTokens > 0) r.max_tokens = s.maxTokens;
    if (s.seed >= 0) r.seed = uint64_t(s.seed);
    r.ignore_eos = s.ignoreEos;
    if (s.minP > 0) r.extra["min_p"] = s.minP;
    if (s.repeatPenalty != 1.0) r.extra["repetition_penalty"] = s.repeatPenalty;
    return r;
}

QString describe_failure(const QString& m) {
    QString what;
    if (m.contains(QLatin1String("cancelled"))) what = QStringLiteral("Stopped.");
    else if (m.contains(QLatin1String("HTTP 401")) || m.contains(QLatin1String("HTTP 403")))
        what = QStringLiteral("The server refused the API key.");
    else if (m.contains(QLatin1String("HTTP 429")))
        what = QStringLiteral("The server is busy (too many requests); retry in a moment.");
    else if (m.contains(QLatin1String("HTTP 404")))
        what = QStringLiteral("The server does not know this model or route.");
    else if (m.contains(QLatin1String("HTTP 5")))
        what = QStringLiteral("The server failed while answering.");
    else if (m.contains(QLatin1String("HTTP 4")))
        what = QStringLiteral("The server rejected the request.");
    else if (m.contains(QLatin1String("is a server listening")))
        what = QStringLiteral("The server cannot be reached.");
    else if (m.contains(QLatin1String("no data came")) || m.contains(QLatin1String("no complete answer")))
        what = QStringLiteral("The server stopped answering (timed out).");
    else if (m.contains(QLatin1String("middle of an event")) || m.contains(QLatin1String("[DONE]")) ||
             m.contains(QLatin1String("connection closed")))
        what = QStringLiteral("The stream was cut off before the reply ended.");
    else if (m.contains(QLatin1String("limit")))
        what = QStringLiteral("The server sent more than the client accepts.");
    else if (m.contains(QLatin1String("JSON")) || m.contains(QLatin1String("json")))
        what = QStringLiteral("The server sent something that is not a valid reply.");
    else
        what = QStringLiteral("The reply failed.");
    return what + QStringLiteral(" (") + m + QLatin1Char(')');
}

RemoteChatClient::RemoteChatClient(QObject* parent) : QObject(parent) {}

RemoteChatClient::~RemoteChatClient() {
    QHash<qint64, std::shared_ptr<Job>> jobs;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        jobs.swap(m_jobs);
    }
    for (auto& j : jobs) j->client->cancel();
    for (auto& j : jobs)
        if (j->thread.joinable()) j->thread.join();
}

int RemoteChatClient::inFlight() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    int n = 0;
    for (const auto& j : m_jobs) n += j->done ? 0 : 1;
    return n;
}

void RemoteChatClient::reap() {
    std::vector<std::shared_ptr<Job>> finished;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        for (auto it = m_jobs.begin(); it != m_jobs.end();) {
            if (it.value()->done) {
                finished.push_back(it.value());
                it = m_jobs.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& j : finished)
        if (j->thread.joinable()) j->thread.join();  // done: returns at once
}

void RemoteChatClient::cancel(qint64 id) {
    std::shared_ptr<Job> j;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        j = m_jobs.value(id);
    }
    if (j) j->client->cancel();  // shuts the socket: the worker returns within moments
}

qint64 RemoteChatClient::submit(const QString& model, const QVector<RemoteTurn>& turns, const RemoteSampling& s) {
    reap();
    const qint64 id = m_next++;
    auto job = std::make_shared<Job>();
    job->client = std::make_shared<net::OpenAIClient>(m_opt);
    const net::CompletionRequest req = make_chat_request(model, turns, s);
    QPointer<RemoteChatClient> self(this);
    std::weak_ptr<Job> weak = job;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_jobs.insert(id, job);
    }
    auto client = job->client;
    job->thread = std::thread([self, weak, client, req, id]() {
        using Clock = std::chrono::steady_clock;
        const auto t0 = Clock::now();
        double ttft_ms = -1;
        // Pieces are posted to the GUI thread as they come; `self` is checked there (the
        // destructor cancels and joins first, so the object outlives every post it waits for).
        auto post = [&](auto fn) {
            if (self) QMetaObject::invokeMethod(self.data(), fn, Qt::QueuedConnection);
        };
        auto r = client->complete(req, [&](const net::StreamDelta& d) {
            if (!d.text.empty()) {
                if (ttft_ms < 0) ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
                const QString piece = QString::fromStdString(d.text);
                post([self, id, piece]() {
                    if (self) Q_EMIT self->token(id, piece);
                });
            }
            return true;
        });
        const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (!r) {
            const QString msg = describe_failure(QString::fromStdString(r.message()));
            post([self, id, msg]() {
                if (self) Q_EMIT self->failed(id, msg);
            });
        } else {
            const int64_t n = r->usage.completion_tokens >= 0 ? r->usage.completion_tokens : r->n_chunks;
            const double decode_s = total_s - std::max(0.0, ttft_ms) / 1000.0;
            QString summary = QStringLiteral("%1 tokens").arg(n);
            if (ttft_ms >= 0) summary += QStringLiteral(" · TTFT %1 ms").arg(ttft_ms, 0, 'f', 0);
            if (n > 1 && decode_s > 0)
                summary += QStringLiteral(" · %1 tok/s").arg(double(n - 1) / decode_s, 0, 'f', 1);
            summary += QStringLiteral(" · ") + QString::fromStdString(r->finish_reason);
            post([self, id, summary]() {
                if (self) Q_EMIT self->finished(id, summary);
            });
        }
        if (auto j = weak.lock()) j->done = true;
    });
    return id;
}

}  // namespace kvs::remote
