#pragma once
// The chooser's measurements (quant_fit.h FitMeasurements) from a comparison table written
// by `kvscope eval --all --json` (engine/quant/quant_table.h, format kvscope-quant-table):
// its model, machine and every measured row's perplexity, KL, top-1 and speeds.
#include <string>

#include "engine/core/status.h"
#include "engine/quant/quant_fit.h"
#include "engine/quant/quant_table.h"

namespace kvs {

FitMeasurements fit_measurements_of(const QuantTable& table);
// read_quant_table(path), then the above; errors name the file and the field.
Result<FitMeasurements> read_fit_measurements(const std::string& path);

}  // namespace kvs
