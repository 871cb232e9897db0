#include "tests/support/fake_model_runner.h"
#include "tests/support/kv_invariants.h"

#include <algorithm>
#include <map>
#include <set>

namespace kvs::test {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

// Prompt, output, then the drafts the request carries (their KV is written by a chunk
// with drafts, and read back in the same step).
std::vector<int32_t> tokens_with_drafts(const SchedRequest& r) {
    std::vector<int32_t> t = r.all_tokens();
    t.insert(t.end(), r.spec_tokens.begin(), r.spec_tokens.end());
    return t;
}

}  // namespace

std::vector<uint64_t> prefix_fingerprints(const std::vector<int32_t>& toks) {
    std::vector<uint64_t> fp(toks.size());
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < toks.size(); ++i) {
        h = mix(h, static_cast<uint64_t>(static_cast<uint32_t>(toks[i])) + 1);
        fp[i] = h | 1;
    }
    return fp;
}

QString pool_invariants(const KVCacheManager& m) { return kvs::test::kv_pool_invariants(m); }

FakeModelRunner::FakeModelRunner(const SchedulerConfig& c, int n_blocks_, int block_size, bool prefix_caching)
    : cfg(c), bs(block_size), n_blocks(n_blocks_) {
    kv = std::make_unique<KVCacheManager>(n_blocks, bs, prefix_caching);
    s = std::make_unique<Scheduler>(cfg, *kv);
    dev.assign(static_cast<size_t>(n_blocks), std::vector<uint64_t>(static_cast<size_t>(bs), 0));
    host.assign(static_cast<size_t>(std::max(0, cfg.n_host_blocks)), std::vector<uint64_t>(static_cast<size_t>(bs), 0));
}

int32_t FakeModelRunner::sample_token(RequestId id, uint64_t last_fp) {
    return static_cast<int32_t>(mix(mix(0x1234, static_cast<uint64_t>(id)), last_fp) % 30000) + 1;
}

QString FakeModelRunner::read_back(const SchedRequest& r, const std::vector<int32_t>& table, int n,
                                   const std::vector<std::vector<uint64_t>>& mem, const char* where) const {
    const auto fp = prefix_fingerprints(tokens_with_drafts(r));
    if (n > static_cast<int>(fp.size()))
        return QString("request %1: %2 KV of %3 positions for %4 tokens").arg(r.id).arg(where).arg(n).arg(fp.size());
    if (static_cast<int>(table.size()) < ceil_div(n, bs))
        return QString("request %1: %2 table of %3 blocks cannot hold %4 tokens")
            .arg(r.id)
            .arg(where)
            .arg(table.size())
            .arg(n);
    for (int p = 0; p < n; ++p) {
        const int32_t b = table[static_cast<size_t>(p / bs)];
        if (b < 0 || b >= static_cast<int32_t>(mem.size()))
            return QString("request %1: bad %2 block %3").arg(r.id).arg(where).arg(b);
        if (mem[static_cast<size_t>(b)][static_cast<size_t>(p % bs)] != fp[static_cast<size_t>(p)])
            return QString("request %1: %2 KV at position %3 (block %4) is not its own")
                .arg(r.id)
                .arg(where)
                .arg(p)
                .arg(b);
    }
    return {};
}

std::vector<int32_t> FakeModelRunner::own_tokens(RequestId id, int n) const {
    std::vector<int32_t> toks = s->request(id)->all_tokens(), out;
    for (int j = 0; j < n; ++j) {
        out.push_back(sample_token(id, prefix_fingerprints(toks).back()));
        toks.push_back(out.back());
    }
    return out;
}

void FakeModelRunner::propose_drafts() {
    if (max_drafts <= 0) return;
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(draft_rng); };
    for (const SchedRequest* r : s->requests()) {
        if (r->status != RequestStatus::running || r->num_output() == 0 ||
            r->num_tokens() - r->num_computed_tokens != 1)
            continue;
        // The fake model's own continuation for the first `right` drafts, then one it would
        // not pick (what follows a wrong draft is never looked at).
        const int n = uni(0, max_drafts), right = uni(0, n);
        std::vector<int32_t> drafts = own_tokens(r->id, n);
        if (right < n) drafts[static_cast<size_t>(right)] = drafts[static_cast<size_t>(right)] % 30000 + 1;
        if (!s->set_spec_tokens(r->id, std::move(drafts)))
            qFatal("set_spec_tokens refused request %lld", static_cast<long long>(r->id));
    }
}

