// gptq_quantize(): calibration, then every layer's seven linears by GPTQ, layer after layer
// (with `sequential`, each layer calibrated on a model whose earlier layers are already
// the quantized ones).
#include <algorithm>
#include <array>
#include <chrono>

#include "engine/quant/gptq.h"
#include "engine/quant/quantize.h"
#include "engine/quant/rtn.h"

namespace kvs {

namespace {

// What keeps a GPTQ variant alive: the source (embedding, head, norms) and the encoded linears.
struct GptqStorage {
    std::shared_ptr<const Model> source;
    std::vector<std::vector<uint8_t>> weights;  // [n_layer * 7]
    std::vector<std::vector<int32_t>> perms;    // [n_layer * 7] act-order input permutations (empty: none)
};

constexpr const char* kLinearNames[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

std::array<WeightView*, 7> linears(LayerWeights& L) {
    return {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
}

// The rows of x [n_rows, n] that go into H: all but the first hessian_skip_first of every
// calibration sequence of seq_len rows.
std::vector<float> hessian_rows(const std::vector<float>& x, int n_rows, int64_t n, int seq_len,
                                const GptqOptions& opt) {
    const int L = seq_len > 0 ? seq_len : n_rows;
    const int skip = std::clamp(opt.hessian_skip_first, 0, L - 1);
    std::vector<float> out;  // [kept rows, n]
    out.reserve(x.size());
    for (int r = 0; r < n_rows; ++r)
        if (r % L >= skip) out.insert(out.end(), x.begin() + int64_t(r) * n, x.begin() + int64_t(r + 1) * n);
    return out;
}

Status check_gptq_input(const Model& m, const std::vector<int32_t>& tokens, const GptqOptions& opt) {
    if (tokens.empty())
        return Status::error(
            "GPTQ needs calibration tokens (QuantOptions.calibration_tokens is empty): give it a "
            "calibration text, e.g. " +
            std::string(default_calibration_text_path()));
    if (opt.bits != 4 && opt.bits != 8)
        return Status::error("GPTQ: bits must be 4 or 8, got " + std::to_string(opt.bits));
    if (opt.group_size != 32 && opt.group_size != 64 && opt.group_size != 128)
        return Status::error("GPTQ: group size must be 32, 64 or 128, got " + std::to_string(opt.group_size));
    for (size_t l = 0; l < m.layers.size(); ++l) {
        LayerWeights L = m.layers[l];
        auto ws = linears(L);
        for (size_t i = 0; i < 7; ++i)
            if (int4_group_for(ws[i]->n_in, opt.group_size) == 0)
                return Status::error("cannot quantize layer " + std::to_string(l) + " " + kLinearNames[i] +
                                     " by GPTQ in groups of " + std::to_string(opt.group_size) + ": a row has " +
                                     std::to_string(ws[i]->n_in) + " elements, a multiple of neither it nor 64");
    }
    return Status::ok();
}

}  // namespace

Result<std::shared_ptr<Model>> gptq_quantize(std::shared_ptr<const Model> source,
                                             const std::vector<int32_t>& calibration_tokens, const GptqOptions& opt,
                                             GptqReport* report) {
    using R = Result<std::shared_ptr<Model>>;
    using clock = std::chrono::steady_clock;
    if (!source) return R::error("gptq_quantize: no source model");
    KVS_RETURN_IF_ERROR(check_gptq_input(*source, calibration_tokens, opt));
    const int n_layer = source->config.n_layer;

    // Calibrate on the reference function (a quantized source's linears dequantized to F32).
    std::shared_ptr<const Model> reference = source;
    if (source->layers[0].wq.dtype != DType::F32) {
        auto ref = quantize_model(source, QuantScheme::parse("ref").value());
        if (!ref) return ref.status();
        reference = ref.value();
    }
    auto storage = std::make_shared<GptqStorage>();
    storage->source = source;
    storage->weights.resize(source->layers.size() * 7);
    storage->perms.resize(storage->weights.size());
    auto variant = std::make_shared<Model>(*source);
    SequentialCalibration sequential(reference, storage);  // the finished layers quantized

    CalibrationOptions copt = opt.calibration;
    copt.n_threads = opt.n_threads;
    copt.max_rows = std::max(copt.max_rows, int(calibration_tokens.size()));
    double t_calib = 0.0, t_quant = 0.0;
    CalibrationData data;
    auto calibrate = [&](int upto_layer) -> Status {  // -1: the reference, every layer
        const auto t0 = clock::now();
        auto d = upto_layer < 0 ? collect_activations(reference, calibration_tokens, copt)
                                : sequential.collect(upto_layer, calibration_tokens, copt);
        if (!d) return d.status();
        data = std::move(d.value());
        t_calib += std::chrono::duration<double>(clock::now() - t0).count();
        return Status::ok();
    };
    // Sequential: every layer calibrates (a forward pass up to it) and then quantizes; else
    // one calibration first (a tenth of the job), then the layers.
    const Progress layers_progress = opt.sequential ? opt.progress : opt.progress.part(0.1, 1.0);
    if (!opt.sequential) {
        copt.progress = opt.progress.part(0.0, 0.1);
        copt.stage = "GPTQ: calibrating";
        KVS_RETURN_IF_ERROR(calibrate(-1));
    }

    for (int l = 0; l < n_layer; ++l) {
        KVS_RETURN_IF_ERROR(
            opt.progress.check("GPTQ at layer " + std::to_string(l + 1) + " of " + std::to_string(n_layer)));
        const Progress layer_progress = layers_progress.step(l, n_layer);
        const std::string stage = "GPTQ: layer " + std::to_string(l + 1) + " / " + std::to_string(n_layer);
        layer_progress.report(stage, 0.0);
        if (opt.sequential) {
            copt.progress = layer_progress.part(0.0, 0.5);
            copt.stage = stage + ", calibrating";
            KVS_RETURN_IF_ERROR(calibrate(l));
        }
        const auto t0 = clock::now();
        LayerActivations& a = data.layers[size_t(l)];
        const int n_rows = data.n_rows;
        const LayerWeights& ref_layer = reference->layers[size_t(l)];
        const std::vector<float>* inputs[7] = {&a.attn_in, &a.attn_in, &a.attn_in, &a.attn_out,
                                               &a.ffn_in,  &a.ffn_in,  &a.down_in};
        LayerWeights src = ref_layer;
        auto ws = linears(src);
        auto out_v = linears(variant->layers[size_t(l)]);
        LayerWeights done = ref_layer;  // the calibration model's layer l from now on
        auto out_c = linears(done);
        std::vector<double> h;
        const std::vector<float>* h_of = nullptr;
        for (size_t i = 0; i < 7; ++i) {
            const WeightView& w = *ws[i];
            if (inputs[i] != h_of) {  // q/k/v and gate/up share one Hessian
                const std::vector<float> x = hessian_rows(*inputs[i], n_rows, w.n_in, data.seq_len, opt);
                h = gptq_hessian(x.data(), int(x.size() / size_t(w.n_in)), w.n_in);
                h_of = inputs[i];
            }
            const std::vector<float> wf = dequantize_matrix(w, opt.n_threads);  // [n_out, n_in]
            auto gm = gptq_quantize_matrix(wf.data(), w.n_out, w.n_in, h, int4_group_for(w.n_in, opt.group_size), opt);
            if (!gm) return R::error("layer " + std::to_string(l) + " " + kLinearNames[i] + ": " + gm.message());
            DType type;
            auto& perm = storage->perms[size_t(l) * 7 + i];  // act-order: the group-sorted column order
            auto bytes = gptq_encode(gm.value(), &type, &perm);
            if (!bytes) return R::error("layer " + std::to_string(l) + " " + kLinearNames[i] + ": " + bytes.message());
            auto& slot = storage->weights[size_t(l) * 7 + i];
            slot = std::move(bytes.value());
            *out_v[i] = WeightView{type, slot.data(), w.n_in, w.n_out};
            out_v[i]->in_perm = perm.empty() ? nullptr : perm.data();
            *out_c[i] = *out_v[i];
            layer_progress.part(opt.sequential ? 0.5 : 0.0, 1.0).report(stage, int64_t(i + 1), 7);
        }
        if (opt.sequential) sequential.set_layer(l, done);
        a = LayerActivations{};
        t_quant += std::chrono::duration<double>(clock::now() - t0).count();
    }

    recount_weights(*variant);
    variant->format = "variant:int4-gptq";
    variant->storage = storage;
    if (report) {
        report->n_calibration_tokens = int(calibration_tokens.size());
        report->seconds_calibration = t_calib;
        report->seconds_quantize = t_quant;
    }
    return variant;
}

}  // namespace kvs
