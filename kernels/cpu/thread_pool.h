#pragma once
// A fixed pool of worker threads for the CPU kernels. parallel_for runs fn(task, thread)
// for task in [0, n_tasks) spread over the workers and the calling thread, and returns
// when all are done. Workers spin briefly between calls (a decode step issues hundreds
// of small parallel regions, so waking sleeping threads would dominate), then sleep.
#include <cstdint>
#include <functional>
#include <memory>

namespace kvs::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // n_threads total, including the caller; 0 = one per core
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const;  // total threads including the caller
    // fn(task, thread_index); thread_index in [0, size()) — use it to pick per-thread scratch.
    void parallel_for(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace kvs::cpu
