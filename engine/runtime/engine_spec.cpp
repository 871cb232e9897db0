// Speculative decoding in the batching engine: drafts proposed before the schedule (prompt
// lookup, or a draft model's runner batched over every drafting request), verified by the
// target in the step's one forward pass (exact rejection sampling, engine/speculative/
// verify.h), rejected drafts rolled back, adaptive k, the token fates and stats.
#include "engine/runtime/engine.h"

#include <algorithm>

#include "engine/runtime/engine_request.h"
#include "engine/speculative/ngram.h"

namespace kvs {

// The draft runner a request's SpecParams name (null for prompt lookup or no speculation),
// or why the request cannot decode speculatively.
Result<DraftRunner*> Engine::draft_runner_for(const GenerationRequest& req) const {
    using R = Result<DraftRunner*>;
    if (!req.spec.enabled()) return static_cast<DraftRunner*>(nullptr);
    if (req.beam_width > 1) return R::error("speculative decoding does not combine with beam search");
    if (req.spec.k < 1 || req.spec.k > 16 || req.spec.k_min < 1 || req.spec.k_max > 16 ||
        req.spec.k_min > req.spec.k_max)
        return R::error("draft length k must be 1 to 16 (k_min <= k <= k_max), got k = " + std::to_string(req.spec.k) +
                        " in [" + std::to_string(req.spec.k_min) + ", " + std::to_string(req.spec.k_max) + "]");
    if (req.spec.proposer == "ngram") return static_cast<DraftRunner*>(nullptr);
    for (const auto& d : m_drafts)
        if (d->name() == req.spec.proposer) return d.get();
    std::string names = "ngram";
    for (const auto& n : draft_names()) names += ", " + n;
    return R::error("unknown draft proposer '" + req.spec.proposer + "' (this engine has: " + names + ")");
}

void Engine::init_spec(Req& r, const SpecParams& spec, DraftRunner* runner) {
    r.spec = spec;
    r.spec_k = std::clamp(spec.k, spec.adaptive ? spec.k_min : 1, spec.adaptive ? spec.k_max : 16);
    r.runner = runner;
}

double Engine::propose_drafts() {
    const auto t0 = EngineClock::now();
    std::vector<DraftRunner::Job> jobs;
    std::vector<Req*> job_req;
    std::vector<std::vector<int32_t>> contexts;
    for (auto& [id, rp] : m_reqs) {
        Req& r = *rp;
        r.drafts.clear();
        if (!r.spec.enabled()) continue;
        const SchedRequest* s = m_sched->request(id);
        if (!s || s->status != RequestStatus::running || s->num_output() == 0 ||
            s->num_tokens() - s->num_computed_tokens != 1) {
            m_sched->set_spec_tokens(id, {});
            continue;
        }
        // No point drafting past max_tokens: the target adds one token of its own.
        const int k = std::min(r.spec_k, s->max_tokens - s->num_output() - 1);
        if (k <= 0) {
            m_sched->set_spec_tokens(id, {});
            continue;
        }
        if (!r.runner) {
            for (int32_t t : propose_ngram(r.history, k, r.spec.ngram_max, r.spec.ngram_min))
                r.drafts.push_back({t, {}});
            continue;
        }
        jobs.push_back({id, {}, k, &r.params});
        job_req.push_back(&r);
    }
    for (auto& d : m_drafts) {
        std::vector<DraftRunner::Job> mine;
        std::vector<Req*> mine_req;
        for (size_t i = 0; i < jobs.size(); ++i)
            if (job_req[i]->runner == d.get()) {
                mine.push_back(jobs[i]);
                mine.back().context = job_req[i]->history;
                mine_req.push_back(job_req[i]);
            }
        if (mine.empty()) continue;
        std::vector<std::vector<DraftToken>> out;
        if (!d->propose(mine, &out)) continue;  // a failed draft pass only costs the drafts
        for (size_t i = 0; i < mine.size(); ++i) mine_req[i]->drafts = std::move(out[i]);
    }
    for (auto& [id, rp] : m_reqs) {
        if (!rp->spec.enabled()) continue;
        std::vector<int32_t> toks;
        for (const auto& d : rp->drafts) toks.push_back(d.token);
        if (!toks.empty()) m_sched->set_spec_tokens(id, std::move(toks));
    }
    return ms_between(t0, EngineClock::now());
}

VerifyResult Engine::verify_chunk(Req& r, const ScheduledChunk& ch, float* logits, double verify_ms) {
    const int n_vocab = m_model->config.n_vocab;
    const std::span<const DraftToken> drafts(r.drafts.data(), static_cast<size_t>(ch.num_spec));
    VerifyResult v = verify_drafts(r.sampler, logits, n_vocab, r.history, drafts, m_accept_rule);
    r.spec_stats.record(ch.num_spec, v.n_accepted, v.bonus);
    r.spec_stats.verify_ms += verify_ms;
    SpecStats one;
    one.record(ch.num_spec, v.n_accepted, v.bonus);
    one.verify_ms = verify_ms;
    m_spec_totals.add(one);
    if (r.runner) r.runner->rollback(r.id, ch.start_pos + 1 + v.n_accepted);
    if (r.spec.adaptive) {  // grow after a full acceptance, shrink to what was accepted + 1
        r.spec_k = v.bonus ? std::min(r.spec_k + 1, r.spec.k_max)
                           : std::max(r.spec.k_min, std::min(r.spec_k, v.n_accepted + 1));
    }
    return v;
}

void Engine::record_fates(Req& r, const ScheduledChunk& ch, const VerifyResult& v, size_t n_kept, int64_t step) {
    // Only what was streamed: an end-of-generation token or a stop string may have cut
    // the verified tokens short.
    for (size_t j = 0; j < n_kept; ++j) {
        const int32_t t = v.tokens[j];
        if (static_cast<int>(j) < v.n_accepted) {
            r.add_fate({t, TokenFate::accepted, static_cast<int>(j) + 1, step});
            continue;
        }
        if (v.bonus) {
            r.add_fate({t, TokenFate::bonus, 0, step});
            break;
        }
        const int rejected = v.n_accepted;  // the draft refused at this position, then the rest unjudged
        r.add_fate({r.drafts[static_cast<size_t>(rejected)].token, TokenFate::rejected, rejected + 1, step});
        for (int d = rejected + 1; d < ch.num_spec; ++d)
            r.add_fate({r.drafts[static_cast<size_t>(d)].token, TokenFate::discarded, d + 1, step});
        r.add_fate({t, TokenFate::corrected, 0, step});
    }
}

// Each drafting request is charged the whole proposing time of the step.
void Engine::charge_draft_time(const SchedulerOutput& out, double draft_ms) {
    if (draft_ms <= 0) return;
    m_spec_totals.draft_ms += draft_ms;
    for (const auto& ch : out.chunks)
        if (ch.num_spec > 0) m_reqs.at(ch.id)->spec_stats.draft_ms += draft_ms;
}

void Engine::release_drafts(RequestId id) {
    for (auto& d : m_drafts) d->release(id);
}

SpecStats Engine::spec_stats(RequestId id) const {
    auto it = m_reqs.find(id);
    return it == m_reqs.end() ? SpecStats{} : it->second->spec_stats;
}

std::vector<SpecTokenEvent> Engine::spec_events(RequestId id) const {
    auto it = m_reqs.find(id);
    if (it == m_reqs.end()) return {};
    return {it->second->fates.begin(), it->second->fates.end()};
}

std::vector<std::string> Engine::draft_names() const {
    std::vector<std::string> v;
    for (const auto& d : m_drafts) v.push_back(d->name());
    return v;
}

}  // namespace kvs
