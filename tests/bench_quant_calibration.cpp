// ctest-labels: bench model
// Quality of the calibrated INT4 schemes on the default model at several calibration sizes
// and seeds, the way `kvscope eval` measures it (engine/quant/eval.h compare_quality): the
// first 2048 tokens of GPL-3, chunks of 512 (the second half of each scored), calibration
// tokens from Apache-2.0 (engine/quant/calibration.h sample_calibration_tokens: seed 0 the
// first N tokens, other seeds random windows of 256). Every variant is scored against one
// reference pass, so the cells compare directly. Environment:
//   KVS_BENCH_SIZES    calibration sizes (default "128,256,512")
//   KVS_BENCH_SEEDS    calibration seeds (default "0,1")
//   KVS_BENCH_SCHEMES  calibrated schemes (default "int4-awq,int4-gptq")
//   KVS_BENCH_PLAIN    schemes without calibration, once (default "int4-rtn,nf4,fp4")
//   KVS_BENCH_OUT      JSON file name in the test output folder (default bench_quant_calibration.json)
// Prints a table (PPL ± error, ΔPPL, share of RTN's gap closed, mean KL, top-1) and writes
// the JSON. Never fails on the numbers; skips when the default model is not installed.
#include <QtTest>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/quant/calibration.h"
#include "engine/quant/eval.h"
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
        if (!item.empty()) out.push_back(item);
    return out;
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
    auto tok = Tokenizer::create(source->vocab);
    QVERIFY(tok);
    auto eval_tokens = tokenize_text_file(*source, "/usr/share/common-licenses/GPL-3", 2048);
    QVERIFY2(eval_tokens, eval_tokens.message().c_str());
    auto calib_text = tokenize_text_file(*source, default_calibration_text_path(), 0);
    QVERIFY2(calib_text, calib_text.message().c_str());

    struct Cell {
        std::string scheme;
        int size = 0;
        int seed = -1;  // -1: no calibration
        double seconds = 0;
    };
    std::vector<Cell> cells;
    std::vector<std::shared_ptr<const Model>> variants;
    auto add = [&](const std::string& name, int size, int seed) {
        auto scheme = QuantScheme::parse(name);
        QVERIFY2(scheme, scheme.message().c_str());
        QuantOptions qo;
        if (scheme->calibrated())
            qo.calibration_tokens = sample_calibration_tokens(calib_text.value(), size, 256, uint32_t(seed));
        const auto t0 = std::chrono::steady_clock::now();
        auto v = quantize_model(source, scheme.value(), qo);
        QVERIFY2(v, v.message().c_str());
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "quantized %s (calibration %d tokens, seed %d) in %.0f s\n", name.c_str(), size, seed, s);
        variants.push_back(v.value());
        cells.push_back({name, size, seed, s});
    };
    for (const auto& name : env_list("KVS_BENCH_PLAIN", "int4-rtn,nf4,fp4")) add(name, 0, -1);
    for (const auto& size : env_list("KVS_BENCH_SIZES", "128,256,512"))
        for (const auto& seed : env_list("KVS_BENCH_SEEDS", "0,1"))
            for (const auto& name : env_list("KVS_BENCH_SCHEMES", "int4-awq,int4-gptq"))
                add(name, std::stoi(size), std::stoi(seed));

    auto ref = quantize_model(source, QuantScheme::parse("ref").value());
    QVERIFY(ref);
    EvalOptions eo;
    eo.n_ctx = 512;
    eo.bos = source->vocab.add_bos ? source->vocab.bos_id : -1;
    eo.runner.n_threads = 2;
    auto rep = compare_quality(ref.value(), variants, eval_tokens.value(), eo);
    QVERIFY2(rep, rep.message().c_str());

    double rtn_delta = 0;
    for (size_t i = 0; i < cells.size(); ++i)
        if (cells[i].scheme == "int4-rtn") rtn_delta = rep->variants[i].delta_ppl;
    json out = {{"model", path},
                {"reference_ppl", rep->reference.ppl},
                {"reference_ppl_err", rep->reference.ppl_err},
                {"n_scored", rep->plan.n_scored()},
                {"cells", json::array()}};
    std::printf("reference PPL %.3f ± %.3f (%lld scored tokens)\n", rep->reference.ppl, rep->reference.ppl_err,
                (long long)rep->plan.n_scored());
    std::printf(
        "| scheme | calibration tokens | seed | PPL | ΔPPL | RTN gap closed | mean KL | top-1 %% | quantize s |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (size_t i = 0; i < cells.size(); ++i) {
        const VariantQuality& q = rep->variants[i];
        const double closed = rtn_delta > 0 ? 1.0 - q.delta_ppl / rtn_delta : 0.0;
        std::printf("| %s | %d | %d | %.3f ± %.3f | %+.3f ± %.3f | %.1f%% | %.5f | %.2f | %.0f |\n",
                    cells[i].scheme.c_str(), cells[i].size, cells[i].seed, q.ppl.ppl, q.ppl.ppl_err, q.delta_ppl,
                    q.delta_ppl_err, 100.0 * closed, q.kl.mean, q.kl.top1_pct, cells[i].seconds);
        QVERIFY(std::isfinite(q.ppl.ppl));
        out["cells"].push_back({{"scheme", cells[i].scheme},
                                {"calibration_tokens", cells[i].size},
                                {"seed", cells[i].seed},
                                {"ppl", q.ppl.ppl},
                                {"ppl_err", q.ppl.ppl_err},
                                {"delta_ppl", q.delta_ppl},
                                {"delta_ppl_err", q.delta_ppl_err},
                                {"rtn_gap_closed", closed},
                                {"mean_kl", q.kl.mean},
                                {"top1_pct", q.kl.top1_pct},
                                {"quantize_s", cells[i].seconds}});
    }
    const char* name = std::getenv("KVS_BENCH_OUT");
    std::ofstream(test::output_path(name && *name ? name : "bench_quant_calibration.json")) << out.dump(2) << "\n";
}

QTEST_GUILESS_MAIN(BenchQuantCalibration)
#include "bench_quant_calibration.moc"
