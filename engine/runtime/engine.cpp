#include "engine/runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <numeric>
#include <unordered_set>

#include "engine/runtime/text_stream.h"
#include "engine/runtime/weight_support.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/draft_runner.h"
#include "engine/speculative/ngram.h"
#include "engine/speculative/verify.h"

namespace kvs {

namespace {
using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

// What the engine keeps beside the scheduler's record of a request.
struct Engine::Req {
    RequestId id = 0;
    SamplingParams params;
    Sampler sampler;
    TextStream text;
    TokenCallback on_event;
    std::vector<int32_t> history;  // prompt + output, for the penalties
    std::shared_ptr<BeamGroup> beam;  // set for every beam of a beam-search request
    RequestMetrics metrics;
    // Speculative decoding.
    SpecParams spec;
    int spec_k = 0;                      // drafts to ask for next (adaptive k moves it)
    DraftRunner* runner = nullptr;       // the draft model, null for prompt lookup
    std::vector<DraftToken> drafts;      // proposed for this step
    SpecStats spec_stats;
    std::deque<SpecTokenEvent> fates;    // the last kMaxFates token fates
    static constexpr size_t kMaxFates = 4096;
    void add_fate(SpecTokenEvent e) {
        fates.push_back(e);
        if (fates.size() > kMaxFates) fates.pop_front();
    }
    Req(RequestId id_, const SamplingParams& p, const Tokenizer* tok, TokenCallback cb, std::vector<int32_t> prompt)
        : id(id_), params(p), sampler(p), text(tok, p), on_event(std::move(cb)), history(std::move(prompt)) {}
};

// A beam-search request: its live beams (each a request forked from another) and the
// hypotheses that ended. Beams advance together: once every live beam has its next-token
// log-probabilities for this position, the best `width` extensions are kept.
struct Engine::BeamGroup {
    RequestId root = 0;
    int width = 1;
    int max_tokens = 0;
    bool ignore_eos = false;
    std::vector<RequestId> live;                    // rank order (best first)
    std::unordered_map<RequestId, double> score;    // sum of log-probs of a live beam
    // This position's best `width` (log-prob, token) of each live beam that has run.
    std::unordered_map<RequestId, std::vector<std::pair<double, int32_t>>> pending;
    std::vector<BeamHypothesis> done;
    bool finished = false;
    FinishReason reason = FinishReason::length;
};

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Model> model,
                                               std::shared_ptr<const Tokenizer> tokenizer, const EngineOptions& opt) {
    using R = Result<std::unique_ptr<Engine>>;
    if (opt.block_size != 8 && opt.block_size != 16 && opt.block_size != 32)
        return R::error("KV block size must be 8, 16 or 32 tokens, got " + std::to_string(opt.block_size));
    const SchedulerConfig& sc = opt.scheduler;
    if (sc.max_num_batched_tokens < 1 || sc.max_num_seqs < 1)
        return R::error("the step token budget and the most sequences per step must be at least 1 (got " +
                        std::to_string(sc.max_num_batched_tokens) + " and " + std::to_string(sc.max_num_seqs) + ")");
    std::unique_ptr<Engine> e(new Engine);
    e->m_model = std::move(model);
    e->m_tok = std::move(tokenizer);
    const ModelConfig& c = e->m_model->config;

    e->m_max_model_len = opt.max_model_len > 0 ? opt.max_model_len
                                               : std::min(4096, c.n_ctx_train > 0 ? c.n_ctx_train : 4096);
    const int64_t per_token = kv_cache_bytes_per_token(c, opt.kv_type);
    const int64_t per_block = per_token * opt.block_size;
    int64_t n_blocks = opt.kv_blocks;
    if (n_blocks <= 0) {
        int64_t bytes = opt.kv_bytes;
        if (bytes <= 0 && opt.kv_ram_fraction > 0) bytes = static_cast<int64_t>(opt.kv_ram_fraction * physical_ram_bytes());
        if (bytes <= 0) bytes = 1LL << 30;
        n_blocks = bytes / per_block;
    }
    if (n_blocks < 1)
        return R::error("the KV memory budget holds no block: one block of " + std::to_string(opt.block_size) +
                        " tokens takes " + std::to_string(per_block) + " bytes");
    if (Status st = check_kv_cache_fits(c, opt.kv_type, n_blocks, opt.block_size); !st)
        return R::error(st.message() + " (lower the KV budget)");

    e->m_backend = make_backend(opt.backend, opt.n_threads, &e->m_backend_note, opt.simd);
    if (!e->m_backend) return R::error(e->m_backend_note);
    if (Status st = check_weight_support(*e->m_model, *e->m_backend); !st) return st;
    if (auto s = check_kv_type(*e->m_backend, c, opt.kv_type); !s) return R::error(s.message());
    auto kv = KvTensors::create(*e->m_backend, c, static_cast<int>(n_blocks), opt.block_size, opt.kv_type);
    if (!kv) return R::error(kv.message() + "; lower the KV budget");
    e->m_kv = std::move(kv).value();
    e->m_kv_mgr = std::make_unique<KVCacheManager>(static_cast<int>(n_blocks), opt.block_size, opt.prefix_caching);
    SchedulerConfig cfg = sc;
    cfg.max_model_len = e->m_max_model_len;
    e->m_sched = std::make_unique<Scheduler>(cfg, *e->m_kv_mgr);
    if (cfg.n_host_blocks > 0) {
        if (Status st = check_kv_cache_fits(c, opt.kv_type, cfg.n_host_blocks, opt.block_size); !st)
            return R::error("the CPU swap tier: " + st.message() + " (lower the swap blocks)");
        e->m_host_blocks.resize(static_cast<size_t>(cfg.n_host_blocks) * static_cast<size_t>(e->m_kv->block_bytes()));
    }
    auto forward = LlamaForward::create(e->m_model, *e->m_backend, *e->m_kv, cfg.max_num_batched_tokens);
    if (!forward) return forward.status();
    e->m_forward = std::move(forward).value();
    for (const auto& [name, draft] : opt.drafts) {
        if (!draft) return R::error("draft '" + name + "' has no model");
        if (draft->config.n_vocab != c.n_vocab)
            return R::error("draft '" + name + "' has " + std::to_string(draft->config.n_vocab) +
                            " tokens in its vocabulary, the target " + std::to_string(c.n_vocab));
        auto d = DraftRunner::create(name, draft, *e->m_backend, static_cast<int>(n_blocks), opt.block_size,
                                     cfg.max_num_batched_tokens);
        if (!d) return R::error(d.message());
        e->m_drafts.push_back(std::move(d.value()));
    }
    e->m_ring = std::make_shared<SnapshotRing>(static_cast<size_t>(std::max(1, opt.snapshot_ring)),
                                               static_cast<size_t>(std::max(1, opt.step_ring)));
    e->m_snapshot_every = opt.snapshot_every;
    e->m_accept_rule = opt.spec_accept_rule;
    e->m_t0 = Clock::now();
    return e;
}

Engine::~Engine() = default;

Result<RequestId> Engine::submit(GenerationRequest req, RequestId want_id) {
    using R = Result<RequestId>;
    const int n_prompt = static_cast<int>(req.prompt.size());
    if (n_prompt == 0) return R::error("the prompt is empty");
    for (int32_t t : req.prompt)
        if (t < 0 || t >= m_model->config.n_vocab)
            return R::error("prompt token id " + std::to_string(t) + " is outside the vocabulary of " +
                            std::to_string(m_model->config.n_vocab) + " tokens");
    if (n_prompt >= m_max_model_len)
        return R::error("the prompt is " + std::to_string(n_prompt) + " tokens, which leaves no room to generate in " +
                        "the context of " + std::to_string(m_max_model_len) + " tokens (shorten it or raise the context)");
    int max_tokens = req.params.max_tokens;
    if (max_tokens < 0 || n_prompt + max_tokens > m_max_model_len) max_tokens = m_max_model_len - n_prompt;
    if (max_tokens == 0) return R::error("max_tokens is 0: nothing to generate");
    if (req.beam_width < 1 || req.beam_width > 8)
        return R::error("beam width must be 1 (off) to 8, got " + std::to_string(req.beam_width));
    DraftRunner* runner = nullptr;
    if (req.spec.enabled()) {
        if (req.beam_width > 1) return R::error("speculative decoding does not combine with beam search");
        if (req.spec.k < 1 || req.spec.k > 16 || req.spec.k_min < 1 || req.spec.k_max > 16 ||
            req.spec.k_min > req.spec.k_max)
            return R::error("draft length k must be 1 to 16 (k_min <= k <= k_max), got k = " + std::to_string(req.spec.k) +
                            " in [" + std::to_string(req.spec.k_min) + ", " + std::to_string(req.spec.k_max) + "]");
        if (req.spec.proposer != "ngram") {
            for (auto& d : m_drafts)
                if (d->name() == req.spec.proposer) runner = d.get();
            if (!runner) {
                std::string names = "ngram";
                for (const auto& n : draft_names()) names += ", " + n;
                return R::error("unknown draft proposer '" + req.spec.proposer + "' (this engine has: " + names + ")");
            }
        }
    }
    const RequestId id = want_id > 0 ? want_id : m_next_id;
    if (m_reqs.count(id)) return R::error("request id " + std::to_string(id) + " is already in use");
    KVS_RETURN_IF_ERROR(m_sched->add_request(id, req.prompt, max_tokens, req.priority));
    m_next_id = std::max(m_next_id, id + 1);
    const double arrival = req.arrival_ms >= 0 ? req.arrival_ms : ms_since_start();
    auto& r = *m_reqs.emplace(id, std::make_unique<Req>(id, req.params, m_tok.get(), std::move(req.on_event),
                                                      std::move(req.prompt))).first->second;
    r.metrics.id = id;
    r.metrics.arrival_ms = arrival;
    r.metrics.n_prompt = n_prompt;
    m_total_prompt_tokens += n_prompt;
    if (req.spec.enabled()) {
        r.spec = req.spec;
        r.spec_k = std::clamp(req.spec.k, req.spec.adaptive ? req.spec.k_min : 1, req.spec.adaptive ? req.spec.k_max : 16);
        r.runner = runner;
    }
    if (req.beam_width > 1) {
        r.beam = std::make_shared<BeamGroup>();
        r.beam->root = id;
        r.beam->width = req.beam_width;
        r.beam->max_tokens = max_tokens;
        r.beam->ignore_eos = req.params.ignore_eos;
        r.beam->live = {id};
        r.beam->score[id] = 0.0;
    }
    return id;
}

void Engine::emit(Req& r, TokenEvent ev) {
    ev.id = r.id;
    if (ev.finished && r.metrics.finish_ms < 0) {
        r.metrics.finish_ms = ms_since_start();
        r.metrics.finish_reason = ev.finish_reason;
        ++m_total_finished;
    }
    if (ev.finished) ev.metrics = &r.metrics;
    if (r.on_event) r.on_event(ev);
}

void Engine::finish(RequestId id, FinishReason why) {
    const SchedRequest* s = m_sched->request(id);
    if (!s || s->status == RequestStatus::finished) return;
    m_sched->finish_request(id, why);
}

bool Engine::cancel(RequestId id) {
    auto it = m_reqs.find(id);
    if (it == m_reqs.end()) return false;
    if (auto g = it->second->beam) {
        if (g->root != id || g->finished) return false;
        for (RequestId b : g->live) m_sched->abort_request(b);
        g->live.clear();
        g->finished = true;
        g->reason = FinishReason::cancelled;
    } else if (!m_sched->abort_request(id)) {
        return false;
    }
    release_drafts(id);
    TokenEvent ev;
    ev.finished = true;
    ev.finish_reason = FinishReason::cancelled;
    emit(*it->second, ev);
    return true;
}

double Engine::propose_drafts() {
    const auto t0 = Clock::now();
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
            for (int32_t t : propose_ngram(r.history, k, r.spec.ngram_max, r.spec.ngram_min)) r.drafts.push_back({t, {}});
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
    return ms_between(t0, Clock::now());
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

Result<StepResult> Engine::step() {
    using R = Result<StepResult>;
    StepResult res;
    const auto t0 = Clock::now();
    const double t_start_ms = ms_between(m_t0, t0);
    const double draft_ms = propose_drafts();
    const auto t_prop = Clock::now();
    res.out = m_sched->schedule();
    const SchedulerOutput& out = res.out;
    const auto t_sched = Clock::now();
    res.schedule_ms = ms_between(t_prop, t_sched);
    res.record.draft_ms = draft_ms;
    if (out.empty()) return res;
    res.ran = true;
    for (const auto& ch : out.chunks) {
        auto& m = m_reqs.at(ch.id)->metrics;
        if (m.first_scheduled_ms < 0) m.first_scheduled_ms = t_start_ms;
    }

    // KV block moves, in the order the scheduler's contract gives.
    const int64_t be = m_kv->block_bytes();
    for (const SwapOp& s : out.swap_out) m_kv->read_block(s.device_block, m_host_blocks.data() + s.host_block * be);
    for (const SwapOp& s : out.swap_in) m_kv->write_block(s.device_block, m_host_blocks.data() + s.host_block * be);
    for (const CopyOp& c : out.copies) m_kv->copy_block(c.src_block, c.dst_block);
    const auto t_kv = Clock::now();
    res.kv_move_ms = ms_between(t_sched, t_kv);

    // One batch: chunk i's tokens use row i of block_tables. A chunk that samples wants
    // the logits of its last token, a speculative one those of every token (row j
    // verifies draft j + 1; the last row gives the bonus token).
    ForwardBatch& b = m_batch;
    b.tokens.clear();
    b.positions.clear();
    b.token_seq.clear();
    b.block_tables.clear();
    b.logit_rows.clear();
    b.n_seqs = static_cast<int>(out.chunks.size());
    b.max_blocks_per_seq = 1;
    for (const auto& ch : out.chunks)
        b.max_blocks_per_seq = std::max<int>(b.max_blocks_per_seq, static_cast<int>(m_kv_mgr->block_table(ch.id).size()));
    b.block_tables.assign(static_cast<size_t>(b.n_seqs) * b.max_blocks_per_seq, -1);
    std::vector<int> first_logit(out.chunks.size(), -1);  // chunk -> its first logit row
    for (int i = 0; i < b.n_seqs; ++i) {
        const ScheduledChunk& ch = out.chunks[static_cast<size_t>(i)];
        const SchedRequest* r = m_sched->request(ch.id);
        if (!r) return R::error("scheduled request " + std::to_string(ch.id) + " is unknown");
        const auto& table = m_kv_mgr->block_table(ch.id);
        std::copy(table.begin(), table.end(), b.block_tables.begin() + static_cast<ptrdiff_t>(i) * b.max_blocks_per_seq);
        for (int p = ch.start_pos; p < ch.start_pos + ch.num_tokens; ++p) {
            b.tokens.push_back(r->token_at(p));
            b.positions.push_back(p);
            b.token_seq.push_back(i);
        }
        if (ch.sample) {
            first_logit[static_cast<size_t>(i)] = static_cast<int>(b.logit_rows.size());
            for (int j = ch.num_spec; j >= 0; --j) b.logit_rows.push_back(b.n_tokens() - 1 - j);
        }
    }
    KVS_RETURN_IF_ERROR(m_forward->forward(b, &m_logits));
    const auto t_fwd = Clock::now();
    res.forward_ms = ms_between(t_kv, t_fwd);

    // Sample (or verify) each request that reached its last token.
    const int n_vocab = m_model->config.n_vocab;
    std::vector<std::vector<int32_t>> emitted(out.chunks.size());
    std::vector<std::optional<VerifyResult>> verified(out.chunks.size());
    std::vector<BeamGroup*> groups;
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        if (first_logit[i] < 0) continue;
        const ScheduledChunk& ch = out.chunks[i];
        Req& r = *m_reqs.at(ch.id);
        float* row = m_logits.data() + static_cast<size_t>(first_logit[i]) * n_vocab;
        if (r.beam) {  // no token yet: the group decides below
            beam_collect(r, row);
            if (std::find(groups.begin(), groups.end(), r.beam.get()) == groups.end()) groups.push_back(r.beam.get());
        } else if (ch.num_spec > 0) {
            verified[i] = verify_chunk(r, ch, row, res.forward_ms);
            emitted[i] = verified[i]->tokens;
            res.record.spec_drafted += ch.num_spec;
            res.record.spec_accepted += static_cast<int>(emitted[i].size()) - 1;
            res.record.spec_emitted += static_cast<int>(emitted[i].size());
        } else {
            emitted[i] = {r.sampler.sample(row, n_vocab, r.history)};
        }
    }

    // Text first: an end-of-generation token or a stop string ends the list there.
    std::vector<std::vector<TokenEvent>> events(out.chunks.size());
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        if (emitted[i].empty()) continue;
        Req& r = *m_reqs.at(out.chunks[i].id);
        const SchedRequest* s = m_sched->request(r.id);
        const size_t room = static_cast<size_t>(std::max(0, s->max_tokens - s->num_output()));
        if (emitted[i].size() > room) emitted[i].resize(room);
        for (size_t j = 0; j < emitted[i].size(); ++j) {
            const TextStep t = r.text.push(emitted[i][j]);
            TokenEvent ev;
            ev.token = emitted[i][j];
            ev.text = t.text;
            if (t.eog || t.stopped) {
                ev.finished = true;
                ev.finish_reason = FinishReason::stop;
                if (!t.stopped) ev.text += r.text.flush();
                events[i].push_back(std::move(ev));
                emitted[i].resize(j + 1);
                break;
            }
            events[i].push_back(std::move(ev));
        }
        if (verified[i]) record_fates(r, out.chunks[i], *verified[i], emitted[i].size(), out.step);
        else if (r.spec.enabled() && !emitted[i].empty()) r.add_fate({emitted[i][0], TokenFate::plain, 0, out.step});
    }
    res.finished = m_sched->update(out, emitted);  // length limits
    for (BeamGroup* g : groups)
        if (!g->finished && g->pending.size() == g->live.size()) beam_advance(*g, &res.finished);

