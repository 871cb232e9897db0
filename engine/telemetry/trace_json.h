#pragma once
// Telemetry as JSON: nlohmann to_json/from_json for every telemetry struct, and the trace
// file `kvscope bench --trace out.json` writes (and the GUI can replay).
//
// Trace file format (version 1), one JSON object:
// {
//   "format": "kvscope-trace", "version": 1,
//   "meta":      { ... },                 // free-form, from the caller: model, workload, config, ...
//   "summary":   LatencySummary,          // summarize(requests), written for convenience
//   "steps":     [ StepRecord, ... ],     // oldest first
//   "snapshots": [ EngineSnapshot, ... ], // oldest first, usually the last few of the run
//   "requests":  [ RequestMetrics, ... ]
// }
// Objects use the C++ field names as keys, so the structs in snapshot.h and
// latency_stats.h are the schema:
//   StepRecord      {"step", "t_start_ms", "duration_ms", "schedule_ms", "forward_ms", "sample_ms",
//                    "n_seqs", "prefill_tokens", "decode_tokens", "padding_tokens", "token_budget",
//                    "max_seqs", "preemptions",
//                    "swap_out_blocks", "swap_in_blocks", "cow_copies", "prefix_hit_tokens",
//                    "n_waiting", "n_running", "n_swapped", "n_finished_this_step", "blocks_used",
//                    "blocks_cached", "blocks_free", "n_blocks", "kv_usage", "tokens_in_kv",
//                    "internal_waste"}
//   EngineSnapshot  {"step": StepRecord, "block_size", "max_model_len", "chunks": [ChunkView
//                    {"id", "start_pos", "num_tokens", "prefill", "padding"}], "blocks": [BlockView], "host_blocks":
//                    [HostBlockView], "n_host_blocks", "requests": [RequestView], "kv_stats":
//                    KVCacheStats, "total_preemptions", "total_prompt_tokens",
//                    "total_generated_tokens", "total_finished", "total_swap_out_blocks",
//                    "total_swap_in_blocks", "total_cow_copies", "prefix_hit_rate"}
//   BlockView       {"block_id", "state", "ref_cnt", "owners": [id], "n_filled", "hashed"}
//   HostBlockView   {"host_block", "owner"}
//   RequestView     {"id", "status", "finish_reason", "priority", "n_prompt", "n_output",
//                    "max_tokens", "num_computed_tokens", "num_cached_tokens", "block_ids": [int],
//                    "n_host_blocks", "num_preemptions"}
//   KVCacheStats    {"query_tokens", "hit_tokens", "block_queries", "block_hits", "block_evictions"}
//   RequestMetrics  {"id", "arrival_ms", "first_scheduled_ms", "first_token_ms", "finish_ms",
//                    "token_times_ms": [ms], "n_prompt", "n_output", "finish_reason",
//                    plus derived, ignored when read: "queue_ms", "ttft_ms", "tpot_ms", "e2e_ms"}
//   LatencySummary  {"n_requests", "n_finished", "n_cancelled", "n_rejected", "prompt_tokens",
//                    "output_tokens", "span_ms", "output_tok_per_s", "ttft_ms", "tpot_ms",
//                    "itl_ms", "queue_ms", "e2e_ms"}, each distribution
//                    {"count", "mean", "min", "max", "p50", "p90", "p99"}
// Enums are strings: BlockSlotState "free" | "used" | "cached" | "swapped";
// RequestStatus "waiting" | "running" | "swapped" | "finished";
// FinishReason "none" | "stop" | "length" | "cancelled" | "rejected".
// Times are ms since engine start; -1 = milestone not reached. A NaN statistic (empty
// distribution) is written as null. Reading ignores unknown keys and leaves a missing key at
// its default, so older traces still load; a wrong type or unknown enum string is an error.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/status.h"
#include "engine/telemetry/latency_stats.h"
#include "engine/telemetry/snapshot.h"

namespace kvs {

// Enum <-> string. from_json throws nlohmann::json::exception on an unknown string.
void to_json(nlohmann::json& j, BlockSlotState v);
void from_json(const nlohmann::json& j, BlockSlotState& v);
void to_json(nlohmann::json& j, RequestStatus v);
void from_json(const nlohmann::json& j, RequestStatus& v);
void to_json(nlohmann::json& j, FinishReason v);
void from_json(const nlohmann::json& j, FinishReason& v);

void to_json(nlohmann::json& j, const BlockView& v);
void from_json(const nlohmann::json& j, BlockView& v);
void to_json(nlohmann::json& j, const HostBlockView& v);
void from_json(const nlohmann::json& j, HostBlockView& v);
void to_json(nlohmann::json& j, const RequestView& v);
void from_json(const nlohmann::json& j, RequestView& v);
void to_json(nlohmann::json& j, const StepRecord& v);
void from_json(const nlohmann::json& j, StepRecord& v);
void to_json(nlohmann::json& j, const KVCacheStats& v);
void from_json(const nlohmann::json& j, KVCacheStats& v);
void to_json(nlohmann::json& j, const RequestMetrics& v);
void from_json(const nlohmann::json& j, RequestMetrics& v);
void to_json(nlohmann::json& j, const ChunkView& v);
void from_json(const nlohmann::json& j, ChunkView& v);
void to_json(nlohmann::json& j, const EngineSnapshot& v);
void from_json(const nlohmann::json& j, EngineSnapshot& v);
void to_json(nlohmann::json& j, const Distribution& v);
void from_json(const nlohmann::json& j, Distribution& v);
void to_json(nlohmann::json& j, const LatencySummary& v);
void from_json(const nlohmann::json& j, LatencySummary& v);

inline constexpr const char* kTraceFormat = "kvscope-trace";
inline constexpr int kTraceVersion = 1;

// A trace in memory (what read_trace returns).
struct Trace {
    nlohmann::json meta;  // an object
    LatencySummary summary;
    std::vector<StepRecord> steps;
    std::vector<EngineSnapshot> snapshots;
    std::vector<RequestMetrics> requests;
};

// The trace object described above (summary computed from requests).
nlohmann::json trace_to_json(const nlohmann::json& meta, const std::vector<StepRecord>& steps,
                             const std::vector<std::shared_ptr<const EngineSnapshot>>& snapshots,
                             const std::vector<RequestMetrics>& requests);

// Writes the trace to path (indent < 0: compact, one line). The error names the path and
// the OS error.
Status write_trace(const std::string& path, const nlohmann::json& meta, const std::vector<StepRecord>& steps,
                   const std::vector<std::shared_ptr<const EngineSnapshot>>& snapshots,
                   const std::vector<RequestMetrics>& requests, int indent = -1);

// Reads a trace file back. Errors name the path and what was wrong (not JSON, wrong format
// or version, a field of the wrong type).
Result<Trace> read_trace(const std::string& path);

}  // namespace kvs
