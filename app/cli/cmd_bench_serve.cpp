// kvscope bench --workload / --sweep: the batching engine under load.
//
// --workload SPEC replays a generated workload (engine/runtime/workload.h) in real time:
// each request is submitted when its arrival time comes, the engine steps while it has
// work, and every request generates exactly its drawn output length (end-of-generation is
// ignored). Each policy (continuous, static, or both) runs the same workload on a fresh
// engine. Reported per policy: output throughput, TTFT / TPOT / ITL percentiles, KV use,
// internal waste of the paged pool against two contiguous reservation baselines (each
// running request reserving max_model_len, or its own prompt + max_tokens), prefix-cache
// hit rate, preemptions.
//
// --sweep 1,2,4,...: aggregated decode throughput per batch size: B identical requests
// (prompt --sweep-prompt, output --sweep-gen tokens) at once, max_num_seqs = B; decode
// tok/s counts only the steps that decode every request of the batch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "app/cli/commands.h"
#include "engine/runtime/workload.h"
#include "engine/telemetry/snapshot_ring.h"

namespace kvs::app {
namespace {

struct PolicyRun {
    std::string policy;
    LatencySummary lat;
    int64_t steps = 0;
    double wall_s = 0;
    double total_tok_per_s = 0;  // (prompt + output tokens computed) / wall
    double kv_util_mean = 0, kv_util_peak = 0;
    double waste_paged = 0;    // 1 - tokens in KV / slots of used blocks, over all steps
    double waste_max_len = 0;  // 1 - tokens in KV / (holders x max_model_len)
    double waste_request = 0;  // 1 - tokens in KV / (sum of holders' prompt + max_tokens)
    double prefix_hit_rate = 0;
    int64_t preemptions = 0, swapped_blocks = 0, padding_tokens = 0;
    int64_t kv_pool_bytes = 0;
    int kv_blocks = 0;
    std::vector<StepRecord> records;
    std::vector<std::shared_ptr<const EngineSnapshot>> snapshots;
    std::vector<RequestMetrics> metrics;
};

EngineOptions engine_options(const BenchOptions& o, int max_seqs) {
    EngineOptions e = engine_options_from(o.runner);
    e.kv_blocks = o.kv_blocks;
    e.kv_bytes = o.kv_mib > 0 ? static_cast<int64_t>(o.kv_mib * 1048576.0) : int64_t{1} << 30;  // --kv-mib default
    e.prefix_caching = !o.no_prefix_cache;
    e.scheduler.max_num_batched_tokens = o.step_budget;
    e.scheduler.max_num_seqs = max_seqs;
    e.scheduler.static_batch_size = max_seqs;
    e.scheduler.preemption = o.preemption == "swap" ? PreemptionMode::swap : PreemptionMode::recompute;
    e.snapshot_every = 0;  // step records only: the bench samples full snapshots itself
    o.tiers.apply(e);
    e.step_ring = 1 << 20;
    return e;
}

Result<PolicyRun> run_policy(const Session& session, const BenchOptions& o, const std::string& policy,
                             const std::vector<WorkloadRequest>& work) {
    using R = Result<PolicyRun>;
    EngineOptions eo = engine_options(o, o.max_seqs);
    eo.scheduler.policy = policy == "static" ? BatchingPolicy::static_batch : BatchingPolicy::continuous;
    if (eo.scheduler.preemption == PreemptionMode::swap) eo.scheduler.n_host_blocks = o.host_blocks;
    auto created = session.make_engine(eo, false);
    if (!created) return R::error(created.message());
    Engine& e = **created;
    PolicyRun run;
    run.policy = policy;
    run.kv_pool_bytes = e.kv_pool_bytes();
    run.kv_blocks = e.kv_cache().n_blocks();

    const double t0 = e.ms_since_start();
    size_t next = 0;
    // Paged waste compares physical slots (a shared prefix block counts once); the
    // contiguous baselines compare each holder's own tokens with its own reservation.
    double phys_tok_sum = 0, tok_sum = 0, slot_sum = 0, max_len_sum = 0, req_sum = 0, util_sum = 0;
    int64_t computed_tokens = 0;
    while (next < work.size() || e.has_work()) {
        const double now = e.ms_since_start() - t0;
        for (; next < work.size() && work[next].arrival_s * 1000.0 <= now; ++next) {
            GenerationRequest g;
            g.prompt = work[next].prompt;
            g.params.temperature = 0;
            g.params.max_tokens = work[next].max_tokens;
            g.params.ignore_eos = true;
            g.priority = work[next].priority;
            g.arrival_ms = t0 + work[next].arrival_s * 1000.0;
            if (auto id = e.submit(g); !id)
                return R::error("workload request " + std::to_string(next) + ": " + id.message());
        }
        if (!e.has_work()) {
            if (next < work.size()) {
                const double wait_ms = work[next].arrival_s * 1000.0 - (e.ms_since_start() - t0);
                if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait_ms));
            }
            continue;
        }
        auto st = e.step();
        if (!st) return R::error(st.message());
        if (!st->ran) return R::error("the engine could not schedule any request (KV pool too small?)");
        const StepRecord& rec = st->record;
        computed_tokens += rec.prefill_tokens + rec.decode_tokens;
        run.padding_tokens += st->out.num_padding_tokens;
        // KV held after the step, by request: the paged pool against contiguous reservations.
        for (const SchedRequest* r : e.scheduler().requests()) {
            const int held = e.kv_cache().num_tokens(r->id);
            if (held == 0 && e.kv_cache().block_table(r->id).empty()) continue;
            tok_sum += held;
            max_len_sum += e.max_model_len();
            req_sum += r->num_prompt() + r->max_tokens;
        }
        phys_tok_sum += static_cast<double>(rec.tokens_in_kv);
        slot_sum += static_cast<double>(rec.blocks_used) * e.block_size();
        util_sum += rec.kv_usage;
        run.kv_util_peak = std::max(run.kv_util_peak, rec.kv_usage);
        ++run.steps;
        e.remove_finished();
    }
    run.wall_s = (e.ms_since_start() - t0) / 1000.0;
    run.records = e.telemetry()->recent_steps(static_cast<size_t>(run.steps));
    run.snapshots.push_back(
        std::make_shared<const EngineSnapshot>(e.snapshot(run.records.empty() ? StepRecord{} : run.records.back())));
    run.metrics = e.finished_metrics();
    for (const auto& m : e.request_metrics()) run.metrics.push_back(m);
    run.lat = summarize(run.metrics);
    run.total_tok_per_s = run.wall_s > 0 ? computed_tokens / run.wall_s : 0;
    run.kv_util_mean = run.steps ? util_sum / run.steps : 0;
    run.waste_paged = slot_sum > 0 ? 1.0 - phys_tok_sum / slot_sum : 0;
    run.waste_max_len = max_len_sum > 0 ? 1.0 - tok_sum / max_len_sum : 0;
    run.waste_request = req_sum > 0 ? 1.0 - tok_sum / req_sum : 0;
    run.prefix_hit_rate = prefix_hit_rate(e.kv_cache().stats());
    run.preemptions = e.scheduler().counters().preemptions;
    run.swapped_blocks = e.scheduler().counters().swapped_out_blocks;
    return run;
}

