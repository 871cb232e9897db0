// kvscope eval: quality and speed of quantized variants of one model against its
// reference — perplexity (llama.cpp's chunking: the second half of every chunk is scored),
// KL divergence of the next-token distributions, top-1 agreement, first greedy
// divergence, size and pp/tg speed — as a table and, with --json, a JSON file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/cli_options.h"
#include "app/cli/cmd_eval_table.h"
#include "app/cli/commands.h"
#include "app/cli/progress_line.h"
#include "engine/quant/calibration.h"
#include "engine/quant/eval.h"
#include "engine/quant/quant_table.h"
#include "engine/quant/quant_table_run.h"
#include "engine/quant/quantize.h"

namespace kvs::app {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Schemes tried when --quant is not given: those QuantScheme::parse accepts in this build.
constexpr const char* kDefaultSchemes[] = {"int8", "int4-rtn", "int4-awq", "q8_0", "q4_k", "q4_0"};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Result<std::string> read_text(const std::string& path, const char* what) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return Result<std::string>::error(std::string(what) + " file " + path + " cannot be opened");
    std::stringstream ss;
    ss << f.rdbuf();
    if (ss.str().empty()) return Result<std::string>::error(std::string(what) + " file " + path + " is empty");
    return ss.str();
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s + ",") {
        if (c == ',') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else if (c != ' ') {
            cur += c;
        }
    }
    return out;
}

// One row of the report: a scheme's model, what it costs and how it does.
struct Row {
    QuantScheme scheme;
    std::string label;
    std::shared_ptr<const Model> model;
    double quantize_s = 0;
    VariantQuality quality;  // unused for the reference row
    std::vector<DivergenceResult> divergence;
    SpeedResult speed;
    bool has_speed = false;
};

Row make_row(const QuantScheme& scheme, std::string label, std::shared_ptr<const Model> model) {
    Row r;
    r.scheme = scheme;
    r.label = std::move(label);
    r.model = std::move(model);
    return r;
}

