// ctest-labels: bench model
// AWQ's gain over INT4 RTN across calibration sets (issue 19 part 5): on the default model,
// each cell (AWQ setting x calibration size x seed) is quantized, scored against the
// reference the way `kvscope eval` scores it (engine/quant/eval.h compare_quality: the first
// 2048 tokens of GPL-3, chunks of 512, the second half of each scored) and written out before
// the next. The share of RTN's perplexity gap a cell closes is 1 - dPPL(AWQ) / dPPL(RTN); each
// cell also gets that share in ln PPL with its paired error (paired_share) and ln(PPL / PPL_rtn),
// paired.
// Calibration tokens come from Apache-2.0 (sample_calibration_tokens: seed 0 the first N
// tokens, other seeds random windows of 256) or, for settings ending in "@eval", from the
// scored text itself (the first N tokens of GPL-3: an upper bound on what any calibration set
// could give AWQ here, not a fair result).
// Environment:
//   KVS_AWQ_SETTINGS  comma-separated settings (default "-": none, the suite's default run;
//                     the grid of docs/benchmarks.md: "sink0,sink1"):
//                     sink0  / sink1   AwqOptions::sink_skip 0 (before part 5: only the down
//                                      loss leaves the sink row out) / 1 (every statistic,
//                                      loss and clipping search leaves it out)
//                     then any of these suffixes, in any order (e.g. sink0-seq-g40-c80):
//                     -noclip   AwqOptions::clip = false
//                     -clipall  the clipping search keeps the sink rows (sink_skip_clip = false)
//                     -lin      AwqLoss::Linear instead of the block loss
//                     -seq      AwqOptions::sequential (each layer calibrated on the variant's
//                               earlier layers, as GPTQ)
//                     -gN       alpha grid of N (AwqOptions::n_grid, default 20)
//                     -cN       clipping grid of N (AwqOptions::clip_grid, default 80; -c0: the
//                               alpha grid's, AWQ's clipping before part 5 with n_grid 20)
//                     -sN       clipping shrinks by at most N % (AwqOptions::max_shrink, default 50)
//                     -rw       AwqOptions::residual_weight (each token's errors weighted by
//                               1 / its residual's mean square)
//                     -noduo    s = x_mean^alpha alone (llm-awq's scales; duo_scaling = false)
//                     -ac       AwqOptions::asym_clip (the clipping search also shrinks each
//                               group's two ends apart)
//                     and last  @eval     calibrate on the scored text (the bound above)
//   KVS_AWQ_SIZES     calibration sizes (default "128,256,512")
//   KVS_AWQ_SEEDS     calibration seeds (default "0,1")
//   KVS_AWQ_EVAL_TOKENS  GPL-3 tokens scored in chunks of 512 (default 2048; 0: the whole text)
//   KVS_BENCH_OUT     JSON file name in the test output folder (default bench_awq_robust.json)
// Each cell takes minutes: run it directly with QTEST_FUNCTION_TIMEOUT raised, e.g.
// QTEST_FUNCTION_TIMEOUT=7200000. Never fails on the numbers; skips when the default model is
// not installed, and when KVS_AWQ_SETTINGS is unset or "-".
#include <QtTest>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/quant/awq.h"
#include "engine/quant/calibration.h"
#include "engine/quant/eval.h"
#include "engine/quant/quantize.h"
#include "tests/support/test_paths.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

std::vector<std::string> env_list(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    std::stringstream ss(v && *v ? v : fallback);
    std::vector<std::string> out;
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty() && item != "-") out.push_back(item);
    return out;
}

// The share of RTN's gap a variant closes in ln PPL, 1 - mean(a) / mean(b) with a = NLL(variant)
// - NLL(reference) and b = NLL(RTN) - NLL(reference) per scored token, and its standard error
// from the per-token values (delta method: sd(a - R b) / sqrt(n) / |mean b|, R = mean a / mean
// b): the error of the share itself, with what the three runs share on each token cancelled.
std::pair<double, double> paired_share(const std::vector<double>& variant, const std::vector<double>& rtn,
                                       const std::vector<double>& reference) {
    const size_t n = reference.size();
    if (n < 2 || variant.size() != n || rtn.size() != n) return {NAN, NAN};
    double ma = 0.0, mb = 0.0;
    for (size_t i = 0; i < n; ++i) ma += variant[i] - reference[i], mb += rtn[i] - reference[i];
    ma /= double(n), mb /= double(n);
    const double r = ma / mb;
    double var = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double e = (variant[i] - reference[i]) - r * (rtn[i] - reference[i]);  // mean 0
        var += e * e;
    }
    var /= double(n - 1);
    return {1.0 - r, std::sqrt(var / double(n)) / std::fabs(mb)};
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

