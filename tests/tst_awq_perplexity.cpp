// ctest-labels: bench
// The quantization lab on the default model: time to make each variant (256 calibration
// tokens of the Apache-2.0 license for AWQ) and the perplexity of ref / int8 / INT4 RTN /
// INT4 AWQ (scales only, and scales + clipping) on the first 1024 tokens of GPL-3 (a text
// AWQ was not calibrated on). Checks that int8 is near the reference; runs AWQ (scales +
// clipping, the default options) and reports whether it closes at least 40% of RTN's gap (met at 256
// calibration tokens; 384 gave 10%, 512 gave 35%: not robust). Prints a table; skipped when the default model is not
// installed. Minutes on 2 cores.
//
// The variants are real INT4 (I4_G128; the default model's rows of 576, which 128 does
// not divide, in groups of 64 as I4_G64), RTN being the same pipeline without the scale
// and clipping searches. Quantized variants are run dequantized to F32, so the numbers
// show the weights' error alone.
#include <QtTest>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/model/model.h"
#include "engine/quant/awq.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/sequence_runner.h"
#include "tests/support/test_paths.h"

using namespace kvs;

namespace {

// exp(mean negative log-likelihood of tokens[1..n) given their prefixes)
double perplexity(std::shared_ptr<const Model> m, const std::vector<int32_t>& tokens, QString* why) {
    if (m->layers[0].wq.dtype != DType::F32) m = quantize_model(m, QuantScheme::parse("ref").value()).value();
    RunnerOptions ro;
    ro.backend = "cpu";
    ro.n_threads = 2;
    ro.n_ctx = int(tokens.size());
    ro.n_batch = 256;
    auto r = SequenceRunner::create(std::move(m), ro);
    if (!r) {
        *why = QString::fromStdString(r.message());
        return NAN;
    }
    const int n_vocab = (*r)->model().config.n_vocab;
    double nll = 0.0;
    std::vector<float> logits;
    for (size_t start = 0; start < tokens.size(); start += 256) {
        const size_t end = std::min(tokens.size(), start + 256);
        std::vector<int32_t> chunk(tokens.begin() + long(start), tokens.begin() + long(end));
        Status st = (*r)->eval(chunk, true, &logits);
        if (!st) {
            *why = QString::fromStdString(st.message());
            return NAN;
        }
        for (size_t t = start; t < end && t + 1 < tokens.size(); ++t) {
            const float* row = logits.data() + (t - start) * size_t(n_vocab);
            float mx = row[0];
            for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, row[v]);
            double sum = 0.0;
            for (int v = 0; v < n_vocab; ++v) sum += std::exp(double(row[v]) - mx);
            nll += std::log(sum) + mx - row[tokens[t + 1]];
        }
    }
    return std::exp(nll / double(tokens.size() - 1));
}

}  // namespace

class TestAwqPerplexity : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void schemes_on_default_model() {
        const std::string path = test::default_model_path();
        if (path.empty()) QSKIP("default model not installed");
        auto loaded = load_model(path);
        QVERIFY2(loaded.is_ok(), loaded.message().c_str());
        std::shared_ptr<const Model> src = loaded.value();
        QuantOptions qo;
        auto calib = tokenize_text_file(*src, default_calibration_text_path(), 256);
        auto eval = tokenize_text_file(*src, "/usr/share/common-licenses/GPL-3", 1024);
        if (!calib || !eval) QSKIP("license texts missing");
        qo.calibration_tokens = calib.value();

        struct Row {
            std::string name;
            double seconds = 0, ppl = 0;
        };
        std::vector<Row> rows;
        auto run = [&](const std::string& name, auto make) {
            const auto t0 = std::chrono::steady_clock::now();
            Result<std::shared_ptr<Model>> v = make();
            Row row{name};
            row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!v) return Status::error(name + ": " + v.message());
            QString why;
            row.ppl = perplexity(v.value(), eval.value(), &why);
            if (!std::isfinite(row.ppl)) return Status::error(name + ": " + why.toStdString());
            std::printf("%-12s quantize %7.2f s   ppl(GPL-3, %zu tokens) %8.4f\n", name.c_str(), row.seconds,
                        eval->size(), row.ppl);
            std::fflush(stdout);
            rows.push_back(row);
            return Status::ok();
        };
        for (const char* scheme : {"ref", "int8"}) {
            Status st = run(scheme, [&] { return quantize_model(src, QuantScheme::parse(scheme).value(), qo); });
            QVERIFY2(st.is_ok(), st.message().c_str());
        }
        AwqOptions awq_opt;  // real INT4: I4_G128, I4_G64 for rows of 576
        AwqOptions rtn_opt = awq_opt;
        rtn_opt.search_scales = rtn_opt.clip = false;
        AwqOptions scales_opt = awq_opt;
        scales_opt.clip = false;
        AwqReport report;
        for (auto [name, opt] :
             {std::pair{"int4-rtn", rtn_opt}, std::pair{"awq-scales", scales_opt}, std::pair{"int4-awq", awq_opt}}) {
            Status st = run(name, [&] { return awq_quantize(src, qo.calibration_tokens, opt, &report); });
            QVERIFY2(st.is_ok(), st.message().c_str());
        }
        std::printf("AWQ: calibration %.2f s, search + encode %.2f s over %d layers\n", report.seconds_calibration,
                    report.seconds_search, int(report.layers.size()));
        const double ref = rows[0].ppl, int8 = rows[1].ppl, rtn = rows[2].ppl, awq = rows[4].ppl;
        const double closed = (rtn - awq) / (rtn - ref);
        std::printf("AWQ closes %.1f%% of RTN's perplexity gap to the reference\n", 100.0 * closed);
        QVERIFY(int8 < ref * 1.02);
        QVERIFY(rtn > ref);
        // The target (AWQ closes >= 40% of the gap) is a benchmark result reported in
        // docs/benchmarks.md, not a pass/fail condition of the suite; AWQ <= RTN on a model
        // built with outlier channels is asserted in tst_quant_schemes.
        std::printf("target >= 40%%: %s\n", closed >= 0.4 ? "met" : "NOT met");
    }
};

QTEST_GUILESS_MAIN(TestAwqPerplexity)
#include "tst_awq_perplexity.moc"
