#pragma once
// Iteration-level scheduler (vLLM v1's Scheduler, simplified): every step it picks
// which tokens of which requests run, within a token budget, and gives each one KV
// slots through the KVCacheManager. No model: the caller runs the forward pass on the
// chunks it returns, samples, and reports back with update().
//
// One step, as the engine drives it:
//   SchedulerOutput out = sched.schedule();
//   perform out.swap_out, then out.swap_in, then out.copies (KV block copies);
//   run the forward pass over out.chunks (chunk i: tokens [start_pos, start_pos+num_tokens)
//     of request i's prompt+output, written at those positions through its block table);
//   emitted[i] = the tokens chunk i produced (one sampled token; with drafts, the
//     accepted drafts then the target's own token; read only where sample = true);
//   finished = sched.update(out, emitted);
//   for stop strings / EOS the engine calls finish_request(id, FinishReason::stop).
//
// Policies:
//   continuous: running requests first (decode 1 token, or the next prefill chunk), in
//     (priority, arrival) order; then waiting/swapped requests in the same order while
//     budget and max_num_seqs allow. With chunked_prefill a prompt that does not fit the
//     budget left runs as a chunk; without it, it waits for a step with room (a prompt
//     longer than the whole budget is chunked anyway: it could never run whole). The
//     first waiting request that does not fit stops admission (FCFS within a priority).
//   static_batch: a batch of up to static_batch_size requests is admitted only when no
//     request is running; nobody joins until every request of the batch has finished.
//     As in a padded static batch, a member that finished early keeps its blocks and its
//     seat: every step recomputes its last token (a `padding` chunk, nothing sampled)
//     until the whole batch is done, so the baseline pays what static batching pays.
// Preemption: when a running request needs a block and none is free, the running request
// with the largest (priority, arrival) is preempted (possibly the one asking): recompute
// frees its blocks and sends it back to waiting with num_computed_tokens = 0; swap copies
// its blocks to the host tier (swap_out) and brings them back later (swap_in). When the
// host tier is full, swap falls back to recompute; so does every preemption when the KV
// manager keeps sliding-window layers in a pool of their own (their freed blocks cannot be
// swapped back: the request recomputes, its prefix-cached blocks found again).
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/scheduler/request.h"

namespace kvs {

enum class PreemptionMode { recompute, swap };
enum class BatchingPolicy { continuous, static_batch };

struct SchedulerConfig {
    int max_num_batched_tokens = 512;  // token budget of one step (prefill + decode tokens)
    int max_num_seqs = 64;             // most requests running at once
    int max_model_len = 2048;          // prompt + max_tokens limit of one request
    bool chunked_prefill = true;
    PreemptionMode preemption = PreemptionMode::recompute;
    BatchingPolicy policy = BatchingPolicy::continuous;
    int static_batch_size = 8;  // static_batch: requests per batch
    int n_host_blocks = 0;      // CPU swap tier, in blocks (swap mode)
};

// Device block <-> host block of the swap tier.
struct SwapOp {
    int32_t device_block = 0;
    int32_t host_block = 0;
};

// What one step runs. Tokens of chunk i: all_tokens()[start_pos, start_pos + num_tokens).
struct ScheduledChunk {
    RequestId id = 0;
    int start_pos = 0;  // num_computed_tokens before this step
    int num_tokens = 0;
    bool is_prefill = false;  // false only for a decode: the one last token of a request that has output
    bool sample = false;      // the chunk ends at the request's last known token: sample the next one
    bool padding = false;     // static batching: a finished member's seat (recomputes its last token)
    int num_spec = 0;         // speculative decode: the chunk is [last token, num_spec drafts]
                              // (num_tokens = 1 + num_spec); their slots are lookahead slots
};

struct SchedulerOutput {
    int64_t step = 0;                    // 0, 1, 2, ... one per schedule() call
    std::vector<ScheduledChunk> chunks;  // batch order
    std::vector<CopyOp> copies;          // copy-on-write block copies, before the forward pass
    std::vector<CopyOp> swa_copies;      // the same in the sliding-window layers' own pool
    std::vector<SwapOp> swap_out;        // device -> host, first
    std::vector<SwapOp> swap_in;         // host -> device, after swap_out
    // KV tiers (KVCacheManager::set_tier): cached blocks this schedule evicted, whose bytes
    // the engine reads first (before anything writes a block), and prefix hits found in the
    // tiers, copied into their fresh device blocks after swap_out.
    std::vector<TierSpill> tier_spills;
    std::vector<TierLoad> tier_loads;
    std::vector<RequestId> preempted;    // preempted during this schedule()
    int token_budget = 0;                // max_num_batched_tokens
    int num_prefill_tokens = 0;
    int num_decode_tokens = 0;
    int num_padding_tokens = 0;     // static batching seats of finished members
    int num_prefix_hit_tokens = 0;  // prompt tokens found in the prefix cache this step (any tier)
    int num_tier_hit_tokens = 0;    // of those, loaded from the CPU tier or the disk store
    int num_spec_tokens = 0;        // draft tokens being verified (counted in num_decode_tokens)
    int total_tokens() const { return num_prefill_tokens + num_decode_tokens + num_padding_tokens; }
    bool empty() const { return chunks.empty(); }
};

struct SchedulerCounters {
    int64_t steps = 0;
    int64_t preemptions = 0;  // both modes
    int64_t recomputes = 0;   // preemptions by recompute
    int64_t swap_outs = 0;    // preemptions by swap (requests)
    int64_t swapped_out_blocks = 0;
    int64_t swapped_in_blocks = 0;
    int64_t cow_copies = 0;
    int64_t rejected = 0;
};

class Scheduler {
public:
    Scheduler(const SchedulerConfig& config, KVCacheManager& kv);
    ~Scheduler();