struct Setting {
    AwqOptions opt;
    bool on_eval_text = false;
};

Setting parse_setting(std::string name) {
    Setting s;
    if (ends_with(name, "@eval")) s.on_eval_text = true, name.resize(name.size() - 5);
    std::stringstream parts(name);
    std::string base;
    std::getline(parts, base, '-');
    if (base == "sink0") s.opt.sink_skip = 0;
    else if (base == "sink1")
        s.opt.sink_skip = 1;
    else
        qFatal("KVS_AWQ_SETTINGS: unknown setting '%s' (sink0 or sink1 first)", name.c_str());
    auto number = [&](const std::string& part) {
        const std::string digits = part.substr(1);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
            qFatal("KVS_AWQ_SETTINGS: '%s' in '%s' needs a number", part.c_str(), name.c_str());
        return std::stoi(digits);
    };
    for (std::string part; std::getline(parts, part, '-');) {
        if (part == "lin") s.opt.loss = AwqLoss::Linear;
        else if (part == "noclip")
            s.opt.clip = false;
        else if (part == "clipall")
            s.opt.sink_skip_clip = false;
        else if (part == "seq")
            s.opt.sequential = true;
        else if (part == "rw")
            s.opt.residual_weight = true;
        else if (part == "ac")
            s.opt.asym_clip = true;
        else if (part == "noduo")
            s.opt.duo_scaling = false;
        else if (part[0] == 'g')
            s.opt.n_grid = number(part);
        else if (part[0] == 'c')
            s.opt.clip_grid = number(part);
        else if (part[0] == 's')
            s.opt.max_shrink = float(number(part)) / 100.0f;
        else
            qFatal("KVS_AWQ_SETTINGS: unknown suffix '-%s' in '%s'", part.c_str(), name.c_str());
    }
    return s;
}

}  // namespace

class BenchAwqRobust : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void grid();
};

