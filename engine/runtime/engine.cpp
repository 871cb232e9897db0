// The batching engine's core: create, submit / cancel, and one step (schedule, move KV
// blocks, one forward pass, sample, stream), its telemetry and the request records.
// Beam search lives in engine_beam.cpp, speculative decoding in engine_spec.cpp.
#include "engine/runtime/engine.h"

#include <algorithm>
#include <cmath>

#include "engine/kv_cache/kv_tiers.h"
#include "engine/lora/lora_adapter.h"
#include "engine/model/op_costs.h"
#include "engine/runtime/engine_request.h"
#include "engine/runtime/kv_pool_plan.h"
#include "engine/runtime/weight_support.h"

namespace kvs {

namespace {
// The record's running / waiting / swapped counts from the scheduler's requests.
void count_statuses(const Scheduler& sched, StepRecord& rec) {
    for (const SchedRequest* r : sched.requests()) {
        if (r->status == RequestStatus::waiting) ++rec.n_waiting;
        else if (r->status == RequestStatus::running)
            ++rec.n_running;
        else if (r->status == RequestStatus::swapped)
            ++rec.n_swapped;
    }
}
}  // namespace

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

    e->m_max_model_len =
        opt.max_model_len > 0 ? opt.max_model_len : std::min(4096, c.n_ctx_train > 0 ? c.n_ctx_train : 4096);
    e->m_backend = make_backend(opt.backend, opt.n_threads, &e->m_backend_note, opt.simd);
    if (!e->m_backend) return R::error(e->m_backend_note);
    // One pool, or the sliding-window layers in a pool of their own (kv_pool_plan.h).
    auto plan = plan_kv_pools(c, opt, e->m_backend->supports_gemma_ops());
    if (!plan) return plan.status();
    const int64_t n_blocks = plan->n_blocks;
    if (Status st = check_kv_cache_fits(plan->main_layers, opt.kv_type, n_blocks, opt.block_size); !st)
        return R::error(st.message() + " (lower the KV budget)");
    if (Status st = check_weight_support(*e->m_model, *e->m_backend); !st) return st;
    if (auto s = check_kv_type(*e->m_backend, c, opt.kv_type); !s) return R::error(s.message());
    auto kv =
        KvTensors::create(*e->m_backend, plan->main_layers, static_cast<int>(n_blocks), opt.block_size, opt.kv_type);
    if (!kv) return R::error(kv.message() + "; lower the KV budget");
    e->m_kv = std::move(kv).value();
    e->m_kv_mgr = std::make_unique<KVCacheManager>(static_cast<int>(n_blocks), opt.block_size, opt.prefix_caching);
    if (plan->split()) {
        auto local =
            KvTensors::create(*e->m_backend, plan->local_layers, plan->n_local_blocks, opt.block_size, opt.kv_type);
        if (!local) return R::error(local.message() + "; lower the KV budget");
        e->m_kv_swa = std::move(local).value();
        e->m_kv_mgr->enable_sliding_window(c.sliding_window, plan->n_local_blocks);
    }
    if (opt.kv_cpu_tier_bytes > 0 || opt.kv_disk_bytes > 0) {
        if (!opt.prefix_caching) return R::error("the KV tiers keep prefix-cached blocks: they need prefix caching on");
        KvTierOptions t;
        t.cpu_bytes = std::max<int64_t>(0, opt.kv_cpu_tier_bytes);
        t.disk_bytes = std::max<int64_t>(0, opt.kv_disk_bytes);
        t.disk_root = opt.kv_disk_dir;
        t.model_fingerprint = model_fingerprint(*e->m_model);
        t.kv_type = static_cast<uint32_t>(opt.kv_type);
        t.kv_type_name = kv_type_name(opt.kv_type);
        t.block_size = opt.block_size;
        t.n_layer = plan->main_layers.n_layer;  // the tiers keep the main pool's layers
        t.block_bytes = e->m_kv->block_bytes();
        auto tiers = KvTiers::create(t);
        if (!tiers) return tiers.status();
        e->m_tiers = std::move(tiers).value();
        e->m_kv_mgr->set_tier(e->m_tiers.get());
    }
    SchedulerConfig cfg = sc;
    cfg.max_model_len = e->m_max_model_len;
    e->m_sched = std::make_unique<Scheduler>(cfg, *e->m_kv_mgr);
    if (cfg.n_host_blocks > 0) {
        if (Status st = check_kv_cache_fits(c, opt.kv_type, cfg.n_host_blocks, opt.block_size); !st)
            return R::error("the CPU swap tier: " + st.message() + " (lower the swap blocks)");
        e->m_host_blocks.resize(static_cast<size_t>(cfg.n_host_blocks) * static_cast<size_t>(e->m_kv->block_bytes()));
    }
    auto forward =
        LlamaForward::create(e->m_model, *e->m_backend, *e->m_kv, cfg.max_num_batched_tokens, e->m_kv_swa.get());
    if (!forward) return forward.status();
    e->m_forward = std::move(forward).value();
    if (opt.op_timing && e->m_backend->host_visible()) {
        e->m_op_model = std::make_unique<OpCostModel>(op_cost_model(*e->m_model, opt.kv_type));
        e->m_forward->set_op_timing(true);
    }
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
    e->m_buf = std::make_unique<StepBuffers>();
    e->m_ring = std::make_shared<SnapshotRing>(static_cast<size_t>(std::max(1, opt.snapshot_ring)),
                                               static_cast<size_t>(std::max(1, opt.step_ring)));
    e->m_snapshot_every = opt.snapshot_every;
    e->m_accept_rule = opt.spec_accept_rule;
    if (e->m_tok)
        for (int32_t id = 0; id < c.n_vocab; ++id)
            if (e->m_tok->is_eog(id)) e->m_eog_ids.push_back(id);
    e->m_t0 = EngineClock::now();
    return e;
}