    // Stream.
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        if (events[i].empty()) continue;
        Req& r = *m_reqs.at(out.chunks[i].id);
        const SchedRequest* s = m_sched->request(r.id);
        for (size_t j = 0; j < events[i].size(); ++j) {
            TokenEvent& ev = events[i][j];
            r.history.push_back(ev.token);
            const double now_ms = ms_since_start();
            if (r.metrics.first_token_ms < 0) r.metrics.first_token_ms = now_ms;
            r.metrics.token_times_ms.push_back(now_ms);
            r.metrics.n_output = static_cast<int>(r.metrics.token_times_ms.size());
            ++m_total_generated;
            const bool last = j + 1 == events[i].size();
            if (last && ev.finished && s->status != RequestStatus::finished) {  // end-of-generation / stop string
                res.finished.push_back(r.id);
                finish(r.id, FinishReason::stop);
            } else if (last && s->status == RequestStatus::finished && !ev.finished) {  // length
                ev.finished = true;
                ev.finish_reason = s->finish_reason;
                ev.text += r.text.flush();
            }
            emit(r, ev);
        }
        if (s->status == RequestStatus::finished) release_drafts(r.id);
    }
    const auto t_end = Clock::now();
    res.sample_ms = ms_between(t_fwd, t_end);
    res.total_ms = ms_between(t0, t_end);
    if (draft_ms > 0) {
        m_spec_totals.draft_ms += draft_ms;
        // Each drafting request is charged the whole proposing time of the step.
        for (const auto& ch : out.chunks)
            if (ch.num_spec > 0) m_reqs.at(ch.id)->spec_stats.draft_ms += draft_ms;
    }
    publish(res, t_start_ms);
    return res;
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

