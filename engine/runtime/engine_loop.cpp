#include "engine/runtime/engine_loop.h"

#include <chrono>

namespace kvs {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : m_engine(std::move(engine)) {
    auto first = std::make_shared<SpecSnapshot>();
    first->drafts = m_engine->draft_names();
    m_spec_snap = std::move(first);
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

RequestId EngineLoop::submit(GenerationRequest req) {
    const RequestId id = m_next_id++;
    post([this, id, req = std::move(req)](Engine& e) mutable {
        TokenCallback cb = req.on_event;
        m_tracks[id].spec = req.spec;
        auto r = e.submit(std::move(req), id);
        if (!r) m_tracks.erase(id);
        if (!r && cb) {
            TokenEvent ev;
            ev.id = id;
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
                m_idle = true;  // nothing to do (or paused): let wait_idle() return
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
        auto r = m_engine->step();
        ++m_steps;
        if (r && r->ran) {
            track_step(*r);
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

DecodeRate EngineLoop::Track::rate() const {
    DecodeRate d;
    d.solo = solo;
    if (n_first < 0 || n_last <= n_first || t_last_ms <= t_first_ms) return d;
    d.n_tokens = n_last - n_first;
    d.tok_per_s = d.n_tokens * 1000.0 / (t_last_ms - t_first_ms);
    return d;
}

// After a step that ran: the decode clock of every request in it, the stats and fates of
// the speculative ones, and the plain baseline when a plain request finished.
void EngineLoop::track_step(const StepResult& res) {
    const double now = m_engine->ms_since_start();
    bool changed = false;
    for (const ScheduledChunk& ch : res.out.chunks) {
        auto it = m_tracks.find(ch.id);
        const SchedRequest* s = m_engine->scheduler().request(ch.id);
        if (it == m_tracks.end() || !s) continue;
        Track& t = it->second;
        const int n = s->num_output();
        if (t.n_first >= 0 && res.out.chunks.size() > 1) t.solo = false;
        if (t.n_first < 0 && n >= 1) {
            t.n_first = t.n_last = n;
            t.t_first_ms = t.t_last_ms = now;
        } else if (n > t.n_last) {
            t.n_last = n;
            t.t_last_ms = now;
        }
        const bool finished = s->status == RequestStatus::finished;
        if (t.spec.enabled()) {
            auto v = std::make_shared<SpecRequestView>();
            v->id = ch.id;
            v->proposer = t.spec.proposer;
            v->k = t.spec.k;
            v->adaptive = t.spec.adaptive;
            v->finished = finished;
            v->stats = m_engine->spec_stats(ch.id);
            v->fates = m_engine->spec_events(ch.id);
            v->rate = t.rate();
            v->rate.id = ch.id;
            m_spec_views[ch.id] = std::move(v);
            changed = true;
        } else if (finished) {
            DecodeRate d = t.rate();
            d.id = ch.id;
            if (d.solo && d.n_tokens >= 8) {
                m_baseline = d;
                changed = true;
            }
        }
        if (finished) m_tracks.erase(it);
    }
    // Requests cancelled between steps never show up in a chunk again.
    if (m_tracks.size() > 256)
        std::erase_if(m_tracks, [this](const auto& kv) {
            const SchedRequest* s = m_engine->scheduler().request(kv.first);
            return !s || s->status == RequestStatus::finished;
        });
    while (m_spec_views.size() > 64) m_spec_views.erase(m_spec_views.begin());
    if (changed) publish_spec(res.out.step);
}

void EngineLoop::publish_spec(int64_t step) {
    auto snap = std::make_shared<SpecSnapshot>();
    snap->step = step;
    for (const auto& [id, v] : m_spec_views) snap->requests.push_back(v);
    snap->totals = m_engine->spec_totals();
    snap->drafts = m_engine->draft_names();
    snap->plain_baseline = m_baseline;
    std::lock_guard<std::mutex> lk(m_mu);
    m_spec_snap = std::move(snap);
}

}  // namespace kvs