Engine::Engine() = default;
// KV tiers: the prefix-cached blocks still in the pool go down to the tiers (and the CPU tier
// to disk, ~KvTiers), so the next engine on the same disk folder finds them.
Engine::~Engine() {
    if (!m_tiers || !m_kv || !m_kv_mgr) return;
    for (const TierSpill& s : m_kv_mgr->hashed_blocks_for_tiers()) {
        auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(m_kv->block_bytes()));
        m_kv->read_block(s.block_id, bytes->data());
        m_tiers->spill(s.key, std::move(bytes));
    }
}

const Scheduler& Engine::scheduler() const { return *m_sched; }
const KVCacheManager& Engine::kv_cache() const { return *m_kv_mgr; }
const Model& Engine::model() const { return *m_model; }
const Tokenizer* Engine::tokenizer() const { return m_tok.get(); }
Backend& Engine::backend() { return *m_backend; }
bool Engine::has_work() const { return m_sched->has_unfinished(); }
int Engine::block_size() const { return m_kv_mgr->block_size(); }
int64_t Engine::kv_pool_bytes() const { return m_kv->bytes() + (m_kv_swa ? m_kv_swa->bytes() : 0); }
DType Engine::kv_type() const { return m_kv->kv_type(); }
std::shared_ptr<const SnapshotRing> Engine::telemetry() const { return m_ring; }

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
                        "the context of " + std::to_string(m_max_model_len) +
                        " tokens (shorten it or raise the context)");
    int max_tokens = req.params.max_tokens;
    if (max_tokens < 0 || n_prompt + max_tokens > m_max_model_len) max_tokens = m_max_model_len - n_prompt;
    if (max_tokens == 0) return R::error("max_tokens is 0: nothing to generate");
    if (req.beam_width < 1 || req.beam_width > 8)
        return R::error("beam width must be 1 (off) to 8, got " + std::to_string(req.beam_width));
    if (req.params.min_new_tokens < 0)
        return R::error("min_new_tokens must be 0 or more, got " + std::to_string(req.params.min_new_tokens));
    if (!std::isfinite(req.params.length_penalty)) return R::error("length_penalty must be a finite number");
    if (req.params.logprobs > kMaxLogprobs)
        return R::error("logprobs asks for " + std::to_string(req.params.logprobs) + " alternatives; at most " +
                        std::to_string(kMaxLogprobs) + " are reported");
    if (req.params.prompt_logprobs > kMaxLogprobs)
        return R::error("prompt_logprobs asks for " + std::to_string(req.params.prompt_logprobs) +
                        " alternatives; at most " + std::to_string(kMaxLogprobs) + " are reported");
    if (!req.choices.empty() && (req.beam_width > 1 || req.spec.enabled()))
        return R::error("parallel choices (n > 1) do not go with beam search or speculative decoding");
    if (req.adapter) {
        KVS_RETURN_IF_ERROR(check_lora_fits(*req.adapter, m_model->config));
        if (!m_backend->host_visible())
            return R::error("LoRA adapter '" + req.adapter->name + "': adapters run on the CPU backend only, not on " +
                            m_backend->name());
    }
    auto runner = draft_runner_for(req);
    if (!runner) return runner.status();
    const RequestId id = want_id > 0 ? want_id : m_next_id;
    if (m_reqs.count(id)) return R::error("request id " + std::to_string(id) + " is already in use");
    {
        RequestId next = std::max(m_next_id, id + 1);
        for (auto& c : req.choices) {
            if (c.id <= 0) c.id = next;
            if (c.id == id || m_reqs.count(c.id) ||
                std::count_if(req.choices.begin(), req.choices.end(), [&](const auto& o) { return o.id == c.id; }) > 1)
                return R::error("request id " + std::to_string(c.id) + " of a parallel choice is already in use");
            next = std::max(next, c.id + 1);
        }
    }
    for (int32_t t : req.forced_output)
        if (t < 0 || t >= m_model->config.n_vocab || req.beam_width > 1 || req.spec.enabled())
            return R::error("forced output: token " + std::to_string(t) + " outside the vocabulary of " +
                            std::to_string(m_model->config.n_vocab) + " (or with beam search / speculative decoding)");
    auto evict = make_eviction(req.kv_eviction, n_prompt, max_tokens,
                               req.beam_width > 1 || req.spec.enabled() || !req.choices.empty());
    if (!evict) return evict.status();
    KVS_RETURN_IF_ERROR(m_sched->add_request(id, req.prompt, max_tokens, req.priority));
    if (req.adapter) m_kv_mgr->set_cache_salt(id, req.adapter->cache_salt);  // its KV is its own
    // Prompt log-probabilities need every position's logits: no prefix-cache hits.
    if (req.params.prompt_logprobs >= 0 && req.beam_width == 1) m_sched->skip_prefix_cache(id);
    m_next_id = std::max(m_next_id, id + 1);
    const double arrival = req.arrival_ms >= 0 ? req.arrival_ms : ms_since_start();
    if (*evict) m_kv_mgr->set_prefix_caching(id, false);  // its blocks are compacted in place
    // Every choice waits with its own record (sampler, text, callback) until the fork.
    for (auto& c : req.choices) {
        SamplingParams p = req.params;
        p.seed = c.seed;
        auto& cr = *m_reqs.emplace(c.id, std::make_unique<Req>(c.id, p, m_tok.get(), std::move(c.on_event), req.prompt))
                        .first->second;
        cr.sampler.set_prompt_len(static_cast<size_t>(n_prompt));
        cr.metrics.id = c.id;
        cr.metrics.arrival_ms = arrival;
        cr.metrics.n_prompt = n_prompt;
        cr.adapter = req.adapter;
        cr.client = req.client;
        cr.max_tokens = max_tokens;
        cr.priority = req.priority;
        cr.awaiting_fork = true;
        m_next_id = std::max(m_next_id, c.id + 1);
    }
    auto& r = *m_reqs
                   .emplace(id, std::make_unique<Req>(id, req.params, m_tok.get(), std::move(req.on_event),
                                                      std::move(req.prompt)))
                   .first->second;
    r.sampler.set_prompt_len(static_cast<size_t>(n_prompt));
    r.metrics.id = id;
    r.metrics.arrival_ms = arrival;
    r.metrics.n_prompt = n_prompt;
    r.adapter = std::move(req.adapter);
    r.max_tokens = max_tokens;
    r.priority = req.priority;
    for (const auto& c : req.choices) r.forks.push_back(c.id);
    r.client = std::move(req.client);
    r.evict = std::move(*evict);
    if (r.evict) r.evict_policy = make_kv_eviction_policy(r.evict->setting.policy);
    r.forced = std::move(req.forced_output);
    m_total_prompt_tokens += n_prompt;
    if (req.spec.enabled()) init_spec(r, req.spec, *runner);
    if (req.beam_width > 1) init_beam(r, req.beam_width, max_tokens, req.params.ignore_eos);
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
    if (it->second->awaiting_fork) {  // a choice not forked yet: it leaves its parent's list
        for (auto& [pid, p] : m_reqs) std::erase(p->forks, id);
        it->second->awaiting_fork = false;
    } else if (auto g = it->second->beam) {
        if (g->root != id || g->finished) return false;
        for (RequestId b : g->live) m_sched->abort_request(b);
        g->live.clear();
        g->finished = true;
        g->reason = FinishReason::cancelled;
    } else if (!m_sched->abort_request(id)) {
        return false;
    } else if (!it->second->forks.empty()) {
        promote_choice(*it->second);
    }
    release_drafts(id);
    TokenEvent ev;
    ev.finished = true;
    ev.finish_reason = FinishReason::cancelled;
    emit(*it->second, ev);
    republish();
    return true;
}

