#pragma once
// The batching engine: many requests at once on one model. Each step() asks the
// Scheduler which tokens run, moves KV blocks it asked for (copy-on-write copies, swap
// out / in), runs every scheduled token of every request in ONE forward pass (each
// weight read once per step; attention through each request's own block table), samples
// each request with its own Sampler, and streams text through the request's callback.
//
// Not thread-safe: one thread owns an Engine. engine/runtime/engine_loop.h runs one on
// its own thread behind a command queue for the GUI.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/kv_eviction.h"
#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampling_params.h"
#include "engine/scheduler/scheduler.h"
#include "engine/speculative/spec_params.h"
#include "engine/telemetry/snapshot.h"
#include "engine/telemetry/spec_stats.h"
#include "kernels/dtype.h"

namespace kvs {

// Held or handed out by reference only; callers that use them include their headers
// (engine/model/model.h, engine/tokenizer/tokenizer.h, kernels/backend.h,
// engine/telemetry/snapshot_ring.h, ...).
struct Model;
class Tokenizer;
class Backend;
class KvTensors;
class KvTiers;
class LlamaForward;
class SnapshotRing;
class DraftRunner;
struct VerifyResult;
struct LoraAdapter;
struct OpCostModel;

struct EngineOptions {
    // KV pool size: kv_blocks if > 0, else kv_bytes if > 0, else kv_ram_fraction of the
    // machine's RAM if > 0, else 1 GiB. Bytes per token = kv_cache_bytes_per_token(config, kv_type):
    // 2 x layers x kv_heads x head_dim x 2 for F16, x 34/32 for Q8_0.
    int kv_blocks = 0;
    int64_t kv_bytes = 0;
    double kv_ram_fraction = 0.0;
    int block_size = 16;         // 8, 16 or 32
    DType kv_type = DType::F16;  // KV cache elements: F16, or Q8_0 (INT8, one fp16 scale per 32 values)
    bool prefix_caching = true;
    // Models with sliding-window layers (gemma3's local layers): their K/V in a pool of their
    // own whose blocks go back as they fall out of each request's window (runtime/kv_pool_plan.h,
    // kv_cache/sliding_window_blocks.h); false: one pool for every layer, nothing freed.
    // local_kv_blocks: that pool's size in blocks (0: planned from the seats and the step).
    bool free_out_of_window = true;
    int local_kv_blocks = 0;
    // KV tiers (engine/kv_cache/kv_tiers.h; need prefix_caching): cached blocks the pool
    // evicts go to a CPU tier of this many bytes, then to a disk store of this many bytes
    // under kv_disk_dir/<model fingerprint>/ ("" : ~/.cache/kvscope/kv), and come back on a
    // prefix hit. Both 0 (the default): no tiers, evicted blocks are recomputed.
    int64_t kv_cpu_tier_bytes = 0;
    int64_t kv_disk_bytes = 0;
    std::string kv_disk_dir;
    int max_model_len = 0;         // prompt + output limit; 0: the model's context, at most 4096
    SchedulerConfig scheduler;     // its max_model_len is set from the field above
    int n_threads = 0;             // CPU threads, 0: one per core
    std::string backend = "auto";  // "auto", "cpu", "cuda"
    std::string simd = "auto";
    // Telemetry: a full snapshot (block map, request table) every this many steps (0:
    // never; step records are kept every step either way), and the ring sizes.
    int snapshot_every = 1;
    int snapshot_ring = 64;
    int step_ring = 4096;
    // Draft models requests may name in SpecParams::proposer (engine/speculative/
    // draft_runner.h make_draft_model builds them): name -> model. Each gets its own KV
    // pool with as many blocks as the target's.
    std::vector<std::pair<std::string, std::shared_ptr<const Model>>> drafts;
    // The acceptance rule; only the distribution tests change it (to prove they can fail).
    AcceptRule spec_accept_rule = AcceptRule::exact;
    // The roofline's op timer (LlamaForward::set_op_timing): each step's op groups timed,
    // EngineSnapshot::op_steps. CPU backends only (elsewhere it would synchronize at every op).
    bool op_timing = true;
};

struct BeamHypothesis;

// One event of a request's stream, delivered on the engine's thread.
struct TokenEvent {
    RequestId id = 0;
    int32_t token = -1;  // the new token, -1 on a final event that carries none
    std::string text;    // text that became safe to show (may be empty)
    bool finished = false;
    FinishReason finish_reason = FinishReason::none;
    std::string error;  // why, when the request was rejected
    // With SamplingParams::logprobs >= 0, for a token: its log-probability and the top
    // alternatives under the raw model distribution (engine/sampling/logprobs.h).
    std::optional<TokenLogprobs> logprobs;
    // With SamplingParams::prompt_logprobs >= 0, on the request's first token event: entry i
    // is prompt token i + 1's log-probability and top alternatives given the tokens before it
    // ([n_prompt - 1]; the first prompt token has none).
    std::vector<TokenLogprobs> prompt_logprobs;
    // A watermarked request's token: 1 when it is in the green list its predecessor seeds,
    // 0 when not; -1 when the request is not watermarked (or the event has no token).
    int8_t green = -1;
    // A beam-search request's final event: its hypotheses, best first (Engine::beam_hypotheses);
    // valid only during the callback, null on every other event.
    const std::vector<BeamHypothesis>* beams = nullptr;
    // On the final event: the request's milestones (TTFT, TPOT: the one measurement the
    // window, bench and /metrics report); valid only during the callback.
    const RequestMetrics* metrics = nullptr;
};
using TokenCallback = std::function<void(const TokenEvent&)>;

struct GenerationRequest {
    std::vector<int32_t> prompt;  // token ids (chat template already applied)
    SamplingParams params;        // max_tokens -1: until end-of-generation or max_model_len
    int priority = 0;             // lower = more urgent
    // Beam search when > 1 (at most 8): the beams are forks of the request sharing its
    // blocks copy-on-write; sampling params other than max_tokens and ignore_eos are not
    // used (no stop strings). The request streams nothing until the end, then one event with the best
    // hypothesis (highest sum of log-probabilities divided by length^params.length_penalty;
    // params.min_new_tokens holds end-of-generation back).
    int beam_width = 1;
    // Speculative decoding (not with beam search): drafts verified by the target in the
    // same batched pass; output distributed exactly as without it.
    SpecParams spec;
    // A LoRA adapter (engine/lora/lora_adapter.h; Session::adapter() hands them out) run on
    // top of the base model for this request only; null: the base model. Requests with
    // different adapters share batches; their prefix-cache blocks never mix.
    std::shared_ptr<const LoraAdapter> adapter;
    // Who sent it, as the views name it ("" : the front end names it itself): the local
    // server's "HTTP 127.0.0.1" or the request's `user` field. Carried into
    // RequestView::client; the engine does nothing else with it.
    std::string client;
    TokenCallback on_event;  // may be empty
    // Parallel sampling (vLLM's n > 1): further choices of the same prompt. The prompt is
    // computed once; when this request samples its first token, each choice becomes a fork
    // of it (Scheduler::fork_request: the prompt's KV blocks shared copy-on-write, the
    // partially filled last block copied on a choice's first write) and draws its own first
    // token from the same logits with its own sampler (params with this seed). A choice
    // that cannot be forked then (max_num_seqs running) runs as a request of its own on the
    // same prompt (prefix-cached full blocks shared). Each has its own id, events and cancel;
    // cancelling this request before the fork hands the prompt to the first choice left.
    // Not with beam search or speculative decoding.
    struct Choice {
        RequestId id = 0;  // 0: the engine picks (EngineLoop::submit assigns them)
        uint64_t seed = 0;
        TokenCallback on_event;
    };
    // KV eviction (engine/kv_cache/kv_eviction.h): a policy and a budget of cached tokens
    // (tokens, or a fraction of prompt + max_tokens). CPU backend only; not with beam search,
    // speculative decoding or choices; the request then takes no part in prefix caching.
    KvEvictionSetting kv_eviction;
    // Teacher forcing (benchmarks, tests): output token i is forced_output[i] instead of a
    // sampled one while there are any (logprobs, when asked for, are those of the forced
    // token under the raw distribution); not with beam search or speculative decoding.
    std::vector<int32_t> forced_output;
    std::vector<Choice> choices;
    // When the request arrived, in ms on the engine's clock (ms_since_start()); < 0: now.
    // A benchmark replaying a workload passes the scheduled arrival time.
    double arrival_ms = -1;
};

// A finished beam-search hypothesis.
struct BeamHypothesis {
    std::vector<int32_t> tokens;  // generated ids (an end-of-generation token that ended it excluded)
    double logprob = 0;           // sum of natural-log probabilities of its tokens (and of that end)
    double score = 0;             // what ranks it: logprob / length^length_penalty
};

// What one step did, for callers that drive step() themselves (bench, tests).
struct StepResult {
    bool ran = false;     // false: nothing was schedulable
    SchedulerOutput out;  // the schedule that ran
    std::vector<RequestId> finished;
    double schedule_ms = 0, kv_move_ms = 0, forward_ms = 0, sample_ms = 0, total_ms = 0;
    StepRecord record;  // what the telemetry ring got for this step
};

class Engine {
public:
    // tokenizer may be null (ids only: no text, no end-of-generation detection).
    static Result<std::unique_ptr<Engine>> create(std::shared_ptr<const Model> model,
                                                  std::shared_ptr<const Tokenizer> tokenizer, const EngineOptions& opt);
    ~Engine();

