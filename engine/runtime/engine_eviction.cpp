// KV eviction in the batching engine (engine/kv_cache/kv_eviction.h): a request with
// GenerationRequest::kv_eviction keeps at most its budget of cached tokens. Each step its
// chunk's tokens go to cache indices after the entries it holds (RoPE still at their
// logical positions, or at the cache index under StreamingLLM), the attention mass its
// policy wants comes back from the forward pass, and after the step the policy shrinks the
// cache: entries moved or merged (kv_compaction), tail blocks given back
// (KVCacheManager::compact), the scheduler told how many tokens lost their entry.
#include <algorithm>
#include <cassert>

#include "engine/kv_cache/kv_compaction.h"
#include "engine/runtime/engine_request.h"

namespace kvs {

Result<std::unique_ptr<KvEvictionState>> Engine::make_eviction(const KvEvictionSetting& s, int n_prompt, int max_tokens,
                                                               bool beams_or_spec) const {
    using R = Result<std::unique_ptr<KvEvictionState>>;
    if (!s.enabled()) return std::unique_ptr<KvEvictionState>();
    KVS_RETURN_IF_ERROR(check_kv_eviction(s));
    if (beams_or_spec)
        return R::error("kv_eviction '" + s.describe() +
                        "' does not go with beam search, speculative decoding or parallel choices (n > 1)");
    if (!m_backend->host_visible() || !m_backend->supports_attention_mass())
        return R::error("kv_eviction '" + s.describe() + "' runs on the CPU backend only, not on " + m_backend->name());
    if (m_model->config.sliding_window > 0)
        return R::error("kv_eviction '" + s.describe() + "': model " + m_model->config.name +
                        " has sliding-window layers, whose windows count cache positions");
    auto st = std::make_unique<KvEvictionState>();
    st->setting = s;
    st->budget = s.budget_for(n_prompt + max_tokens);
    st->n_prompt = n_prompt;
    if (s.policy == KvEvictPolicy::streaming && st->budget <= s.sinks)
        return R::error("kv_eviction '" + s.describe() + "': a budget of " + std::to_string(st->budget) +
                        " tokens leaves no room after " + std::to_string(s.sinks) + " attention sinks");
    if (st->budget < 2)
        return R::error("kv_eviction '" + s.describe() + "': a budget of " + std::to_string(st->budget) +
                        " tokens is under 2");
    return st;
}

// A request preempted by recompute starts over with an empty cache.
void Engine::eviction_preempted(const SchedulerOutput& out) {
    for (RequestId id : out.preempted) {
        auto it = m_reqs.find(id);
        const SchedRequest* s = m_sched->request(id);
        if (it != m_reqs.end() && it->second->evict && s && s->status == RequestStatus::waiting)
            it->second->evict->reset();
    }
}

// After build_batch: evicting requests' tokens get their cache indices (and, under
// StreamingLLM, their RoPE positions) and attention-mass rows; their entries are added to
// the policy's state.
void Engine::eviction_batch(const SchedulerOutput& out) {
    ForwardBatch& b = m_buf->batch;
    b.kv_positions.clear();
    b.mass_rows.clear();
    b.n_mass_rows = 0;
    b.mass_stride = 0;
    m_buf->evict_mass_row.assign(out.chunks.size(), -1);
    bool any = false;
    for (const auto& ch : out.chunks) any = any || m_reqs.at(ch.id)->evict;
    if (!any) return;
    b.kv_positions = b.positions;
    b.mass_rows.assign(b.positions.size(), -1);
    size_t off = 0;
    for (size_t i = 0; i < out.chunks.size(); off += static_cast<size_t>(out.chunks[i].num_tokens), ++i) {
        const ScheduledChunk& ch = out.chunks[i];
        Req& r = *m_reqs.at(ch.id);
        if (!r.evict) continue;
        KvEvictionState& st = *r.evict;
        const int kv_len = m_kv_mgr->num_tokens(ch.id);  // after this step's allocation
        const int kv0 = kv_len - ch.num_tokens;
        if (!ch.padding) {
            assert(kv0 == st.n_entries());
            for (int j = 0; j < ch.num_tokens; ++j) {
                st.pos.push_back(ch.start_pos + j);
                st.span.push_back(1);
                st.mass.push_back(0.0f);
            }
            st.peak_entries = std::max(st.peak_entries, st.n_entries());
        }
        bool wants = false;
        for (int j = 0; j < ch.num_tokens; ++j) {
            const size_t t = off + static_cast<size_t>(j);
            b.kv_positions[t] = kv0 + j;
            if (st.setting.policy == KvEvictPolicy::streaming) b.positions[t] = kv0 + j;  // positions inside the cache
            if (!ch.padding && r.evict_policy->wants_mass(st, ch.start_pos + j)) {
                b.mass_rows[t] = b.n_mass_rows;
                wants = true;
            }
        }
        if (wants) {
            m_buf->evict_mass_row[i] = b.n_mass_rows++;
            b.mass_stride = std::max(b.mass_stride, kv_len);
        }
    }
    if (b.n_mass_rows == 0) b.mass_rows.clear();
}

// After the forward pass: each evicting chunk's attention mass joins its entries' scores.
void Engine::eviction_collect_mass(const SchedulerOutput& out) {
    const std::vector<float>& mass = m_forward->attn_mass();
    const ForwardBatch& b = m_buf->batch;
    if (mass.empty()) return;
    for (size_t i = 0; i < out.chunks.size() && i < m_buf->evict_mass_row.size(); ++i) {
        const int row = m_buf->evict_mass_row[i];
        if (row < 0) continue;
        KvEvictionState& st = *m_reqs.at(out.chunks[i].id)->evict;
        const float* m = mass.data() + static_cast<size_t>(row) * static_cast<size_t>(b.mass_stride);
        const int n = std::min(st.n_entries(), b.mass_stride);
        for (int e = 0; e < n; ++e) st.mass[static_cast<size_t>(e)] += m[e];
    }
}

// After the step: every running evicting request over its budget is shrunk by its policy.
Status Engine::evict_over_budget(const SchedulerOutput& out) {
    const int bs = m_kv_mgr->block_size();
    for (const auto& ch : out.chunks) {
        auto it = m_reqs.find(ch.id);
        if (it == m_reqs.end() || !it->second->evict || ch.padding) continue;
        Req& r = *it->second;
        KvEvictionState& st = *r.evict;
        const SchedRequest* s = m_sched->request(ch.id);
        if (!s || s->status != RequestStatus::running) continue;  // finished: its blocks are gone
        const bool prompt_done = s->num_computed_tokens >= s->num_prompt();
        if (r.evict_policy->should_evict(st, prompt_done)) {
            const int target = std::min(st.budget, r.evict_policy->target(st, bs));
            const CompactionPlan plan = r.evict_policy->plan(st, target);
            KVS_RETURN_IF_ERROR(apply_compaction(*m_kv, m_backend->host_visible(), m_model->config,
                                                 m_kv_mgr->block_table(ch.id), plan));
            const int before = st.n_entries();
            apply_plan_to_state(plan, st);
            auto freed = m_kv_mgr->compact(ch.id, st.n_entries());
            if (!freed) return freed.status();
            st.n_freed_blocks += *freed;
            m_sched->note_evicted(ch.id, before - st.n_entries());
        }
        if (st.setting.policy == KvEvictPolicy::snapkv && prompt_done) st.snapped = true;
        // The invariant: the cache holds what the state lists, and no more than the budget
        // (SnapKV from the end of its prefill on).
        assert(m_kv_mgr->num_tokens(ch.id) == st.n_entries());
        assert(st.n_entries() <= st.budget || (st.setting.policy == KvEvictPolicy::snapkv && !prompt_done));
    }
    return Status::ok();
}

void Engine::eviction_view(RequestView& v) const {
    auto it = m_reqs.find(v.id);
    if (it == m_reqs.end() || !it->second->evict) return;
    const KvEvictionState& st = *it->second->evict;
    v.kv_evict_policy = st.setting.describe();
    v.kv_budget = st.budget;
    v.kv_evicted_tokens = st.n_evicted;
    v.kv_freed_blocks = st.n_freed_blocks;
    if (!v.block_ids.empty()) {
        v.kv_entry_pos = st.pos;
        v.kv_entry_span = st.span;
    }
}

const KvEvictionState* Engine::kv_eviction(RequestId id) const {
    auto it = m_reqs.find(id);
    return it == m_reqs.end() ? nullptr : it->second->evict.get();
}

}  // namespace kvs
