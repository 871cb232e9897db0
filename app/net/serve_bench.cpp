#include "app/net/serve_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace kvs::net {
namespace {
using Clock = std::chrono::steady_clock;
double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

RequestOutcome send_timed(OpenAIClient& client, const BenchRequest& r, const ServeBenchConfig& cfg, double start_s) {
    CompletionRequest req;
    req.model = cfg.model;
    if (cfg.chat) req.messages = {{"user", r.prompt_text}};
    else if (r.prompt_text.empty())
        req.prompt_ids = r.prompt_ids;
    else
        req.prompt = r.prompt_text;
    req.max_tokens = r.max_tokens;
    req.temperature = cfg.temperature;
    req.ignore_eos = cfg.ignore_eos;
    req.stream = true;
    req.include_usage = true;
    req.extra = cfg.extra;

    RequestOutcome o;
    o.start_s = start_s;
    const auto t0 = Clock::now();
    auto last = t0;
    bool first = true;
    auto res = client.complete(req, [&](const StreamDelta& d) {
        if (d.text.empty()) return true;
        const auto now = Clock::now();
        if (first) {
            o.ttft_s = secs(now - t0);
            first = false;
        } else {
            o.itl_s.push_back(secs(now - last));
        }
        last = now;
        return true;
    });
    o.latency_s = secs(Clock::now() - t0);
    if (!res) {
        o.error = res.message();
        return o;
    }
    if (first) {
        o.error = "the stream carried no text";
        return o;
    }
    o.success = true;
    o.output_tokens = res->usage.completion_tokens >= 0 ? res->usage.completion_tokens : res->n_chunks;
    o.prompt_len = res->usage.prompt_tokens >= 0
                       ? res->usage.prompt_tokens
                       : static_cast<int64_t>(r.prompt_text.empty() ? r.prompt_ids.size() : 0);
    return o;
}

ServeBenchRun run_serve_bench(const std::vector<BenchRequest>& requests, const ServeBenchConfig& cfg,
                              const std::function<void(int, int)>& on_done) {
    ServeBenchRun run;
    const int n = static_cast<int>(requests.size());
    run.outcomes.resize(requests.size());
    if (n == 0) return run;
    const int slots = std::min(n, cfg.max_concurrency > 0 ? cfg.max_concurrency : n);
    std::mutex mu;
    int next = 0, done = 0, in_flight = 0;
    const auto t0 = Clock::now();
    auto end = t0;
    auto worker = [&] {
        OpenAIClient client(cfg.client);
        for (;;) {
            int i;
            {
                std::lock_guard<std::mutex> lock(mu);
                if (next >= n) return;
                i = next++;
            }
            const auto due = t0 + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(requests[static_cast<size_t>(i)].arrival_s));
            std::this_thread::sleep_until(due);
            {
                std::lock_guard<std::mutex> lock(mu);
                run.peak_in_flight = std::max(run.peak_in_flight, ++in_flight);
            }
            RequestOutcome o = send_timed(client, requests[static_cast<size_t>(i)], cfg, secs(Clock::now() - t0));
            std::lock_guard<std::mutex> lock(mu);
            --in_flight;
            run.outcomes[static_cast<size_t>(i)] = std::move(o);
            end = std::max(end, Clock::now());
            ++done;
            if (on_done) on_done(done, n);
        }
    };
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(slots));
    for (int s = 0; s < slots; ++s) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    run.duration_s = secs(end - t0);
    return run;
}

}  // namespace kvs::net
