#include "app/quant_table_convert.h"

namespace kvs::app {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }
std::string ss(const QString& s) { return s.toStdString(); }
}  // namespace

ui::QuantTableInfo toView(const QuantTable& t) {
    ui::QuantTableInfo v;
    v.model = qs(t.model);
    if (t.n_params) v.nParams = qint64(*t.n_params);
    v.machine = qs(t.machine);
    for (const QuantTableRow& r : t.rows) {
        ui::QuantTableRowInfo u;
        u.scheme = qs(r.scheme);
        u.label = qs(r.label);
        u.bitsPerWeight = r.bits_per_weight;
        if (r.size_bytes) u.sizeBytes = qint64(*r.size_bytes);
        u.ppl = r.ppl;
        u.pplErr = r.ppl_err;
        u.meanKl = r.mean_kl;
        u.top1 = r.top1;
        u.firstDivergence = r.first_divergence;
        u.prefillTokS = r.prefill_tok_s;
        u.decodeTokS = r.decode_tok_s;
        u.note = qs(r.note);
        v.rows.push_back(u);
    }
    return v;
}

QuantTable fromView(const ui::QuantTableInfo& v) {
    QuantTable t;
    t.model = ss(v.model);
    if (v.nParams) t.n_params = int64_t(*v.nParams);
    t.machine = ss(v.machine);
    for (const ui::QuantTableRowInfo& u : v.rows) {
        QuantTableRow r;
        r.scheme = ss(u.scheme);
        r.label = ss(u.label);
        r.bits_per_weight = u.bitsPerWeight;
        if (u.sizeBytes) r.size_bytes = int64_t(*u.sizeBytes);
        r.ppl = u.ppl;
        r.ppl_err = u.pplErr;
        r.mean_kl = u.meanKl;
        r.top1 = u.top1;
        r.first_divergence = u.firstDivergence;
        r.prefill_tok_s = u.prefillTokS;
        r.decode_tok_s = u.decodeTokS;
        r.note = ss(u.note);
        t.rows.push_back(std::move(r));
    }
    return t;
}

}  // namespace kvs::app
