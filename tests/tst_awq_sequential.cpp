// ctest-labels: unit
// Sequential calibration (engine/quant/calibration.h SequentialCalibration, GPTQ's layer loop
// and AwqOptions::sequential) on a tiny two-layer model: the calibration model runs the
// finished layers as their quantized versions and stops after the layer asked for; AWQ with
// `sequential` searches layer 0 exactly as without it (same inputs) and layer 1 on the inputs
// the variant's own layer 0 produces, which a loss recomputed here from those inputs (the
// attention block by awq_block's float forward, the weights by fake_quant_int4) confirms;
// scaling and folding alone (no quantization, no clipping) still compute the source's function.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/core/progress.h"
#include "engine/model/model.h"
#include "engine/quant/awq.h"
#include "engine/quant/awq_block.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quantize.h"
#include "engine/quant/rtn.h"
#include "kernels/backend.h"
#include "kernels/dtype.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

// A tiny F32 llama model (two layers, rows of 128) whose channels 3, 50 and 97 of every
// norm are 60x the rest, so that AWQ's scales are far from 1.
struct TinyOutlierModel {
    std::shared_ptr<Model> model;
    std::vector<std::vector<float>> norms;
};
TinyOutlierModel tiny_outlier_model(int n_kv_head) {
    test::TinyModelSpec spec;
    spec.n_embd = 128;
    spec.n_head = 4;
    spec.n_kv_head = n_kv_head;
    spec.n_ff = 256;
    spec.n_layer = 2;
    spec.seed = 11;
    TinyOutlierModel o;
    auto m = test::write_and_load_tiny_gguf(test::output_path("awq_sequential.gguf"), spec);
    if (!m) return o;
    o.model = std::make_shared<Model>(*m.value());
    o.norms.reserve(o.model->layers.size() * 2);
    for (auto& L : o.model->layers)
        for (const float** p : {&L.attn_norm, &L.ffn_norm}) {
            o.norms.emplace_back(*p, *p + spec.n_embd);
            for (int c : {3, 50, 97}) o.norms.back()[size_t(c)] *= 60.0f;
            *p = o.norms.back().data();
        }
    return o;
}

std::vector<int32_t> apache_tokens(const Model& m, int n) {
    auto t = tokenize_text_file(m, default_calibration_text_path(), n);
    return t ? t.value() : std::vector<int32_t>{};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double d = a.size() == b.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
    return d;
}
double max_abs(const std::vector<float>& a) {
    double m = 0.0;
    for (float v : a) m = std::max(m, double(std::fabs(v)));
    return m;
}

// AWQ's q/k/v loss at s = 1 for layer `l` of the F32 model m on inputs x [n_rows, n_embd]:
// the attention block's output with q/k/v round-tripped through INT4 groups of 128 against
// the float block's, mean squared over every element (awq.h: the block loss); with row weights
// w [n_rows], each row's mean square weighted: sum_r w_r msd_r / sum_r w_r.
double qkv_rtn_loss(const Model& m, int l, const std::vector<float>& x, int n_rows, int seq_len,
                    const std::vector<float>& w = {}) {
    const ModelConfig& c = m.config;
    const LayerWeights& L = m.layers[size_t(l)];
    const auto wq = dequantize_matrix(L.wq, 1), wk = dequantize_matrix(L.wk, 1), wv = dequantize_matrix(L.wv, 1);
    const auto wo = dequantize_matrix(L.wo, 1);
    const int64_t E = c.n_embd;
    auto quant = [&](const std::vector<float>& dense) {
        std::vector<float> q(dense.size());
        fake_quant_int4(dense.data(), q.data(), int64_t(dense.size()), 128);  // rows of 128: one group a row
        return q;
    };
    const auto qq = quant(wq), qk = quant(wk), qv = quant(wv);
    auto be = make_cpu_backend(1);
    std::vector<float> ref(size_t(n_rows) * size_t(E)), out(ref.size());  // [n_rows, n_embd] each
    attention_block_forward(*be, c, AttnBlockWeights{wq.data(), wk.data(), wv.data(), wo.data()}, x.data(), n_rows,
                            ref.data(), seq_len);
    attention_block_forward(*be, c, AttnBlockWeights{qq.data(), qk.data(), qv.data(), wo.data()}, x.data(), n_rows,
                            out.data(), seq_len);
    if (w.empty()) return mean_squared_diff(ref.data(), out.data(), ref.size());
    double acc = 0.0, sum_w = 0.0;
    for (int r = 0; r < n_rows; ++r) {
        acc += w[size_t(r)] *
               mean_squared_diff(ref.data() + size_t(r) * size_t(E), out.data() + size_t(r) * size_t(E), size_t(E));
        sum_w += w[size_t(r)];
    }
    return acc / sum_w;
}