std::vector<int32_t> FakeModelRunner::emit(const ScheduledChunk& c) {
    if (!c.sample || sample_minus_one) return {};
    const SchedRequest* r = s->request(c.id);
    const auto fp = prefix_fingerprints(tokens_with_drafts(*r));
    // Position p's logits give the token after p; the chunk's first token is the last known one.
    const int first = c.start_pos + c.num_tokens - c.num_spec - 1;
    std::vector<int32_t> out;
    for (int j = 0; j <= c.num_spec; ++j) {
        const int32_t own = sample_token(c.id, fp[static_cast<size_t>(first + j)]);
        out.push_back(own);
        if (j == c.num_spec || r->spec_tokens[static_cast<size_t>(j)] != own) break;  // bonus / correction
    }
    spec_drafted += c.num_spec;
    spec_accepted += static_cast<int64_t>(out.size()) - 1;
    return out;
}

QString FakeModelRunner::step() {
    std::set<RequestId> was_running;
    for (const SchedRequest* r : s->requests())
        if (r->status == RequestStatus::running) was_running.insert(r->id);
    propose_drafts();
    std::map<RequestId, std::vector<int32_t>> drafts;  // as proposed (by propose_drafts or by hand)
    for (const SchedRequest* r : s->requests())
        if (!r->spec_tokens.empty()) drafts[r->id] = r->spec_tokens;
    SchedulerOutput out = s->schedule();
    QString e = check_limits(out, was_running);
    if (e.isEmpty()) e = forward(out, drafts);
    if (!e.isEmpty()) return QString("step %1: ").arg(out.step) + e;
    std::vector<std::vector<int32_t>> emitted(out.chunks.size());
    for (size_t i = 0; i < out.chunks.size(); ++i) emitted[i] = emit(out.chunks[i]);
    last_finished = s->update(out, emitted);
    last = std::move(out);
    return check_state();
}

QString FakeModelRunner::check_limits(const SchedulerOutput& out, const std::set<RequestId>& was_running) {
    // A step that preempted admits nobody (the freed blocks are for the running ones;
    // this also keeps swap-ins out of steps that free blocks).
    if (!out.preempted.empty()) {
        if (!out.swap_in.empty()) return QString("preempted and swapped in");
        for (const auto& c : out.chunks)
            if (!c.padding && !was_running.count(c.id)) return QString("preempted and admitted request %1").arg(c.id);
    }
    // The budget and max_num_seqs.
    if (out.total_tokens() > cfg.max_num_batched_tokens)
        return QString("%1 tokens over the budget %2").arg(out.total_tokens()).arg(cfg.max_num_batched_tokens);
    if (out.token_budget != cfg.max_num_batched_tokens) return "token_budget not reported";
    if (static_cast<int>(out.chunks.size()) > cfg.max_num_seqs || s->num_running() > cfg.max_num_seqs)
        return QString("%1 chunks, %2 running, max_num_seqs %3")
            .arg(out.chunks.size())
            .arg(s->num_running())
            .arg(cfg.max_num_seqs);
    max_step_tokens = std::max(max_step_tokens, out.total_tokens());
    max_running = std::max(max_running, s->num_running());
    max_chunks = std::max(max_chunks, static_cast<int>(out.chunks.size()));
    return {};
}