Result<StepResult> Engine::step() {
    StepResult res;
    const auto t0 = EngineClock::now();
    const double t_start_ms = clock_ms(t0);
    const double draft_ms = propose_drafts();
    const auto t_prop = EngineClock::now();
    res.out = m_sched->schedule();
    const SchedulerOutput& out = res.out;
    const auto t_sched = EngineClock::now();
    res.schedule_ms = ms_between(t_prop, t_sched);
    res.record.draft_ms = draft_ms;
    if (out.empty()) return res;
    res.ran = true;
    for (const auto& ch : out.chunks) {
        auto& m = m_reqs.at(ch.id)->metrics;
        if (m.first_scheduled_ms < 0) m.first_scheduled_ms = t_start_ms;
    }

    move_kv_blocks(out);
    const auto t_kv = EngineClock::now();
    res.kv_move_ms = ms_between(t_sched, t_kv);

    StepTokens tokens;
    eviction_preempted(out);
    KVS_RETURN_IF_ERROR(build_batch(out, tokens));
    eviction_batch(out);
    KVS_RETURN_IF_ERROR(m_forward->forward(m_buf->batch, &m_buf->logits));
    eviction_collect_mass(out);
    collect_prompt_logprobs(out, tokens);
    const auto t_fwd = EngineClock::now();
    res.forward_ms = ms_between(t_kv, t_fwd);
    if (m_op_model) {  // the roofline: this pass's op groups, counted and timed
        std::vector<ChunkShape> shapes;
        for (const auto& ch : out.chunks) shapes.push_back({ch.start_pos, ch.num_tokens});
        OpStepRecord rec = op_costs(*m_op_model, shapes, static_cast<int>(m_buf->batch.logit_rows.size()));
        rec.step = out.step;
        rec.prefill = out.num_prefill_tokens > 0;
        rec.decode_tokens = rec.n_tokens - out.num_prefill_tokens;
        for (size_t k = 0; k < rec.ops.size(); ++k) rec.ops[k].ms = m_forward->op_ms()[k];
        keep_op_step(m_op_steps, rec);
    }

    const size_t n_scheduled = out.chunks.size();
    sample_chunks(res.out, tokens, res);  // may add the chunks of choices forked this step
    cut_at_stops(out, tokens);
    res.finished = m_sched->update(out, tokens.emitted);  // length limits
    advance_beams(tokens.groups, &res.finished);
    stream(out, tokens, res);
    res.out.chunks.resize(n_scheduled);  // what ran, for the telemetry

    const auto t_end = EngineClock::now();
    res.sample_ms = ms_between(t_fwd, t_end);
    res.total_ms = ms_between(t0, t_end);
    charge_draft_time(out, draft_ms);
    publish(res, t_start_ms);
    KVS_RETURN_IF_ERROR(evict_over_budget(res.out));
    return res;
}