// The schemes to evaluate (explicit: all must parse; default: those that parse; --all: the
// comparison table's list, which must all parse).
Result<std::vector<QuantScheme>> pick_schemes(const std::string& list, bool all) {
    std::vector<QuantScheme> out;
    if (all) {
        for (const QuantTableScheme& t : quant_table_schemes()) {
            auto q = QuantScheme::parse(t.scheme);
            if (!q) return Result<std::vector<QuantScheme>>::error("--all: " + q.message());
            if (q->kind != QuantScheme::Kind::Reference) out.push_back(q.value());
        }
        return out;
    }
    if (!list.empty()) {
        for (const std::string& s : split_list(list)) {
            auto q = QuantScheme::parse(s);
            if (!q) return Result<std::vector<QuantScheme>>::error("--quant: " + q.message());
            if (q->kind != QuantScheme::Kind::Reference) out.push_back(q.value());
        }
        if (out.empty())
            return Result<std::vector<QuantScheme>>::error("--quant names no scheme besides the reference");
        return out;
    }
    for (const char* s : kDefaultSchemes)
        if (auto q = QuantScheme::parse(s)) out.push_back(q.value());
    return out;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string divergence_cell(const std::vector<DivergenceResult>& d) {
    std::string s;
    for (const auto& r : d)
        s += (s.empty() ? "" : ", ") + (r.first < 0 ? std::string("none") : std::to_string(r.first));
    return s;
}

// A calibrated INT4 scheme (AWQ, GPTQ) against RTN when both were evaluated: the share of
// RTN's perplexity gap to the reference it closes, and how much lower its mean KL is. Null
// when either is missing.
json calibrated_vs_rtn(const std::vector<Row>& rows, QuantScheme::Kind kind) {
    const Row *rtn = nullptr, *other = nullptr;
    for (size_t i = 1; i < rows.size(); ++i) {
        if (rows[i].scheme.kind == QuantScheme::Kind::Int4Rtn) rtn = &rows[i];
        if (rows[i].scheme.kind == kind) other = &rows[i];
    }
    if (!rtn || !other || rtn->quality.kl.mean <= 0) return nullptr;
    // the share of the gap means something only when RTN raised the perplexity
    const json gap =
        rtn->quality.delta_ppl > 0 ? json(1.0 - other->quality.delta_ppl / rtn->quality.delta_ppl) : json();
    return {{"scheme", other->scheme.name},
            {"ppl_gap_closed", gap},
            {"delta_ppl_rtn", rtn->quality.delta_ppl},
            {"delta_ppl_rtn_err", rtn->quality.delta_ppl_err},
            {"delta_ppl_awq", other->quality.delta_ppl},  // the key names AWQ, the first such scheme
            {"delta_ppl_awq_err", other->quality.delta_ppl_err},
            {"delta_ppl", other->quality.delta_ppl},
            {"delta_ppl_err", other->quality.delta_ppl_err},
            {"mean_kl_reduced", 1.0 - other->quality.kl.mean / rtn->quality.kl.mean}};
}
json awq_vs_rtn(const std::vector<Row>& rows) { return calibrated_vs_rtn(rows, QuantScheme::Kind::Int4Awq); }
// Every calibrated scheme's comparison, keyed by scheme name.
json all_vs_rtn(const std::vector<Row>& rows) {
    json out = json::object();
    for (auto kind : {QuantScheme::Kind::Int4Awq, QuantScheme::Kind::Int4Gptq, QuantScheme::Kind::Int4GptqAct})
        if (json a = calibrated_vs_rtn(rows, kind); !a.is_null()) out[a["scheme"].get<std::string>()] = a;
    return out;
}

void print_table(const std::vector<Row>& rows, const QualityReport& rep, bool speed, int n_div) {
    std::printf(
        "| scheme | label | bits/weight | size MiB | PPL | ΔPPL | mean KL | p99 KL | top-1 %% | first divergence "
        "(of %d) | pp tok/s | tg tok/s |\n",
        n_div);
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |\n");
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        const MemoryInfo mem = memory_info(*r.model);
        const bool ref = i == 0;
        const PerplexityResult& p = ref ? rep.reference : r.quality.ppl;
        auto tps = [&](const SpeedSample& x) {
            return !r.has_speed ? std::string("-")
                                : fmt("%.1f", x.mean) + (x.values.size() > 1 ? fmt(" ± %.1f", x.sd) : std::string());
        };
        const std::string pp = tps(r.speed.pp), tg = tps(r.speed.tg);
        std::printf(
            "| %s | %s | %.2f | %.1f | %.3f ± %.3f | %s | %s | %s | %s | %s | %s | %s |\n", r.scheme.name.c_str(),
            r.label.c_str(), mem.linear_bits_per_weight, mem.weight_bytes / 1048576.0, p.ppl, p.ppl_err,
            ref ? "-" : (fmt("%+.3f", r.quality.delta_ppl) + fmt(" ± %.3f", r.quality.delta_ppl_err)).c_str(),
            ref ? "-" : fmt("%.5f", r.quality.kl.mean).c_str(), ref ? "-" : fmt("%.4f", r.quality.kl.p99).c_str(),
            ref ? "-" : fmt("%.2f", r.quality.kl.top1_pct).c_str(), ref ? "-" : divergence_cell(r.divergence).c_str(),
            speed ? pp.c_str() : "-", speed ? tg.c_str() : "-");
    }
}

json speed_json(const SpeedSample& s, const char* count_key, int n) {
    return {{count_key, n},     {"mean_tps", s.mean}, {"sd_tps", s.sd},
            {"min_tps", s.min}, {"max_tps", s.max},   {"samples_tps", s.values}};
}

json row_json(const Row& r, bool ref, const QualityReport& rep, const EvalCommandOptions& o) {
    const MemoryInfo mem = memory_info(*r.model);
    json j = {{"scheme", r.scheme.name},
              {"label", r.label},
              {"is_reference", ref},
              {"linear_bits_per_weight", mem.linear_bits_per_weight},
              {"weight_bytes", mem.weight_bytes},
              {"kv_bytes_per_token", mem.kv_bytes_per_token},
              {"quantize_s", r.quantize_s}};
    const PerplexityResult& p = ref ? rep.reference : r.quality.ppl;
    j["ppl"] = p.ppl;
    j["ppl_err"] = p.ppl_err;
    j["mean_nll"] = p.mean_nll;
    if (!ref) {
        const KlStats& k = r.quality.kl;
        j["delta_ppl"] = r.quality.delta_ppl;
        j["delta_ppl_err"] = r.quality.delta_ppl_err;
        j["ln_ppl_ratio"] = r.quality.ln_ppl_ratio;
        j["ln_ppl_ratio_err"] = r.quality.ln_ppl_ratio_err;
        j["kl"] = {{"mean", k.mean}, {"mean_err", k.mean_err}, {"median", k.median}, {"p90", k.p90},
                   {"p95", k.p95},   {"p99", k.p99},           {"max", k.max},       {"n", k.n}};
        j["top1_pct"] = k.top1_pct;
        j["top1_err_pct"] = k.top1_err_pct;
        json d = json::array();
        for (const auto& x : r.divergence)
            d.push_back({{"first", x.first < 0 ? json(nullptr) : json(x.first)}, {"n_compared", x.n_compared}});
        j["first_divergence"] = d;
    }
    if (r.has_speed)
        j["speed"] = {{"pp", speed_json(r.speed.pp, "n_prompt", r.speed.n_prompt)},
                      {"tg", speed_json(r.speed.tg, "n_gen", r.speed.n_gen)},
                      {"backend", r.speed.backend},
                      {"n_threads", r.speed.n_threads},
                      {"repeat", o.repeat}};
    return j;
}