nlohmann::json run_json(const PolicyRun& r) {
    nlohmann::json j;
    j["policy"] = r.policy;
    j["latency"] = r.lat;
    j["steps"] = r.steps;
    j["wall_s"] = r.wall_s;
    j["output_tok_per_s"] = r.lat.output_tok_per_s;
    j["total_tok_per_s"] = r.total_tok_per_s;
    j["kv_util_mean"] = r.kv_util_mean;
    j["kv_util_peak"] = r.kv_util_peak;
    j["kv_waste_paged"] = r.waste_paged;
    j["kv_waste_contiguous_max_len"] = r.waste_max_len;
    j["kv_waste_contiguous_request"] = r.waste_request;
    j["prefix_hit_rate"] = r.prefix_hit_rate;
    j["preemptions"] = r.preemptions;
    j["swapped_out_blocks"] = r.swapped_blocks;
    j["padding_tokens"] = r.padding_tokens;
    j["kv_pool_bytes"] = r.kv_pool_bytes;
    j["kv_blocks"] = r.kv_blocks;
    return j;
}

std::vector<int> parse_int_list(const std::string& s) {
    std::vector<int> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        try {
            size_t used = 0;
            const int x = std::stoi(item, &used);
            if (used != item.size() || x < 1) return {};
            v.push_back(x);
        } catch (...) {
            return {};
        }
    }
    return v;
}