    // Queues a request; the id it returns names it from now on (id > 0 asks for that id,
    // which must be unused; 0 picks the next free one). Fails, keeping nothing, when the
    // request can never run (empty prompt, prompt over max_model_len, more KV than the
    // whole pool): the message says which.
    Result<RequestId> submit(GenerationRequest req, RequestId id = 0);
    // Cancels a queued or running request: blocks freed at once, a final event with
    // FinishReason::cancelled. Unknown or finished ids: false, nothing happens.
    bool cancel(RequestId id);

    // One iteration: schedule, move KV blocks, forward, sample, stream. An error is a
    // failed forward pass (the engine state is then unreliable).
    Result<StepResult> step();
    bool has_work() const;
    // Runs steps until every request has finished.
    Status run_until_idle();

    // Tokens a request generated so far (prompt excluded); for a beam-search request, the
    // best hypothesis once it has finished. Empty for unknown ids.
    std::vector<int32_t> output_tokens(RequestId id) const;
    // A finished beam-search request's hypotheses, best first (empty otherwise).
    std::vector<BeamHypothesis> beam_hypotheses(RequestId id) const;
    // Forgets finished requests except the keep_last most recent ones (by id; their records
    // stay readable until then); the metrics of those forgotten move to finished_metrics().
    void remove_finished(size_t keep_last = 0);