// KV block moves, in the order the scheduler's contract gives. KV tiers: evicted cached
// blocks are read before anything writes a block, tier hits are written after the swap-outs
// read theirs, and the spilled bytes go to the tiers last (so no hit of this step is pushed
// out before it was copied).
void Engine::move_kv_blocks(const SchedulerOutput& out) {
    const int64_t be = m_kv->block_bytes();
    std::vector<TierBytes> spilled;
    if (m_tiers)
        for (const TierSpill& s : out.tier_spills) {
            auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(be));
            m_kv->read_block(s.block_id, bytes->data());
            spilled.push_back(std::move(bytes));
        }
    for (const SwapOp& s : out.swap_out) m_kv->read_block(s.device_block, m_host_blocks.data() + s.host_block * be);
    for (const TierLoad& l : out.tier_loads)
        if (l.bytes && static_cast<int64_t>(l.bytes->size()) == be) m_kv->write_block(l.block_id, l.bytes->data());
    for (const SwapOp& s : out.swap_in) m_kv->write_block(s.device_block, m_host_blocks.data() + s.host_block * be);
    for (const CopyOp& c : out.copies) m_kv->copy_block(c.src_block, c.dst_block);
    for (const CopyOp& c : out.swa_copies) m_kv_swa->copy_block(c.src_block, c.dst_block);
    for (size_t i = 0; i < spilled.size(); ++i) m_tiers->spill(out.tier_spills[i].key, std::move(spilled[i]));
}