int run_sweep(const Session& session, const BenchOptions& o) {
    const Model* model = &session.model();
    const std::vector<int> sizes = parse_int_list(o.sweep);
    if (sizes.empty()) {
        std::fprintf(stderr, "error: --sweep wants batch sizes like 1,2,4,8 (positive integers), got '%s'\n",
                     o.sweep.c_str());
        return 1;
    }
    nlohmann::json rows = nlohmann::json::array();
    if (!o.json) {
        std::printf("| batch | decode tok/s (aggregate) | per sequence tok/s | ms / step | vs batch %d |\n",
                    sizes.front());
        std::printf("| ---: | ---: | ---: | ---: | ---: |\n");
    }
    double base = 0;
    WorkloadSpec spec;
    spec.kind = "uniform";
    spec.prompt_min = spec.prompt_max = o.sweep_prompt;
    spec.output_min = spec.output_max = o.sweep_gen;
    spec.n_vocab = model->config.n_vocab;
    spec.first_token_id = std::min<int32_t>(32, model->config.n_vocab - 1);
    for (int b : sizes) {
        EngineOptions eo = engine_options(o, b);
        auto created = session.make_engine(eo, false);
        if (!created) {
            std::fprintf(stderr, "error: %s\n", created.message().c_str());
            return 1;
        }
        Engine& e = **created;
        spec.n_requests = b;
        auto work = make_workload(spec);
        if (!work) {
            std::fprintf(stderr, "error: %s\n", work.message().c_str());
            return 1;
        }
        for (const auto& w : *work) {
            GenerationRequest g;
            g.prompt = w.prompt;
            g.params.temperature = 0;
            g.params.max_tokens = w.max_tokens;
            g.params.ignore_eos = true;
            if (auto id = e.submit(g); !id) {
                std::fprintf(stderr, "error: batch %d: %s\n", b, id.message().c_str());
                return 1;
            }
        }
        double decode_ms = 0;
        int64_t decode_tokens = 0, decode_steps = 0;
        while (e.has_work()) {
            auto st = e.step();
            if (!st || !st->ran) {
                std::fprintf(stderr, "error: batch %d: %s\n", b, st ? "nothing schedulable" : st.message().c_str());
                return 1;
            }
            if (st->record.prefill_tokens == 0 && st->record.decode_tokens == b) {
                decode_ms += st->total_ms;
                decode_tokens += b;
                ++decode_steps;
            }
        }
        const double tps = decode_ms > 0 ? decode_tokens * 1000.0 / decode_ms : 0;
        if (base == 0) base = tps;
        rows.push_back({{"batch", b},
                        {"decode_tok_per_s", tps},
                        {"decode_steps", decode_steps},
                        {"ms_per_step", decode_steps ? decode_ms / decode_steps : 0},
                        {"vs_first", base > 0 ? tps / base : 0}});
        if (!o.json)
            std::printf("| %d | %.1f | %.1f | %.2f | %.2fx |\n", b, tps, tps / b,
                        decode_steps ? decode_ms / decode_steps : 0, base > 0 ? tps / base : 0);
        std::fflush(stdout);
    }
    nlohmann::json j = {{"model", model->path},
                        {"sweep", rows},
                        {"prompt_tokens", o.sweep_prompt},
                        {"gen_tokens", o.sweep_gen},
                        {"kv_type", kv_type_name(o.runner.kv_type)},
                        {"kv_bytes_per_token", session.kv_bytes_per_token(o.runner.kv_type)}};
    if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
    if (o.json) std::printf("%s\n", j.dump(2).c_str());
    return 0;
}

}  // namespace

