#include "app/server/beam_search_fields.h"

#include <algorithm>
#include <climits>
#include <cstdio>

namespace kvs::server {

namespace {
std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
}
}  // namespace

void read_beam_search_fields(FieldReader& f, CompletionJob* job) {
    SamplingParams& p = job->params;
    int64_t min_tokens = 0;
    if (f.integer("min_tokens", &min_tokens, 0, INT32_MAX)) p.min_new_tokens = static_cast<int32_t>(min_tokens);
    if (p.max_tokens > 0 && min_tokens > p.max_tokens)
        f.fail(bad_request("min_tokens (" + std::to_string(min_tokens) + ") must be at most max_tokens (" +
                               std::to_string(p.max_tokens) + ")",
                           "min_tokens"));
    bool beam = false;
    f.boolean("use_beam_search", &beam);
    double lp = 1.0;
    if (f.number("length_penalty", &lp, -10.0, 10.0)) p.length_penalty = static_cast<float>(lp);
    if (!beam) {
        if (lp != 1.0)
            f.fail(bad_request("length_penalty ranks beam-search hypotheses: it needs use_beam_search: true",
                               "length_penalty"));
        return;  // best_of > 1 without beam search is refused with the other unsupported fields
    }
    int64_t best_of = job->n;
    const bool best_of_given = f.has("best_of");
    f.integer("best_of", &best_of, 1, 1 << 20);
    if (best_of < job->n)
        f.fail(bad_request("best_of (" + std::to_string(best_of) + ") must be at least n (" + std::to_string(job->n) +
                               "): the n best of best_of beams are returned",
                           "best_of"));
    const int64_t width = std::max<int64_t>(best_of, job->n);
    const char* width_field = best_of_given ? "best_of" : "n";
    if (width < 2)
        f.fail(bad_request("use_beam_search needs 2 to 8 beams: set n (or best_of) to at least 2", width_field));
    if (width > 8) f.fail(bad_request("beam search runs at most 8 beams, got " + std::to_string(width), width_field));
    job->beam_width = static_cast<int>(std::clamp<int64_t>(width, 1, 8));
    auto refuse = [&](const char* field, const std::string& why) {
        f.fail(bad_request(std::string(field) + " does not go with use_beam_search: " + why, field));
    };
    if (p.temperature != 0.0f && p.temperature != 1.0f)
        refuse("temperature",
               "hypotheses rank by the model's log-probabilities (temperature 0 or 1), got " + num(p.temperature));
    if (p.top_p != 1.0f) refuse("top_p", "every token is a candidate");
    if (p.top_k > 0) refuse("top_k", "every token is a candidate");
    if (p.min_p > 0.0f) refuse("min_p", "every token is a candidate");
    if (p.presence_penalty != 0.0f) refuse("presence_penalty", "the log-probabilities are not penalized");
    if (p.frequency_penalty != 0.0f) refuse("frequency_penalty", "the log-probabilities are not penalized");
    if (p.repeat_penalty != 1.0f) refuse("repetition_penalty", "the log-probabilities are not penalized");
    if (!p.stop.empty()) refuse("stop", "hypotheses end at end-of-generation or max_tokens only");
    if (job->top_logprobs >= 0) refuse("logprobs", "hypotheses are returned whole, without token log-probabilities");
    if (job->spec.enabled()) refuse("speculative", "drafts are verified for one sequence, not for beams");
    if (job->kv_eviction.enabled()) refuse("kv_eviction", "beams share their blocks copy-on-write, never compacted");
    if (p.watermark) refuse("watermark", "the watermark biases sampling, and beam search does not sample");
}

}  // namespace kvs::server
