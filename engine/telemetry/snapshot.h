#pragma once
// Telemetry of the engine, as plain data: what one step did (StepRecord), what the KV
// pool and the request table looked like after it (EngineSnapshot), and when each
// request's milestones and tokens happened (RequestMetrics). No Qt: the engine fills
// these, app/engine_bridge turns them into ui/view_types.h, `kvscope bench --trace`
// writes them as JSON (telemetry/trace_json.h).
//
// Every time is in milliseconds since the engine's start clock (the engine's own
// steady_clock origin), so a trace from one run lines up on one axis.
//
// A snapshot is built by the engine thread after a step, then published through a
// SnapshotRing (telemetry/snapshot_ring.h) as shared_ptr<const EngineSnapshot>: from then
// on nobody writes it, so readers on other threads need no lock to look at it.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/scheduler/request.h"
#include "engine/telemetry/op_roofline.h"
#include "engine/telemetry/spec_stats.h"

namespace kvs {

// A KV block's state in the block map. Device blocks are free, used or cached (free but
// still findable by its prefix hash), or freed: given back by a request that lives on
// without it (out of its sliding window, or evicted), until the pool hands it out again;
// `swapped` is the state of a host-tier block that holds a preempted request's KV.
enum class BlockSlotState { free, used, cached, swapped, freed };

// One device block (vLLM's KVCacheBlock seen from outside).
struct BlockView {
    int32_t block_id = 0;
    BlockSlotState state = BlockSlotState::free;
    int32_t ref_cnt = 0;
    std::vector<RequestId> owners;  // requests whose block table holds it, sorted
    int n_filled = 0;               // token slots written: max over owners; block_size when cached
    bool hashed = false;            // registered in the prefix cache
};

// One occupied block of the CPU swap tier. Only occupied host blocks are listed (sorted by
// host_block); every other host block of EngineSnapshot::n_host_blocks is free.
struct HostBlockView {
    int32_t host_block = 0;
    RequestId owner = 0;
};

// One row of the request table.
struct RequestView {
    RequestId id = 0;
    RequestStatus status = RequestStatus::waiting;
    FinishReason finish_reason = FinishReason::none;
    int priority = 0;
    int n_prompt = 0;
    int n_output = 0;
    int max_tokens = 0;
    int num_computed_tokens = 0;
    int num_cached_tokens = -1;      // prefix-cache hit when first scheduled, -1 until then
    std::vector<int32_t> block_ids;  // device block table, [ceil(tokens with slots / block_size)]
    int n_host_blocks = 0;           // host blocks held while swapped
    int num_preemptions = 0;
    // Prompt + output ids of a request that holds device blocks (empty otherwise), so a
    // view can show the text a block holds. Not written to trace files (too big).
    std::vector<int32_t> tokens;
    std::string adapter;  // the LoRA adapter it runs with ("" : the base model), for colouring by adapter
    std::string client;   // who sent it (GenerationRequest::client; "" : the front end's own request)
    // The sliding-window layers' table beside it ([block_ids.size()], -1 where the block fell
    // out of the window and was freed); empty when those layers share the main pool.
    std::vector<int32_t> local_block_ids;
    // A watermarked request (SamplingParams::watermark): its output tokens in the green list
    // their predecessor seeds (TokenEvent::green), of n_output; -1 when not watermarked.
    int n_green = -1;
    // KV eviction (GenerationRequest::kv_eviction; engine/kv_cache/kv_eviction.h): the setting
    // ("h2o:512", "" : none), its budget in tokens, cache entries dropped or merged away so
    // far, blocks the compactions gave back; while it holds blocks, the logical position of
    // each cache entry in cache order and the positions it stands for (> 1: a merged run).
    std::string kv_evict_policy;
    int kv_budget = 0;
    int64_t kv_evicted_tokens = 0;
    int64_t kv_freed_blocks = 0;
    std::vector<int32_t> kv_entry_pos;   // [cache entries]
    std::vector<int32_t> kv_entry_span;  // [cache entries]
};

// What one engine step did, and the pool right after it. Small and fixed-size on purpose:
// the ring keeps thousands of these for the step timeline.
struct StepRecord {
    int64_t step = 0;
    double t_start_ms = 0;   // since engine start
    double duration_ms = 0;  // whole step: schedule + forward + sample + bookkeeping
    double schedule_ms = 0;
    double forward_ms = 0;
    double sample_ms = 0;
    int n_seqs = 0;  // chunks (requests) in the batch
    int prefill_tokens = 0;
    int decode_tokens = 0;
    int padding_tokens = 0;  // static batching: seats of finished requests, recomputed
    int token_budget = 0;    // max_num_batched_tokens
    int max_seqs = 0;        // max_num_seqs (seats)
    int preemptions = 0;     // requests preempted by this step's schedule
    int swap_out_blocks = 0;
    int swap_in_blocks = 0;
    int cow_copies = 0;
    int prefix_hit_tokens = 0;
    int n_waiting = 0;  // waiting, not counting swapped
    int n_running = 0;
    int n_swapped = 0;
    int n_finished_this_step = 0;
    // Speculative decoding in this step (engine/telemetry/spec_stats.h for the terms).
    int spec_drafted = 0;  // draft tokens verified by this step's pass
    int spec_accepted = 0;
    int spec_emitted = 0;  // tokens the verifying requests produced
    double draft_ms = 0;   // proposing, before the pass
    // The device pool after the step (fill_block_counts computes these from a block map).
    int blocks_used = 0;
    int blocks_cached = 0;
    int blocks_free = 0;  // free and not cached
    int n_blocks = 0;
    double kv_usage = 0;        // blocks_used / n_blocks
    int64_t tokens_in_kv = 0;   // filled slots of used blocks; a block shared by several requests counts once
    double internal_waste = 0;  // 1 - tokens_in_kv / (blocks_used * block_size); 0 when none used
    // The sliding-window layers' own pool (0 / 0 when they share the main pool).
    int local_blocks_used = 0;
    int n_local_blocks = 0;

