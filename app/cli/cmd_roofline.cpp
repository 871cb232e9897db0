#include "app/cli/cmd_roofline.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/cli_options.h"
#include "app/cli/commands.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/machine_roof.h"
#include "engine/telemetry/snapshot_ring.h"

namespace kvs::app {

CLI::App* add_roofline_command(CLI::App& app, RooflineOptions& o) {
    auto* r = app.add_subcommand("roofline",
                                 "this machine's roof (measured) and each op of prefill and decode steps on it");
    r->add_option("-m,--model", o.model, "model (default " + o.model + ")");
    r->add_option("--batches", o.batches, "decode batch sizes (default 1,2,4,8,16,32,64)");
    r->add_option("--prompt", o.prompt, "prompt tokens per request (default 256)")->check(CLI::Range(1, kMaxTokens));
    r->add_option("--gen", o.gen, "tokens each request generates (default 8)")->check(CLI::Range(2, kMaxTokens));
    r->add_flag("--remeasure", o.remeasure, "measure the roof again (else the cached roof of this machine)");
    r->add_flag("--roof-only", o.roof_only, "measure / print the roof only, run no model");
    r->add_flag("--json", o.json, "print JSON");
    r->add_option("--json-out", o.json_out, "also write the JSON to this file");
    add_cpu_options(r, o.runner);
    return r;
}

namespace {
std::vector<int> parse_batches(const std::string& s) {
    std::vector<int> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) {
        try {
            size_t used = 0;
            const int v = std::stoi(item, &used);
            if (used != item.size() || v < 1 || v > kMaxBatch) return {};
            out.push_back(v);
        } catch (...) {
            return {};
        }
    }
    return out;
}

nlohmann::json op_json(const OpStepRecord& s, const MachineRoof& roof) {
    nlohmann::json ops = nlohmann::json::array();
    for (int k = 0; k < n_op_kinds; ++k) {
        const OpCost& c = s.ops[static_cast<size_t>(k)];
        ops.push_back({{"op", op_kind_name(static_cast<OpKind>(k))},
                       {"flops", c.flops},
                       {"bytes", c.bytes},
                       {"ms", c.ms},
                       {"intensity", c.intensity()},
                       {"gflops", c.gflops()},
                       {"of_roof", roof.attainable_gflops(c.intensity()) > 0
                                       ? c.gflops() / roof.attainable_gflops(c.intensity())
                                       : 0}});
    }
    return {{"step", s.step},          {"prefill", s.prefill},           {"n_tokens", s.n_tokens},
            {"n_seqs", s.n_seqs},      {"decode_tokens", s.decode_tokens}, {"context_tokens", s.context_tokens},
            {"ops", ops}};
}

void print_step(const OpStepRecord& s, const MachineRoof& roof) {
    std::printf("\n%s step %lld: %d tokens of %d sequences (%lld context positions)\n",
                s.prefill ? "prefill" : "decode", static_cast<long long>(s.step), s.n_tokens, s.n_seqs,
                static_cast<long long>(s.context_tokens));
    std::printf("| op | GFLOP | MB moved | FLOP/byte | ms | GFLOP/s | of roof |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int k = 0; k < n_op_kinds; ++k) {
        const OpCost& c = s.ops[static_cast<size_t>(k)];
        if (c.flops <= 0) continue;
        const double att = roof.attainable_gflops(c.intensity());
        std::printf("| %s | %.4f | %.3f | %.2f | %.3f | %.2f | %.0f %% |\n", op_kind_name(static_cast<OpKind>(k)),
                    c.flops / 1e9, c.bytes / 1e6, c.intensity(), c.ms, c.gflops(), att > 0 ? 100 * c.gflops() / att : 0);
    }
}
}  // namespace