double Engine::ms_since_start() const { return ms_between(m_t0, Clock::now()); }

EngineSnapshot Engine::snapshot(const StepRecord& step) const {
    EngineSnapshot s;
    s.step = step;
    s.block_size = m_kv_mgr->block_size();
    s.max_model_len = m_max_model_len;
    s.blocks = block_views(*m_kv_mgr);
    s.n_host_blocks = m_sched->config().n_host_blocks;
    std::vector<std::pair<RequestId, std::vector<int32_t>>> host_tables;
    for (const SchedRequest* r : m_sched->requests()) {
        const auto host = m_sched->host_blocks(r->id);
        s.requests.push_back(request_view(*r, *m_kv_mgr, static_cast<int>(host.size())));
        if (!host.empty()) host_tables.emplace_back(r->id, host);
    }
    s.host_blocks = host_block_views(host_tables);
    s.kv_stats = m_kv_mgr->stats();
    const SchedulerCounters& c = m_sched->counters();
    s.total_preemptions = c.preemptions;
    s.total_prompt_tokens = m_total_prompt_tokens;
    s.total_generated_tokens = m_total_generated;
    s.total_finished = m_total_finished;
    s.total_swap_out_blocks = c.swapped_out_blocks;
    s.total_swap_in_blocks = c.swapped_in_blocks;
    s.total_cow_copies = c.cow_copies;
    s.prefix_hit_rate = prefix_hit_rate(s.kv_stats);
    return s;
}

