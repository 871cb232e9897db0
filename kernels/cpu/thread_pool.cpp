// ThreadPool: a parallel region publishes (fn, n_tasks) and a new generation in one
// atomic state word; every thread (caller included) takes tasks from a shared atomic
// counter until none are left. A worker must register in the region (CAS on the state:
// same generation, not closed) before touching it, and the caller closes the region once
// no registered worker is still running. So a worker that the OS has descheduled (other
// programs on a 2-core machine) never makes the caller wait: it simply misses the
// region. Idle workers spin (with pause) for a while, then yield, then sleep on a
// condition variable, so an idle program costs no CPU but back-to-back regions cost ~1 us.
#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KVS_CPU_RELAX() _mm_pause()
#else
#define KVS_CPU_RELAX() ((void)0)
#endif

namespace kvs::cpu {

namespace {
constexpr int kSpinIters = 1 << 15;  // idle worker: ~0.5-1 ms of pause before yielding
// The caller waiting for a registered worker yields much sooner: when the machine is
// oversubscribed that worker is usually waiting for a core, and this one is free.
constexpr int kCallerSpinIters = 1 << 10;
constexpr auto kYieldTime = std::chrono::milliseconds(2);  // then yield this long before sleeping

// state word: generation in the high 32 bits, "closed" in bit 31, registered workers below.
constexpr uint64_t kClosed = uint64_t{1} << 31;
constexpr uint64_t kActiveMask = kClosed - 1;
inline uint32_t gen_of(uint64_t s) { return static_cast<uint32_t>(s >> 32); }
}  // namespace

struct ThreadPool::Impl {
    int n_threads = 1;
    std::vector<std::thread> workers;

    // Written by the caller before it publishes a new generation (release), read by
    // workers after registering (acquire).
    const std::function<void(int64_t, int)>* fn = nullptr;
    int64_t n_tasks = 0;

    alignas(64) std::atomic<uint64_t> state{kClosed};  // generation 0, closed
    alignas(64) std::atomic<int64_t> next_task{0};
    alignas(64) std::atomic<int> n_sleeping{0};
    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::condition_variable cv;

    void run_tasks(int thread) {
        const auto& f = *fn;
        for (;;) {
            const int64_t t = next_task.fetch_add(1, std::memory_order_relaxed);
            if (t >= n_tasks) break;
            f(t, thread);
        }
    }

    // Wait until the generation differs from `seen` (or stop); returns the state seen.
    uint64_t wait_for_work(uint32_t seen) {
        for (int i = 0; i < kSpinIters; ++i) {
            const uint64_t s = state.load(std::memory_order_acquire);
            if (gen_of(s) != seen || stop.load(std::memory_order_relaxed)) return s;
            KVS_CPU_RELAX();
        }
        const auto until = std::chrono::steady_clock::now() + kYieldTime;
        while (std::chrono::steady_clock::now() < until) {
            const uint64_t s = state.load(std::memory_order_acquire);
            if (gen_of(s) != seen || stop.load(std::memory_order_relaxed)) return s;
            std::this_thread::yield();
        }
        std::unique_lock lock(mutex);
        n_sleeping.fetch_add(1, std::memory_order_seq_cst);
        cv.wait(lock, [&] {
            return gen_of(state.load(std::memory_order_seq_cst)) != seen || stop.load(std::memory_order_relaxed);
        });
        n_sleeping.fetch_sub(1, std::memory_order_relaxed);
        return state.load(std::memory_order_acquire);
    }

    // Joins region `gen` if it is still open; false when the caller already closed it.
    bool try_register(uint64_t s, uint32_t gen) {
        while (gen_of(s) == gen && !(s & kClosed)) {
            if (state.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed))
                return true;
        }
        return false;
    }

    void worker_main(int thread) {
        uint32_t seen = 0;
        for (;;) {
            const uint64_t s = wait_for_work(seen);
            if (stop.load(std::memory_order_acquire)) return;
            seen = gen_of(s);
            if (!try_register(s, seen)) continue;
            run_tasks(thread);
            state.fetch_sub(1, std::memory_order_acq_rel);
        }
    }

    void wake_sleepers() {
        if (n_sleeping.load(std::memory_order_seq_cst) > 0) {
            std::lock_guard lock(mutex);
            cv.notify_all();
        }
    }

    // Waits until no registered worker runs, then closes the region atomically.
    void close_region() {
        uint64_t s = state.load(std::memory_order_acquire);
        for (int i = 0;; ++i) {
            if ((s & kActiveMask) == 0) {
                if (state.compare_exchange_weak(s, s | kClosed, std::memory_order_acq_rel, std::memory_order_acquire))
                    return;
                continue;
            }
            if (i < kCallerSpinIters) KVS_CPU_RELAX();
            else
                std::this_thread::yield();
            s = state.load(std::memory_order_acquire);
        }
    }
};

ThreadPool::ThreadPool(int n_threads) : m_impl(std::make_unique<Impl>()) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    m_impl->n_threads = n_threads;
    m_impl->workers.reserve(static_cast<size_t>(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) m_impl->workers.emplace_back([this, i] { m_impl->worker_main(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(m_impl->mutex);
        m_impl->stop.store(true, std::memory_order_seq_cst);
        m_impl->state.fetch_add(uint64_t{1} << 32, std::memory_order_seq_cst);
    }
    m_impl->cv.notify_all();
    for (auto& w : m_impl->workers) w.join();
}

int ThreadPool::size() const { return m_impl->n_threads; }

void ThreadPool::parallel_for(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn) {
    if (n_tasks <= 0) return;
    Impl& p = *m_impl;
    if (p.n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    p.fn = &fn;
    p.n_tasks = n_tasks;
    p.next_task.store(0, std::memory_order_relaxed);
    const uint32_t gen = gen_of(p.state.load(std::memory_order_relaxed)) + 1;
    p.state.store(static_cast<uint64_t>(gen) << 32, std::memory_order_seq_cst);  // open, publishes fn/n_tasks
    p.wake_sleepers();
    p.run_tasks(0);
    p.close_region();
}

}  // namespace kvs::cpu
