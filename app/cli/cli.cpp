#include "app/cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli/cli_options.h"
#include "app/cli/cmd_bench_http.h"
#include "app/cli/cmd_quant_fit.h"
#include "app/cli/cmd_roofline.h"
#include "app/cli/cmd_watermark.h"
#include "app/cli/commands.h"
#include "app/gui_main.h"

namespace kvs::app {

int run_main(int argc, char** argv) {
    if (argc <= 1) return run_gui(argc, argv);

    CLI::App app{
        "KV Scope: run language models locally and watch the inference engine work.\n"
        "Without a subcommand, opens the desktop program."};
    app.require_subcommand(0, 1);
    app.set_version_flag("--version", "kvscope 0.1.0");
    const std::string kDefaultModel = Session::default_model_name();
    const std::string model_help =
        "model: a .gguf file, a safetensors folder, or an installed name (default " + kDefaultModel + ")";

    GenerateOptions gen;
    gen.model = kDefaultModel;
    auto* g = app.add_subcommand("generate", "generate text from a prompt, streaming tokens");
    g->add_option("-m,--model", gen.model, model_help);
    g->add_option("-p,--prompt", gen.prompt, "the prompt");
    g->add_option("-f,--file", gen.prompt_file, "read the prompt from a file")->check(CLI::ExistingFile);
    g->add_flag("--chat", gen.chat, "wrap the prompt in the model's chat template as a user message");
    g->add_option("--system", gen.system, "system prompt (with --chat)");
    g->add_flag("--no-stats", gen.quiet_stats, "do not print timings");
    g->add_option("--spec", gen.spec,
                  "speculative decoding: ngram (prompt lookup), int4 (the model re-quantized to 4 bits), "
                  "layer-skip:N (its first N layers), or a draft model path; any draft may end in @V "
                  "(head cut to the first V token ids)");
    g->add_option("--spec-k", gen.spec_k, "draft tokens per target pass (with --spec)")->check(CLI::Range(1, 16));
    g->add_flag("--spec-adaptive", gen.spec_adaptive, "grow / shrink the draft length with acceptance (with --spec)");
    g->add_option("--lora", gen.lora, "a LoRA adapter on top of the model: PATH or NAME=PATH (PEFT folder or GGUF)");
    g->add_option("--lora-scale", gen.lora_scale, "multiplies the adapter's alpha / r (default 1)")
        ->check(CLI::Range(-100.0, 100.0));
    g->add_option("--beams", gen.beams, "beam search with this many beams (1: off)")->check(CLI::Range(1, 8));
    g->add_option("--length-penalty", gen.sampling.length_penalty,
                  "beam search: hypotheses rank by sum log p / length^this (default 1; 0: plain sum)")
        ->check(CLI::Range(-10.0, 10.0));
    add_sampling_options(g, gen.sampling);
    add_runner_options(g, gen.runner);
    add_kv_tier_options(g, gen.tiers);
    g->add_option("--kv-evict", gen.kv_evict,
                  "KV eviction through the batching engine: POLICY[:BUDGET], policies streaming, h2o, snapkv, merge; "
                  "BUDGET in tokens (512) or a fraction of prompt + max tokens (0.5)");

    InspectOptions ins;
    ins.model = kDefaultModel;
    auto* in = app.add_subcommand("inspect", "architecture, tensor types, parameters, weight and KV memory");
    in->add_option("model", ins.model, model_help);
    in->add_option("--ctx", ins.ctx, "context for the KV size (default: the model's)")->check(CLI::Range(1, 1 << 24));
    in->add_option("--batch", ins.batch, "concurrent sequences for the KV size")->check(CLI::Range(1, kMaxBatch));
    in->add_flag("--tensors", ins.tensors, "list every tensor");
    in->add_flag("--json", ins.json, "print JSON");

    BenchOptions bench;
    bench.model = kDefaultModel;
    auto* b = app.add_subcommand("bench", "prompt processing (pp) and generation (tg) speed, llama-bench style");
    b->add_option("model", bench.model, model_help);
    b->add_option("-p,--n-prompt", bench.n_prompt, "prompt tokens for pp")->check(CLI::Range(0, kMaxTokens));
    b->add_option("-n,--n-gen", bench.n_gen, "generated tokens for tg")->check(CLI::Range(0, kMaxTokens));
    b->add_option("-d,--depth", bench.depth, "tokens already in the context (untimed) before each pp and tg test")
        ->check(CLI::Range(0, kMaxCtx));
    b->add_option("-r,--repetitions", bench.repetitions, "runs per test")->check(CLI::Range(1, 1000));
    b->add_flag("--json", bench.json, "print JSON instead of the table");
    b->add_option("--json-out", bench.json_out, "also write the JSON to this file");
    b->add_option("--workload", bench.workload,
                  "serve a generated workload instead of pp/tg: mixed, poisson, shared-prefix, uniform "
                  "(kind[:n=64,rate=8,prompt=16..512,output=16..256,prefix=256,seed=1])");
    b->add_option("--policy", bench.policy, "batching policy for --workload: continuous, static or both")
        ->check(CLI::IsMember({"continuous", "static", "both"}));
    b->add_option("--max-seqs", bench.max_seqs, "most sequences per step (also the static batch size)")
        ->check(CLI::Range(1, 4096));
    b->add_option("--step-budget", bench.step_budget, "most tokens per engine step")->check(CLI::Range(1, kMaxBatch));
    b->add_option("--kv-blocks", bench.kv_blocks, "KV pool size in blocks")->check(CLI::Range(1, 1 << 24));
    b->add_option("--kv-mib", bench.kv_mib, "KV pool size in MiB (default 1024)")->check(CLI::Range(1.0, 1048576.0));
    b->add_option("--preemption", bench.preemption, "when the KV pool is full: recompute or swap")
        ->check(CLI::IsMember({"recompute", "swap"}));
    b->add_option("--host-blocks", bench.host_blocks, "CPU swap tier size in blocks (with --preemption swap)")
        ->check(CLI::Range(0, 1 << 24));
    b->add_flag("--no-prefix-cache", bench.no_prefix_cache, "turn prefix caching off");
    b->add_option("--trace", bench.trace,
                  "with --workload: write the step timeline, last snapshot and requests as JSON");
    b->add_option("--sweep", bench.sweep, "aggregate decode tok/s per batch size, e.g. 1,2,4,8,16,32,64");
    b->add_option("--sweep-prompt", bench.sweep_prompt, "prompt tokens per request in --sweep")
        ->check(CLI::Range(1, kMaxTokens));
    b->add_option("--sweep-gen", bench.sweep_gen, "generated tokens per request in --sweep")
        ->check(CLI::Range(1, kMaxTokens));
    b->add_option("--spec", bench.spec,
                  "speculative decoding against plain: proposers, e.g. ngram,layer-skip:8,int4 or a draft model path");
    b->add_option("--spec-k", bench.spec_k, "draft lengths for --spec, e.g. 2,4,8");
    b->add_option("--spec-workload", bench.spec_workload, "repetitive, chat or both")
        ->check(CLI::IsMember({"repetitive", "chat", "both"}));
    b->add_option("--spec-gen", bench.spec_gen, "tokens generated per request in --spec")
        ->check(CLI::Range(1, kMaxTokens));
    add_runner_options(b, bench.runner);
    add_kv_tier_options(b, bench.tiers);
    b->add_flag("--kv-tiers", bench.kv_tiers_bench,
                "TTFT of a long system prompt: cold, from the CPU tier, from disk after a restart (alternating; "
                "sizes from --kv-cpu-mib / --kv-disk-mib, default 128 / 256)");
    b->add_option("--tier-prompt", bench.tier_prompt, "system prompt tokens for --kv-tiers")
        ->check(CLI::Range(32, 32768));
    HttpBenchOptions http_bench;
    add_bench_http_options(b, http_bench);

    QuantizeOptions quant;
    quant.model = kDefaultModel;
    auto* q = app.add_subcommand("quantize", "re-encode a model's linears with a scheme and save the variant");
    q->add_option("-m,--model", quant.model, model_help);
    q->add_option("-s,--scheme", quant.scheme, "quantization scheme (ref, f16, q8_0, q4_k, ...)")->required();
    q->add_option("-o,--out", quant.out, "output: a .gguf file, or a folder for INT4 (AutoAWQ format)")->required();
    q->add_option("--calib", quant.calib, "calibration text for AWQ (default /usr/share/common-licenses/Apache-2.0)");
    q->add_option("--calib-tokens", quant.calib_tokens, "calibration tokens taken from --calib (at most 1024)")
        ->check(CLI::Range(1, 1024));
    EvalCommandOptions eval;
    auto* ev = add_eval_command(app, eval);
    WatermarkDetectOptions wm;
    auto* wd = add_watermark_command(app, wm);
    RooflineOptions roofline;
    roofline.model = kDefaultModel;
    auto* rl = add_roofline_command(app, roofline);
    QuantFitOptions quant_fit;
    auto* qf = add_quant_fit_command(app, quant_fit);
    ServeOptions serve;
    serve.model = kDefaultModel;
    auto* sv = add_serve_command(app, serve);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (g->parsed()) {
        if (gen.prompt.empty() && gen.prompt_file.empty()) {
            std::fprintf(stderr, "error: generate needs --prompt TEXT or --file PATH\n");
            return 1;
        }
        return cmd_generate(gen);
    }
    if (in->parsed()) return cmd_inspect(ins);
    if (q->parsed()) return cmd_quantize(quant);
    if (ev->parsed()) return cmd_eval(eval);
    if (wd->parsed()) return cmd_watermark_detect(wm);
    if (rl->parsed()) return cmd_roofline(roofline);
    if (qf->parsed()) return cmd_quant_fit(quant_fit);
    if (sv->parsed()) return cmd_serve(serve);
    if (b->parsed()) {
        if (!http_bench.url.empty()) {
            http_bench.json_out = bench.json_out;
            return cmd_bench_http(http_bench);
        }
        if (!bench.spec.empty()) return cmd_bench_spec(bench);
        if (bench.kv_tiers_bench) return cmd_bench_tiers(bench);
        if (!bench.workload.empty() || !bench.sweep.empty()) {
            if (b->count("--ctx") == 0) bench.runner.n_ctx = 2048;  // max_model_len of the served requests
            return cmd_bench_serve(bench);
        }
        return cmd_bench(bench);
    }
    return run_gui(argc, argv);
}

}  // namespace kvs::app
