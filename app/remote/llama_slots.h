#pragma once
// llama-server's GET /slots: its parallel slots (-np) as the remote view draws them, each
// with its context size, whether it is processing, and how much of its context the task in
// it holds (prompt tokens + tokens decoded). No Qt. A body that is not a list of slots is an
// error; missing or mistyped fields read as 0 / false.
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace kvs::remote {

struct LlamaSlot {
    int id = 0;
    int n_ctx = 0;
    bool processing = false;
    bool speculative = false;
    int n_prompt = 0;   // n_prompt_tokens of the task in the slot
    int n_decoded = 0;  // next_token.n_decoded
    int context_used() const { return processing ? n_prompt + n_decoded : 0; }
};

Result<std::vector<LlamaSlot>> parse_llama_slots(const std::string& body);

}  // namespace kvs::remote