void BenchAwqRobust::grid() {
    const auto settings = env_list("KVS_AWQ_SETTINGS", "-");
    if (settings.empty()) QSKIP("KVS_AWQ_SETTINGS is unset: no AWQ cells (each takes minutes)");
    const std::string path = test::default_model_path();
    if (path.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
    auto loaded = load_model(path);
    QVERIFY2(loaded, loaded.message().c_str());
    std::shared_ptr<const Model> source = loaded.value();
    const char* n_eval_env = std::getenv("KVS_AWQ_EVAL_TOKENS");
    const int n_eval = n_eval_env && *n_eval_env ? std::atoi(n_eval_env) : 2048;
    auto eval_tokens = tokenize_text_file(*source, "/usr/share/common-licenses/GPL-3", n_eval);
    QVERIFY2(eval_tokens, eval_tokens.message().c_str());
    auto calib_text = tokenize_text_file(*source, default_calibration_text_path(), 0);
    QVERIFY2(calib_text, calib_text.message().c_str());
    auto ref = quantize_model(source, QuantScheme::parse("ref").value());
    QVERIFY2(ref, ref.message().c_str());
    EvalOptions eo;
    eo.n_ctx = 512;
    eo.bos = source->vocab.add_bos ? source->vocab.bos_id : -1;
    eo.runner.n_threads = 2;

    json out = {{"model", path}, {"cells", json::array()}};
    const char* name_env = std::getenv("KVS_BENCH_OUT");
    const std::string out_path = test::output_path(name_env && *name_env ? name_env : "bench_awq_robust.json");
    auto score = [&](const std::shared_ptr<Model>& v) {
        auto rep = compare_quality(ref.value(), {v}, eval_tokens.value(), eo);
        if (!rep) qFatal("%s", rep.message().c_str());
        out["reference_ppl"] = rep->reference.ppl;
        out["reference_ppl_err"] = rep->reference.ppl_err;
        out["n_scored"] = rep->plan.n_scored();
        out["eval_tokens"] = eval_tokens->size();
        return rep->variants[0];
    };
    auto rtn = quantize_model(source, QuantScheme::parse("int4-rtn").value());
    QVERIFY2(rtn, rtn.message().c_str());
    const VariantQuality r = score(rtn.value());
    const std::vector<double> ref_nll = score(ref.value()).token_nll;  // the reference scored as a variant
    out["rtn"] = {{"ppl", r.ppl.ppl},         {"ppl_err", r.ppl.ppl_err},
                  {"delta_ppl", r.delta_ppl}, {"delta_ppl_err", r.delta_ppl_err},
                  {"mean_kl", r.kl.mean},     {"top1_pct", r.kl.top1_pct}};
    std::printf("int4-rtn: PPL %.3f ± %.3f, dPPL %+.3f ± %.3f, KL %.5f, top-1 %.2f %%\n", r.ppl.ppl, r.ppl.ppl_err,
                r.delta_ppl, r.delta_ppl_err, r.kl.mean, r.kl.top1_pct);
    std::printf(
        "| setting | calibration tokens | seed | PPL | dPPL | gap closed | mean KL | KL vs RTN | top-1 %% | s | gap "
        "closed in ln PPL, paired | ln(PPL / PPL_rtn), paired |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    std::fflush(stdout);
    for (const auto& size : env_list("KVS_AWQ_SIZES", "128,256,512"))
        for (const auto& seed : env_list("KVS_AWQ_SEEDS", "0,1"))
            for (const auto& name : settings) {
                const Setting st = parse_setting(name);
                const int n = std::stoi(size);
                const auto tokens =
                    st.on_eval_text ? sample_calibration_tokens(eval_tokens.value(), n, 256, uint32_t(std::stoi(seed)))
                                    : sample_calibration_tokens(calib_text.value(), n, 256, uint32_t(std::stoi(seed)));
                AwqReport report;
                const auto t0 = std::chrono::steady_clock::now();
                auto v = awq_quantize(source, tokens, st.opt, &report);
                QVERIFY2(v, v.message().c_str());
                const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                const VariantQuality q = score(v.value());
                const double closed = 1.0 - q.delta_ppl / r.delta_ppl, kl_cut = 1.0 - q.kl.mean / r.kl.mean;
                const auto [share_ln, share_ln_err] = paired_share(q.token_nll, r.token_nll, ref_nll);
                auto vs_rtn = paired_difference(q.token_nll, r.token_nll);
                QVERIFY2(vs_rtn, vs_rtn.message().c_str());
                std::printf(
                    "| %s | %s | %s | %.3f ± %.3f | %+.3f ± %.3f | %.1f %% | %.5f | %+.1f %% | %.2f | %.0f | %.1f ± "
                    "%.1f %% | "
                    "%+.4f ± %.4f |\n",
                    name.c_str(), size.c_str(), seed.c_str(), q.ppl.ppl, q.ppl.ppl_err, q.delta_ppl, q.delta_ppl_err,
                    100.0 * closed, q.kl.mean, -100.0 * kl_cut, q.kl.top1_pct, secs, 100.0 * share_ln,
                    100.0 * share_ln_err, vs_rtn->mean, vs_rtn->err);
                std::fflush(stdout);
                json alphas = json::array();
                for (const AwqLayerStats& l : report.layers)
                    alphas.push_back({l.qkv.alpha, l.gate_up.alpha, l.down.alpha});
                out["cells"].push_back(
                    {{"setting", name},
                     {"sink_skip", st.opt.sink_skip},
                     {"clip", st.opt.clip},
                     {"sequential", st.opt.sequential},
                     {"residual_weight", st.opt.residual_weight},
                     {"asym_clip", st.opt.asym_clip},
                     {"duo_scaling", st.opt.duo_scaling},
                     {"max_shrink", st.opt.max_shrink},
                     {"n_grid", st.opt.n_grid},
                     {"clip_grid", st.opt.clip_grid > 0 ? st.opt.clip_grid : st.opt.n_grid},
                     {"loss", st.opt.loss == AwqLoss::Block ? "block" : "linear"},
                     {"calibration_text", st.on_eval_text ? "GPL-3 (the scored text)" : "Apache-2.0"},
                     {"calibration_tokens", n},
                     {"seed", std::stoi(seed)},
                     {"ppl", q.ppl.ppl},
                     {"ppl_err", q.ppl.ppl_err},
                     {"delta_ppl", q.delta_ppl},
                     {"delta_ppl_err", q.delta_ppl_err},
                     {"gap_closed", closed},
                     {"gap_closed_ln_paired", share_ln},
                     {"gap_closed_ln_paired_err", share_ln_err},
                     {"ln_ppl_vs_rtn_paired", vs_rtn->mean},
                     {"ln_ppl_vs_rtn_paired_err", vs_rtn->err},
                     {"mean_kl", q.kl.mean},
                     {"kl_reduction", kl_cut},
                     {"top1_pct", q.kl.top1_pct},
                     {"alpha_qkv_gateup_down", alphas},
                     {"quantize_s", secs}});
                std::ofstream(out_path) << out.dump(2) << "\n";
            }
}

QTEST_GUILESS_MAIN(BenchAwqRobust)
#include "bench_awq_robust.moc"
