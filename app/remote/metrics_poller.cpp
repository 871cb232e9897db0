#include "app/remote/metrics_poller.h"

#include <QMetaObject>
#include <QPointer>
#include <chrono>

namespace kvs::remote {

MetricsPoller::MetricsPoller(QObject* parent) : QObject(parent) {}

MetricsPoller::~MetricsPoller() { stop(); }

void MetricsPoller::stop() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_client) m_client->cancel();
    if (m_thread.joinable()) m_thread.join();
    m_client.reset();
}

void MetricsPoller::start(const net::ClientOptions& opt, const QString& model, int intervalMs, bool pollSlots) {
    stop();
    m_stop = false;
    m_readings = 0;
    net::ClientOptions o = opt;
    o.read_timeout_s = std::min(o.read_timeout_s, 10.0);
    o.connect_timeout_s = std::min(o.connect_timeout_s, 5.0);
    o.total_timeout_s = 20;
    o.max_body_bytes = size_t{32} << 20;
    m_client = std::make_shared<net::OpenAIClient>(o);
    auto client = m_client;
    const std::string modelName = model.toStdString();
    QPointer<MetricsPoller> self(this);
    m_thread = std::thread([this, self, client, modelName, intervalMs, pollSlots]() {
        using Clock = std::chrono::steady_clock;
        const auto t0 = Clock::now();
        for (;;) {
            const auto a = Clock::now();
            auto reply = client->get("/metrics");
            const double fetch_ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
            if (client->cancelled()) return;
            QString error;
            MetricsReading r;
            r.t_s = std::chrono::duration<double>(a - t0).count();
            r.fetch_ms = fetch_ms;
            if (!reply) error = QString::fromStdString(reply.message());
            else if (reply->status != 200)
                error = QStringLiteral("GET /metrics answered HTTP %1").arg(reply->status);
            else {
                r.page_bytes = reply->body.size();
                auto page = parse_prometheus_text(reply->body);
                if (!page) error = QString::fromStdString(page.message());
                else {
                    r.bad_lines = page->n_bad_lines;
                    auto m = read_vllm_metrics(*page, modelName);
                    if (!m) error = QString::fromStdString(m.message());
                    else
                        r.m = std::move(m.value());
                }
            }
            if (error.isEmpty() && pollSlots) {
                if (auto sl = client->get("/slots"); sl && sl->status == 200)
                    if (auto slots = parse_llama_slots(sl->body); slots) {
                        r.has_slots = true;
                        r.slots = std::move(slots.value());
                    }
            }
            // The destructor joins this thread before the object goes, so posting is safe;
            // the queued call is dropped if the object is gone by the time it would run.
            if (error.isEmpty()) {
                ++m_readings;
                QMetaObject::invokeMethod(
                    this,
                    [self, r]() {
                        if (self) Q_EMIT self->reading(r);
                    },
                    Qt::QueuedConnection);
            } else {
                QMetaObject::invokeMethod(
                    this,
                    [self, error]() {
                        if (self) Q_EMIT self->failed(error);
                    },
                    Qt::QueuedConnection);
            }
            std::unique_lock<std::mutex> lock(m_mutex);
            if (m_cv.wait_for(lock, std::chrono::milliseconds(intervalMs), [this] { return m_stop; })) return;
        }
    });
}

}  // namespace kvs::remote