// One batch: chunk i's tokens use row i of block_tables. A chunk that samples wants the
// logits of its last token, a speculative one those of every token (row j verifies draft
// j + 1; the last row gives the bonus token).
Status Engine::build_batch(const SchedulerOutput& out, StepTokens& t) {
    ForwardBatch& b = m_buf->batch;
    b.tokens.clear();
    b.positions.clear();
    b.token_seq.clear();
    b.block_tables.clear();
    b.swa_block_tables.clear();
    b.logit_rows.clear();
    b.adapters.clear();
    b.token_adapter.clear();
    b.n_seqs = static_cast<int>(out.chunks.size());
    b.max_blocks_per_seq = 1;
    for (const auto& ch : out.chunks)
        b.max_blocks_per_seq =
            std::max<int>(b.max_blocks_per_seq, static_cast<int>(m_kv_mgr->block_table(ch.id).size()));
    b.block_tables.assign(static_cast<size_t>(b.n_seqs) * b.max_blocks_per_seq, -1);
    if (m_kv_swa) b.swa_block_tables.assign(b.block_tables.size(), -1);  // local layers: -1 = freed
    t.first_logit.assign(out.chunks.size(), -1);
    t.prompt_row.assign(out.chunks.size(), -1);
    for (int i = 0; i < b.n_seqs; ++i) {
        const ScheduledChunk& ch = out.chunks[static_cast<size_t>(i)];
        const SchedRequest* r = m_sched->request(ch.id);
        if (!r) return Status::error("scheduled request " + std::to_string(ch.id) + " is unknown");
        const auto& table = m_kv_mgr->block_table(ch.id);
        std::copy(table.begin(), table.end(),
                  b.block_tables.begin() + static_cast<ptrdiff_t>(i) * b.max_blocks_per_seq);
        if (m_kv_swa) {
            const auto& local = m_kv_mgr->swa_block_table(ch.id);  // entry for entry beside `table`
            std::copy_n(local.begin(), std::min(local.size(), table.size()),
                        b.swa_block_tables.begin() + static_cast<ptrdiff_t>(i) * b.max_blocks_per_seq);
        }
        // LoRA: each token names its request's adapter (an index into b.adapters, -1: none).
        int32_t adapter = -1;
        if (const LoraAdapter* a = m_reqs.at(ch.id)->adapter.get()) {
            auto it = std::find(b.adapters.begin(), b.adapters.end(), a);
            adapter = static_cast<int32_t>(it - b.adapters.begin());
            if (it == b.adapters.end()) b.adapters.push_back(a);
            b.token_adapter.resize(b.tokens.size(), -1);  // earlier tokens: none
        }
        for (int p = ch.start_pos; p < ch.start_pos + ch.num_tokens; ++p) {
            b.tokens.push_back(r->token_at(p));
            b.positions.push_back(p);
            b.token_seq.push_back(i);
            if (!b.adapters.empty()) b.token_adapter.push_back(adapter);
        }
        // Prompt log-probabilities: the logits of every prompt position but the last (that one
        // samples), each giving the next prompt token's.
        const int lp_end = std::min(ch.start_pos + ch.num_tokens, r->num_prompt() - 1);
        if (r->skip_prefix_cache && ch.start_pos < lp_end && m_reqs.at(ch.id)->params.prompt_logprobs >= 0 &&
            !m_reqs.at(ch.id)->prompt_lps_sent) {
            t.prompt_row[static_cast<size_t>(i)] = static_cast<int>(b.logit_rows.size());
            const int first = b.n_tokens() - ch.num_tokens;
            for (int p = ch.start_pos; p < lp_end; ++p) b.logit_rows.push_back(first + p - ch.start_pos);
        }
        if (ch.sample) {
            t.first_logit[static_cast<size_t>(i)] = static_cast<int>(b.logit_rows.size());
            for (int j = ch.num_spec; j >= 0; --j) b.logit_rows.push_back(b.n_tokens() - 1 - j);
        }
    }
    return Status::ok();
}

// The prompt log-probabilities of the rows build_batch asked for (SamplingParams::prompt_logprobs):
// row p of a prompt gives the log-probability of prompt token p + 1 (raw logits, like logprobs).
void Engine::collect_prompt_logprobs(const SchedulerOutput& out, const StepTokens& t) {
    const int n_vocab = m_model->config.n_vocab;
    for (size_t i = 0; i < out.chunks.size() && i < t.prompt_row.size(); ++i) {
        if (t.prompt_row[i] < 0) continue;
        const ScheduledChunk& ch = out.chunks[i];
        Req& r = *m_reqs.at(ch.id);
        const SchedRequest* s = m_sched->request(ch.id);
        const int n_prompt = s->num_prompt();
        r.prompt_lps.resize(static_cast<size_t>(n_prompt - 1));  // [n_prompt - 1] entry p: token p + 1
        const int end = std::min(ch.start_pos + ch.num_tokens, n_prompt - 1);
        for (int p = ch.start_pos; p < end; ++p) {
            const float* row = m_buf->logits.data() + static_cast<size_t>(t.prompt_row[i] + p - ch.start_pos) * n_vocab;
            r.prompt_lps[static_cast<size_t>(p)] =
                token_logprobs(row, n_vocab, s->prompt[static_cast<size_t>(p + 1)], r.params.prompt_logprobs);
        }
    }
}

