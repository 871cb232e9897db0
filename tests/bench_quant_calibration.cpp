// ctest-labels: bench model
// Quality of the calibrated INT4 schemes on the default model at several calibration sizes
// and seeds, the way `kvscope eval` measures it (engine/quant/eval.h compare_quality): the
// first 2048 tokens of GPL-3, chunks of 512 (the second half of each scored), calibration
// tokens from Apache-2.0 (engine/quant/calibration.h sample_calibration_tokens: seed 0 the
// first N tokens, other seeds random windows of 256). Each cell is quantized, scored against
// the reference and written out before the next (a stopped run keeps what it finished).
// Environment:
//   KVS_BENCH_SIZES    calibration sizes (default "-": none; the table in docs/benchmarks.md:
//                      "128,256,512" - each calibrated cell takes minutes, so the suite's
//                      default run (CI) leaves them out)
//   KVS_BENCH_SEEDS    calibration seeds (default "0,1")
//   KVS_BENCH_SCHEMES  calibrated schemes (default "int4-awq,int4-gptq")
//   KVS_BENCH_PLAIN    schemes without calibration, once (default "int4-rtn,nf4"; "-": none)
//   KVS_BENCH_OUT      JSON file name in the test output folder (default bench_quant_calibration.json)
//   KVS_BENCH_GPTQ     GPTQ settings for the int4-gptq / int4-gptq-act cells instead of the
//                      schemes' defaults (engine/quant/quantize.h gptq_defaults), space-separated
//                      key=value: damp=<fraction of mean diag H> group=<32|64|128> sym=<0|1>
//                      act=<0|1> static=<0|1> mse=<0|1> seq=<0|1> (layers calibrated on the
//                      quantized earlier ones) window=<tokens per calibration sequence; also the
//                      sampling window of seeds other than 0>. The cell's JSON records them.
// Prints a table (PPL ± error, ΔPPL, mean KL, top-1, quantization time) and writes the JSON.
// A GPTQ or AWQ cell takes minutes: run it directly with QTEST_FUNCTION_TIMEOUT raised (Qt Test
// stops a test function after 300 s), e.g. QTEST_FUNCTION_TIMEOUT=7200000. Never fails on the
// numbers; skips when the default model is not installed.
#include <QtTest>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/quant/calibration.h"
#include "engine/quant/eval.h"
#include "engine/quant/gptq.h"
#include "engine/quant/quantize.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_paths.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

std::vector<std::string> env_list(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    std::stringstream ss(v && *v ? v : fallback);
    std::vector<std::string> out;
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty() && item != "-") out.push_back(item);  // "-": none
    return out;
}

// KVS_BENCH_GPTQ parsed over `base`; *window gets the calibration window (256 unless set).
GptqOptions gptq_settings(const std::string& text, GptqOptions base, int* window) {
    std::stringstream ss(text);
    *window = 256;
    for (std::string kv; ss >> kv;) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) qFatal("KVS_BENCH_GPTQ: '%s' is not key=value", kv.c_str());
        const std::string k = kv.substr(0, eq);
        const double v = std::stod(kv.substr(eq + 1));
        if (k == "damp") base.damp_percent = v;
        else if (k == "group")
            base.group_size = int(v);
        else if (k == "sym")
            base.sym = v != 0;
        else if (k == "act")
            base.act_order = v != 0;
        else if (k == "static")
            base.static_groups = v != 0;
        else if (k == "mse")
            base.mse = v != 0;
        else if (k == "seq")
            base.sequential = v != 0;
        else if (k == "window")
            *window = int(v);
        else
            qFatal("KVS_BENCH_GPTQ: unknown key '%s'", k.c_str());
    }
    base.calibration.seq_len = *window;
    return base;
}

}  // namespace

class BenchQuantCalibration : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void table();
};