    // Telemetry. The ring is thread-safe: another thread may read it while this one steps.
    std::shared_ptr<const SnapshotRing> telemetry() const;
    // Milestones of every request still known, by id, and of those removed since start.
    std::vector<RequestMetrics> request_metrics() const;
    // One request's milestones (null for unknown or forgotten ids); valid until the next
    // step() or remove_finished(). Speculative-decoding rates derive from these.
    const RequestMetrics* request_metrics(RequestId id) const;
    const std::vector<RequestMetrics>& finished_metrics() const { return m_removed_metrics; }
    // The engine's clock, in ms since it was created, standing still while held: every
    // timestamp it records (arrival, first token, step start) is on this clock.
    double ms_since_start() const;
    // Holds (true) or releases the clock. EngineLoop holds it while paused between steps, so
    // RequestMetrics (TTFT, TPOT) count the time the engine could run, not the time a user
    // looked at a paused lesson. Engine thread only.
    void hold_clock(bool held);
    // The snapshot of the state right now (what the ring gets after a step).
    EngineSnapshot snapshot(const StepRecord& step) const;
    // A full snapshot every n steps from now on (0: step records only; EngineOptions::
    // snapshot_every). Engine thread only: `kvscope serve` turns snapshots on while a
    // telemetry stream has a reader (app/server/telemetry_stream.h).
    void set_snapshot_every(int n) { m_snapshot_every = n; }
    int snapshot_every() const { return m_snapshot_every; }

    const Scheduler& scheduler() const;
    const KVCacheManager& kv_cache() const;
    const Model& model() const;
    const Tokenizer* tokenizer() const;
    Backend& backend();
    const std::string& backend_note() const { return m_backend_note; }
    int block_size() const;
    int max_model_len() const { return m_max_model_len; }
    int64_t kv_pool_bytes() const;
    // The KV tiers below the device pool (null without EngineOptions::kv_cpu_tier_bytes /
    // kv_disk_bytes): their state, counters and reports (bad files skipped).
    const KvTiers* kv_tiers() const { return m_tiers.get(); }

    // Speculative decoding telemetry: one request's (empty for unknown ids; kept until
    // remove_finished), every request's since start, and a request's token fates in order
    // (draft tokens with what happened to them, the last 4096).
    SpecStats spec_stats(RequestId id) const;
    const SpecStats& spec_totals() const { return m_spec_totals; }
    std::vector<SpecTokenEvent> spec_events(RequestId id) const;
    std::vector<std::string> draft_names() const;
    DType kv_type() const;
    // KV eviction of one request (GenerationRequest::kv_eviction): its cache entries'
    // positions, budget and counters; null for unknown ids and requests without eviction.
    const KvEvictionState* kv_eviction(RequestId id) const;

private:
    // engine/runtime/engine_request.h defines these for the Engine's own files.
    struct Req;
    struct BeamGroup;
    struct StepTokens;
    struct StepBuffers;
    Engine();

