// JSON conversion of the telemetry structs and the trace file (format in trace_json.h).
#include "engine/telemetry/trace_json.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

namespace kvs {

using nlohmann::json;

namespace {

// A field copied to and from a key of the same name. Reading: a missing key keeps the
// default, a present one must have the right type (get_to throws otherwise).
#define KVS_PUT(name) j[#name] = v.name
#define KVS_GET(name)                                                   \
    do {                                                                \
        if (auto it = j.find(#name); it != j.end()) it->get_to(v.name); \
    } while (0)

// Doubles that may be NaN (empty distributions): null in JSON.
double get_double_or_nan(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::numeric_limits<double>::quiet_NaN();
    return it->get<double>();
}

// Enum <-> name tables. Unknown names throw json::other_error with the name and the enum.
template <typename E, size_t N>
void enum_to_json(json& j, E v, const std::pair<E, const char*> (&table)[N]) {
    for (const auto& [e, name] : table)
        if (e == v) {
            j = name;
            return;
        }
    j = static_cast<int>(v);  // a value added to the enum but not to the table: still readable
}

template <typename E, size_t N>
void enum_from_json(const json& j, E& v, const std::pair<E, const char*> (&table)[N], const char* what) {
    const std::string s = j.get<std::string>();
    for (const auto& [e, name] : table)
        if (s == name) {
            v = e;
            return;
        }
    std::string names;
    for (const auto& [e, name] : table) names += std::string(names.empty() ? "" : ", ") + name;
    throw json::other_error::create(
        501, "unknown " + std::string(what) + " \"" + s + "\" (expected one of " + names + ")", &j);
}

constexpr std::pair<BlockSlotState, const char*> kBlockStates[] = {
    {BlockSlotState::free, "free"},       {BlockSlotState::used, "used"},   {BlockSlotState::cached, "cached"},
    {BlockSlotState::swapped, "swapped"}, {BlockSlotState::freed, "freed"},
};
constexpr std::pair<RequestStatus, const char*> kRequestStatuses[] = {
    {RequestStatus::waiting, "waiting"},
    {RequestStatus::running, "running"},
    {RequestStatus::swapped, "swapped"},
    {RequestStatus::finished, "finished"},
};
constexpr std::pair<FinishReason, const char*> kFinishReasons[] = {
    {FinishReason::none, "none"},           {FinishReason::stop, "stop"},         {FinishReason::length, "length"},
    {FinishReason::cancelled, "cancelled"}, {FinishReason::rejected, "rejected"},
};

}  // namespace

// ---- enums ----------------------------------------------------------------------------

void to_json(json& j, BlockSlotState v) { enum_to_json(j, v, kBlockStates); }
void from_json(const json& j, BlockSlotState& v) { enum_from_json(j, v, kBlockStates, "block state"); }
void to_json(json& j, RequestStatus v) { enum_to_json(j, v, kRequestStatuses); }
void from_json(const json& j, RequestStatus& v) { enum_from_json(j, v, kRequestStatuses, "request status"); }
void to_json(json& j, FinishReason v) { enum_to_json(j, v, kFinishReasons); }
void from_json(const json& j, FinishReason& v) { enum_from_json(j, v, kFinishReasons, "finish reason"); }

// ---- block map and request table ------------------------------------------------------

void to_json(json& j, const BlockView& v) {
    j = json::object();
    KVS_PUT(block_id);
    KVS_PUT(state);
    KVS_PUT(ref_cnt);
    KVS_PUT(owners);
    KVS_PUT(n_filled);
    KVS_PUT(hashed);
}

void from_json(const json& j, BlockView& v) {
    KVS_GET(block_id);
    KVS_GET(state);
    KVS_GET(ref_cnt);
    KVS_GET(owners);
    KVS_GET(n_filled);
    KVS_GET(hashed);
}

void to_json(json& j, const HostBlockView& v) {
    j = json::object();
    KVS_PUT(host_block);
    KVS_PUT(owner);
}

void from_json(const json& j, HostBlockView& v) {
    KVS_GET(host_block);
    KVS_GET(owner);
}

void to_json(json& j, const RequestView& v) {
    j = json::object();
    KVS_PUT(id);
    KVS_PUT(status);
    KVS_PUT(finish_reason);
    KVS_PUT(priority);
    KVS_PUT(n_prompt);
    KVS_PUT(n_output);
    KVS_PUT(max_tokens);
    KVS_PUT(num_computed_tokens);
    KVS_PUT(num_cached_tokens);
    KVS_PUT(block_ids);
    if (!v.local_block_ids.empty()) KVS_PUT(local_block_ids);
    KVS_PUT(n_host_blocks);
    KVS_PUT(num_preemptions);
}

void from_json(const json& j, RequestView& v) {
    KVS_GET(id);
    KVS_GET(status);
    KVS_GET(finish_reason);
    KVS_GET(priority);
    KVS_GET(n_prompt);
    KVS_GET(n_output);
    KVS_GET(max_tokens);
    KVS_GET(num_computed_tokens);
    KVS_GET(num_cached_tokens);
    KVS_GET(block_ids);
    KVS_GET(local_block_ids);
    KVS_GET(n_host_blocks);
    KVS_GET(num_preemptions);
}

// ---- steps ----------------------------------------------------------------------------

// One list of StepRecord fields for both directions.
#define KVS_STEP_FIELDS(F)   \
    F(step);                 \
    F(t_start_ms);           \
    F(duration_ms);          \
    F(schedule_ms);          \
    F(forward_ms);           \
    F(sample_ms);            \
    F(n_seqs);               \
    F(prefill_tokens);       \
    F(decode_tokens);        \
    F(padding_tokens);       \
    F(token_budget);         \
    F(max_seqs);             \
    F(preemptions);          \
    F(swap_out_blocks);      \
    F(swap_in_blocks);       \
    F(cow_copies);           \
    F(prefix_hit_tokens);    \
    F(n_waiting);            \
    F(n_running);            \
    F(n_swapped);            \
    F(n_finished_this_step); \
    F(spec_drafted);         \
    F(spec_accepted);        \
    F(spec_emitted);         \
    F(draft_ms);             \
    F(blocks_used);          \
    F(blocks_cached);        \
    F(blocks_free);          \
    F(n_blocks);             \
    F(kv_usage);             \
    F(tokens_in_kv);         \
    F(internal_waste);       \
    F(local_blocks_used);    \
    F(n_local_blocks)

void to_json(json& j, const StepRecord& v) {
    j = json::object();
    KVS_STEP_FIELDS(KVS_PUT);
}

void from_json(const json& j, StepRecord& v) { KVS_STEP_FIELDS(KVS_GET); }

void to_json(json& j, const KVCacheStats& v) {
    j = json{{"query_tokens", v.query_tokens},
             {"hit_tokens", v.hit_tokens},
             {"block_queries", v.blocks.queries},
             {"block_hits", v.blocks.hits},
             {"block_evictions", v.blocks.evictions}};
}

void from_json(const json& j, KVCacheStats& v) {
    KVS_GET(query_tokens);
    KVS_GET(hit_tokens);
    if (auto it = j.find("block_queries"); it != j.end()) it->get_to(v.blocks.queries);
    if (auto it = j.find("block_hits"); it != j.end()) it->get_to(v.blocks.hits);
    if (auto it = j.find("block_evictions"); it != j.end()) it->get_to(v.blocks.evictions);
}

// ---- per request ----------------------------------------------------------------------

void to_json(json& j, const RequestMetrics& v) {
    j = json::object();
    KVS_PUT(id);
    KVS_PUT(arrival_ms);
    KVS_PUT(first_scheduled_ms);
    KVS_PUT(first_token_ms);
    KVS_PUT(finish_ms);
    KVS_PUT(token_times_ms);
    KVS_PUT(n_prompt);
    KVS_PUT(n_output);
    KVS_PUT(finish_reason);
    // Derived, for readers of the file (not read back).
    j["queue_ms"] = v.queue_ms();
    j["ttft_ms"] = v.ttft_ms();
    j["tpot_ms"] = v.tpot_ms();
    j["e2e_ms"] = v.e2e_ms();
}

void from_json(const json& j, RequestMetrics& v) {
    KVS_GET(id);
    KVS_GET(arrival_ms);
    KVS_GET(first_scheduled_ms);
    KVS_GET(first_token_ms);
    KVS_GET(finish_ms);
    KVS_GET(token_times_ms);
    KVS_GET(n_prompt);
    KVS_GET(n_output);
    KVS_GET(finish_reason);
}

// ---- snapshot -------------------------------------------------------------------------

void to_json(json& j, const ChunkView& v) {
    j = json::object();
    KVS_PUT(id);
    KVS_PUT(start_pos);
    KVS_PUT(num_tokens);
    KVS_PUT(prefill);
    KVS_PUT(padding);
}

void from_json(const json& j, ChunkView& v) {
    KVS_GET(id);
    KVS_GET(start_pos);
    KVS_GET(num_tokens);
    KVS_GET(prefill);
    KVS_GET(padding);
}

void to_json(json& j, const EngineSnapshot& v) {
    j = json::object();
    KVS_PUT(step);
    KVS_PUT(block_size);
    KVS_PUT(max_model_len);
    KVS_PUT(chunks);
    KVS_PUT(blocks);
    if (!v.local_blocks.empty()) {
        KVS_PUT(local_blocks);
        KVS_PUT(sliding_window);
        KVS_PUT(n_local_layers);
        KVS_PUT(n_layers);
        KVS_PUT(total_freed_blocks);
    }
    KVS_PUT(host_blocks);
    KVS_PUT(n_host_blocks);
    KVS_PUT(requests);
    KVS_PUT(kv_stats);
    KVS_PUT(total_preemptions);
    KVS_PUT(total_prompt_tokens);
    KVS_PUT(total_generated_tokens);
    KVS_PUT(total_finished);
    KVS_PUT(total_swap_out_blocks);
    KVS_PUT(total_swap_in_blocks);
    KVS_PUT(total_cow_copies);
    KVS_PUT(prefix_hit_rate);
}

void from_json(const json& j, EngineSnapshot& v) {
    KVS_GET(step);
    KVS_GET(block_size);
    KVS_GET(max_model_len);
    KVS_GET(chunks);
    KVS_GET(blocks);
    KVS_GET(local_blocks);
    KVS_GET(sliding_window);
    KVS_GET(n_local_layers);
    KVS_GET(n_layers);
    KVS_GET(total_freed_blocks);
    KVS_GET(host_blocks);
    KVS_GET(n_host_blocks);
    KVS_GET(requests);
    KVS_GET(kv_stats);
    KVS_GET(total_preemptions);
    KVS_GET(total_prompt_tokens);
    KVS_GET(total_generated_tokens);
    KVS_GET(total_finished);
    KVS_GET(total_swap_out_blocks);
    KVS_GET(total_swap_in_blocks);
    KVS_GET(total_cow_copies);
    KVS_GET(prefix_hit_rate);
}

// ---- latency summary ------------------------------------------------------------------

void to_json(json& j, const Distribution& v) {
    // nlohmann dumps NaN as null; say so explicitly so the in-memory json matches the file.
    auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
    j = json{{"count", v.count},  {"mean", num(v.mean)}, {"min", num(v.min)}, {"max", num(v.max)},
             {"p50", num(v.p50)}, {"p90", num(v.p90)},   {"p99", num(v.p99)}};
}

void from_json(const json& j, Distribution& v) {
    KVS_GET(count);
    v.mean = get_double_or_nan(j, "mean");
    v.min = get_double_or_nan(j, "min");
    v.max = get_double_or_nan(j, "max");
    v.p50 = get_double_or_nan(j, "p50");
    v.p90 = get_double_or_nan(j, "p90");
    v.p99 = get_double_or_nan(j, "p99");
}

void to_json(json& j, const LatencySummary& v) {
    j = json::object();
    KVS_PUT(n_requests);
    KVS_PUT(n_finished);
    KVS_PUT(n_cancelled);
    KVS_PUT(n_rejected);
    KVS_PUT(prompt_tokens);
    KVS_PUT(output_tokens);
    KVS_PUT(span_ms);
    KVS_PUT(output_tok_per_s);
    KVS_PUT(ttft_ms);
    KVS_PUT(tpot_ms);
    KVS_PUT(itl_ms);
    KVS_PUT(queue_ms);
    KVS_PUT(e2e_ms);
}

void from_json(const json& j, LatencySummary& v) {
    KVS_GET(n_requests);
    KVS_GET(n_finished);
    KVS_GET(n_cancelled);
    KVS_GET(n_rejected);
    KVS_GET(prompt_tokens);
    KVS_GET(output_tokens);
    KVS_GET(span_ms);
    KVS_GET(output_tok_per_s);
    KVS_GET(ttft_ms);
    KVS_GET(tpot_ms);
    KVS_GET(itl_ms);
    KVS_GET(queue_ms);
    KVS_GET(e2e_ms);
}

#undef KVS_STEP_FIELDS
#undef KVS_PUT
#undef KVS_GET

// ---- trace file -----------------------------------------------------------------------

json trace_to_json(const json& meta, const std::vector<StepRecord>& steps,
                   const std::vector<std::shared_ptr<const EngineSnapshot>>& snapshots,
                   const std::vector<RequestMetrics>& requests) {
    json snaps = json::array();
    for (const auto& s : snapshots)
        if (s) snaps.push_back(*s);
    json j = json::object();
    j["format"] = kTraceFormat;
    j["version"] = kTraceVersion;
    j["meta"] = meta.is_null() ? json::object() : meta;
    j["summary"] = summarize(requests);
    j["steps"] = steps;
    j["snapshots"] = std::move(snaps);
    j["requests"] = requests;
    return j;
}

Status write_trace(const std::string& path, const json& meta, const std::vector<StepRecord>& steps,
                   const std::vector<std::shared_ptr<const EngineSnapshot>>& snapshots,
                   const std::vector<RequestMetrics>& requests, int indent) {
    const std::string text = trace_to_json(meta, steps, snapshots, requests).dump(indent);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return Status::error("cannot write trace " + path + ": " + std::strerror(errno));
    out << text << '\n';
    out.flush();
    if (!out) return Status::error("writing trace " + path + " failed: " + std::strerror(errno));
    return Status::ok();
}

Result<Trace> read_trace(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Result<Trace>::error("cannot open trace " + path + ": " + std::strerror(errno));
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Result<Trace>::error("trace " + path + " is not valid JSON");
    if (!j.is_object() || j.value("format", std::string()) != kTraceFormat)
        return Result<Trace>::error("trace " + path + ": \"format\" is not \"" + kTraceFormat + "\"");
    const int version = j.value("version", 0);
    if (version != kTraceVersion)
        return Result<Trace>::error("trace " + path + ": version " + std::to_string(version) +
                                    " is not supported (expected " + std::to_string(kTraceVersion) + ")");
    Trace t;
    // Each section read on its own so the error says which one was wrong.
    auto section = [&](const char* key, auto& into) -> Status {
        auto it = j.find(key);
        if (it == j.end()) return Status::ok();
        try {
            it->get_to(into);
        } catch (const json::exception& e) {
            return Status::error("trace " + path + ": \"" + key + "\": " + e.what());
        }
        return Status::ok();
    };
    t.meta = json::object();
    KVS_RETURN_IF_ERROR(section("meta", t.meta));
    KVS_RETURN_IF_ERROR(section("summary", t.summary));
    KVS_RETURN_IF_ERROR(section("steps", t.steps));
    KVS_RETURN_IF_ERROR(section("snapshots", t.snapshots));
    KVS_RETURN_IF_ERROR(section("requests", t.requests));
    return t;
}

}  // namespace kvs