QString FakeModelRunner::forward(const SchedulerOutput& out, const std::map<RequestId, std::vector<int32_t>>& drafts) {
    // The engine's order: swap-outs, swap-ins, copies, then the forward pass.
    for (const auto& op : out.swap_out)
        host.at(static_cast<size_t>(op.host_block)) = dev.at(static_cast<size_t>(op.device_block));
    for (const auto& op : out.swap_in)
        dev.at(static_cast<size_t>(op.device_block)) = host.at(static_cast<size_t>(op.host_block));
    for (const auto& op : out.copies)
        dev.at(static_cast<size_t>(op.dst_block)) = dev.at(static_cast<size_t>(op.src_block));

    // Every chunk follows on from num_computed_tokens and has slots for its tokens.
    std::set<RequestId> seen;
    int prefill = 0, decode = 0, padding = 0, spec = 0;
    for (const auto& c : out.chunks) {
        const SchedRequest* r = s->request(c.id);
        if (!r) return QString("chunk for unknown request %1").arg(c.id);
        if (!seen.insert(c.id).second) return QString("two chunks for request %1").arg(c.id);
        if (c.padding) {  // static batching: a finished member's seat rewrites its last KV slot
            if (r->status != RequestStatus::finished || cfg.policy != BatchingPolicy::static_batch)
                return QString("padding chunk for request %1 that is %2").arg(c.id).arg(status_name(r->status));
            if (c.num_tokens != 1 || c.sample || c.start_pos != r->num_computed_tokens - 1)
                return QString("request %1: padding chunk [%2, +%3)").arg(c.id).arg(c.start_pos).arg(c.num_tokens);
            ++padding;
            continue;
        }
        if (r->status != RequestStatus::running)
            return QString("chunk for request %1 that is %2").arg(c.id).arg(status_name(r->status));
        if (c.start_pos != r->num_computed_tokens)
            return QString("request %1: chunk starts at %2 but %3 tokens are computed")
                .arg(c.id)
                .arg(c.start_pos)
                .arg(r->num_computed_tokens);
        const int own = c.num_tokens - c.num_spec;  // the request's own tokens in the chunk
        if (own <= 0 || c.start_pos + own > r->num_tokens())
            return QString("request %1: chunk [%2, +%3) outside its %4 tokens")
                .arg(c.id)
                .arg(c.start_pos)
                .arg(own)
                .arg(r->num_tokens());
        if (c.sample != (c.start_pos + own == r->num_tokens()))
            return QString("request %1: sample flag wrong").arg(c.id);
        const bool decode_chunk = r->num_output() > 0 && own == 1 && c.start_pos == r->num_tokens() - 1;
        if (c.is_prefill == decode_chunk) return QString("request %1: is_prefill wrong").arg(c.id);
        // Drafts: only on a decode, a prefix of what was proposed, kept on the request for verification.
        const auto d = drafts.find(c.id);
        const size_t n_proposed = d == drafts.end() ? 0 : d->second.size();
        if (c.num_spec < 0 || static_cast<size_t>(c.num_spec) > n_proposed || (c.num_spec > 0 && !decode_chunk) ||
            r->spec_tokens.size() != static_cast<size_t>(c.num_spec) ||
            !std::equal(r->spec_tokens.begin(), r->spec_tokens.end(),
                        d == drafts.end() ? r->spec_tokens.begin() : d->second.begin()))
            return QString("request %1: %2 drafts in the chunk, %3 kept, %4 proposed")
                .arg(c.id)
                .arg(c.num_spec)
                .arg(r->spec_tokens.size())
                .arg(n_proposed);
        // The target adds a token of its own after the drafts: that one must fit too.
        if (r->num_tokens() + c.num_spec >= std::min(r->num_prompt() + r->max_tokens, cfg.max_model_len))
            return QString("request %1: drafts past max_tokens or the context").arg(c.id);
        spec += c.num_spec;
        (c.is_prefill ? prefill : decode) += c.num_tokens;
        if (kv->num_tokens(c.id) != c.start_pos + c.num_tokens)
            return QString("request %1: %2 slots for a chunk ending at %3")
                .arg(c.id)
                .arg(kv->num_tokens(c.id))
                .arg(c.start_pos + c.num_tokens);
        // Write the chunk's KV.
        const auto& table = kv->block_table(c.id);
        const auto fp = prefix_fingerprints(tokens_with_drafts(*r));
        for (int p = c.start_pos; p < c.start_pos + c.num_tokens; ++p) {
            const int32_t b = table.at(static_cast<size_t>(p / bs));
            dev[static_cast<size_t>(b)][static_cast<size_t>(p % bs)] = fp[static_cast<size_t>(p)];
        }
    }
    if (padding != out.num_padding_tokens)
        return QString("%1 padding chunks, output says %2").arg(padding).arg(out.num_padding_tokens);
    if (prefill != out.num_prefill_tokens || decode != out.num_decode_tokens)
        return QString("prefill/decode token counts %1/%2, chunks say %3/%4")
            .arg(out.num_prefill_tokens)
            .arg(out.num_decode_tokens)
            .arg(prefill)
            .arg(decode);
    if (spec != out.num_spec_tokens)
        return QString("%1 draft tokens in chunks, output says %2").arg(spec).arg(out.num_spec_tokens);
    if (prefill > 0 && decode > 0) ++steps_with_mixed;

    // Attention: every running request reads all of its KV (chunks read what they wrote).
    for (const SchedRequest* r : s->requests()) {
        if (r->status != RequestStatus::running) continue;
        const QString e = read_back(*r, kv->block_table(r->id), kv->num_tokens(r->id), dev, "device");
        if (!e.isEmpty()) return e;
    }
    return {};
}