// The variants: quantized one by one (a default scheme this build cannot make is skipped).
Status make_variants(std::shared_ptr<const Model> source, const std::vector<QuantScheme>& schemes,
                     const QuantOptions& qo, bool explicit_list, std::vector<Row>& rows, json& skipped,
                     const CancelFlag* cancel) {
    for (const QuantScheme& s : schemes) {
        const auto t0 = Clock::now();
        QuantOptions with_progress = qo;
        ProgressLine line(s.name);  // in place on a terminal, plain lines elsewhere
        with_progress.progress = line.progress(cancel);
        auto m = quantize_model(source, s, with_progress);
        line.finish();
        if (!m && Progress::is_cancelled(m.status())) return m.status();
        if (!m) {
            if (explicit_list) return Status::error("quantizing to " + s.name + ": " + m.message());
            std::fprintf(stderr, "skipping %s: %s\n", s.name.c_str(), m.message().c_str());
            skipped.push_back({{"scheme", s.name}, {"reason", m.message()}});
            continue;
        }
        Row r = make_row(s, quant_label(*source, s), m.value());
        r.quantize_s = seconds_since(t0);
        std::fprintf(stderr, "quantized %-8s %-28s in %.1f s\n", s.name.c_str(), r.label.c_str(), r.quantize_s);
        rows.push_back(std::move(r));
    }
    return Status::ok();
}

}  // namespace

CLI::App* add_eval_command(CLI::App& app, EvalCommandOptions& o) {
    o.model = Session::default_model_name();
    auto* e = app.add_subcommand("eval",
                                 "quality and speed of quantized variants against the reference "
                                 "(perplexity, KL divergence, top-1, first divergence, pp/tg)");
    e->add_option("-m,--model", o.model, "model: a .gguf file, a safetensors folder, or an installed name");
    std::string all;
    for (const auto& s : QuantScheme::spellings()) all += (all.empty() ? "" : ", ") + s;
    e->add_option(
        "-q,--quant", o.quant,
        "comma list of schemes (" + all + "); default: int8,int4-rtn,int4-awq,q8_0,q4_k,q4_0 where available");
    e->add_option("--text", o.text, "evaluation text file");
    e->add_option("--calib", o.calib, "calibration text for the calibrated schemes (AWQ, GPTQ)");
    e->add_option("--calib-tokens", o.calib_tokens, "calibration tokens taken from --calib")
        ->check(CLI::Range(1, kMaxTokens));
    e->add_option("--calib-seed", o.calib_seed,
                  "0: the first --calib-tokens tokens of --calib; another seed: random windows of 256 tokens")
        ->check(CLI::Range(0, 1 << 30));
    e->add_option("--ctx", o.ctx, "tokens per evaluation chunk (the second half is scored)")
        ->check(CLI::Range(3, 1 << 20));
    e->add_option("--max-tokens", o.max_tokens, "most text tokens evaluated")->check(CLI::Range(1, kMaxTokens));
    e->add_option("--prompts", o.prompts_file, "prompts for the first greedy divergence, one per line");
    e->add_option("--divergence-tokens", o.divergence_tokens, "greedy tokens per prompt")
        ->check(CLI::Range(1, kMaxTokens));
    e->add_option("--json", o.json_out,
                  "write the report as JSON to this file (with --all: the comparison table, format "
                  "kvscope-quant-table)");
    auto* all_flag = e->add_flag("--all", o.all,
                                 "the comparison table: one row per scheme (reference, INT8 RTN, LLM.int8(), NF4, FP4, "
                                 "INT4 RTN, GPTQ, GPTQ act-order, AWQ, Q4_K, Q8_0)");
    all_flag->excludes(e->get_option("--quant"));
    e->add_option("--csv", o.csv_out, "with --all: write the comparison table as CSV to this file")->needs(all_flag);
    e->add_flag("--no-speed", o.no_speed, "skip the pp512 / tg128 speed runs");
    e->add_option("--repeat", o.repeat, "speed runs per model")->check(CLI::Range(1, 1000));
    add_cpu_options(e, o.runner);
    return e;
}

