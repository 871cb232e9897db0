#pragma once
// One Engine on its own thread, driven through a thread-safe command queue: submit,
// cancel, pause, resume, single-step, and arbitrary work posted to the engine thread.
// The GUI's bridge and the future local server talk to the engine only through this.
// Token events are delivered on the engine thread (the caller forwards them: the Qt
// bridge turns them into queued signals). Speculative decoding telemetry (per request stats,
// token fates, decode rates: engine/telemetry/spec_tracker.h) is copied after each step into
// an immutable SpecSnapshot that any thread may read (spec_snapshot()).
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/telemetry/spec_tracker.h"

namespace kvs {

class EngineLoop {
public:
    explicit EngineLoop(std::unique_ptr<Engine> engine);  // starts the thread, running
    ~EngineLoop();                                        // stops it and joins
    EngineLoop(const EngineLoop&) = delete;
    EngineLoop& operator=(const EngineLoop&) = delete;

    // Returns the request's id at once. A request the engine rejects gets one final
    // event with FinishReason::rejected and the reason in TokenEvent::error (so does each
    // of its parallel choices). The ids of req.choices (assigned here when 0) go to
    // *choice_ids, in order.
    RequestId submit(GenerationRequest req, std::vector<RequestId>* choice_ids = nullptr);
    void cancel(RequestId id);  // unknown ids are ignored
    void pause();               // finish the current step, then wait
    void resume();
    void single_step();  // while paused: run exactly one step
    // Slow motion for lessons: wait this long after each step (0: none).
    void set_step_delay_ms(int ms) { m_step_delay_ms = ms; }
    // Runs fn on the engine thread between steps.
    void post(std::function<void(Engine&)> fn);
    // Blocks until the queue is drained and no request is unfinished (or paused with
    // nothing to do). For tests and the CLI.
    void wait_idle();

    bool paused() const { return m_paused; }
    int64_t steps_run() const { return m_steps; }
    std::string last_error() const;  // the last failed step's message, empty if none
    // Speculative decoding after the newest step that changed it (never null; thread-safe).
    std::shared_ptr<const SpecSnapshot> spec_snapshot() const;

    // Finished requests the engine keeps readable (telemetry request tables, speculative
    // stats); older ones are forgotten after each step, so a long session's per-step
    // snapshots and memory stay bounded.
    static constexpr size_t kKeepFinished = 64;

private:
    void run();
    using Command = std::function<void(Engine&)>;

    std::unique_ptr<Engine> m_engine;
    SpecTracker m_spec;                               // engine thread only
    std::shared_ptr<const SpecSnapshot> m_spec_snap;  // its newest snapshot, guarded by m_mu
    mutable std::mutex m_mu;
    std::condition_variable m_cv;       // wakes the engine thread
    std::condition_variable m_idle_cv;  // wakes wait_idle()
    std::deque<Command> m_queue;
    bool m_stop = false;
    bool m_idle = false;
    std::atomic<bool> m_paused{false};
    int m_pending_steps = 0;  // single_step() requests while paused
    std::atomic<int> m_step_delay_ms{0};
    std::atomic<int64_t> m_steps{0};
    std::atomic<RequestId> m_next_id{1};
    std::string m_last_error;
    std::thread m_thread;
};

}  // namespace kvs