QString FakeModelRunner::check_state() const {
    QString e = pool_invariants(*kv);
    if (!e.isEmpty()) return e;
    int running = 0, waiting = 0, host_used = 0;
    std::set<int32_t> host_seen;
    std::set<RequestId> running_ids;
    for (const SchedRequest* r : s->requests()) {
        const auto hb = s->host_blocks(r->id);
        switch (r->status) {
            case RequestStatus::running:
                ++running;
                running_ids.insert(r->id);
                if (kv->num_tokens(r->id) != r->num_computed_tokens)
                    return QString("running request %1: %2 slots, %3 computed")
                        .arg(r->id)
                        .arg(kv->num_tokens(r->id))
                        .arg(r->num_computed_tokens);
                if (!hb.empty()) return QString("running request %1 holds host blocks").arg(r->id);
                break;
            case RequestStatus::waiting:
                ++waiting;
                if (kv->has_request(r->id) || !hb.empty()) return QString("waiting request %1 holds KV").arg(r->id);
                if (r->num_computed_tokens != 0) return QString("waiting request %1 has computed tokens").arg(r->id);
                break;
            case RequestStatus::swapped: {
                ++waiting;
                if (kv->has_request(r->id)) return QString("swapped request %1 holds device blocks").arg(r->id);
                if (static_cast<int>(hb.size()) != ceil_div(r->num_computed_tokens, bs))
                    return QString("swapped request %1: %2 host blocks for %3 tokens")
                        .arg(r->id)
                        .arg(hb.size())
                        .arg(r->num_computed_tokens);
                const QString rb = read_back(*r, hb, r->num_computed_tokens, host, "host");
                if (!rb.isEmpty()) return rb;
                break;
            }
            case RequestStatus::finished:
                // Static batching keeps a finished member's seat (and its KV) until the batch ends.
                if (kv->has_request(r->id) && cfg.policy == BatchingPolicy::static_batch) {
                    running_ids.insert(r->id);  // a seat: holds blocks like a running member
                    const QString rb = read_back(*r, kv->block_table(r->id), kv->num_tokens(r->id), dev, "device");
                    if (!rb.isEmpty()) return rb;
                } else if (kv->has_request(r->id)) {
                    return QString("finished request %1 holds KV").arg(r->id);
                }
                if (!hb.empty()) return QString("finished request %1 holds host blocks").arg(r->id);
                if (r->finish_reason == FinishReason::none)
                    return QString("finished request %1 without a reason").arg(r->id);
                break;
        }
        for (int32_t b : hb) {
            if (!host_seen.insert(b).second) return QString("host block %1 held twice").arg(b);
            ++host_used;
        }
    }
    if (running != s->num_running() || waiting != s->num_waiting())
        return QString("counts: %1 running / %2 waiting, scheduler says %3 / %4")
            .arg(running)
            .arg(waiting)
            .arg(s->num_running())
            .arg(s->num_waiting());
    if (running > cfg.max_num_seqs) return "more running than max_num_seqs";
    const auto kv_ids = kv->request_ids();
    if (std::set<RequestId>(kv_ids.begin(), kv_ids.end()) != running_ids)
        return "the KV manager holds blocks for requests that are neither running nor static-batch seats";
    if (host_used + s->num_free_host_blocks() != std::max(0, cfg.n_host_blocks))
        return QString("host tier: %1 used + %2 free != %3")
            .arg(host_used)
            .arg(s->num_free_host_blocks())
            .arg(cfg.n_host_blocks);
    return {};
}

QString FakeModelRunner::check_drained() const {
    if (s->has_unfinished()) return "requests left unfinished";
    if (kv->num_free_blocks() != n_blocks)
        return QString("%1 of %2 blocks free at the end").arg(kv->num_free_blocks()).arg(n_blocks);
    for (int i = 0; i < n_blocks; ++i)
        if (kv->pool().block(i).ref_cnt != 0) return QString("block %1 still referenced").arg(i);
    if (!kv->request_ids().empty()) return "the KV manager still tracks requests";
    if (s->num_free_host_blocks() != std::max(0, cfg.n_host_blocks)) return "host blocks still held";
    return {};
}

QString FakeModelRunner::run(int max_steps) {
    for (int i = 0; i < max_steps && s->has_unfinished(); ++i) {
        const QString e = step();
        if (!e.isEmpty()) return e;
    }
    if (s->has_unfinished()) return QString("not done after %1 steps").arg(max_steps);
    return check_drained();
}

std::vector<RequestId> FakeModelRunner::chunk_ids() const {
    std::vector<RequestId> ids;
    for (const auto& c : last.chunks) ids.push_back(c.id);
    return ids;
}

const ScheduledChunk* FakeModelRunner::chunk(RequestId id) const {
    for (const auto& c : last.chunks)
        if (c.id == id) return &c;
    return nullptr;
}

}  // namespace kvs::test