    int batch_tokens() const { return prefill_tokens + decode_tokens + padding_tokens; }
};

// Milestones of one request. Times are ms since engine start; -1 = not reached yet.
struct RequestMetrics {
    RequestId id = 0;
    double arrival_ms = 0;           // submitted (for a benchmark: its scheduled arrival)
    double first_scheduled_ms = -1;  // first step that ran any of its tokens
    double first_token_ms = -1;      // first output token sampled
    double finish_ms = -1;
    std::vector<double> token_times_ms;  // [n_output] when each output token was sampled
    int n_prompt = 0;
    int n_output = 0;
    FinishReason finish_reason = FinishReason::none;

    // Each returns -1 when a milestone it needs is missing.
    double queue_ms() const;  // first_scheduled - arrival
    double ttft_ms() const;   // first_token - arrival (time to first token)
    double e2e_ms() const;    // finish - arrival
    // Mean gap between consecutive output tokens after the first ((last - first) / (n - 1));
    // 0 with fewer than 2 tokens.
    double tpot_ms() const;
    std::vector<double> inter_token_ms() const;  // [n_output - 1] gaps between consecutive tokens
};

// One request's part of the step's batch.
struct ChunkView {
    RequestId id = 0;
    int start_pos = 0;
    int num_tokens = 0;
    bool prefill = false;  // false: a decode (or a padding seat)
    bool padding = false;  // static batching: a finished request's seat
};

// The whole observable state after one step; immutable once published.
struct EngineSnapshot {
    StepRecord step;
    int block_size = 0;
    int max_model_len = 0;                   // what a contiguous allocator would reserve per request
    std::vector<ChunkView> chunks;           // the step's batch, in batch order
    std::vector<BlockView> blocks;           // [n_blocks] device blocks, by block id
    std::vector<HostBlockView> host_blocks;  // occupied host blocks only, by host block id
    int n_host_blocks = 0;                   // size of the host swap tier
    std::vector<RequestView> requests;       // every known request, by id
    KVCacheStats kv_stats;                   // prefix-cache counters since start
    KvTierStats kv_tiers;                    // the CPU tier and disk store below the pool (enabled: false without)
    // Totals since engine start.
    int64_t total_preemptions = 0;
    int64_t total_prompt_tokens = 0;     // prompt tokens of submitted requests
    int64_t total_generated_tokens = 0;  // output tokens sampled
    int64_t total_finished = 0;          // requests finished (any reason)
    int64_t total_swap_out_blocks = 0;
    int64_t total_swap_in_blocks = 0;
    int64_t total_cow_copies = 0;
    double prefix_hit_rate = 0;  // kv_stats.hit_tokens / query_tokens (prefix_hit_rate())
    // The roofline (op_roofline.h, keep_op_step): the largest timed prefill step, then the
    // newest decode step of each batch class (1, 2, 4, ...); empty when ops are not timed.
    std::vector<OpStepRecord> op_steps;
    // Models with sliding-window layers in a pool of their own (gemma3's local layers): that
    // pool's blocks by id (owners from RequestView::local_block_ids), the window, how many of
    // the model's layers are local, and the blocks freed out of the window since start.
    // Empty / 0 otherwise: `blocks` then holds every layer.
    std::vector<BlockView> local_blocks;
    int sliding_window = 0;
    int n_local_layers = 0;
    int n_layers = 0;
    int64_t total_freed_blocks = 0;
};

// ---- speculative decoding --------------------------------------------------------------
// Published by EngineLoop (engine/runtime/engine_loop.h) after each step that changed it,
// beside the EngineSnapshot ring; immutable once published, like the snapshots.

// How fast a request decoded: output tokens after its first, per second of the steps that
// made them. solo: no other request was in any of those steps (a batch slows each of its
// requests, so only solo rates compare with each other).
struct DecodeRate {
    RequestId id = 0;
    int n_tokens = 0;      // output tokens after the first that the rate is over
    double tok_per_s = 0;  // 0 until two output tokens
    bool solo = true;
};

// One request that decodes speculatively.
struct SpecRequestView {
    RequestId id = 0;
    std::string proposer;  // SpecParams::proposer: "ngram" or a draft model's name
    int k = 0;             // drafts per step asked for (the start value when adaptive)
    bool adaptive = false;
    bool finished = false;
    SpecStats stats;
    std::vector<SpecTokenEvent> fates;  // its token fates in order (Engine::spec_events: the last 4096)
    DecodeRate rate;
};

struct SpecSnapshot {
    int64_t step = -1;                                             // the engine step it follows
    std::vector<std::shared_ptr<const SpecRequestView>> requests;  // by id; the newest 64
    SpecStats totals;                                              // every request since the engine started
    std::vector<std::string> drafts;                               // draft models the engine has
    // The last finished plain (non-speculative) request that decoded alone, at least 8
    // tokens: the baseline a speculative request's speed-up is measured against (id 0: none).
    DecodeRate plain_baseline;
};

// ---- helpers that build the parts above from the KV side --------------------------------

const char* block_slot_state_name(BlockSlotState s);

// The device block map, [n_blocks], from KVCacheManager::block_map().
std::vector<BlockView> block_views(const KVCacheManager& kv);
// The sliding-window layers' pool, from KVCacheManager::swa_block_map() (empty without).
std::vector<BlockView> local_block_views(const KVCacheManager& kv);
// The local pool's part of a snapshot and its step record: local_blocks, the freed total,
// local_blocks_used / n_local_blocks (nothing without a local pool).
void fill_local_pool(EngineSnapshot& s, const KVCacheManager& kv);
// Only the step record's local_blocks_used / n_local_blocks.
void fill_local_counts(StepRecord& rec, const KVCacheManager& kv);

// The occupied host blocks from each swapped request's host block table
// (Scheduler::host_blocks(id)), sorted by host block id.
std::vector<HostBlockView> host_block_views(const std::vector<std::pair<RequestId, std::vector<int32_t>>>& host_tables);

// One request-table row: the scheduler's record plus its device block table from kv.
RequestView request_view(const SchedRequest& r, const KVCacheManager& kv, int n_host_blocks = 0);

// Fills the pool half of a StepRecord (blocks_used .. internal_waste) from a block map.
void fill_block_counts(StepRecord& rec, const std::vector<BlockView>& blocks, int block_size);

// hit_tokens / query_tokens, 0 when nothing was looked up.
double prefix_hit_rate(const KVCacheStats& s);

}  // namespace kvs
