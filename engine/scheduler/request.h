#pragma once
// A request as the scheduler sees it: token ids in, token ids out, where it stands.
// No text, no sampling: the engine (engine/runtime/engine.h) keeps those beside it.
#include <cstdint>
#include <vector>

#include "engine/kv_cache/kv_cache_manager.h"

namespace kvs {

enum class RequestStatus {
    waiting,   // queued, holds no blocks (new, or preempted by recompute)
    running,   // holds device blocks, scheduled every step it fits the budget
    swapped,   // preempted by swap: its KV sits in host blocks, waiting to come back
    finished,  // done; holds nothing
};

enum class FinishReason {
    none,       // not finished
    stop,       // end-of-generation token or stop string (decided by the engine)
    length,     // max_tokens reached or the context is full
    cancelled,  // abort_request
    rejected,   // can never fit (too long for the context or the KV pool)
};

const char* status_name(RequestStatus s);
const char* finish_reason_name(FinishReason r);

struct SchedRequest {
    RequestId id = 0;
    std::vector<int32_t> prompt;  // [n_prompt] never empty
    std::vector<int32_t> output;  // generated so far
    int max_tokens = 0;           // generate at most this many (>= 1)
    int priority = 0;             // lower value = more urgent (vLLM's convention); FCFS within one
    int64_t arrival = 0;          // order in which add_request saw it (FCFS tie-break)
    RequestStatus status = RequestStatus::waiting;
    FinishReason finish_reason = FinishReason::none;
    int num_computed_tokens = 0;  // leading tokens of prompt+output whose KV is in the cache
    int num_cached_tokens = -1;   // prefix-cache hit when first scheduled (-1: not yet)
    int num_preemptions = 0;
    // KV eviction: computed tokens whose KV entries were dropped or merged away; the cache
    // holds num_computed_tokens - num_evicted entries (Scheduler::note_evicted).
    int num_evicted = 0;
    // Speculative decoding: draft tokens proposed for the next step (Scheduler::set_spec_tokens).
    // A decode step then runs [last token, drafts...] and the engine verifies them.
    std::vector<int32_t> spec_tokens;
    // Computes its whole prompt even when the prefix cache holds some of it (prompt
    // log-probabilities need the logits of every position; Scheduler::skip_prefix_cache).
    bool skip_prefix_cache = false;

    int num_prompt() const { return static_cast<int>(prompt.size()); }
    int num_output() const { return static_cast<int>(output.size()); }
    int num_tokens() const { return num_prompt() + num_output(); }
    std::vector<int32_t> all_tokens() const;  // prompt followed by output
    // Token at position p of prompt + output + spec_tokens.
    int32_t token_at(int p) const {
        if (p < num_prompt()) return prompt[static_cast<size_t>(p)];
        if (p < num_tokens()) return output[static_cast<size_t>(p - num_prompt())];
        return spec_tokens[static_cast<size_t>(p - num_tokens())];
    }
};

}  // namespace kvs
