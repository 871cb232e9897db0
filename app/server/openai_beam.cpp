// vLLM's beam search on the OpenAI routes (use_beam_search, app/server/beam_search_fields.h):
// one engine request of job.beam_width beams per prompt; when its search ends, its n best
// hypotheses become that prompt's n choices (each choice's tokens, then its whole text, as a
// streamed reply of those tokens would show it, and
// finish reason: "stop" for a hypothesis that ended with end-of-generation, "length" for one
// cut at the limit). A stream gets each choice's text in one chunk at the end, as vLLM's.
#include "app/server/openai_server.h"

#include <algorithm>

#include "engine/runtime/text_stream.h"

namespace kvs::server {

namespace {
// A hypothesis's text as a streamed reply of those tokens would show it (control tokens
// hidden, split UTF-8 handled as engine/runtime/text_stream.h does).
std::string hypothesis_text(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    TextStream ts(&tok, SamplingParams{});
    std::string s;
    for (int32_t t : ids) s += ts.push(t).text;
    return s + ts.flush();
}
}  // namespace

std::shared_ptr<ApiCall> OpenAiServer::submit_beam(const CompletionJob& job, const std::string& client) {
    const int n = job.n;
    auto call = std::make_shared<ApiCall>(static_cast<int>(job.prompts.size()) * n);
    {
        std::lock_guard<std::mutex> lk(m_calls_mu);
        std::erase_if(m_calls, [](const std::weak_ptr<ApiCall>& w) { return w.expired(); });
        m_calls.push_back(call);
    }
    const int max_tokens_param = std::max(0, job.params.max_tokens);
    for (size_t p = 0; p < job.prompts.size(); ++p) {
        const int first = static_cast<int>(p) * n;
        std::vector<TokenCallback> choices;
        for (int i = 0; i < n; ++i)
            choices.push_back(call->callback(first + i, [metrics = m_metrics, pending = m_pending, max_tokens_param,
                                                         hook = m_opt.on_request_finished](const TokenEvent& ev) {
                if (ev.metrics) metrics->on_request_finished(*ev.metrics, max_tokens_param);
                if (ev.metrics && hook) hook(*ev.metrics);
                --*pending;
            }));
        // The most tokens a hypothesis can have: one that long was cut, not ended.
        const int limit = job.params.max_tokens > 0 ? job.params.max_tokens
                                                    : m_limits.max_model_len - static_cast<int>(job.prompts[p].size());
        GenerationRequest g;
        g.prompt = job.prompts[p];
        g.params = job.params;
        g.params.temperature = 0;
        g.beam_width = job.beam_width;
        g.adapter = job.adapter;
        g.client = client;
        g.on_event = [choices, session = m_session, limit](const TokenEvent& ev) {
            if (!ev.finished) return;  // a beam request reports once, at the end
            for (size_t i = 0; i < choices.size(); ++i) {
                TokenEvent fin;
                fin.id = ev.id;
                fin.finished = true;
                fin.finish_reason = ev.finish_reason;
                fin.error = ev.error;
                fin.metrics = i == 0 ? ev.metrics : nullptr;  // one engine request: counted once
                if (ev.beams && i < ev.beams->size()) {
                    const BeamHypothesis& h = (*ev.beams)[i];
                    for (int32_t t : h.tokens) {
                        TokenEvent te;
                        te.id = ev.id;
                        te.token = t;
                        choices[i](te);
                    }
                    fin.text = hypothesis_text(session->tokenizer(), h.tokens);
                    fin.finish_reason =
                        static_cast<int>(h.tokens.size()) >= limit ? FinishReason::length : FinishReason::stop;
                }
                choices[i](fin);
            }
        };
        const RequestId id = m_loop.submit(std::move(g));
        for (int i = 0; i < n; ++i) call->set_id(first + i, id, static_cast<int>(p));
    }
    return call;
}

}  // namespace kvs::server
