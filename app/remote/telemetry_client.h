#pragma once
// Follows a remote KV Scope server's telemetry stream (app/net/telemetry_reader.h) on a
// worker thread and hands its events to the GUI thread; after a failure it says why and
// connects again (after 1 s, then 2 s, up to 5 s between tries; a stream that delivered an
// event starts the wait over), so a server that restarts on the same address is followed
// again without the user doing anything. Events the GUI thread has not taken yet wait in a
// bounded queue (the oldest dropped past kMaxPending), so a busy window never makes the
// worker hold more than that. stop() (and the destructor) cancel the read and join.
#include <QObject>
#include <QPointer>
#include <QString>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "app/net/telemetry_reader.h"

namespace kvs::remote {

class TelemetryClient : public QObject {
    Q_OBJECT
public:
    static constexpr size_t kMaxPending = 64;

    explicit TelemetryClient(QObject* parent = nullptr);
    ~TelemetryClient() override;

    void start(const net::TelemetryReaderOptions& opt);
    void stop();
    bool running() const { return m_thread.joinable(); }
    int connections() const { return m_connections; }  // streams that delivered a first event
    int eventsReceived() const { return m_events; }

Q_SIGNALS:
    // A stream delivered its first event (the engine's state at connection time).
    void connected(const QString& url);
    void event(std::shared_ptr<const kvs::TelemetryEvent> e);
    // The stream ended or could not start; retryInMs: when the next try is.
    void failed(const QString& message, int retryInMs);

private:
    void run(net::TelemetryReaderOptions opt, QPointer<TelemetryClient> self);
    void drain();  // GUI thread: emits the queued events

    std::thread m_thread;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_stop = false;
    std::shared_ptr<net::TelemetryReader> m_reader;  // the one reading now (for cancel)
    std::deque<std::shared_ptr<const TelemetryEvent>> m_pending;
    std::atomic<int> m_connections{0};
    int m_events = 0;
};

}  // namespace kvs::remote