int cmd_bench_serve(const BenchOptions& o) {
    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    const Model* model = &session->model();
    if (!o.sweep.empty()) return run_sweep(*session, o);

    auto spec = parse_workload_spec(o.workload);
    if (!spec) {
        std::fprintf(stderr, "error: --workload: %s\n", spec.message().c_str());
        return 1;
    }
    spec->n_vocab = model->config.n_vocab;
    spec->first_token_id = std::min<int32_t>(spec->first_token_id, model->config.n_vocab - 1);
    auto work = make_workload(*spec);
    if (!work) {
        std::fprintf(stderr, "error: --workload: %s\n", work.message().c_str());
        return 1;
    }
    std::vector<std::string> policies;
    if (o.policy == "both") policies = {"continuous", "static"};
    else
        policies = {o.policy};

    std::vector<PolicyRun> runs;
    for (const auto& p : policies) {
        if (!o.json)
            std::fprintf(stderr, "running %s batching on %s (%zu requests)...\n", p.c_str(),
                         workload_spec_string(*spec).c_str(), work->size());
        auto r = run_policy(*session, o, p, *work);
        if (!r) {
            std::fprintf(stderr, "error: %s batching: %s\n", p.c_str(), r.message().c_str());
            return 1;
        }
        runs.push_back(std::move(*r));
    }

    nlohmann::json j;
    j["model"] = model->path;
    j["workload"] = workload_spec_string(*spec);
    j["max_seqs"] = o.max_seqs;
    j["step_budget"] = o.step_budget;
    j["block_size"] = o.runner.block_size;
    j["kv_type"] = kv_type_name(o.runner.kv_type);
    j["kv_bytes_per_token"] = session->kv_bytes_per_token(o.runner.kv_type);
    j["runs"] = nlohmann::json::array();
    for (const auto& r : runs) j["runs"].push_back(run_json(r));
    if (runs.size() == 2 && runs[1].lat.output_tok_per_s > 0)
        j["continuous_vs_static"] = runs[0].lat.output_tok_per_s / runs[1].lat.output_tok_per_s;
    if (!o.trace.empty()) {
        const PolicyRun& r = runs.front();
        nlohmann::json meta = j;
        meta["policy"] = r.policy;
        if (auto s = write_trace(o.trace, meta, r.records, r.snapshots, r.metrics); !s) {
            std::fprintf(stderr, "error: --trace: %s\n", s.message().c_str());
            return 1;
        }
    }
    if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
        return 0;
    }
    std::printf("workload %s, %zu requests, max %d sequences, step budget %d tokens, blocks of %d\n",
                workload_spec_string(*spec).c_str(), work->size(), o.max_seqs, o.step_budget, o.runner.block_size);
    std::printf("KV cache %s: %lld bytes per token, pool of %d blocks (%.1f MiB)\n\n",
                kv_type_name(o.runner.kv_type).c_str(),
                static_cast<long long>(session->kv_bytes_per_token(o.runner.kv_type)), runs.front().kv_blocks,
                runs.front().kv_pool_bytes / 1048576.0);
    std::printf(
        "| policy | out tok/s | total tok/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | ITL p99 ms | KV util mean / peak "
        "| waste paged | waste max-len | waste per-request | prefix hits | preemptions |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const auto& r : runs)
        std::printf(
            "| %s | %.1f | %.1f | %.0f / %.0f | %.1f / %.1f | %.1f | %.0f%% / %.0f%% | %.2f%% | %.1f%% | %.1f%% | "
            "%.1f%% "
            "| %lld |\n",
            r.policy.c_str(), r.lat.output_tok_per_s, r.total_tok_per_s, r.lat.ttft_ms.p50, r.lat.ttft_ms.p99,
            r.lat.tpot_ms.p50, r.lat.tpot_ms.p99, r.lat.itl_ms.p99, 100 * r.kv_util_mean, 100 * r.kv_util_peak,
            100 * r.waste_paged, 100 * r.waste_max_len, 100 * r.waste_request, 100 * r.prefix_hit_rate,
            static_cast<long long>(r.preemptions));
    if (runs.size() == 2 && runs[1].lat.output_tok_per_s > 0)
        std::printf("\ncontinuous / static output throughput: %.2fx\n",
                    runs[0].lat.output_tok_per_s / runs[1].lat.output_tok_per_s);
    return 0;
}

}  // namespace kvs::app
