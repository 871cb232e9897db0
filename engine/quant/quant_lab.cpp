#include "engine/quant/quant_lab.h"

#include "engine/quant/calibration.h"
#include "engine/quant/eval.h"
#include "engine/quant/quantize.h"

namespace kvs {

namespace {
QuantVariant describe(const QuantScheme& scheme, std::string label, std::shared_ptr<const Model> model) {
    const MemoryInfo mi = memory_info(*model);
    QuantVariant v;
    v.scheme = scheme.name;
    v.label = std::move(label);
    v.model = std::move(model);
    v.weight_bytes = mi.weight_bytes;
    v.bits_per_weight = mi.linear_bits_per_weight;
    return v;
}
}  // namespace

std::vector<std::string> quant_scheme_choices() {
    std::vector<std::string> out;
    for (const std::string& s : QuantScheme::spellings()) {
        auto p = QuantScheme::parse(s);
        if (!p || p->kind == QuantScheme::Kind::Reference || p->name != s) continue;  // the reference, aliases
        out.push_back(s);
    }
    return out;
}

Result<QuantVariant> make_quant_reference(const std::shared_ptr<const Model>& source) {
    const QuantScheme ref = QuantScheme::parse("ref").value();
    auto m = quantize_model(source, ref);
    if (!m) return Status::error("making the reference: " + m.message());
    return describe(ref, quant_label(*source, ref), std::move(m.value()));
}

Result<QuantVariant> make_quant_variant(const std::shared_ptr<const Model>& source, const std::string& name,
                                        int calib_tokens, const Progress& progress) {
    auto scheme = QuantScheme::parse(name);
    if (!scheme) return scheme.status();
    QuantOptions qo;
    if (scheme->calibrated()) {
        progress.report("Calibrating " + scheme->name + " on " + default_calibration_text_path() + "…", 0.0);
        auto calib = tokenize_text_file(*source, default_calibration_text_path(), calib_tokens);
        if (!calib) return Status::error(scheme->name + " calibration: " + calib.message());
        qo.calibration_tokens = std::move(calib.value());
    }
    std::string label = quant_label(*source, *scheme);
    progress.report("Quantizing the linears to " + label + "…", 0.0);
    qo.progress = progress;
    auto m = quantize_model(source, *scheme, qo);
    if (!m && Progress::is_cancelled(m.status())) return m.status();
    if (!m) return Status::error(scheme->name + " cannot be made for this model: " + m.message());
    return describe(*scheme, std::move(label), std::move(m.value()));
}

}  // namespace kvs