void Engine::publish(StepResult& res, double t_start_ms) {
    const SchedulerOutput& out = res.out;
    StepRecord& rec = res.record;
    rec.step = out.step;
    rec.t_start_ms = t_start_ms;
    rec.duration_ms = res.total_ms;
    rec.schedule_ms = res.schedule_ms;
    rec.forward_ms = res.forward_ms;
    rec.sample_ms = res.sample_ms;
    rec.n_seqs = static_cast<int>(out.chunks.size());
    rec.prefill_tokens = out.num_prefill_tokens;
    rec.decode_tokens = out.num_decode_tokens;
    rec.padding_tokens = out.num_padding_tokens;
    rec.token_budget = out.token_budget;
    rec.max_seqs = m_sched->config().max_num_seqs;
    rec.preemptions = static_cast<int>(out.preempted.size());
    rec.swap_out_blocks = static_cast<int>(out.swap_out.size());
    rec.swap_in_blocks = static_cast<int>(out.swap_in.size());
    rec.cow_copies = static_cast<int>(out.copies.size());
    rec.prefix_hit_tokens = out.num_prefix_hit_tokens;
    for (const SchedRequest* r : m_sched->requests()) {
        if (r->status == RequestStatus::waiting) ++rec.n_waiting;
        else if (r->status == RequestStatus::running) ++rec.n_running;
        else if (r->status == RequestStatus::swapped) ++rec.n_swapped;
    }
    rec.n_finished_this_step = static_cast<int>(res.finished.size());
    const bool full = m_snapshot_every > 0 && out.step % m_snapshot_every == 0;
    if (full) {
        EngineSnapshot snap = snapshot(rec);
        for (const auto& ch : out.chunks)
            snap.chunks.push_back({ch.id, ch.start_pos, ch.num_tokens, ch.is_prefill && !ch.padding, ch.padding});
        fill_block_counts(snap.step, snap.blocks, snap.block_size);
        rec = snap.step;
        m_ring->publish(std::move(snap));
    } else {
        fill_block_counts(rec, block_views(*m_kv_mgr), m_kv_mgr->block_size());
        m_ring->publish_step(rec);
    }
}