int cmd_roofline(const RooflineOptions& o) {
    const std::vector<int> batches = parse_batches(o.batches);
    if (batches.empty()) {
        std::fprintf(stderr, "error: --batches wants batch sizes like 1,2,4,8 (positive integers), got '%s'\n",
                     o.batches.c_str());
        return 1;
    }
    if (!o.json) std::fprintf(stderr, "measuring this machine's roof (or reading %s)...\n",
                              machine_roof_cache_path().c_str());
    auto roof_r = machine_roof(o.runner.n_threads, o.remeasure);
    if (!roof_r) {
        std::fprintf(stderr, "error: %s\n", roof_r.message().c_str());
        return 1;
    }
    const MachineRoof roof = roof_r.value();
    nlohmann::json j = {{"roof",
                         {{"peak_gflops", roof.peak_gflops},
                          {"mem_gbps", roof.mem_gbps},
                          {"ridge_flop_per_byte", roof.ridge()},
                          {"cpu", roof.cpu},
                          {"kernel", roof.kernel},
                          {"n_threads", roof.n_threads},
                          {"stream_bytes", roof.stream_bytes},
                          {"measured_at", roof.measured_at}}}};
    if (!o.json)
        std::printf("roof: %.1f GFLOP/s peak (Q4_1 matmul, %s, %d threads), %.1f GB/s streaming read, ridge at %.2f "
                    "FLOP/byte\n  %s\n",
                    roof.peak_gflops, roof.kernel.c_str(), roof.n_threads, roof.mem_gbps, roof.ridge(),
                    roof.cpu.c_str());
    if (!o.roof_only) {
        auto session = open_session_or_report(o.model);
        if (!session) return 1;
        const int32_t n_vocab = session->model().config.n_vocab;
        nlohmann::json steps = nlohmann::json::array();
        bool prefill_shown = false;
        for (int b : batches) {
            EngineOptions eo = engine_options_from(o.runner);
            eo.scheduler.max_num_seqs = b;
            eo.scheduler.max_num_batched_tokens = std::max(512, b);
            // The prompts take several steps when they exceed the step budget; every request
            // generates that many tokens more, so all b decode together for --gen steps.
            const int budget = eo.scheduler.max_num_batched_tokens;
            const int max_tokens = o.gen + (b * o.prompt + budget - 1) / budget + 1;
            eo.max_model_len = o.prompt + max_tokens + 16;
            auto created = session->make_engine(eo, false);
            if (!created) {
                std::fprintf(stderr, "error: %s\n", created.message().c_str());
                return 1;
            }
            Engine& e = *created.value();
            for (int i = 0; i < b; ++i) {
                GenerationRequest g;
                for (int t = 0; t < o.prompt; ++t) g.prompt.push_back((32 + 7919 * (i * o.prompt + t)) % n_vocab);
                g.params.temperature = 0;
                g.params.max_tokens = max_tokens;
                g.params.ignore_eos = true;
                if (auto id = e.submit(std::move(g)); !id) {
                    std::fprintf(stderr, "error: batch %d: %s\n", b, id.message().c_str());
                    return 1;
                }
            }
            if (Status st = e.run_until_idle(); !st) {
                std::fprintf(stderr, "error: batch %d: %s\n", b, st.message().c_str());
                return 1;
            }
            const auto snap = e.telemetry()->latest();
            if (!snap || snap->op_steps.empty()) {
                std::fprintf(stderr, "error: the engine timed no ops (the op timer runs on the CPU backend only)\n");
                return 1;
            }
            for (const OpStepRecord& s : snap->op_steps) {
                // the first batch's prefill; then the decode step at exactly this batch size
                if (s.prefill ? prefill_shown : s.decode_tokens != b) continue;
                prefill_shown |= s.prefill;
                steps.push_back(op_json(s, roof));
                if (!o.json) print_step(s, roof);
            }
            std::fflush(stdout);
        }
        j["model"] = session->model().path;
        j["steps"] = steps;
    }
    if (o.json) std::printf("%s\n", j.dump(2).c_str());
    if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
    return 0;
}

}  // namespace kvs::app
