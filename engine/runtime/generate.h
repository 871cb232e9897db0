#pragma once
// Prompt in, text out, for one sequence: runs the prompt, then samples token by token,
// streaming complete UTF-8 text through a callback, until max_tokens, an
// end-of-generation token, a stop string, or the callback asks to stop.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampling_params.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs {

struct GenerationStats {
    int n_prompt = 0;
    int n_generated = 0;
    double prompt_ms = 0;  // prompt processing (prefill)
    double ttft_ms = 0;    // from start to the first generated token
    double decode_ms = 0;  // all generation steps after the first token
    double prompt_tps() const { return prompt_ms > 0 ? n_prompt * 1000.0 / prompt_ms : 0; }
    double decode_tps() const { return decode_ms > 0 && n_generated > 1 ? (n_generated - 1) * 1000.0 / decode_ms : 0; }
    std::string stop_reason;      // "eos", "stop string", "max tokens", "context full", "cancelled"
    std::vector<int32_t> tokens;  // generated ids
    std::string text;             // generated text (stop string excluded)
};

// Called once per generated token with the text that became safe to show (may be
// empty); return false to stop generating.
using TextCallback = std::function<bool(const std::string& text_piece)>;

Result<GenerationStats> generate(SequenceRunner& runner, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                 const SamplingParams& params, const TextCallback& on_text);

// Peak resident memory of this process in bytes (VmHWM), 0 when unknown.
int64_t peak_rss_bytes();

}  // namespace kvs