namespace {

// Everything read and tokenized before any model runs.
struct Inputs {
    std::vector<QuantScheme> schemes;
    std::vector<int32_t> tokens;  // [<= max_tokens] evaluation text
    size_t n_text_tokens = 0;
    ChunkPlan plan;
    std::vector<std::string> prompts;
    std::vector<std::vector<int32_t>> prompt_ids;
    QuantOptions quant;
    bool uses_calibration = false;
};

Result<std::vector<std::string>> read_prompts(const std::string& path) {
    if (path.empty()) return default_divergence_prompts();
    auto p = read_text(path, "--prompts");
    if (!p) return p.status();
    std::vector<std::string> out;
    std::istringstream is(p.value());
    for (std::string line; std::getline(is, line);)
        if (!line.empty()) out.push_back(line);
    if (out.empty())
        return Result<std::vector<std::string>>::error("--prompts file " + path + " has no non-empty line");
    return out;
}

Result<Inputs> read_inputs(const EvalCommandOptions& o, const Tokenizer& tok) {
    Inputs in;
    auto schemes = pick_schemes(o.quant, o.all);
    if (!schemes) return schemes.status();
    in.schemes = schemes.value();
    auto text = read_text(o.text, "--text");
    if (!text) return text.status();
    in.tokens = tok.encode(text.value(), true, false);
    in.n_text_tokens = in.tokens.size();
    if (int64_t(in.tokens.size()) > o.max_tokens) in.tokens.resize(size_t(o.max_tokens));
    auto plan = plan_chunks(int64_t(in.tokens.size()), o.ctx);
    if (!plan) return Result<Inputs>::error(o.text + ": " + plan.message());
    in.plan = plan.value();
    auto prompts = read_prompts(o.prompts_file);
    if (!prompts) return prompts.status();
    in.prompts = prompts.value();
    for (const auto& p : in.prompts) in.prompt_ids.push_back(tok.encode(p, true, false));
    in.uses_calibration =
        std::any_of(in.schemes.begin(), in.schemes.end(), [](const QuantScheme& s) { return s.calibrated(); });
    if (in.uses_calibration) {
        auto calib = read_text(o.calib, "--calib");
        if (!calib) return calib.status();
        in.quant.calibration_tokens = sample_calibration_tokens(tok.encode(calib.value(), true, false), o.calib_tokens,
                                                                CalibrationOptions{}.seq_len, uint32_t(o.calib_seed));
    }
    return in;
}

// Wall time of each phase, in seconds.
struct PhaseTimes {
    double quantize = 0, quality = 0, divergence = 0, speed = 0;
};

// Quality of every variant, first divergences, then speed (unless --no-speed).
Result<QualityReport> measure(std::vector<Row>& rows, const Inputs& in, const Tokenizer& tok,
                              const EvalCommandOptions& o, PhaseTimes& times, const CancelFlag* cancel) {
    auto t0 = Clock::now();
    EvalOptions eo;
    eo.n_ctx = o.ctx;
    eo.bos = tok.add_bos() ? tok.bos() : -1;
    eo.runner = o.runner;
    ProgressLine line("quality");
    eo.progress = line.progress(cancel);
    std::vector<std::shared_ptr<const Model>> variants;
    for (size_t i = 1; i < rows.size(); ++i) variants.push_back(rows[i].model);
    auto rep = compare_quality(rows[0].model, variants, in.tokens, eo);
    line.finish();
    if (!rep) return rep.status();
    times.quality = seconds_since(t0);
    t0 = Clock::now();
    const Progress stop({}, cancel);  // Ctrl+C between prompts and between speed runs too
    auto div =
        first_greedy_divergence(rows[0].model, variants, tok, in.prompt_ids, o.divergence_tokens, o.runner, stop);
    if (!div) return div.status();
    for (size_t i = 1; i < rows.size(); ++i) {
        rows[i].quality = rep->variants[i - 1];
        rows[i].divergence = (*div)[i - 1];
    }
    times.divergence = seconds_since(t0);
    std::fprintf(stderr, "quality %.1f s, first divergence %.1f s\n", times.quality, times.divergence);
    if (o.no_speed) return rep;
    t0 = Clock::now();
    SpeedOptions so;
    so.repeat = o.repeat;
    so.runner = o.runner;
    so.progress = stop;
    for (Row& r : rows) {
        auto sp = measure_speed(r.model, in.tokens, so);
        if (!sp) return sp.status();
        r.speed = sp.value();
        r.has_speed = true;
    }
    times.speed = seconds_since(t0);
    std::fprintf(stderr, "speed %.1f s\n", times.speed);
    return rep;
}

void print_report(const Model& source, const std::vector<Row>& rows, const QualityReport& rep, const Inputs& in,
                  const EvalCommandOptions& o, double elapsed) {
    std::printf("model: %s (%s, %s)\nreference: %s\n", source.path.c_str(), source.config.name.c_str(),
                source.file_type.c_str(), rows[0].label.c_str());
    std::printf(
        "text: %s (%zu tokens; %d chunks of %d evaluated, the second half of each scored as llama.cpp's "
        "perplexity does: %lld tokens)\n",
        o.text.c_str(), in.n_text_tokens, in.plan.n_chunks, in.plan.n_ctx, (long long)in.plan.n_scored());
    if (in.uses_calibration)
        std::printf("calibration: %s (%zu tokens, seed %d)\n", o.calib.c_str(), in.quant.calibration_tokens.size(),
                    o.calib_seed);
    std::printf("first divergence: %zu prompts (%s), %d greedy tokens each; index of the first differing token\n\n",
                in.prompts.size(), o.prompts_file.empty() ? "built in" : o.prompts_file.c_str(), o.divergence_tokens);
    print_table(rows, rep, !o.no_speed, o.divergence_tokens);
    const json vs_rtn = all_vs_rtn(rows);
    for (auto it = vs_rtn.begin(); it != vs_rtn.end(); ++it) {
        const std::string name = it.key();
        const json& a = it.value();
        const std::string gap = a["ppl_gap_closed"].is_null()
                                    ? std::string("RTN does not raise the perplexity on this text")
                                    : name + fmt(" closes %.1f%% of RTN's perplexity gap to the reference",
                                                 100.0 * a["ppl_gap_closed"].get<double>());
        std::printf("\n%s vs RTN: %s (ΔPPL %+.3f ± %.3f vs %+.3f ± %.3f); it lowers the mean KL by %.1f%%\n",
                    name.c_str(), gap.c_str(), a["delta_ppl"].get<double>(), a["delta_ppl_err"].get<double>(),
                    a["delta_ppl_rtn"].get<double>(), a["delta_ppl_rtn_err"].get<double>(),
                    100.0 * a["mean_kl_reduced"].get<double>());
    }
    if (!o.no_speed)
        std::printf("\nspeed: pp%d and tg%d, single stream, %d run%s each, mean%s (%s, %d threads)\n",
                    rows[0].speed.n_prompt, rows[0].speed.n_gen, o.repeat, o.repeat == 1 ? "" : "s",
                    o.repeat == 1 ? "" : " ± sd", rows[0].speed.backend.c_str(), rows[0].speed.n_threads);
    std::printf("elapsed %.1f s\n", elapsed);
}

Status write_json(const Model& source, const std::vector<Row>& rows, const QualityReport& rep, const Inputs& in,
                  const json& skipped, const EvalCommandOptions& o, const PhaseTimes& times, double elapsed) {
    json calib = nullptr;
    if (in.uses_calibration)
        calib = {{"file", o.calib}, {"tokens", in.quant.calibration_tokens.size()}, {"seed", o.calib_seed}};
    json j = {{"model", source.path},
              {"model_type", source.config.name + " " + source.file_type},
              {"reference", rows[0].label},
              {"text", {{"file", o.text}, {"tokens", in.n_text_tokens}, {"evaluated_tokens", in.tokens.size()}}},
              {"chunking",
               {{"n_ctx", in.plan.n_ctx},
                {"n_chunks", in.plan.n_chunks},
                {"first_scored_row", in.plan.first},
                {"n_scored", in.plan.n_scored()},
                {"method", "llama.cpp perplexity: the second half of each chunk is scored"}}},
              {"calibration", calib},
              {"divergence", {{"prompts", in.prompts}, {"n_tokens", o.divergence_tokens}}},
              {"skipped", skipped},
              {"awq_vs_rtn", awq_vs_rtn(rows)},
              {"vs_rtn", all_vs_rtn(rows)},
              {"timing_s",
               {{"quantize", times.quantize},
                {"quality", times.quality},
                {"first_divergence", times.divergence},
                {"speed", times.speed},
                {"total", elapsed}}}};
    json jr = json::array();
    for (size_t i = 0; i < rows.size(); ++i) jr.push_back(row_json(rows[i], i == 0, rep, o));
    j["rows"] = jr;
    const std::string tmp = o.json_out + ".partial";  // renamed when whole: never a truncated report
    {
        std::ofstream f(tmp);
        if (!(f << j.dump(2) << "\n")) {
            std::remove(tmp.c_str());
            return Status::error("cannot write the --json file " + o.json_out);
        }
    }
    if (std::rename(tmp.c_str(), o.json_out.c_str()) != 0) {
        std::remove(tmp.c_str());
        return Status::error("cannot write the --json file " + o.json_out);
    }
    return Status::ok();
}

}  // namespace