Status Engine::run_until_idle() {
    while (has_work()) {
        auto r = step();
        if (!r) return r.status();
        if (!r->ran && has_work())
            return Status::error("the scheduler made no progress with " + std::to_string(m_sched->num_waiting()) +
                                 " requests waiting (the KV pool cannot hold any of them)");
    }
    return Status::ok();
}

std::vector<int32_t> Engine::output_tokens(RequestId id) const {
    auto it = m_reqs.find(id);
    if (it != m_reqs.end() && it->second->beam && it->second->beam->root == id && it->second->beam->finished)
        return it->second->beam->done.empty() ? std::vector<int32_t>{} : it->second->beam->done.front().tokens;
    const SchedRequest* r = m_sched->request(id);
    return r ? r->output : std::vector<int32_t>{};
}

std::vector<RequestMetrics> Engine::request_metrics() const {
    std::vector<RequestMetrics> v;
    for (const auto& [id, r] : m_reqs)
        if (!r->beam || r->beam->root == id) v.push_back(r->metrics);
    std::sort(v.begin(), v.end(), [](const RequestMetrics& a, const RequestMetrics& b) { return a.id < b.id; });
    return v;
}

std::vector<BeamHypothesis> Engine::beam_hypotheses(RequestId id) const {
    auto it = m_reqs.find(id);
    if (it == m_reqs.end() || !it->second->beam || it->second->beam->root != id || !it->second->beam->finished) return {};
    return it->second->beam->done;
}

