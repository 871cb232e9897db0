// kvscope eval --all: the quantization comparison table (see cmd_eval_table.h).
#include "app/cli/cmd_eval_table.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "app/cli/progress_line.h"
#include "engine/quant/quant_table.h"
#include "engine/quant/quant_table_run.h"

namespace kvs::app {

namespace {

// v x scale printed with f, "-" when v is missing.
std::string cell(const char* f, const std::optional<double>& v, double scale = 1.0) {
    if (!v.has_value()) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v.value() * scale);
    return buf;
}

// A mean speed with its runs' spread: "733.4 ± 12.1" (the sample sd; one run: the mean alone).
std::string speed_cell(const std::optional<double>& mean, const std::optional<QuantTableSpread>& spread) {
    std::string c = cell("%.1f", mean);
    if (mean && spread && spread->runs > 1) c += cell(" ± %.1f", spread->sd);
    return c;
}

// A paired ln PPL difference: "-0.087 ± 0.021", "-" when not measured.
std::string paired_cell(const std::optional<double>& v, const std::optional<double>& err) {
    if (!v || !err) return "-";
    return cell("%+.3f", v) + cell(" ± %.3f", err);
}

void print_table(const QuantTable& t, const EvalCommandOptions& o, size_t n_prompts) {
    std::printf("model: %s (%.1f M parameters)\nmachine: %s\n\n", t.model.c_str(),
                t.n_params ? double(*t.n_params) / 1e6 : 0.0, t.machine.c_str());
    std::printf(
        "| scheme | label | bits/weight | size MiB | PPL | vs reference | vs INT4 RTN | mean KL | top-1 %% "
        "| first divergence (mean of %zu, of %d) | prefill tok/s | decode tok/s | note |\n",
        n_prompts, o.divergence_tokens);
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (const QuantTableRow& r : t.rows) {
        std::optional<double> bytes;
        if (r.size_bytes) bytes = double(*r.size_bytes);
        const std::string ppl = r.ppl ? cell("%.3f", r.ppl) + cell(" ± %.3f", r.ppl_err) : "-";
        std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.scheme.c_str(),
                    r.label.c_str(), cell("%.2f", r.bits_per_weight).c_str(),
                    cell("%.1f", bytes, 1.0 / 1048576.0).c_str(), ppl.c_str(),
                    paired_cell(r.ln_ppl_vs_ref, r.ln_ppl_vs_ref_err).c_str(),
                    paired_cell(r.ln_ppl_vs_int4_rtn, r.ln_ppl_vs_int4_rtn_err).c_str(),
                    cell("%.5f", r.mean_kl).c_str(), cell("%.2f", r.top1, 100.0).c_str(),
                    cell("%.1f", r.first_divergence).c_str(), speed_cell(r.prefill_tok_s, r.prefill_spread).c_str(),
                    speed_cell(r.decode_tok_s, r.decode_spread).c_str(), r.note.c_str());
    }
}

}  // namespace

int run_eval_table(const EvalCommandOptions& o, const Session& session, const EvalTableInputs& in) {
    const auto t0 = std::chrono::steady_clock::now();
    const Tokenizer& tok = session.tokenizer();
    QuantTableOptions qo;
    qo.eval_tokens = in.tokens;
    qo.n_ctx = o.ctx;
    qo.bos = tok.add_bos() ? tok.bos() : -1;
    qo.calibration_tokens = in.calibration_tokens;
    qo.prompts = in.prompt_ids;
    qo.tokenizer = &tok;
    qo.divergence_tokens = o.divergence_tokens;
    qo.speed = !o.no_speed;
    qo.repeat = o.repeat;
    qo.runner = o.runner;
    // Ctrl+C stops the table at its next progress check (a layer, a chunk, a prompt, a speed
    // run); nothing is written then (the --json and --csv files only once the table is whole).
    SigintCancel sigint;
    ProgressLine line("table");  // in place on a terminal, plain lines elsewhere
    qo.progress = line.progress(sigint.flag());
    auto table = measure_quant_table(session.model_ptr(), qo);
    line.finish();
    if (!table && Progress::is_cancelled(table.status())) {
        std::fprintf(stderr, "cancelled: %s\n", table.message().c_str());
        return kExitCancelled;
    }
    if (!table) {
        std::fprintf(stderr, "error: %s\n", table.message().c_str());
        return 1;
    }
    if (sigint.cancelled()) {  // after the last check: still nothing written
        std::fprintf(stderr, "cancelled: the quantization table was measured, but not printed or written\n");
        return kExitCancelled;
    }
    std::printf("text: %s (%zu tokens; %zu evaluated in chunks of %d, the second half of each scored)\n",
                o.text.c_str(), in.n_text_tokens, in.tokens.size(), o.ctx);
    std::printf("calibration (AWQ, GPTQ): %s, %zu tokens, seed %d\n", o.calib.c_str(), in.calibration_tokens.size(),
                o.calib_seed);
    if (!o.no_speed && o.repeat == 1)
        std::printf("speed: pp%d and tg%d, single stream, one run\n", qo.n_prompt, qo.n_gen);
    else if (!o.no_speed)
        std::printf("speed: pp%d and tg%d, single stream, mean ± sd of %d runs (each run in --json / --csv)\n",
                    qo.n_prompt, qo.n_gen, o.repeat);
    std::printf(
        "vs reference / vs INT4 RTN: ln(PPL / PPL of that row) on the same tokens ± the standard error of the "
        "per-token differences (negative = better; |value| > 2 x error = a real difference)\n");
    print_table(table.value(), o, in.prompt_ids.size());
    std::printf("elapsed %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    int rc = 0;
    if (!o.json_out.empty())
        if (Status s = write_quant_table_json(table.value(), o.json_out); !s) {
            std::fprintf(stderr, "error: %s\n", s.message().c_str());
            rc = 1;
        }
    if (!o.csv_out.empty())
        if (Status s = write_quant_table_csv(table.value(), o.csv_out); !s) {
            std::fprintf(stderr, "error: %s\n", s.message().c_str());
            rc = 1;
        }
    return rc;
}

}  // namespace kvs::app