// Mean over a row of (x / g)^2 for each row of x [n_rows, n] (an RMSNorm output, g its weight).
std::vector<double> normalized_mean_squares(const std::vector<float>& x, const float* g, int n_rows, int n) {
    std::vector<double> q(static_cast<size_t>(n_rows), 0.0);
    for (int r = 0; r < n_rows; ++r) {
        for (int i = 0; i < n; ++i) {
            const double v = double(x[size_t(r) * size_t(n) + size_t(i)]) / g[i];
            q[size_t(r)] += v * v;
        }
        q[size_t(r)] /= n;
    }
    return q;
}

}  // namespace

class TestAwqSequential : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // Before any layer is swapped the calibration model is the reference, cut after the layer
    // asked for; after layer 0 is swapped for INT4 RTN's, layer 0's inputs stay the same and
    // layer 1's become those of a model built by hand from the reference with RTN's layer 0.
    void collect_runs_the_swapped_layers() {
        auto om = tiny_outlier_model(2);
        QVERIFY(om.model);
        std::shared_ptr<const Model> ref = om.model;
        const auto tokens = apache_tokens(*ref, 96);
        if (tokens.empty()) QSKIP("no /usr/share/common-licenses/Apache-2.0");
        CalibrationOptions copt;
        copt.n_threads = 1;
        auto full = collect_activations(ref, tokens, copt);
        QVERIFY2(full, full.message().c_str());
        auto rtn = quantize_model(ref, QuantScheme::parse("int4-rtn").value());
        QVERIFY2(rtn, rtn.message().c_str());

        SequentialCalibration seq(ref, rtn.value());
        auto before = seq.collect(0, tokens, copt);
        QVERIFY2(before, before.message().c_str());
        QCOMPARE(before->layers.size(), size_t(1));  // layer 1 was not run
        QCOMPARE(before->layers[0].attn_in, full->layers[0].attn_in);
        QCOMPARE(before->layers[0].down_in, full->layers[0].down_in);

        seq.set_layer(0, rtn.value()->layers[0]);
        auto after = seq.collect(1, tokens, copt);
        QVERIFY2(after, after.message().c_str());
        QCOMPARE(after->layers.size(), size_t(2));
        QCOMPARE(after->layers[0].attn_in, full->layers[0].attn_in);  // the embeddings: unchanged
        const double moved = max_abs_diff(after->layers[1].attn_in, full->layers[1].attn_in);
        qInfo("layer 1 input: max |sequential - reference| %.4g of max |x| %.4g", moved,
              max_abs(full->layers[1].attn_in));
        QVERIFY2(moved > 1e-3 * max_abs(full->layers[1].attn_in), "layer 1 still sees the reference's inputs");

        auto hybrid = std::make_shared<Model>(*ref);  // the reference with RTN's layer 0, by hand
        hybrid->layers[0] = rtn.value()->layers[0];
        auto by_hand = collect_activations(hybrid, tokens, copt);
        QVERIFY2(by_hand, by_hand.message().c_str());
        QCOMPARE(after->layers[1].attn_in, by_hand->layers[1].attn_in);
        QCOMPARE(after->layers[1].down_in, by_hand->layers[1].down_in);

        auto bad = seq.collect(2, tokens, copt);
        QVERIFY(!bad);
        QVERIFY2(bad.message().find("layer 2 out of range") != std::string::npos, bad.message().c_str());
    }

    // AWQ with and without `sequential`: layer 0 is searched on the same inputs (same choices,
    // the same stored bytes); layer 1's q/k/v loss at s = 1 is the one recomputed here on the
    // inputs the variant's own layer 0 gives (sequential) or the reference's (not).
    void awq_layer1_searches_on_the_variants_inputs_data() {
        QTest::addColumn<int>("n_kv_head");
        QTest::newRow("GQA") << 2;
        QTest::newRow("MHA: o folds into v") << 4;
    }
    void awq_layer1_searches_on_the_variants_inputs() {
        QFETCH(int, n_kv_head);
        auto om = tiny_outlier_model(n_kv_head);
        QVERIFY(om.model);
        std::shared_ptr<const Model> src = om.model;
        const auto tokens = apache_tokens(*src, 160);
        if (tokens.empty()) QSKIP("no /usr/share/common-licenses/Apache-2.0");
        AwqOptions opt;
        opt.n_threads = 1;
        AwqReport rep_par, rep_seq;
        auto par = awq_quantize(src, tokens, opt, &rep_par);
        QVERIFY2(par, par.message().c_str());
        opt.sequential = true;
        auto seq = awq_quantize(src, tokens, opt, &rep_seq);
        QVERIFY2(seq, seq.message().c_str());
        QCOMPARE(seq.value()->layers[0].wq.dtype, DType::I4_G128);

        const auto& p0 = rep_par.layers[0];
        const auto& s0 = rep_seq.layers[0];
        QCOMPARE(s0.qkv.alpha, p0.qkv.alpha);
        QCOMPARE(s0.qkv.loss_rtn, p0.qkv.loss_rtn);
        QCOMPARE(s0.down.loss_best, p0.down.loss_best);
        QVERIFY(p0.qkv.alpha > 0.0f || p0.gate_up.alpha > 0.0f);  // the outliers make AWQ scale
        const auto* w_par = static_cast<const uint8_t*>(par.value()->layers[0].w_down.data);
        const auto* w_seq = static_cast<const uint8_t*>(seq.value()->layers[0].w_down.data);
        const size_t n_bytes = row_bytes(DType::I4_G128, 256) * 128;  // down: [128, 256]
        QVERIFY(std::memcmp(w_par, w_seq, n_bytes) == 0);

        CalibrationOptions copt;
        copt.n_threads = 1;
        auto reference_inputs = collect_activations(src, tokens, copt);
        QVERIFY2(reference_inputs, reference_inputs.message().c_str());
        auto variant = std::make_shared<Model>(*src);  // the reference after the variant's layer 0
        variant->layers[0] = seq.value()->layers[0];
        variant->storage = std::make_shared<std::vector<std::shared_ptr<const Model>>>(
            std::vector<std::shared_ptr<const Model>>{src, seq.value()});
        auto variant_inputs = collect_activations(variant, tokens, copt);
        QVERIFY2(variant_inputs, variant_inputs.message().c_str());
        const int n = reference_inputs->n_rows, L = reference_inputs->seq_len;
        const double on_ref = qkv_rtn_loss(*src, 1, reference_inputs->layers[1].attn_in, n, L);
        const double on_var = qkv_rtn_loss(*src, 1, variant_inputs->layers[1].attn_in, n, L);
        qInfo(
            "layer 1 q/k/v loss at s = 1: reference inputs %.6g (AWQ %.6g), variant's inputs %.6g (sequential AWQ "
            "%.6g)",
            on_ref, rep_par.layers[1].qkv.loss_rtn, on_var, rep_seq.layers[1].qkv.loss_rtn);
        QVERIFY(std::fabs(on_ref - on_var) > 1e-3 * on_ref);  // the inputs differ enough to tell
        QVERIFY(std::fabs(rep_par.layers[1].qkv.loss_rtn - on_ref) <= 1e-6 * on_ref);
        QVERIFY(std::fabs(rep_seq.layers[1].qkv.loss_rtn - on_var) <= 1e-6 * on_var);
    }

    // Sequential scaling and folding without quantization or clipping (F32 output) is the
    // source's function: last-token logits agree to the precision of the F16 KV cache (5e-3 of
    // their range, as tst_quant_schemes' awq_fold_is_exact).
    void sequential_fold_is_exact() {
        auto om = tiny_outlier_model(4);
        QVERIFY(om.model);
        std::shared_ptr<const Model> src = om.model;
        const auto tokens = apache_tokens(*src, 160);
        if (tokens.empty()) QSKIP("no /usr/share/common-licenses/Apache-2.0");
        AwqOptions opt;
        opt.sequential = true;
        opt.output = AwqOutput::Float;
        opt.clip = false;
        AwqReport rep;
        auto v = awq_quantize(src, tokens, opt, &rep);
        QVERIFY2(v, v.message().c_str());
        QVERIFY(rep.layers[1].qkv.alpha > 0.0f || rep.layers[1].gate_up.alpha > 0.0f);
        const auto ref = test::last_logits(om.model), got = test::last_logits(v.value());
        QVERIFY(!ref.empty());
        const double diff = max_abs_diff(ref, got), range = max_abs(ref);
        QVERIFY2(diff <= 5e-3 * range, qPrintable(QString("logits: max diff %1, range %2").arg(diff).arg(range)));
    }

    // residual_mean_squares against the model's own norms: RMSNorm(x) / g = x / sqrt(ms(x) + eps),
    // so with a large eps each norm's output tells ms(x) = eps q / (1 - q), q its mean square / g^2:
    // the attention norm of layer l sees x_l (layer l-1's `out`), the MLP norm mid_l.
    void residual_mean_squares_match_the_norms() {
        test::TinyModelSpec spec;
        spec.n_embd = 128;
        spec.n_ff = 256;
        spec.n_layer = 3;
        spec.rms_eps = 4e-3f;  // the residual's mean square is about 1e-3 here
        auto m = test::write_and_load_tiny_gguf(test::output_path("awq_residual.gguf"), spec);
        QVERIFY2(m, m.message().c_str());
        std::shared_ptr<const Model> src = m.value();
        const auto tokens = apache_tokens(*src, 100);
        if (tokens.empty()) QSKIP("no /usr/share/common-licenses/Apache-2.0");
        auto d = collect_activations(src, tokens);
        QVERIFY2(d, d.message().c_str());
        auto be = make_cpu_backend(1);
        auto ms = residual_mean_squares(*be, *src, *d, tokens);
        QVERIFY2(ms, ms.message().c_str());
        QCOMPARE(ms->size(), size_t(3));
        const float eps = src->config.rms_eps;
        double worst = 0.0, smallest = INFINITY, largest = 0.0;
        auto check = [&](const std::vector<float>& got, const std::vector<float>& norm_out, const float* g) {
            const auto q = normalized_mean_squares(norm_out, g, d->n_rows, int(src->config.n_embd));
            for (size_t r = 0; r < got.size(); ++r) {
                const double want = eps * q[r] / (1.0 - q[r]);
                worst = std::max(worst, std::fabs(got[r] - want) / want);
                smallest = std::min(smallest, want);
                largest = std::max(largest, want);
            }
        };
        for (int l = 0; l < 3; ++l) {
            QCOMPARE((*ms)[size_t(l)].mid.size(), size_t(d->n_rows));
            check((*ms)[size_t(l)].mid, d->layers[size_t(l)].ffn_in, src->layers[size_t(l)].ffn_norm);
            if (l > 0) check((*ms)[size_t(l - 1)].out, d->layers[size_t(l)].attn_in, src->layers[size_t(l)].attn_norm);
        }
        qInfo("residual mean squares %.3g..%.3g, worst relative difference to the norms' %.2g", smallest, largest,
              worst);
        QVERIFY2(worst < 2e-3, qPrintable(QString("worst relative difference %1").arg(worst)));

        CalibrationData sampled = *d;  // a sampled calibration cannot give every token's residual
        sampled.n_rows = d->n_rows / 2;
        QVERIFY(!residual_mean_squares(*be, *src, sampled, tokens));
    }

    // AWQ with residual_weight: layer 1's q/k/v loss at s = 1 is the weighted one recomputed here
    // (weights 1 / residual mean square after the attention block).
    void awq_residual_weighted_loss() {
        auto om = tiny_outlier_model(2);
        QVERIFY(om.model);
        std::shared_ptr<const Model> src = om.model;
        const auto tokens = apache_tokens(*src, 160);
        if (tokens.empty()) QSKIP("no /usr/share/common-licenses/Apache-2.0");
        AwqOptions opt;
        opt.n_threads = 1;
        opt.residual_weight = true;
        AwqReport rep;
        auto v = awq_quantize(src, tokens, opt, &rep);
        QVERIFY2(v, v.message().c_str());
        CalibrationOptions copt;
        copt.n_threads = 1;
        auto d = collect_activations(src, tokens, copt);
        QVERIFY2(d, d.message().c_str());
        auto be = make_cpu_backend(1);
        auto ms = residual_mean_squares(*be, *src, *d, tokens);
        QVERIFY2(ms, ms.message().c_str());
        std::vector<float> w;
        for (float x : (*ms)[1].mid) w.push_back(1.0f / x);
        const double weighted = qkv_rtn_loss(*src, 1, d->layers[1].attn_in, d->n_rows, d->seq_len, w);
        const double plain = qkv_rtn_loss(*src, 1, d->layers[1].attn_in, d->n_rows, d->seq_len);
        qInfo("layer 1 q/k/v loss at s = 1: weighted %.6g (AWQ %.6g), unweighted %.6g", weighted,
              rep.layers[1].qkv.loss_rtn, plain);
        QVERIFY(std::fabs(weighted - plain) > 1e-3 * plain);
        QVERIFY(std::fabs(rep.layers[1].qkv.loss_rtn - weighted) <= 1e-5 * weighted);
        QCOMPARE(v.value()->layers[1].w_down.dtype, DType::I4_G128);

        opt.sequential = true;  // not supported together: refused by name
        auto bad = awq_quantize(src, tokens, opt);
        QVERIFY(!bad);
        QVERIFY2(bad.message().find("residual_weight") != std::string::npos, bad.message().c_str());
    }

    // Sequential AWQ reports its progress (monotone to 1, each layer's calibration and search)
    // and stops when cancelled part-way, with the error Progress::is_cancelled knows.
    void sequential_progress_and_cancel() {
        auto om = tiny_outlier_model(2);
        QVERIFY(om.model);
        const auto tokens = apache_tokens(*om.model, 160);
        if (tokens.empty()) QSKIP("no /usr/share/common-licenses/Apache-2.0");
        for (const double cancel_at : {2.0, 0.3}) {
            std::vector<double> fractions;
            CancelFlag flag{false};
            AwqOptions opt;
            opt.sequential = true;
            opt.progress = Progress(
                [&](const std::string&, double f) {
                    fractions.push_back(f);
                    if (f >= cancel_at) flag = true;
                },
                &flag);
            auto v = awq_quantize(om.model, tokens, opt);
            QVERIFY(!fractions.empty());
            QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
            if (cancel_at > 1.0) {
                QVERIFY2(v, v.message().c_str());
                QVERIFY(fractions.size() >= 4);  // two layers: calibration and search each
                QCOMPARE(fractions.back(), 1.0);
            } else {
                QVERIFY(!v);
                QVERIFY2(Progress::is_cancelled(v.status()), v.message().c_str());
                QVERIFY(fractions.back() < 1.0);
            }
        }
    }

    // Bad input: a negative clipping grid is refused by name.
    void bad_clip_grid() {
        auto om = tiny_outlier_model(2);
        QVERIFY(om.model);
        AwqOptions opt;
        opt.clip_grid = -1;
        auto v = awq_quantize(om.model, {1, 2, 3}, opt);
        QVERIFY(!v);
        QVERIFY2(v.message().find("clip_grid") != std::string::npos, v.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestAwqSequential)
#include "tst_awq_sequential.moc"