void Engine::beam_collect(Req& r, const float* logits) {
    // log_softmax in double, then the best `width` tokens (lower id first among equals).
    const int n = m_model->config.n_vocab;
    const double mx = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    const int w = std::min(r.beam->width, n);
    std::vector<int32_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + w, idx.end(), [&](int32_t a, int32_t b) {
        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    auto& cand = r.beam->pending[r.id];
    cand.clear();
    for (int i = 0; i < w; ++i) cand.emplace_back(static_cast<double>(logits[idx[static_cast<size_t>(i)]]) - lse, idx[static_cast<size_t>(i)]);
}

void Engine::beam_advance(BeamGroup& g, std::vector<RequestId>* finished) {
    struct Cand {
        double score;
        int rank;  // parent's rank among the live beams
        int32_t token;
    };
    std::vector<Cand> cands;
    for (size_t rank = 0; rank < g.live.size(); ++rank)
        for (const auto& [lp, tok] : g.pending.at(g.live[rank]))
            cands.push_back({g.score.at(g.live[rank]) + lp, static_cast<int>(rank), tok});
    g.pending.clear();
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        if (a.score != b.score) return a.score > b.score;
        return a.rank != b.rank ? a.rank < b.rank : a.token < b.token;
    });
    std::vector<Cand> keep;
    for (const Cand& c : cands) {
        if (static_cast<int>(keep.size()) == g.width) break;
        if (!g.ignore_eos && m_tok && m_tok->is_eog(c.token)) {  // a hypothesis ends here
            if (static_cast<int>(g.done.size()) < g.width) {
                g.done.push_back({m_sched->request(g.live[static_cast<size_t>(c.rank)])->output, c.score});
                g.reason = FinishReason::stop;
            }
            continue;
        }
        keep.push_back(c);
    }
    // Each kept extension continues in its parent's request the first time the parent is
    // used, in a fork of it after that. Forks first: a child copies the parent's tokens.
    std::vector<RequestId> next(keep.size());
    std::vector<bool> parent_used(g.live.size(), false);
    for (size_t i = 0; i < keep.size(); ++i) {
        const RequestId parent = g.live[static_cast<size_t>(keep[i].rank)];
        if (!parent_used[static_cast<size_t>(keep[i].rank)]) {
            parent_used[static_cast<size_t>(keep[i].rank)] = true;
            next[i] = parent;
            continue;
        }
        const RequestId child = m_next_beam_id--;
        if (!m_sched->fork_request(parent, child)) {  // cannot happen for a running parent
            next[i] = 0;
            continue;
        }
        const Req& p = *m_reqs.at(parent);
        auto& c = *m_reqs.emplace(child, std::make_unique<Req>(child, p.params, m_tok.get(), nullptr, p.history))
                       .first->second;
        c.beam = p.beam;
        next[i] = child;
    }
    for (size_t rank = 0; rank < g.live.size(); ++rank)
        if (!parent_used[rank]) m_sched->finish_request(g.live[rank], FinishReason::stop);  // dropped beam
    std::unordered_map<RequestId, double> score;
    g.live.clear();
    for (size_t i = 0; i < keep.size(); ++i) {
        if (next[i] == 0 || !m_sched->append_token(next[i], keep[i].token)) continue;
        m_reqs.at(next[i])->history.push_back(keep[i].token);
        g.live.push_back(next[i]);
        score[next[i]] = keep[i].score;
    }
    g.score = std::move(score);

    const bool at_length = !g.live.empty() && m_sched->request(g.live.front())->num_output() >= g.max_tokens;
    // Log-probs only lower a score: once `width` hypotheses have ended and the best of them
    // beats every live beam, no live beam can overtake it.
    double best_live = -INFINITY, best_done = -INFINITY;
    for (RequestId b : g.live) best_live = std::max(best_live, g.score[b]);
    for (const auto& h : g.done) best_done = std::max(best_done, h.logprob);
    const bool settled = static_cast<int>(g.done.size()) >= g.width && best_done >= best_live;
    if (g.live.empty() || at_length || settled) {
        if (at_length) {
            g.reason = FinishReason::length;
            for (RequestId b : g.live) g.done.push_back({m_sched->request(b)->output, g.score[b]});
        }
        beam_finish(g, finished);
    }
}

