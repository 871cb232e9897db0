#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "engine/kv_cache/swap_space.h"

namespace kvs {

struct Scheduler::Impl {
    std::map<RequestId, SchedRequest> reqs;  // every known request
    std::vector<RequestId> running;          // holds device blocks
    std::vector<RequestId> waiting;          // waiting or swapped, in (priority, arrival) order
    std::unordered_map<RequestId, std::vector<int32_t>> host_tables;  // swapped: host block per device block
    SwapSpace host{0};
    int64_t next_arrival = 0;
    int64_t step = 0;
    std::vector<RequestId> static_batch;  // static_batch policy: the batch in flight
    std::vector<RequestId> padded;        // finished members still holding their seat

    bool before(RequestId a, RequestId b) const {
        const SchedRequest& x = reqs.at(a);
        const SchedRequest& y = reqs.at(b);
        if (x.priority != y.priority) return x.priority < y.priority;
        if (x.arrival != y.arrival) return x.arrival < y.arrival;
        return a < b;
    }
    void insert_waiting(RequestId id) {
        auto it = std::lower_bound(waiting.begin(), waiting.end(), id,
                                   [&](RequestId a, RequestId b) { return before(a, b); });
        waiting.insert(it, id);
    }
    static void erase(std::vector<RequestId>& v, RequestId id) {
        auto it = std::find(v.begin(), v.end(), id);
        if (it != v.end()) v.erase(it);
    }
};

Scheduler::Scheduler(const SchedulerConfig& config, KVCacheManager& kv)
    : m_config(config), m_kv(kv), m_impl(std::make_unique<Impl>()) {
    m_impl->host = SwapSpace(std::max(0, config.n_host_blocks));
}

Scheduler::~Scheduler() = default;

Status Scheduler::add_request(RequestId id, std::vector<int32_t> prompt, int max_tokens, int priority) {
    ++m_counters.rejected;  // undone below when accepted
    const std::string who = "request " + std::to_string(id) + ": ";
    if (m_impl->reqs.count(id)) return Status::error(who + "the id is already in use");
    if (prompt.empty()) return Status::error(who + "the prompt is empty");
    if (max_tokens < 1) return Status::error(who + "max_tokens must be at least 1, got " + std::to_string(max_tokens));
    const int n_prompt = static_cast<int>(prompt.size());
    if (n_prompt + max_tokens > m_config.max_model_len)
        return Status::error(who + "prompt (" + std::to_string(n_prompt) + " tokens) + max_tokens (" +
                             std::to_string(max_tokens) + ") is over the context of " +
                             std::to_string(m_config.max_model_len) + " tokens");
    const int bs = m_kv.block_size();
    // The last sampled token never gets KV: prompt + max_tokens - 1 tokens at most.
    const int blocks = (n_prompt + max_tokens - 1 + bs - 1) / bs;
    if (blocks > m_kv.n_blocks())
        return Status::error(
            who + "needs " + std::to_string(blocks) + " KV blocks for " + std::to_string(n_prompt + max_tokens - 1) +
            " tokens (" + std::to_string(n_prompt) + " prompt + " + std::to_string(max_tokens) +
            " output, the last of which never gets KV) in blocks of " + std::to_string(bs) +
            ", but the whole pool holds " + std::to_string(m_kv.n_blocks()) + " blocks: it can never run");
    if (const SlidingWindowBlocks* swa = m_kv.sliding_window()) {
        const int local = std::min(blocks, swa->max_blocks_per_request(m_config.max_num_batched_tokens));
        if (local > swa->n_blocks())
            return Status::error(who + "needs up to " + std::to_string(local) +
                                 " blocks of the sliding-window layers' pool at once (a window of " +
                                 std::to_string(swa->window()) + " tokens and a step of " +
                                 std::to_string(m_config.max_num_batched_tokens) + "), but that pool holds " +
                                 std::to_string(swa->n_blocks()) + ": it can never run");
    }
    --m_counters.rejected;
    SchedRequest r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.priority = priority;
    r.arrival = m_impl->next_arrival++;
    m_impl->reqs.emplace(id, std::move(r));
    m_impl->insert_waiting(id);
    return Status::ok();
}

void Scheduler::finish_request(RequestId id, FinishReason why) {
    auto it = m_impl->reqs.find(id);
    if (it == m_impl->reqs.end() || it->second.status == RequestStatus::finished) return;
    const bool keeps_seat =
        m_config.policy == BatchingPolicy::static_batch && why != FinishReason::cancelled &&
        it->second.status == RequestStatus::running &&
        std::find(m_impl->static_batch.begin(), m_impl->static_batch.end(), id) != m_impl->static_batch.end();
    if (keeps_seat) m_impl->padded.push_back(id);  // blocks freed when the batch ends
    else
        m_kv.free(id);
    const bool batch_live = std::any_of(m_impl->static_batch.begin(), m_impl->static_batch.end(), [&](RequestId b) {
        auto bt = m_impl->reqs.find(b);
        return b != id && bt != m_impl->reqs.end() && bt->second.status != RequestStatus::finished;
    });
    if (!batch_live) {  // the last member finished: every seat is free
        for (RequestId p : m_impl->padded) m_kv.free(p);
        m_impl->padded.clear();
    }
    if (auto h = m_impl->host_tables.find(id); h != m_impl->host_tables.end()) {
        m_impl->host.release(h->second);
        m_impl->host_tables.erase(h);
    }
    Impl::erase(m_impl->running, id);
    Impl::erase(m_impl->waiting, id);
    it->second.status = RequestStatus::finished;
    it->second.finish_reason = why;
}

bool Scheduler::abort_request(RequestId id) {
    auto it = m_impl->reqs.find(id);
    if (it == m_impl->reqs.end() || it->second.status == RequestStatus::finished) return false;
    finish_request(id, FinishReason::cancelled);
    return true;
}

Status Scheduler::append_token(RequestId id, int32_t token) {
    auto it = m_impl->reqs.find(id);
    if (it == m_impl->reqs.end() || it->second.status != RequestStatus::running)
        return Status::error("append_token: request " + std::to_string(id) + " is not running");
    SchedRequest& r = it->second;
    r.output.push_back(token);
    if (r.num_output() >= r.max_tokens || r.num_tokens() >= m_config.max_model_len)
        finish_request(id, FinishReason::length);
    return Status::ok();
}

Status Scheduler::fork_request(RequestId parent, RequestId child) {
    auto it = m_impl->reqs.find(parent);
    if (it == m_impl->reqs.end() || it->second.status != RequestStatus::running)
        return Status::error("fork_request: parent " + std::to_string(parent) + " is not running");
    if (m_impl->reqs.count(child)) return Status::error("fork_request: id " + std::to_string(child) + " is in use");
    if (static_cast<int>(m_impl->running.size()) >= m_config.max_num_seqs)
        return Status::error("fork_request: " + std::to_string(m_impl->running.size()) +
                             " requests are running, max_num_seqs is " + std::to_string(m_config.max_num_seqs));
    KVS_RETURN_IF_ERROR(m_kv.fork(parent, child));
    SchedRequest c = it->second;  // same tokens, same place in line
    c.id = child;
    m_impl->reqs.emplace(child, std::move(c));
    m_impl->running.push_back(child);
    return Status::ok();
}

void Scheduler::note_evicted(RequestId id, int n) {
    auto it = m_impl->reqs.find(id);
    if (it != m_impl->reqs.end()) it->second.num_evicted += n;
}

bool Scheduler::remove_request(RequestId id) {
    auto it = m_impl->reqs.find(id);
    if (it == m_impl->reqs.end()) return false;
    if (it->second.status != RequestStatus::finished) finish_request(id, FinishReason::cancelled);
    // A finished member of a static batch keeps its seat until the batch ends.
    if (std::find(m_impl->padded.begin(), m_impl->padded.end(), id) != m_impl->padded.end()) return false;
    m_impl->reqs.erase(it);
    return true;
}

SchedulerOutput Scheduler::schedule() {
    Impl& im = *m_impl;
    SchedulerOutput out;
    out.step = im.step++;
    ++m_counters.steps;
    out.token_budget = m_config.max_num_batched_tokens;
    int budget = m_config.max_num_batched_tokens;
    std::unordered_map<RequestId, CopyOp> copies;  // one per request at most per step
    std::vector<RequestId> scheduled;

    // Preempts the least urgent running request that is not yet scheduled this step.
    auto preempt = [&](RequestId victim) {
        SchedRequest& v = im.reqs.at(victim);
        v.spec_tokens.clear();
        Impl::erase(im.running, victim);
        // A copy queued for it this step is dropped: its destination is never filled, so a
        // swap-out reads the copy's source instead (swap-outs run before anything writes).
        std::optional<CopyOp> dropped;
        if (auto c = copies.find(victim); c != copies.end()) dropped = c->second;
        copies.erase(victim);
        const auto& table = m_kv.block_table(victim);
        std::optional<std::vector<int32_t>> host;
        if (m_config.preemption == PreemptionMode::swap && !m_kv.sliding_window())
            host = im.host.allocate(static_cast<int>(table.size()));
        if (host) {
            for (size_t i = 0; i < table.size(); ++i) {
                const int32_t d = dropped && table[i] == dropped->dst_block ? dropped->src_block : table[i];
                out.swap_out.push_back({d, (*host)[i]});
            }
            m_counters.swapped_out_blocks += static_cast<int64_t>(table.size());
            ++m_counters.swap_outs;
            im.host_tables[victim] = std::move(*host);
            v.status = RequestStatus::swapped;
        } else {  // recompute (also when the host tier is full)
            v.num_computed_tokens = 0;
            v.num_evicted = 0;
            v.status = RequestStatus::waiting;
            ++m_counters.recomputes;
        }
        m_kv.free(victim);
        ++v.num_preemptions;
        ++m_counters.preemptions;
        out.preempted.push_back(victim);
        im.insert_waiting(victim);
    };

    // Static batching under memory pressure: a finished member's seat gives its blocks back
    // before anyone is preempted (it only held them to model the padded batch).
    auto release_seat = [&]() {
        if (im.padded.empty()) return false;
        m_kv.free(im.padded.back());
        im.padded.pop_back();
        return true;
    };

    auto add_chunk = [&](SchedRequest& r, int n, int n_spec = 0) {
        ScheduledChunk ch;
        ch.id = r.id;
        ch.start_pos = r.num_computed_tokens;
        ch.num_tokens = n + n_spec;
        ch.num_spec = n_spec;
        ch.sample = r.num_computed_tokens + n == r.num_tokens();
        ch.is_prefill = !(n == 1 && r.num_output() > 0 && ch.sample);
        (ch.is_prefill ? out.num_prefill_tokens : out.num_decode_tokens) += n + n_spec;
        out.num_spec_tokens += n_spec;
        n += n_spec;
        out.chunks.push_back(ch);
        scheduled.push_back(r.id);
        budget -= n;
    };

    // 1. Running requests, most urgent first.
    std::sort(im.running.begin(), im.running.end(), [&](RequestId a, RequestId b) { return im.before(a, b); });
    for (size_t i = 0; i < im.running.size() && budget > 0;) {
        const RequestId id = im.running[i];
        SchedRequest& r = im.reqs.at(id);
        const int todo = r.num_tokens() - r.num_computed_tokens;
        if (todo <= 0) {  // waiting for the engine (a beam between positions)
            ++i;
            continue;
        }
        const int n = std::min(todo, budget);
        // Drafts ride along a decode: as many as the budget, max_tokens (the target adds
        // one token of its own) and the context leave room for.
        int n_spec = 0;
        if (todo == 1 && r.num_output() > 0)
            n_spec =
                std::max(0, std::min({static_cast<int>(r.spec_tokens.size()), budget - 1,
                                      r.max_tokens - r.num_output() - 1, m_config.max_model_len - r.num_tokens() - 1}));
        r.spec_tokens.resize(static_cast<size_t>(n_spec));
        bool ok = false;
        for (;;) {
            auto prep = m_kv.prepare_append(id);
            bool no_room = prep && prep->no_room;
            if (prep && prep->copy) copies[id] = *prep->copy;
            if (!no_room) {
                auto alloc = m_kv.allocate_slots(id, r.all_tokens(), n, n_spec);
                no_room = !alloc || alloc->no_room;
                if (!no_room) {
                    ok = true;
                    break;
                }
            }
            if (release_seat()) continue;  // static batching: an empty seat's blocks go first
            const RequestId victim = im.running.back();
            preempt(victim);
            if (victim == id) break;
        }
        if (!ok) break;  // it preempted itself: everything after it is gone too
        add_chunk(r, n, n_spec);
        ++i;
    }

    // Static batching: the seats of finished members still cost their token each step.
    for (RequestId id : im.padded) {
        if (budget <= 0) break;
        const SchedRequest& r = im.reqs.at(id);
        ScheduledChunk ch;
        ch.id = id;
        ch.start_pos = r.num_computed_tokens - 1;  // its last token with a KV slot, written again
        ch.num_tokens = 1;
        ch.padding = true;
        out.chunks.push_back(ch);
        ++out.num_padding_tokens;
        --budget;
    }

    // 2. Waiting and swapped requests, when nothing had to be preempted.
    const bool is_static = m_config.policy == BatchingPolicy::static_batch;
    if (is_static) {
        bool batch_live = false;
        for (RequestId id : im.static_batch)
            if (auto it = im.reqs.find(id); it != im.reqs.end() && it->second.status != RequestStatus::finished)
                batch_live = true;
        if (!batch_live) {  // the whole batch is done: the next one is the first waiting requests
            im.static_batch.assign(
                im.waiting.begin(),
                im.waiting.begin() + std::min<size_t>(im.waiting.size(), m_config.static_batch_size));
        }
    }
    auto in_static_batch = [&](RequestId id) {
        return std::find(im.static_batch.begin(), im.static_batch.end(), id) != im.static_batch.end();
    };
    const int max_seqs =
        is_static ? std::min(m_config.max_num_seqs, m_config.static_batch_size) : m_config.max_num_seqs;
    for (size_t wi = 0; out.preempted.empty() && wi < im.waiting.size() && budget > 0 &&
                        static_cast<int>(im.running.size()) < max_seqs;) {
        const RequestId id = im.waiting[wi];
        if (is_static && !in_static_batch(id)) {  // static: nobody joins a batch in flight
            ++wi;
            continue;
        }
        SchedRequest& r = im.reqs.at(id);
        if (r.status == RequestStatus::swapped) {
            const auto& host = im.host_tables.at(id);
            while (static_cast<int>(host.size()) > m_kv.num_free_blocks() && release_seat()) {
            }
            if (static_cast<int>(host.size()) > m_kv.num_free_blocks()) break;
            auto alloc = m_kv.allocate_slots(id, r.all_tokens(), r.num_computed_tokens - r.num_evicted);
            if (!alloc || alloc->no_room) break;
            const auto& table = m_kv.block_table(id);
            for (size_t i = 0; i < host.size(); ++i) out.swap_in.push_back({table[i], host[i]});
            m_counters.swapped_in_blocks += static_cast<int64_t>(host.size());
            im.host.release(host);
            im.host_tables.erase(id);
        } else {
            int n_cached = 0;
            if (r.num_computed_tokens == 0 && !r.skip_prefix_cache) {
                auto hit = m_kv.get_computed_blocks(id, r.all_tokens());
                if (hit) n_cached = *hit;
            }
            int n = r.num_tokens() - n_cached;
            if (n > budget) {
                // Without chunked prefill a prompt waits for a step with room for all of it,
                // unless it is longer than any step's budget (it could never run whole).
                if (!m_config.chunked_prefill && n <= m_config.max_num_batched_tokens) {
                    m_kv.free(id);  // drop the pending prefix hits
                    break;
                }
                n = budget;
            }
            auto alloc = m_kv.allocate_slots(id, r.all_tokens(), n);
            if (alloc && alloc->no_room && release_seat()) continue;  // retry this request with the seat's blocks
            if (!alloc || alloc->no_room) {
                m_kv.free(id);
                break;
            }
            r.num_computed_tokens = n_cached;
            if (r.num_cached_tokens < 0) r.num_cached_tokens = n_cached;
            out.num_prefix_hit_tokens += n_cached;
            out.num_tier_hit_tokens += static_cast<int>(alloc->tier_loads.size()) * m_kv.block_size();
            for (auto& load : alloc->tier_loads) out.tier_loads.push_back(std::move(load));
            r.status = RequestStatus::running;
            im.waiting.erase(im.waiting.begin() + static_cast<ptrdiff_t>(wi));
            im.running.push_back(id);
            add_chunk(r, n);
            continue;
        }
        // Swapped in: its blocks are back; run what it still has to compute.
        r.status = RequestStatus::running;
        im.waiting.erase(im.waiting.begin() + static_cast<ptrdiff_t>(wi));
        im.running.push_back(id);
        const int todo = std::min(r.num_tokens() - r.num_computed_tokens, budget);
        if (todo > 0) {
            auto prep = m_kv.prepare_append(id);  // fresh blocks: never shared
            auto alloc = m_kv.allocate_slots(id, r.all_tokens(), todo);
            if (prep && !prep->no_room && alloc && !alloc->no_room) add_chunk(r, todo);
        }
    }

    for (RequestId id : scheduled)
        if (auto it = copies.find(id); it != copies.end()) out.copies.push_back(it->second);
    out.swa_copies = m_kv.take_swa_copies();
    out.tier_spills = m_kv.take_spills();
    m_counters.cow_copies += static_cast<int64_t>(out.copies.size());
    return out;
}

std::vector<RequestId> Scheduler::update(const SchedulerOutput& out, const std::vector<std::vector<int32_t>>& emitted) {
    std::vector<RequestId> finished;
    for (size_t i = 0; i < out.chunks.size(); ++i) {
        const ScheduledChunk& ch = out.chunks[i];
        auto it = m_impl->reqs.find(ch.id);
        if (it == m_impl->reqs.end() || it->second.status != RequestStatus::running) continue;
        SchedRequest& r = it->second;
        r.spec_tokens.clear();
        const std::vector<int32_t> none;
        const auto& toks = ch.sample && i < emitted.size() ? emitted[i] : none;
        if (toks.empty()) {
            r.num_computed_tokens = ch.start_pos + ch.num_tokens - ch.num_spec;
            if (ch.num_spec > 0) (void)m_kv.truncate(r.id, r.num_computed_tokens);
            continue;
        }
        // Tokens [start_pos, start_pos + size) now have KV: the chunk's first token and the
        // accepted drafts (the last emitted token is new). Only decodes carry drafts.
        r.num_computed_tokens =
            ch.num_spec > 0 ? ch.start_pos + static_cast<int>(toks.size()) : ch.start_pos + ch.num_tokens;
        if (ch.num_spec > 0) (void)m_kv.truncate(r.id, r.num_computed_tokens);
        for (int32_t t : toks) {
            r.output.push_back(t);
            if (r.num_output() >= r.max_tokens || r.num_tokens() >= m_config.max_model_len) {
                finish_request(r.id, FinishReason::length);
                finished.push_back(r.id);
                break;
            }
        }
    }
    return finished;
}

bool Scheduler::set_spec_tokens(RequestId id, std::vector<int32_t> drafts) {
    auto it = m_impl->reqs.find(id);
    if (it == m_impl->reqs.end()) return false;
    SchedRequest& r = it->second;
    if (r.status != RequestStatus::running || r.num_tokens() - r.num_computed_tokens != 1 || r.num_output() == 0) {
        r.spec_tokens.clear();
        return false;
    }
    r.spec_tokens = std::move(drafts);
    return true;
}

bool Scheduler::skip_prefix_cache(RequestId id) {
    auto it = m_impl->reqs.find(id);
    if (it == m_impl->reqs.end()) return false;
    it->second.skip_prefix_cache = true;
    return true;
}

const SchedRequest* Scheduler::request(RequestId id) const {
    auto it = m_impl->reqs.find(id);
    return it == m_impl->reqs.end() ? nullptr : &it->second;
}

std::vector<const SchedRequest*> Scheduler::requests() const {
    std::vector<const SchedRequest*> v;
    v.reserve(m_impl->reqs.size());
    for (const auto& [id, r] : m_impl->reqs) v.push_back(&r);
    return v;
}

int Scheduler::num_waiting() const { return static_cast<int>(m_impl->waiting.size()); }
int Scheduler::num_running() const { return static_cast<int>(m_impl->running.size()); }
bool Scheduler::has_unfinished() const { return !m_impl->waiting.empty() || !m_impl->running.empty(); }

std::vector<int32_t> Scheduler::host_blocks(RequestId id) const {
    auto it = m_impl->host_tables.find(id);
    return it == m_impl->host_tables.end() ? std::vector<int32_t>{} : it->second;
}

int Scheduler::num_free_host_blocks() const { return m_impl->host.n_free(); }

}  // namespace kvs
