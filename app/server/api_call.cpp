#include "app/server/api_call.h"

namespace kvs::server {

ApiCall::ApiCall(int n_choices) : m_choices(static_cast<size_t>(n_choices)), m_unfinished(n_choices) {}

TokenCallback ApiCall::callback(int index, std::function<void(const TokenEvent&)> on_finish) {
    return [self = shared_from_this(), this, index, on_finish = std::move(on_finish)](const TokenEvent& ev) {
        if (ev.finished && on_finish) on_finish(ev);
        {
            std::lock_guard<std::mutex> lk(m_mu);
            Choice& c = m_choices[static_cast<size_t>(index)];
            if (c.finished) return;
            c.text += ev.text;
            if (ev.token >= 0) c.tokens.push_back(ev.token);
            if (ev.token >= 0 && ev.logprobs) c.logprobs.push_back(*ev.logprobs);
            if (!ev.prompt_logprobs.empty()) c.prompt_logprobs = ev.prompt_logprobs;
            if (ev.finished) {
                c.finished = true;
                c.reason = ev.finish_reason;
                c.error = ev.error;
                --m_unfinished;
            }
            m_events.push_back({index, ev.text, ev.token, ev.finished, ev.finish_reason, ev.error, ev.logprobs});
        }
        m_cv.notify_all();
    };
}

std::vector<ApiCall::Event> ApiCall::take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(m_mu);
    m_cv.wait_for(lk, timeout, [this] { return !m_events.empty(); });
    std::vector<Event> out(std::make_move_iterator(m_events.begin()), std::make_move_iterator(m_events.end()));
    m_events.clear();
    return out;
}

bool ApiCall::wait_all(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(m_mu);
    return m_cv.wait_for(lk, timeout, [this] { return m_unfinished == 0; });
}

bool ApiCall::all_finished() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_unfinished == 0;
}

void ApiCall::set_id(int index, RequestId id, int prompt) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_choices[static_cast<size_t>(index)].id = id;
    m_choices[static_cast<size_t>(index)].prompt = prompt;
}

std::vector<RequestId> ApiCall::unfinished_ids() const {
    std::lock_guard<std::mutex> lk(m_mu);
    std::vector<RequestId> ids;
    for (const Choice& c : m_choices)
        if (!c.finished && c.id > 0) ids.push_back(c.id);
    return ids;
}

std::vector<ApiCall::Choice> ApiCall::choices() const {
    std::lock_guard<std::mutex> lk(m_mu);
    return m_choices;
}

}  // namespace kvs::server
