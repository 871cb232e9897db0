#include "engine/runtime/engine_loop.h"

#include <chrono>

namespace kvs {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine)
    : m_engine(std::move(engine)), m_spec(m_engine->draft_names()), m_spec_snap(m_spec.snapshot()) {
    m_thread = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
    {
        std::lock_guard<std::mutex> lk(m_mu);
        m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
}

void EngineLoop::post(std::function<void(Engine&)> fn) {
    {
        std::lock_guard<std::mutex> lk(m_mu);
        m_queue.push_back(std::move(fn));
        m_idle = false;
    }
    m_cv.notify_all();
}

RequestId EngineLoop::submit(GenerationRequest req, std::vector<RequestId>* choice_ids) {
    const RequestId id = m_next_id++;
    for (auto& c : req.choices) {
        if (c.id <= 0) c.id = m_next_id++;
        if (choice_ids) choice_ids->push_back(c.id);
    }
    post([this, id, req = std::move(req)](Engine& e) mutable {
        std::vector<std::pair<RequestId, TokenCallback>> cbs{{id, req.on_event}};
        for (const auto& c : req.choices) cbs.emplace_back(c.id, c.on_event);
        m_spec.on_submit(id, req.spec);
        auto r = e.submit(std::move(req), id);
        if (r) return;
        m_spec.on_rejected(id);
        for (const auto& [rid, cb] : cbs) {
            if (!cb) continue;
            TokenEvent ev;
            ev.id = rid;
            ev.finished = true;
            ev.finish_reason = FinishReason::rejected;
            ev.error = r.message();
            cb(ev);
        }
    });
    return id;
}

void EngineLoop::cancel(RequestId id) {
    post([id](Engine& e) { e.cancel(id); });
}

void EngineLoop::pause() { m_paused = true; }

void EngineLoop::resume() {
    {
        std::lock_guard<std::mutex> lk(m_mu);
        m_paused = false;
        m_idle = false;  // wait_idle() must see the thread run again first
    }
    m_cv.notify_all();
}

void EngineLoop::single_step() {
    {
        std::lock_guard<std::mutex> lk(m_mu);
        ++m_pending_steps;
        m_idle = false;
    }
    m_cv.notify_all();
}

std::string EngineLoop::last_error() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_last_error;
}

void EngineLoop::wait_idle() {
    std::unique_lock<std::mutex> lk(m_mu);
    m_idle_cv.wait(lk, [this] { return m_idle && m_queue.empty(); });
}

void EngineLoop::run() {
    for (;;) {
        std::deque<Command> cmds;
        bool step_now = false;
        {
            std::unique_lock<std::mutex> lk(m_mu);
            for (;;) {
                if (m_stop) return;
                if (!m_queue.empty()) break;
                const bool work = m_engine->has_work();
                if (work && (!m_paused || m_pending_steps > 0)) break;
                m_engine->hold_clock(m_paused);  // paused: the time waited is not the requests'
                m_idle = true;                   // nothing to do (or paused): let wait_idle() return
                m_idle_cv.notify_all();
                m_cv.wait(lk);
            }
            cmds.swap(m_queue);
            m_idle = false;
        }
        for (auto& c : cmds) c(*m_engine);
        {
            std::lock_guard<std::mutex> lk(m_mu);
            if (m_engine->has_work() && (!m_paused || m_pending_steps > 0)) {
                step_now = true;
                if (m_paused) --m_pending_steps;
            }
            if (!m_paused) m_pending_steps = 0;
        }
        if (!step_now) continue;
        m_engine->hold_clock(false);
        auto r = m_engine->step();
        ++m_steps;
        if (r && r->ran) {
            if (auto snap = m_spec.on_step(*m_engine, *r)) {
                std::lock_guard<std::mutex> lk(m_mu);
                m_spec_snap = std::move(snap);
            }
            m_engine->remove_finished(kKeepFinished);
        }
        if (!r) {
            std::lock_guard<std::mutex> lk(m_mu);
            m_last_error = r.message();
            m_paused = true;  // a failed forward pass leaves the engine unreliable: stop stepping
        } else if (!r->ran) {
            // Work exists but nothing fits: wait for a command (a cancel frees blocks).
            std::unique_lock<std::mutex> lk(m_mu);
            m_idle = true;
            m_idle_cv.notify_all();
            m_cv.wait_for(lk, std::chrono::milliseconds(50));
        }
        if (const int d = m_step_delay_ms; d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
    }
}

std::shared_ptr<const SpecSnapshot> EngineLoop::spec_snapshot() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_spec_snap;
}

}  // namespace kvs
