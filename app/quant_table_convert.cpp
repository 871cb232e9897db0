#include "app/quant_table_convert.h"

#include <type_traits>

namespace kvs::app {

namespace {

// The fields the engine's and the view's types share, each pair once: f(engine, view). Both
// directions walk the same list, so a field added to it travels both ways.
template <class Spread, class SpreadInfo, class F>
void spread_fields(Spread& s, SpreadInfo& v, F&& f) {
    f(s.runs, v.runs);
    f(s.sd, v.sd);
    f(s.min, v.min);
    f(s.max, v.max);
    f(s.values, v.values);
}

// One value from one side to the other: text, numbers, lists, run spreads, optionals of them.
void put(const std::string& from, QString& to) { to = QString::fromStdString(from); }
void put(const QString& from, std::string& to) { to = from.toStdString(); }
void put(const std::vector<double>& from, QVector<double>& to) { to = QVector<double>(from.begin(), from.end()); }
void put(const QVector<double>& from, std::vector<double>& to) { to.assign(from.begin(), from.end()); }
template <class A, class B>
requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
void put(const A& from, B& to) { to = B(from); }
void put(const QuantTableSpread& from, ui::QuantTableSpreadInfo& to) {
    spread_fields(from, to, [](const auto& e, auto& v) { put(e, v); });
}
void put(const ui::QuantTableSpreadInfo& from, QuantTableSpread& to) {
    spread_fields(to, from, [](auto& e, const auto& v) { put(v, e); });
}
template <class A, class B>
void put(const std::optional<A>& from, std::optional<B>& to) {
    if (!from) {
        to.reset();
        return;
    }
    B b{};
    put(*from, b);
    to = std::move(b);
}

// A row's and the table's shared fields, as spread_fields.
template <class Row, class RowInfo, class F>
void row_fields(Row& r, RowInfo& u, F&& f) {
    f(r.scheme, u.scheme);
    f(r.label, u.label);
    f(r.bits_per_weight, u.bitsPerWeight);
    f(r.size_bytes, u.sizeBytes);
    f(r.ppl, u.ppl);
    f(r.ppl_err, u.pplErr);
    f(r.ln_ppl_vs_ref, u.lnPplVsRef);
    f(r.ln_ppl_vs_ref_err, u.lnPplVsRefErr);
    f(r.ln_ppl_vs_int4_rtn, u.lnPplVsRtn);
    f(r.ln_ppl_vs_int4_rtn_err, u.lnPplVsRtnErr);
    f(r.mean_kl, u.meanKl);
    f(r.top1, u.top1);
    f(r.first_divergence, u.firstDivergence);
    f(r.prefill_tok_s, u.prefillTokS);
    f(r.decode_tok_s, u.decodeTokS);
    f(r.prefill_spread, u.prefillSpread);
    f(r.decode_spread, u.decodeSpread);
    f(r.note, u.note);
}

template <class Table, class TableInfo, class F>
void table_fields(Table& t, TableInfo& v, F&& f) {
    f(t.model, v.model);
    f(t.n_params, v.nParams);
    f(t.machine, v.machine);
}

}  // namespace

ui::QuantTableInfo toView(const QuantTable& t) {
    ui::QuantTableInfo v;
    const auto to_view = [](const auto& e, auto& u) { put(e, u); };
    table_fields(t, v, to_view);
    for (const QuantTableRow& r : t.rows) {
        ui::QuantTableRowInfo u;
        row_fields(r, u, to_view);
        v.rows.push_back(std::move(u));
    }
    return v;
}

QuantTable fromView(const ui::QuantTableInfo& v) {
    QuantTable t;
    const auto from_view = [](auto& e, const auto& u) { put(u, e); };
    table_fields(t, v, from_view);
    for (const ui::QuantTableRowInfo& u : v.rows) {
        QuantTableRow r;
        row_fields(r, u, from_view);
        t.rows.push_back(std::move(r));
    }
    return t;
}

}  // namespace kvs::app
