#pragma once
// vLLM's extension fields for beam search and a minimum length, on /v1/completions and
// /v1/chat/completions:
//   min_tokens       no end-of-generation token or stop string before this many tokens
//                    (SamplingParams::min_new_tokens); at most max_tokens
//   use_beam_search  true: beam search instead of sampling (GenerationRequest::beam_width)
//   best_of          with use_beam_search: the number of beams (vLLM before 0.6); at least n
//   n                the hypotheses returned, best first; without best_of also the number of
//                    beams (vLLM 0.6 on: beam_width = n)
//   length_penalty   hypotheses rank by sum(log p) / length^length_penalty (default 1; only
//                    with use_beam_search)
// Beam search ranks by the model's own log-probabilities: sampling fields that would change
// them (temperature other than 0 or 1, top_p, top_k, min_p, penalties), stop strings,
// logprobs, speculative decoding, KV eviction and the watermark are refused by name with
// it, never ignored. Every error names its field.
#include "app/server/completion_request.h"

namespace kvs::server {

// Reads the fields into job (params.min_new_tokens, params.length_penalty, beam_width);
// call after the sampling fields, max_tokens, n, logprobs, speculative and kv_eviction were read.
void read_beam_search_fields(FieldReader& f, CompletionJob* job);

}  // namespace kvs::server
