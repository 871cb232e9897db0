#include "app/cli/cmd_quant_fit.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/commands.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/quant/quant_fit.h"
#include "engine/quant/quant_fit_table.h"

namespace kvs::app {

CLI::App* add_quant_fit_command(CLI::App& app, QuantFitOptions& o) {
    auto* c = app.add_subcommand("quant-fit",
                                 "which quantization fits: every scheme's weights and KV room on a device, ranked "
                                 "for a goal");
    c->add_option("-m,--model", o.model, "model: an installed name, a .gguf file or a safetensors folder");
    std::string presets;
    for (const auto& p : fit_preset_names()) presets += (presets.empty() ? "" : ", ") + p;
    c->add_option("--preset", o.preset, "a model with published perplexities: " + presets);
    c->add_option("--params", o.params, "parameter count (e.g. 7e9), with --layers, --kv-heads and --head-dim");
    c->add_option("--layers", o.layers, "layers");
    c->add_option("--heads", o.heads, "attention (query) heads, with --hidden");
    c->add_option("--kv-heads", o.kv_heads, "KV heads");
    c->add_option("--head-dim", o.head_dim, "head size (with --params)");
    c->add_option("--hidden", o.hidden,
                  "hidden size: with --layers, --heads, --kv-heads, --ffn and --vocab, the "
                  "whole Llama shape (exact weight sizes)");
    c->add_option("--ffn", o.ffn, "FFN size");
    c->add_option("--vocab", o.vocab, "vocabulary size");
    c->add_option("--trained-ctx", o.trained_ctx, "the model's trained context (checks --ctx)");
    c->add_option("--memory", o.memory_gib, "device memory in GiB (default: this machine's available RAM)");
    c->add_option("--device", o.device, "cpu or gpu")->check(CLI::IsMember({"cpu", "gpu"}));
    c->add_option("--usable", o.usable, "fraction of the memory the engine may use (default 0.9)");
    c->add_option("--goal", o.goal, "quality, edge-cpu or throughput");
    c->add_option("--ctx", o.ctx, "tokens per sequence (default: min(4096, the trained context))");
    c->add_option("--batch", o.batch, "sequences at once");
    c->add_option("--kv-type", o.kv_type, "KV cache type: f16 or int8");
    c->add_option("--table", o.table, "a comparison table from `kvscope eval --all --json FILE` (measured quality)");
    c->add_option(
        "--schemes", o.schemes, "comma list of schemes (default: " + [] {
            std::string s;
            for (const auto& n : fit_default_schemes()) s += (s.empty() ? "" : ",") + n;
            return s;
        }() + ")");
    c->add_flag("--json", o.json, "print JSON");
    return c;
}

namespace {

Result<FitModel> pick_model(const QuantFitOptions& o) {
    const int given = int(!o.model.empty()) + int(!o.preset.empty()) + int(o.params > 0) + int(o.hidden > 0);
    if (given > 1)
        return Result<FitModel>::error(
            "give one model: --model, --preset, --params (with --layers, --kv-heads, "
            "--head-dim) or --hidden (with the whole shape)");
    if (!o.preset.empty()) return fit_preset(o.preset);
    if (o.params > 0) {
        if (!std::isfinite(o.params) || o.params > 1e15)
            return Result<FitModel>::error("--params " + std::to_string(o.params) + " is not a parameter count");
        return fit_model_of_params("a model of " + std::to_string(int64_t(o.params)) + " parameters", int64_t(o.params),
                                   o.layers, o.kv_heads, o.head_dim);
    }
    if (o.hidden > 0)
        return fit_model_of_shape("the given shape", o.layers, o.hidden, o.heads, o.kv_heads, o.ffn, o.vocab, false,
                                  o.trained_ctx);
    auto session = open_session_or_report(o.model.empty() ? Session::default_model_name() : o.model);
    if (!session) return Result<FitModel>::error("");  // reported already
    return fit_model_of(session->model());
}

std::string gib(int64_t b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.2f", double(b) / double(int64_t(1) << 30));
    return s;
}

nlohmann::json to_json(const FitRequest& rq, const FitResult& r) {
    using nlohmann::json;
    json rows = json::array();
    auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    for (const FitRow& x : r.rows)
        rows.push_back({{"rank", x.rank},
                        {"scheme", x.scheme},
                        {"label", x.label},
                        {"applies", x.applies},
                        {"bits_per_weight", x.bits_per_weight},
                        {"weight_bytes", x.weight_bytes},
                        {"weights_estimated", x.weights_estimated},
                        {"kv_bytes", x.kv_bytes},
                        {"room_bytes", x.room_bytes},
                        {"fits", x.fits},
                        {"max_context", x.max_context},
                        {"max_batch", x.max_batch},
                        {"ppl", opt(x.ppl)},
                        {"ppl_increase_pct", opt(x.ppl_increase_pct)},
                        {"quality_source", x.quality_source},
                        {"decode_tok_s", opt(x.decode_tok_s)},
                        {"prefill_tok_s", opt(x.prefill_tok_s)},
                        {"why", x.why}});
    return {{"format", "kvscope-quant-fit"},
            {"version", 1},
            {"model", rq.model.name},
            {"n_params", rq.model.n_params},
            {"device",
             {{"kind", rq.device.kind == FitDeviceKind::Cpu ? "cpu" : "gpu"},
              {"memory_bytes", rq.device.memory_bytes},
              {"usable_fraction", rq.device.usable_fraction},
              {"described", rq.device.described}}},
            {"goal", fit_goal_name(rq.goal)},
            {"context", rq.context},
            {"batch", rq.batch},
            {"kv_type", kv_type_name(rq.kv_type)},
            {"usable_bytes", r.usable_bytes},
            {"kv_bytes_per_token", r.kv_bytes_per_token},
            {"block_size", r.block_size},
            {"rows", rows},
            {"notes", r.notes}};
}

void print_table(const FitRequest& rq, const FitResult& r) {
    std::printf("%s (%.2fB parameters) on %s, goal %s, %lld x %lld tokens, KV %s\n\n", rq.model.name.c_str(),
                double(rq.model.n_params) / 1e9, rq.device.described.c_str(), fit_goal_name(rq.goal).c_str(),
                (long long)rq.batch, (long long)rq.context, kv_type_name(rq.kv_type).c_str());
    // the label column as wide as its longest label ("Q4_K_M-style GGUF")
    int lw = 5;
    for (const FitRow& x : r.rows) lw = std::max(lw, int(x.label.size()));
    std::printf("%4s  %-14s %-*s %5s %9s %9s %9s %4s %7s %8s %9s  %s\n", "rank", "scheme", lw, "label", "bits",
                "weights", "KV need", "KV room", "fits", "max bat", "max ctx", "quality", "why");
    std::printf("%4s  %-14s %-*s %5s %9s %9s %9s %4s %7s %8s %9s\n", "", "", lw, "", "", "GiB", "GiB", "GiB", "", "",
                "", "ΔPPL %");
    for (const FitRow& x : r.rows) {
        char q[32] = "-";
        if (x.ppl_increase_pct) std::snprintf(q, sizeof q, "%+.1f", *x.ppl_increase_pct);
        std::printf("%4s  %-14s %-*s %5.2f %9s %9s %9s %4s %7lld %8lld %9s  %s\n",
                    x.rank ? std::to_string(x.rank).c_str() : "-", x.scheme.c_str(), lw, x.label.c_str(),
                    x.bits_per_weight, x.applies ? gib(x.weight_bytes).c_str() : "-", gib(x.kv_bytes).c_str(),
                    x.applies ? gib(x.room_bytes).c_str() : "-", x.fits ? "yes" : "no", (long long)x.max_batch,
                    (long long)x.max_context, q, x.why.c_str());
    }
    if (std::any_of(r.rows.begin(), r.rows.end(), [](const FitRow& x) { return x.ppl_increase_pct.has_value(); }))
        std::printf("\nquality sources:\n");
    for (const FitRow& x : r.rows)
        if (x.ppl_increase_pct) std::printf("  %-14s %s\n", x.scheme.c_str(), x.quality_source.c_str());
    std::printf("\n");
    for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
}

}  // namespace

int cmd_quant_fit(const QuantFitOptions& o) {
    auto fail = [](const std::string& m) {
        if (!m.empty()) std::fprintf(stderr, "error: %s\n", m.c_str());
        return 1;
    };
    auto goal = parse_fit_goal(o.goal);
    if (!goal) return fail(goal.message());
    auto kv = parse_kv_type(o.kv_type);
    if (!kv) return fail("--kv-type: " + kv.message());
    auto model = pick_model(o);
    if (!model) return fail(model.message());
    FitRequest rq;
    rq.model = std::move(model.value());
    rq.goal = goal.value();
    rq.kv_type = kv.value();
    rq.batch = o.batch;
    rq.context = o.ctx != 0 ? o.ctx : std::min<int64_t>(4096, rq.model.n_ctx_train > 0 ? rq.model.n_ctx_train : 4096);
    rq.device.kind = o.device == "gpu" ? FitDeviceKind::Gpu : FitDeviceKind::Cpu;
    rq.device.usable_fraction = o.usable;
    if (o.memory_gib < 0 || !std::isfinite(o.memory_gib))
        return fail("--memory must be a positive number of GiB (got " + std::to_string(o.memory_gib) + ")");
    if (o.memory_gib > 0) {
        rq.device.memory_bytes = int64_t(o.memory_gib * double(int64_t(1) << 30));
        char d[64];
        std::snprintf(d, sizeof d, "%.1f GiB of %s memory", o.memory_gib, o.device == "gpu" ? "GPU" : "CPU");
        rq.device.described = d;
    } else {
        if (rq.device.kind == FitDeviceKind::Gpu)
            return fail("--device gpu needs --memory (GiB of VRAM): this command does not query a GPU");
        rq.device.memory_bytes = available_ram_bytes();
        if (rq.device.memory_bytes <= 0) return fail("cannot read this machine's available RAM: give --memory GiB");
        char d[64];
        std::snprintf(d, sizeof d, "%.1f GiB available RAM", double(rq.device.memory_bytes) / double(int64_t(1) << 30));
        rq.device.described = d;
    }
    if (!o.table.empty()) {
        auto t = read_fit_measurements(o.table);
        if (!t) return fail("--table: " + t.message());
        rq.table = t.value();
    }
    if (!o.schemes.empty()) {
        std::stringstream in(o.schemes);
        for (std::string s; std::getline(in, s, ',');)
            if (!s.empty()) rq.schemes.push_back(s);
    }
    auto r = quant_fit(rq);
    if (!r) return fail(r.message());
    if (o.json) {
        std::printf("%s\n", to_json(rq, r.value()).dump(2).c_str());
        return 0;
    }
    print_table(rq, r.value());
    return 0;
}

}  // namespace kvs::app