int cmd_eval(const EvalCommandOptions& o) {
    const auto t_start = Clock::now();
    auto fail = [](const std::string& m) {
        if (Progress::is_cancelled(Status::error(m))) {
            std::fprintf(stderr, "cancelled: %s\n", m.c_str());
            return kExitCancelled;
        }
        std::fprintf(stderr, "error: %s\n", m.c_str());
        return 1;
    };
    if (auto s = pick_schemes(o.quant, o.all); !s) return fail(s.message());  // before the model loads
    // Ctrl+C from here on stops the command at its next check: after the model has loaded,
    // after the texts are tokenized and the calibration tokens drawn, then at each layer,
    // chunk, prompt or speed run; nothing is written (the --json / --csv files only at the end).
    SigintCancel sigint;
    auto stopped = [&](const char* what) {
        if (!sigint.cancelled()) return false;
        std::fprintf(stderr, "cancelled: kvscope eval, %s\n", what);
        return true;
    };
    {
        ProgressLine line("eval");  // says the handler is in place: a test may signal from here
        line.progress().report("Loading " + o.model, 0.0);
    }
    auto session = open_session_or_report(o.model);
    if (!session) return sigint.cancelled() ? kExitCancelled : 1;
    if (stopped("after loading the model")) return kExitCancelled;
    const std::shared_ptr<const Model>& source = session->model_ptr();
    const Tokenizer& tok = session->tokenizer();
    auto in = read_inputs(o, tok);
    if (!in) return fail(in.message());
    if (stopped("after reading the texts and drawing the calibration tokens")) return kExitCancelled;
    if (o.all)
        return run_eval_table(o, *session,
                              {in->tokens, in->n_text_tokens, in->prompt_ids, in->quant.calibration_tokens});

    PhaseTimes times;
    const auto t_quant = Clock::now();
    const QuantScheme ref_scheme = QuantScheme::parse("ref").value();
    auto ref = quantize_model(source, ref_scheme);
    if (!ref) return fail("making the reference: " + ref.message());
    std::vector<Row> rows{make_row(ref_scheme, quant_label(*source, ref_scheme), ref.value())};
    json skipped = json::array();
    if (auto s = make_variants(source, in->schemes, in->quant, !o.quant.empty(), rows, skipped, sigint.flag()); !s)
        return fail(s.message());
    if (rows.size() < 2) return fail("no quantization scheme could be made in this build");
    times.quantize = seconds_since(t_quant);
    std::fprintf(stderr, "reference: %s\n", rows[0].label.c_str());

    auto rep = measure(rows, in.value(), tok, o, times, sigint.flag());
    if (!rep) return fail(rep.message());
    const double elapsed = seconds_since(t_start);
    print_report(*source, rows, rep.value(), in.value(), o, elapsed);
    if (!o.json_out.empty())
        if (auto s = write_json(*source, rows, rep.value(), in.value(), skipped, o, times, elapsed); !s)
            return fail(s.message());
    return 0;
}

}  // namespace kvs::app