// Samples (or verifies, or collects for its beam group) each request that reached its
// last token.
void Engine::sample_chunks(SchedulerOutput& out, StepTokens& t, StepResult& res) {
    const int n_vocab = m_model->config.n_vocab;
    const size_t n_chunks = out.chunks.size();  // forked choices' chunks come after these
    t.emitted.assign(n_chunks, {});
    t.verified.assign(n_chunks, std::nullopt);
    t.logprobs.assign(n_chunks, {});
    for (size_t i = 0; i < n_chunks; ++i) {
        if (t.first_logit[i] < 0) continue;
        const ScheduledChunk ch = out.chunks[i];  // a copy: forks append to out.chunks
        Req& r = *m_reqs.at(ch.id);
        float* row = m_buf->logits.data() + static_cast<size_t>(t.first_logit[i]) * n_vocab;
        const size_t n_rows = static_cast<size_t>(ch.num_spec) + 1;
        const bool forking = !r.beam && !r.forks.empty() && ch.num_spec == 0;
        const bool want_lp = !r.beam && r.params.logprobs >= 0;
        if (forking || want_lp) m_buf->raw.assign(row, row + n_rows * static_cast<size_t>(n_vocab));
        if (forking) fork_choices(r, ch, m_buf->raw.data(), out, t);
        if (!r.beam) hold_eog(r, m_sched->request(ch.id)->num_output(), row, ch.num_spec + 1);
        if (r.beam) {  // no token yet: the group decides after the update
            beam_collect(r, row);
            if (std::find(t.groups.begin(), t.groups.end(), r.beam.get()) == t.groups.end())
                t.groups.push_back(r.beam.get());
        } else if (ch.num_spec > 0) {
            t.verified[i] = verify_chunk(r, ch, row, res.forward_ms);
            t.emitted[i] = t.verified[i]->tokens;
            res.record.spec_drafted += ch.num_spec;
            res.record.spec_accepted += static_cast<int>(t.emitted[i].size()) - 1;
            res.record.spec_emitted += static_cast<int>(t.emitted[i].size());
        } else {
            const size_t n_out = static_cast<size_t>(m_sched->request(ch.id)->num_output());
            t.emitted[i] = {n_out < r.forced.size() ? r.forced[n_out] : r.sampler.sample(row, n_vocab, r.history)};
        }
        if (want_lp)
            for (size_t j = 0; j < t.emitted[i].size() && j < n_rows; ++j)
                t.logprobs[i].push_back(token_logprobs(m_buf->raw.data() + j * static_cast<size_t>(n_vocab), n_vocab,
                                                       t.emitted[i][j], r.params.logprobs));
    }
}

// The parent's prompt is computed (its first sample is now): each waiting choice becomes a
// copy-on-write fork of it and draws its first token from the same raw logits with its own
// sampler. Its chunk (the parent's, under its id) is appended so that the update and the
// stream treat it like the parent's. A choice that cannot be forked now runs on its own.
void Engine::fork_choices(Req& parent, const ScheduledChunk& ch, const float* raw, SchedulerOutput& out,
                          StepTokens& t) {
    const int n_vocab = m_model->config.n_vocab;
    const std::vector<RequestId> forks = std::move(parent.forks);
    parent.forks.clear();
    for (RequestId cid : forks) {
        Req& c = *m_reqs.at(cid);
        c.awaiting_fork = false;
        c.metrics.first_scheduled_ms = parent.metrics.first_scheduled_ms;
        if (!m_sched->fork_request(parent.id, cid)) {  // max_num_seqs running: a request of its own
            if (Status st = m_sched->add_request(cid, c.history, c.max_tokens, c.priority); !st) {
                TokenEvent ev;
                ev.finished = true;
                ev.finish_reason = FinishReason::rejected;
                ev.error = st.message();
                emit(c, ev);
                continue;
            }
            if (c.adapter) m_kv_mgr->set_cache_salt(cid, c.adapter->cache_salt);
            continue;
        }
        m_buf->scratch.assign(raw, raw + n_vocab);
        float* row = m_buf->scratch.data();
        hold_eog(c, 0, row, 1);
        const int32_t tok = c.sampler.sample(row, n_vocab, c.history);
        ScheduledChunk cc = ch;
        cc.id = cid;
        out.chunks.push_back(cc);
        t.emitted.push_back({tok});
        t.verified.push_back(std::nullopt);
        t.logprobs.emplace_back();
        if (c.params.logprobs >= 0) t.logprobs.back().push_back(token_logprobs(raw, n_vocab, tok, c.params.logprobs));
    }
}

