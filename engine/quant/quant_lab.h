#pragma once
// The quantization lab's front door for front ends (the window's compare dock, later the
// server): the schemes a picker offers, the reference and the variants of a loaded model
// with the facts a view shows (label, weight bytes, bits per weight), and the side-by-side
// run (engine/quant/side_by_side.h). The pieces behind it (quantize, calibration, AWQ, eval)
// stay internal to engine/quant/.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/progress.h"
#include "engine/core/status.h"
#include "engine/quant/side_by_side.h"

namespace kvs {

struct QuantVariant {
    std::string scheme;  // QuantScheme::name ("ref", "int8", "int4-awq", "q4_k", ...)
    std::string label;   // what the source became, honestly labelled (quant_label)
    std::shared_ptr<const Model> model;
    int64_t weight_bytes = 0;
    double bits_per_weight = 0;  // of the linear layers
};

// Every scheme name a picker offers: QuantScheme::spellings() without the reference and
// without aliases.
std::vector<std::string> quant_scheme_choices();

// The reference of `source`: its linears dequantized (scheme "ref").
Result<QuantVariant> make_quant_reference(const std::shared_ptr<const Model>& source);

// A variant of `source`. Calibrated schemes (AWQ, GPTQ) calibrate on the first
// calib_tokens tokens of the default calibration text. progress hears what is being done,
// in words, with the fraction done (calibration, every layer); its cancel flag stops the
// build at the next layer or calibration chunk with an error that Progress::is_cancelled
// recognizes.
Result<QuantVariant> make_quant_variant(const std::shared_ptr<const Model>& source, const std::string& scheme,
                                        int calib_tokens, const Progress& progress = {});

}  // namespace kvs
