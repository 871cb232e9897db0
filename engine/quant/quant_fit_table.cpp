#include "engine/quant/quant_fit_table.h"

namespace kvs {

FitMeasurements fit_measurements_of(const QuantTable& table) {
    FitMeasurements m;
    m.model = table.model;
    m.machine = table.machine;
    for (const QuantTableRow& r : table.rows) {
        if (!r.measured()) continue;
        FitMeasurement f;
        f.scheme = r.scheme;
        f.ppl = r.ppl;
        f.ppl_err = r.ppl_err;
        f.mean_kl = r.mean_kl;
        f.top1 = r.top1;
        f.prefill_tok_s = r.prefill_tok_s;
        f.decode_tok_s = r.decode_tok_s;
        m.rows.push_back(f);
    }
    return m;
}

Result<FitMeasurements> read_fit_measurements(const std::string& path) {
    auto t = read_quant_table(path);
    if (!t) return t.status();
    return fit_measurements_of(t.value());
}

}  // namespace kvs