    const SchedulerConfig& config() const { return m_config; }

    // Queues a request. Fails, keeping nothing, when it can never run: empty prompt,
    // max_tokens < 1, duplicate id, prompt + max_tokens over max_model_len, or more
    // blocks than the whole pool for prompt + max_tokens. The message names the numbers.
    Status add_request(RequestId id, std::vector<int32_t> prompt, int max_tokens, int priority = 0);

    // Cancels a request in any state: its device and host blocks are freed at once and it
    // is finished with FinishReason::cancelled. Unknown or already finished: returns false,
    // changes nothing.
    bool abort_request(RequestId id);

    SchedulerOutput schedule();

    // After the forward pass of `out`: emitted[i] are the tokens chunk i produced, in order,
    // read only where chunks[i].sample: one sampled token for a plain chunk; for a chunk with
    // drafts (speculative decoding), the accepted drafts then the target's own token; empty
    // when the engine appends the token itself later (append_token: beam search).
    // Advances num_computed_tokens (with drafts, to start_pos + size: the last emitted token
    // has no KV yet, and the KV slots of rejected drafts are given back), appends the tokens
    // and finishes requests that reach max_tokens or max_model_len (FinishReason::length;
    // tokens past that are dropped). Returns the requests this call finished.
    std::vector<RequestId> update(const SchedulerOutput& out, const std::vector<std::vector<int32_t>>& emitted);

    // Speculative decoding: drafts to verify the next time this request decodes. Only a
    // running request with exactly one token left to compute takes them (false otherwise);
    // schedule() trims them to the budget, max_tokens and the context, and clears them.
    bool set_spec_tokens(RequestId id, std::vector<int32_t> drafts);
    // A waiting request that must compute its whole prompt: schedule() does not look its
    // prompt up in the prefix cache (SchedRequest::skip_prefix_cache). False for unknown ids.
    bool skip_prefix_cache(RequestId id);

    // A running request whose tokens are all computed (num_computed_tokens == num_tokens(),
    // e.g. a beam whose chunk got sampled = -1 while its group decides) is skipped by
    // schedule() until append_token gives it a new token.
    // The engine's own decisions: a token for a running request (beam search; finishes it
    // with `length` at max_tokens), and the end
    // of a request (end-of-generation token, stop string). finish_request frees its blocks.
    Status append_token(RequestId id, int32_t token);
    void finish_request(RequestId id, FinishReason why);

    // Beam search / parallel sampling: child becomes a running copy of parent (same tokens,
    // same num_computed_tokens) sharing its blocks copy-on-write. Parent must be running,
    // the child id unused, and fewer than max_num_seqs requests running.
    Status fork_request(RequestId parent, RequestId child);
    // KV eviction: n more of this running request's computed tokens have no KV entry of their
    // own any more (its cache was compacted); swap-in then restores the entries it has, and a
    // preemption by recompute starts it over with none evicted.
    void note_evicted(RequestId id, int n);

    // Forgets a request (a finished one's record stays until then, for telemetry and
    // results); an unfinished one is cancelled first. False (nothing removed) for unknown
    // ids and for a finished member of a static batch still holding its seat.
    bool remove_request(RequestId id);

    const SchedRequest* request(RequestId id) const;    // nullptr if unknown
    std::vector<const SchedRequest*> requests() const;  // every known request, by id
    int num_waiting() const;                            // waiting + swapped
    int num_running() const;
    bool has_unfinished() const;
    const SchedulerCounters& counters() const { return m_counters; }
    // Host block table of a swapped request (empty otherwise), and the tier's use.
    std::vector<int32_t> host_blocks(RequestId id) const;
    int num_free_host_blocks() const;

private:
    struct Impl;
    SchedulerConfig m_config;
    KVCacheManager& m_kv;
    SchedulerCounters m_counters;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace kvs
