#include "engine/scheduler/request.h"

namespace kvs {

const char* status_name(RequestStatus s) {
    switch (s) {
        case RequestStatus::waiting: return "waiting";
        case RequestStatus::running: return "running";
        case RequestStatus::swapped: return "swapped";
        case RequestStatus::finished: return "finished";
    }
    return "?";
}

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::none: return "none";
        case FinishReason::stop: return "stop";
        case FinishReason::length: return "length";
        case FinishReason::cancelled: return "cancelled";
        case FinishReason::rejected: return "rejected";
    }
    return "?";
}

std::vector<int32_t> SchedRequest::all_tokens() const {
    std::vector<int32_t> t;
    t.reserve(prompt.size() + output.size());
    t.insert(t.end(), prompt.begin(), prompt.end());
    t.insert(t.end(), output.begin(), output.end());
    return t;
}

}  // namespace kvs
