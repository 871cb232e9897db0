// kvscope quantize: re-encode a model's linears with a quantization scheme and save the
// variant (GGUF for GGML types, an AutoAWQ folder for INT4; engine/quant/save_variant.h).
// Progress on stderr (app/cli/progress_line.h); Ctrl+C cancels with exit code 130 and no
// output file.
#include <chrono>
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/progress_line.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quantize.h"
#include "engine/quant/save_variant.h"

namespace kvs::app {

int cmd_quantize(const QuantizeOptions& o) {
    auto scheme = QuantScheme::parse(o.scheme);
    if (!scheme) {
        std::fprintf(stderr, "error: %s\n", scheme.message().c_str());
        return 1;
    }
    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    const std::shared_ptr<const Model>& model = session->model_ptr();
    QuantOptions qo;
    const std::string calib = o.calib.empty() ? default_calibration_text_path() : o.calib;
    if (scheme->calibrated()) {
        auto tokens = tokenize_text_file(*model, calib, o.calib_tokens);
        if (!tokens) {
            std::fprintf(stderr, "error: %s\n", tokens.message().c_str());
            return 1;
        }
        qo.calibration_tokens = std::move(tokens.value());
    }
    // Progress on stderr (in place on a terminal); Ctrl+C stops the work and leaves no
    // output behind (save_variant writes under a temporary name and renames at the end).
    SigintCancel sigint;
    ProgressLine line(scheme->name);
    const Progress progress = line.progress(sigint.flag());
    const auto t0 = std::chrono::steady_clock::now();
    qo.progress = progress.part(0.0, 0.95);
    auto variant = quantize_model(model, scheme.value(), qo);
    auto cancelled = [&](const Status& st) {
        line.finish();
        std::fprintf(stderr, "cancelled: %s; nothing was written to %s\n", st.message().c_str(), o.out.c_str());
        return kExitCancelled;
    };
    if (!variant) {
        if (Progress::is_cancelled(variant.status())) return cancelled(variant.status());
        line.finish();
        std::fprintf(stderr, "error: %s\n", variant.message().c_str());
        return 1;
    }
    const auto t1 = std::chrono::steady_clock::now();
    progress.report("saving " + o.out, 0.95);
    auto saved = save_variant(*variant.value(), o.out, progress.part(0.95, 1.0));
    line.finish();
    if (!saved) {
        if (Progress::is_cancelled(saved.status())) return cancelled(saved.status());
        std::fprintf(stderr, "error: %s\n", saved.message().c_str());
        return 1;
    }
    const auto t2 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    std::printf("%s: %s -> %s (%s, %.1f MiB); quantized in %.0f ms, saved in %.0f ms\n", model->path.c_str(),
                quant_label(*model, scheme.value()).c_str(), saved.value().path.c_str(), saved.value().format.c_str(),
                double(saved.value().n_bytes) / (1024.0 * 1024.0), ms(t0, t1), ms(t1, t2));
    if (!qo.calibration_tokens.empty())
        std::printf("calibration: %zu tokens from %s\n", qo.calibration_tokens.size(), calib.c_str());
    return 0;
}

}  // namespace kvs::app