// The parent was cancelled before its prompt was computed: the first waiting choice takes
// the prompt over (its full blocks stay in the prefix cache) with the others waiting on it.
void Engine::promote_choice(Req& parent) {
    std::vector<RequestId> forks = std::move(parent.forks);
    parent.forks.clear();
    Req& heir = *m_reqs.at(forks.front());
    heir.awaiting_fork = false;
    forks.erase(forks.begin());
    if (Status st = m_sched->add_request(heir.id, heir.history, heir.max_tokens, heir.priority); !st) {
        forks.insert(forks.begin(), heir.id);
        for (RequestId id : forks) {
            m_reqs.at(id)->awaiting_fork = false;
            TokenEvent ev;
            ev.finished = true;
            ev.finish_reason = FinishReason::rejected;
            ev.error = st.message();
            emit(*m_reqs.at(id), ev);
        }
        return;
    }
    if (heir.adapter) m_kv_mgr->set_cache_salt(heir.id, heir.adapter->cache_salt);
    heir.forks = std::move(forks);
}

void Engine::hold_eog(const Req& r, int n_output, float* logits, int n_rows) const {
    if (r.params.ignore_eos) return;
    const int n_vocab = m_model->config.n_vocab;
    for (int j = 0; j < n_rows && n_output + j < r.params.min_new_tokens; ++j)
        for (int32_t id : m_eog_ids) logits[static_cast<size_t>(j) * n_vocab + static_cast<size_t>(id)] = -INFINITY;
}

// Text first: an end-of-generation token or a stop string ends a chunk's tokens there
// (and max_tokens cuts what a speculative chunk produced).
void Engine::cut_at_stops(const SchedulerOutput& out, StepTokens& t) {
    t.events.assign(out.chunks.size(), {});
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        std::vector<int32_t>& emitted = t.emitted[i];
        if (emitted.empty()) continue;
        Req& r = *m_reqs.at(out.chunks[i].id);
        const SchedRequest* s = m_sched->request(r.id);
        const size_t room = static_cast<size_t>(std::max(0, s->max_tokens - s->num_output()));
        if (emitted.size() > room) emitted.resize(room);
        for (size_t j = 0; j < emitted.size(); ++j) {
            const TextStep step = r.text.push(emitted[j]);
            TokenEvent ev;
            ev.token = emitted[j];
            ev.text = step.text;
            if (j < t.logprobs[i].size()) ev.logprobs = std::move(t.logprobs[i][j]);
            if (step.eog || step.stopped) {
                ev.finished = true;
                ev.finish_reason = FinishReason::stop;
                if (!step.stopped) ev.text += r.text.flush();
                t.events[i].push_back(std::move(ev));
                emitted.resize(j + 1);
                break;
            }
            t.events[i].push_back(std::move(ev));
        }
        if (t.verified[i]) record_fates(r, out.chunks[i], *t.verified[i], emitted.size(), out.step);
        else if (r.spec.enabled() && !emitted.empty())
            r.add_fate({emitted[0], TokenFate::plain, 0, out.step});
    }
}