void Engine::beam_finish(BeamGroup& g, std::vector<RequestId>* finished) {
    for (RequestId b : g.live) m_sched->finish_request(b, g.reason);
    g.live.clear();
    g.finished = true;
    std::stable_sort(g.done.begin(), g.done.end(),
                     [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.logprob > b.logprob; });
    finished->push_back(g.root);
    Req& root = *m_reqs.at(g.root);
    TokenEvent ev;
    ev.finished = true;
    ev.finish_reason = g.reason;
    if (m_tok && !g.done.empty()) ev.text = m_tok->decode(g.done.front().tokens);
    emit(root, ev);
}

void Engine::remove_finished(size_t keep_last) {
    std::vector<RequestId> done;
    for (const auto& [id, r] : m_reqs) {
        const SchedRequest* s = m_sched->request(id);
        const bool group_live = r->beam && !r->beam->finished;  // the root reports at the end
        if (!group_live && (!s || s->status == RequestStatus::finished)) done.push_back(id);
    }
    if (done.size() <= keep_last) return;
    std::sort(done.begin(), done.end());
    done.resize(done.size() - keep_last);  // the oldest ones (ids grow with submission)
    for (RequestId id : done) {
        if (m_sched->request(id) && !m_sched->remove_request(id)) continue;  // a static batch seat: later
        auto it = m_reqs.find(id);
        if (it->second->metrics.finish_ms >= 0 && (!it->second->beam || it->second->beam->root == id))
            m_removed_metrics.push_back(it->second->metrics);
        release_drafts(id);
        m_reqs.erase(it);
    }
}

}  // namespace kvs