void BenchQuantCalibration::table() {
    const std::string path = test::default_model_path();
    if (path.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
    auto loaded = load_model(path);
    QVERIFY2(loaded, loaded.message().c_str());
    std::shared_ptr<const Model> source = loaded.value();
    auto eval_tokens = tokenize_text_file(*source, "/usr/share/common-licenses/GPL-3", 2048);
    QVERIFY2(eval_tokens, eval_tokens.message().c_str());
    auto calib_text = tokenize_text_file(*source, default_calibration_text_path(), 0);
    QVERIFY2(calib_text, calib_text.message().c_str());

    auto ref = quantize_model(source, QuantScheme::parse("ref").value());
    QVERIFY(ref);
    EvalOptions eo;
    eo.n_ctx = 512;
    eo.bos = source->vocab.add_bos ? source->vocab.bos_id : -1;
    eo.runner.n_threads = 2;

    // One cell at a time, each scored against the reference in its own pass and written out
    // at once: a long run that is stopped keeps the cells it finished.
    json out = {{"model", path}, {"cells", json::array()}};
    const char* name_env = std::getenv("KVS_BENCH_OUT");
    const std::string out_path = test::output_path(name_env && *name_env ? name_env : "bench_quant_calibration.json");
    std::printf("| scheme | calibration tokens | seed | PPL | ΔPPL | mean KL | top-1 %% | quantize s |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    auto cell = [&](const std::string& name, int size, int seed) {
        auto scheme = QuantScheme::parse(name);
        QVERIFY2(scheme, scheme.message().c_str());
        QuantOptions qo;
        const char* gptq_env = std::getenv("KVS_BENCH_GPTQ");
        const bool custom =
            gptq_env && *gptq_env &&
            (scheme->kind == QuantScheme::Kind::Int4Gptq || scheme->kind == QuantScheme::Kind::Int4GptqAct);
        int window = 256;
        const GptqOptions base = gptq_defaults(scheme.value());  // what quantize_model runs the scheme with
        const GptqOptions go = custom ? gptq_settings(gptq_env, base, &window) : base;
        if (scheme->calibrated())
            qo.calibration_tokens = sample_calibration_tokens(calib_text.value(), size, window, uint32_t(seed));
        const auto t0 = std::chrono::steady_clock::now();
        auto v = custom ? gptq_quantize(source, qo.calibration_tokens, go) : quantize_model(source, scheme.value(), qo);
        QVERIFY2(v, v.message().c_str());
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        auto rep = compare_quality(ref.value(), {v.value()}, eval_tokens.value(), eo);
        QVERIFY2(rep, rep.message().c_str());
        const VariantQuality& q = rep->variants[0];
        QVERIFY(std::isfinite(q.ppl.ppl));
        std::printf("| %s%s%s | %d | %d | %.3f ± %.3f | %+.3f ± %.3f | %.5f | %.2f | %.0f |\n", name.c_str(),
                    custom ? " " : "", custom ? gptq_env : "", size, seed, q.ppl.ppl, q.ppl.ppl_err, q.delta_ppl,
                    q.delta_ppl_err, q.kl.mean, q.kl.top1_pct, secs);
        std::fflush(stdout);
        out["reference_ppl"] = rep->reference.ppl;
        out["reference_ppl_err"] = rep->reference.ppl_err;
        out["n_scored"] = rep->plan.n_scored();
        out["cells"].push_back({{"scheme", name},
                                {"calibration_tokens", size},
                                {"seed", seed},
                                {"ppl", q.ppl.ppl},
                                {"ppl_err", q.ppl.ppl_err},
                                {"delta_ppl", q.delta_ppl},
                                {"delta_ppl_err", q.delta_ppl_err},
                                {"mean_kl", q.kl.mean},
                                {"top1_pct", q.kl.top1_pct},
                                {"quantize_s", secs},
                                {"gptq_settings", custom ? std::string(gptq_env) : std::string()}});
        std::ofstream(out_path) << out.dump(2) << "\n";
    };
    for (const auto& name : env_list("KVS_BENCH_PLAIN", "int4-rtn,nf4")) cell(name, 0, -1);
    for (const auto& size : env_list("KVS_BENCH_SIZES", "-"))
        for (const auto& seed : env_list("KVS_BENCH_SEEDS", "0,1"))
            for (const auto& name : env_list("KVS_BENCH_SCHEMES", "int4-awq,int4-gptq"))
                cell(name, std::stoi(size), std::stoi(seed));
}

QTEST_GUILESS_MAIN(BenchQuantCalibration)
#include "bench_quant_calibration.moc"
