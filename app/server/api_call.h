#pragma once
// One HTTP request's engine requests (its choices: prompts x n) and what the engine sends
// back for them. The engine thread calls the callbacks (cheap: a lock, a push, a notify);
// the HTTP thread that serves the request waits on the call and takes the events, so the
// engine never waits on a client's socket.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/session.h"

namespace kvs::server {

class ApiCall : public std::enable_shared_from_this<ApiCall> {
public:
    struct Event {
        int index = 0;       // choice index (prompt * n + i)
        std::string text;    // text that became safe to show
        int32_t token = -1;  // -1 on a final event that carries none
        bool finished = false;
        FinishReason reason = FinishReason::none;
        std::string error;  // why the engine refused the request
        std::optional<TokenLogprobs> logprobs;  // of `token`, when the request asked for them
    };
    // What a choice came to (kept as events arrive).
    struct Choice {
        int prompt = 0;  // which prompt it continues
        RequestId id = 0;
        std::string text;
        std::vector<int32_t> tokens;
        std::vector<TokenLogprobs> logprobs;  // [tokens] when the request asked for them
        // [prompt tokens - 1] when the request asked for them (SamplingParams::prompt_logprobs)
        std::vector<TokenLogprobs> prompt_logprobs;
        bool finished = false;
        FinishReason reason = FinishReason::none;
        std::string error;
    };

    explicit ApiCall(int n_choices);

    // The engine-side callback of choice `index` (it keeps the call alive: the engine may
    // report after the HTTP side has gone); on_finish runs on the engine thread with the
    // final event (its metrics are null when the engine refused the request). The call
    // must be owned by a shared_ptr.
    TokenCallback callback(int index, std::function<void(const TokenEvent&)> on_finish);

    // Waits until an event arrives or timeout passes; returns the events since the last
    // take (each also folded into choices()).
    std::vector<Event> take(std::chrono::milliseconds timeout);
    // Waits until every choice has finished or timeout passes; true when all have.
    bool wait_all(std::chrono::milliseconds timeout);
    bool all_finished() const;

    void set_id(int index, RequestId id, int prompt);
    std::vector<RequestId> unfinished_ids() const;
    std::vector<Choice> choices() const;  // a copy

private:
    mutable std::mutex m_mu;
    std::condition_variable m_cv;
    std::deque<Event> m_events;
    std::vector<Choice> m_choices;
    int m_unfinished = 0;
};

}  // namespace kvs::server