// Streams each chunk's events: the request's history and token times (its RequestMetrics:
// the one measurement of TTFT / TPOT), the end of a request by a stop or its length.
void Engine::stream(const SchedulerOutput& out, StepTokens& t, StepResult& res) {
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        if (t.events[i].empty()) continue;
        Req& r = *m_reqs.at(out.chunks[i].id);
        const SchedRequest* s = m_sched->request(r.id);
        for (size_t j = 0; j < t.events[i].size(); ++j) {
            TokenEvent& ev = t.events[i][j];
            if (r.params.watermark && !r.history.empty())
                ev.green = r.sampler.is_green(r.history.back(), ev.token, m_model->config.n_vocab) ? 1 : 0;
            if (ev.green == 1) ++r.n_green;
            if (!r.prompt_lps_sent && !r.prompt_lps.empty()) {  // the first token carries the prompt's
                ev.prompt_logprobs = std::move(r.prompt_lps);
                r.prompt_lps.clear();
                r.prompt_lps_sent = true;
            }
            r.history.push_back(ev.token);
            const double now_ms = ms_since_start();
            if (r.metrics.first_token_ms < 0) r.metrics.first_token_ms = now_ms;
            r.metrics.token_times_ms.push_back(now_ms);
            r.metrics.n_output = static_cast<int>(r.metrics.token_times_ms.size());
            ++m_total_generated;
            const bool last = j + 1 == t.events[i].size();
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
}

double Engine::ms_since_start() const { return clock_ms(EngineClock::now()); }

double Engine::clock_ms(EngineClock::time_point t) const {
    const double held = m_held_ms + (m_clock_held ? ms_between(m_hold_t0, t) : 0.0);
    return ms_between(m_t0, t) - held;
}

void Engine::hold_clock(bool held) {
    if (held == m_clock_held) return;
    const auto now = EngineClock::now();
    if (held) {
        m_hold_t0 = now;
    } else {
        m_held_ms += ms_between(m_hold_t0, now);
    }
    m_clock_held = held;
}

EngineSnapshot Engine::snapshot(const StepRecord& step) const {
    EngineSnapshot s;
    s.step = step;
    s.block_size = m_kv_mgr->block_size();
    s.max_model_len = m_max_model_len;
    s.blocks = block_views(*m_kv_mgr);
    s.n_layers = m_model->config.n_layer;
    if (m_kv_swa) s.n_local_layers = m_kv_swa->n_layer();
    s.n_host_blocks = m_sched->config().n_host_blocks;
    std::vector<std::pair<RequestId, std::vector<int32_t>>> host_tables;
    for (const SchedRequest* r : m_sched->requests()) {
        const auto host = m_sched->host_blocks(r->id);
        s.requests.push_back(request_view(*r, *m_kv_mgr, static_cast<int>(host.size())));
        eviction_view(s.requests.back());
        if (auto it = m_reqs.find(r->id); it != m_reqs.end()) {
            if (it->second->adapter) s.requests.back().adapter = it->second->adapter->name;
            s.requests.back().client = it->second->client;
            if (it->second->params.watermark) s.requests.back().n_green = it->second->n_green;
        }
        if (!host.empty()) host_tables.emplace_back(r->id, host);
    }
    s.host_blocks = host_block_views(host_tables);
    s.kv_stats = m_kv_mgr->stats();
    if (m_tiers) s.kv_tiers = m_tiers->stats();
    const SchedulerCounters& c = m_sched->counters();
    s.total_preemptions = c.preemptions;
    s.total_prompt_tokens = m_total_prompt_tokens;
    s.total_generated_tokens = m_total_generated;
    s.total_finished = m_total_finished;
    s.total_swap_out_blocks = c.swapped_out_blocks;
    s.total_swap_in_blocks = c.swapped_in_blocks;
    s.total_cow_copies = c.cow_copies;
    s.prefix_hit_rate = prefix_hit_rate(s.kv_stats);
    s.op_steps = m_op_steps;
    fill_local_pool(s, *m_kv_mgr);
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
    count_statuses(*m_sched, rec);
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
        fill_local_counts(rec, *m_kv_mgr);
        m_ring->publish_step(rec);
    }
    m_last_record = rec;
    m_published = true;
}

void Engine::republish() {
    if (!m_published || m_snapshot_every <= 0) return;
    StepRecord rec = m_last_record;
    rec.n_running = rec.n_waiting = rec.n_swapped = 0;
    count_statuses(*m_sched, rec);
    EngineSnapshot snap = snapshot(rec);
    fill_block_counts(snap.step, snap.blocks, snap.block_size);
    m_ring->publish(std::move(snap));
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

const RequestMetrics* Engine::request_metrics(RequestId id) const {
    auto it = m_reqs.find(id);
    return it == m_reqs.end() ? nullptr : &it->second->metrics;
}

void Engine::remove_finished(size_t keep_last) {
    std::vector<RequestId> done;
    for (const auto& [id, r] : m_reqs) {
        const SchedRequest* s = m_sched->request(id);
        const bool group_live = r->beam && !r->beam->finished;  // the root reports at the end
        if (r->awaiting_fork) continue;                         // a choice not forked yet
        if (!group_live && (!s || s->status == RequestStatus::finished)) done.push_back(id);
    }
    if (done.size() <= keep_last) return;
    std::sort(done.begin(), done.end());
    done.resize(done.size() - keep_last);  // the oldest ones (ids grow with submission)
    for (RequestId id : done) {
        if (m_sched->request(id) && !m_sched->remove_request(id)) continue;  // a static batch seat: later
        m_kv_mgr->forget_salt(id);
        auto it = m_reqs.find(id);
        if (it->second->metrics.finish_ms >= 0 && (!it->second->beam || it->second->beam->root == id))
            m_removed_metrics.push_back(it->second->metrics);
        release_drafts(id);
        m_reqs.erase(it);
    }
}

}  // namespace kvs
