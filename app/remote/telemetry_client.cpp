#include "app/remote/telemetry_client.h"

#include <QMetaObject>
#include <QPointer>
#include <algorithm>
#include <chrono>

namespace kvs::remote {

TelemetryClient::TelemetryClient(QObject* parent) : QObject(parent) {}

TelemetryClient::~TelemetryClient() { stop(); }

void TelemetryClient::stop() {
    std::shared_ptr<net::TelemetryReader> reader;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
        reader = m_reader;
        m_pending.clear();
    }
    m_cv.notify_all();
    if (reader) reader->cancel();
    if (m_thread.joinable()) m_thread.join();
    m_reader.reset();
}

void TelemetryClient::start(const net::TelemetryReaderOptions& opt) {
    stop();
    m_stop = false;
    m_connections = 0;
    m_events = 0;
    QPointer<TelemetryClient> self(this);
    m_thread = std::thread([this, opt, self] { run(opt, self); });
}

void TelemetryClient::run(net::TelemetryReaderOptions opt, QPointer<TelemetryClient> self) {
    int waitMs = 1000;
    for (;;) {
        auto reader = std::make_shared<net::TelemetryReader>(opt);
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_stop) return;
            m_reader = reader;
        }
        const QString url = QString::fromStdString(reader->url());
        bool first = true;
        Status s = reader->run([&](TelemetryEvent&& e) {
            auto ev = std::make_shared<const TelemetryEvent>(std::move(e));
            bool wake = false;
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                if (m_stop) return false;
                wake = m_pending.empty();
                m_pending.push_back(std::move(ev));
                while (m_pending.size() > kMaxPending) m_pending.pop_front();
            }
            if (first) {
                first = false;
                ++m_connections;
                waitMs = 1000;
                QMetaObject::invokeMethod(
                    this, [self, url] { if (self) Q_EMIT self->connected(url); }, Qt::QueuedConnection);
            }
            if (wake)
                QMetaObject::invokeMethod(this, [self] { if (self) self->drain(); }, Qt::QueuedConnection);
            return true;
        });
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_stop) return;
        }
        const QString message = QString::fromStdString(s ? std::string("the telemetry stream ended") : s.message());
        const int retry = waitMs;
        QMetaObject::invokeMethod(
            this, [self, message, retry] { if (self) Q_EMIT self->failed(message, retry); }, Qt::QueuedConnection);
        std::unique_lock<std::mutex> lock(m_mutex);
        if (m_cv.wait_for(lock, std::chrono::milliseconds(waitMs), [this] { return m_stop; })) return;
        waitMs = std::min(5000, waitMs * 2);
    }
}

void TelemetryClient::drain() {
    std::deque<std::shared_ptr<const TelemetryEvent>> batch;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        batch.swap(m_pending);
    }
    for (auto& e : batch) {
        ++m_events;
        Q_EMIT event(e);
    }
}

}  // namespace kvs::remote
