#pragma once
// The connection workers of the HTTP server: a cpp-httplib TaskQueue that starts a thread
// only when no worker is idle, up to a cap (a streaming reply holds its worker for the whole
// generation, so a fixed pool of a few threads would stall the 9th client). Jobs beyond the
// cap wait in order. shutdown() finishes the queued jobs and joins every thread.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace kvs::server {

class WorkerPool : public httplib::TaskQueue {
public:
    explicit WorkerPool(size_t max_threads) : m_max(max_threads < 1 ? 1 : max_threads) {}
    ~WorkerPool() override { shutdown(); }

    void enqueue(std::function<void()> fn) override {
        std::lock_guard<std::mutex> lk(m_mu);
        m_jobs.push_back(std::move(fn));
        if (m_jobs.size() > m_idle && m_threads.size() < m_max) m_threads.emplace_back([this] { work(); });
        m_cv.notify_one();
    }

    void shutdown() override {
        {
            std::lock_guard<std::mutex> lk(m_mu);
            if (m_shutdown) return;
            m_shutdown = true;
        }
        m_cv.notify_all();
        for (auto& t : m_threads) t.join();
    }

    size_t threads() const {
        std::lock_guard<std::mutex> lk(m_mu);
        return m_threads.size();
    }

private:
    void work() {
        std::unique_lock<std::mutex> lk(m_mu);
        for (;;) {
            ++m_idle;
            m_cv.wait(lk, [this] { return !m_jobs.empty() || m_shutdown; });
            --m_idle;
            if (m_jobs.empty()) return;  // shut down with nothing left
            auto fn = std::move(m_jobs.front());
            m_jobs.pop_front();
            lk.unlock();
            fn();
            lk.lock();
        }
    }

    const size_t m_max;
    mutable std::mutex m_mu;
    std::condition_variable m_cv;
    std::deque<std::function<void()>> m_jobs;
    std::vector<std::thread> m_threads;
    size_t m_idle = 0;
    bool m_shutdown = false;
};

}  // namespace kvs::server