    // The step (engine.cpp).
    void move_kv_blocks(const SchedulerOutput& out);
    Status build_batch(const SchedulerOutput& out, StepTokens& t);
    void collect_prompt_logprobs(const SchedulerOutput& out, const StepTokens& t);
    // May append a chunk per choice forked this step (GenerationRequest::choices): they go
    // through the update and the stream like the chunk they were forked from.
    void sample_chunks(SchedulerOutput& out, StepTokens& t, StepResult& res);
    void fork_choices(Req& parent, const ScheduledChunk& ch, const float* raw, SchedulerOutput& out, StepTokens& t);
    void promote_choice(Req& parent);
    void cut_at_stops(const SchedulerOutput& out, StepTokens& t);
    // min_new_tokens: -inf on the end-of-generation logits of the rows that would give output
    // token n_output + j (j < n_rows) while that is below the request's minimum.
    void hold_eog(const Req& r, int n_output, float* logits, int n_rows) const;
    void stream(const SchedulerOutput& out, StepTokens& t, StepResult& res);
    void emit(Req& r, TokenEvent ev);
    void finish(RequestId id, FinishReason why);
    void publish(StepResult& res, double t_start_ms);
    // After a cancel between steps: the newest step's snapshot again (same step number) with
    // the state as it is now, so views do not keep showing a request that is gone.
    void republish();
    double clock_ms(std::chrono::steady_clock::time_point t) const;

    // Beam search (engine_beam.cpp).
    void init_beam(Req& r, int width, int max_tokens, bool ignore_eos);
    void beam_collect(Req& r, const float* logits);
    int beam_candidates(const BeamGroup& g) const;
    void advance_beams(const std::vector<BeamGroup*>& groups, std::vector<RequestId>* finished);
    void beam_advance(BeamGroup& g, std::vector<RequestId>* finished);
    void beam_finish(BeamGroup& g, std::vector<RequestId>* finished);

    // Speculative decoding (engine_spec.cpp).
    Result<DraftRunner*> draft_runner_for(const GenerationRequest& req) const;
    void init_spec(Req& r, const SpecParams& spec, DraftRunner* runner);
    double propose_drafts();  // returns the ms it took
    VerifyResult verify_chunk(Req& r, const ScheduledChunk& ch, float* logits, double verify_ms);
    void record_fates(Req& r, const ScheduledChunk& ch, const VerifyResult& v, size_t n_kept, int64_t step);
    void charge_draft_time(const SchedulerOutput& out, double draft_ms);
    void release_drafts(RequestId id);

    std::shared_ptr<const Model> m_model;
    std::shared_ptr<const Tokenizer> m_tok;
    std::unique_ptr<Backend> m_backend;
    std::string m_backend_note;
    std::unique_ptr<KvTensors> m_kv;
    // The sliding-window layers' own pool (kv_pool_plan.h), or null.
    std::unique_ptr<KvTensors> m_kv_swa;
    std::unique_ptr<KvTiers> m_tiers;  // before m_kv_mgr, which points at it: outlives it
    std::unique_ptr<KVCacheManager> m_kv_mgr;
    // KV eviction (engine_eviction.cpp).
    // The request's eviction state (null when s is off), or why the engine cannot run it.
    Result<std::unique_ptr<KvEvictionState>> make_eviction(const KvEvictionSetting& s, int n_prompt, int max_tokens,
                                                           bool beams_or_spec) const;
    void eviction_preempted(const SchedulerOutput& out);
    void eviction_batch(const SchedulerOutput& out);
    void eviction_collect_mass(const SchedulerOutput& out);
    Status evict_over_budget(const SchedulerOutput& out);
    void eviction_view(RequestView& v) const;

    std::unique_ptr<Scheduler> m_sched;
    std::unique_ptr<LlamaForward> m_forward;
    std::vector<uint8_t> m_host_blocks;  // swap tier: [n_host_blocks, block_bytes]
    std::unordered_map<RequestId, std::unique_ptr<Req>> m_reqs;
    RequestId m_next_id = 1;
    RequestId m_next_beam_id = -1;  // beams other than the first get ids -1, -2, ...
    int m_max_model_len = 0;
    std::shared_ptr<SnapshotRing> m_ring;
    int m_snapshot_every = 1;
    std::chrono::steady_clock::time_point m_t0;
    double m_held_ms = 0;  // clock time held before m_hold_t0
    bool m_clock_held = false;
    std::chrono::steady_clock::time_point m_hold_t0;  // since when it is held
    StepRecord m_last_record;                         // the newest published step
    bool m_published = false;                         // a step was published
    std::vector<RequestMetrics> m_removed_metrics;
    std::vector<std::unique_ptr<DraftRunner>> m_drafts;
    SpecStats m_spec_totals;
    AcceptRule m_accept_rule = AcceptRule::exact;
    std::vector<int32_t> m_eog_ids;  // the tokenizer's end-of-generation ids (min_new_tokens)
    int64_t m_total_prompt_tokens = 0, m_total_generated = 0, m_total_finished = 0;
    std::unique_ptr<StepBuffers> m_buf;       // reused by every step
    std::unique_ptr<OpCostModel> m_op_model;  // the op timer's counts; null: not timed
    std::vector<OpStepRecord> m_op_steps;     // the roofline's steps (keep_op_step)
};

}  // namespace kvs
