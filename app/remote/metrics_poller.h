#pragma once
// Reads a remote server's /metrics every interval on a worker thread (app/net's client, so
// a dead or slow server costs that thread a timeout, never the GUI a freeze) and hands each
// reading to the GUI thread: the page parsed into VllmMetrics, or why it could not be read.
// stop() (and the destructor) cancel a read in flight and join the thread.
#include <QObject>
#include <QString>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "app/net/openai_client.h"
#include "app/remote/llama_slots.h"
#include "app/remote/vllm_metrics.h"

namespace kvs::remote {

struct MetricsReading {
    double t_s = 0;  // seconds since start()
    VllmMetrics m;
    double fetch_ms = 0;  // how long the GET took
    size_t page_bytes = 0;
    size_t bad_lines = 0;    // lines of the page skipped as not Prometheus text
    bool has_slots = false;  // llama-server's /slots was read
    std::vector<LlamaSlot> slots;
};

class MetricsPoller : public QObject {
    Q_OBJECT
public:
    explicit MetricsPoller(QObject* parent = nullptr);
    ~MetricsPoller() override;

    // Starts polling base URL's /metrics (model: the model_name to read; "" the first), and
    // llama-server's /slots too when pollSlots.
    void start(const net::ClientOptions& opt, const QString& model, int intervalMs = 1000, bool pollSlots = false);
    void stop();
    bool running() const { return m_thread.joinable(); }
    int readings() const { return m_readings; }

Q_SIGNALS:
    void reading(const kvs::remote::MetricsReading& r);
    void failed(const QString& message);

private:
    std::thread m_thread;
    std::shared_ptr<net::OpenAIClient> m_client;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_stop = false;
    std::atomic<int> m_readings{0};
};

}  // namespace kvs::remote
