// The quantization comparison table's JSON and CSV (see quant_table.h for the format).
#include "engine/quant/quant_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace kvs {

namespace {

using json = nlohmann::json;

// The row keys in the order JSON and CSV write them.
constexpr const char* kRowKeys[] = {
    "scheme",       "label",         "bits_per_weight",   "size_bytes",         "ppl",
    "ppl_err",      "ln_ppl_vs_ref", "ln_ppl_vs_ref_err", "ln_ppl_vs_int4_rtn", "ln_ppl_vs_int4_rtn_err",
    "mean_kl",      "top1",          "first_divergence",  "prefill_tok_s",      "decode_tok_s",
    "prefill_runs", "prefill_sd",    "prefill_min",       "prefill_max",        "prefill_values",
    "decode_runs",  "decode_sd",     "decode_min",        "decode_max",         "decode_values",
    "note"};

// The speeds whose runs a row keeps: the key prefix and the row's members.
struct SpeedField {
    const char* prefix;
    std::optional<double> QuantTableRow::*mean;
    std::optional<QuantTableSpread> QuantTableRow::*spread;
};
constexpr SpeedField kSpeeds[] = {{"prefill", &QuantTableRow::prefill_tok_s, &QuantTableRow::prefill_spread},
                                  {"decode", &QuantTableRow::decode_tok_s, &QuantTableRow::decode_spread}};

// The paired differences a row keeps (ln PPL against another row, ± its standard error):
// the value's key, its error's key and the row's members.
struct PairedField {
    const char* key;
    const char* err_key;
    std::optional<double> QuantTableRow::*value;
    std::optional<double> QuantTableRow::*err;
};
constexpr PairedField kPaired[] = {
    {"ln_ppl_vs_ref", "ln_ppl_vs_ref_err", &QuantTableRow::ln_ppl_vs_ref, &QuantTableRow::ln_ppl_vs_ref_err},
    {"ln_ppl_vs_int4_rtn", "ln_ppl_vs_int4_rtn_err", &QuantTableRow::ln_ppl_vs_int4_rtn,
     &QuantTableRow::ln_ppl_vs_int4_rtn_err}};

// A paired value goes out with its error or not at all (null both): never one without the other.
bool paired_set(const QuantTableRow& r, const PairedField& f) {
    const auto &v = r.*f.value, &e = r.*f.err;
    return v && e && std::isfinite(*v) && std::isfinite(*e);
}

json opt_json(const std::optional<double>& v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }
json opt_json(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

json row_json(const QuantTableRow& r) {
    json j = json::object();
    j["scheme"] = r.scheme;
    j["label"] = r.label;
    j["bits_per_weight"] = opt_json(r.bits_per_weight);
    j["size_bytes"] = opt_json(r.size_bytes);
    j["ppl"] = opt_json(r.ppl);
    j["ppl_err"] = opt_json(r.ppl_err);
    for (const PairedField& f : kPaired) {
        const bool set = paired_set(r, f);
        j[f.key] = set ? json(*(r.*f.value)) : json(nullptr);
        j[f.err_key] = set ? json(*(r.*f.err)) : json(nullptr);
    }
    j["mean_kl"] = opt_json(r.mean_kl);
    j["top1"] = opt_json(r.top1);
    j["first_divergence"] = opt_json(r.first_divergence);
    j["prefill_tok_s"] = opt_json(r.prefill_tok_s);
    j["decode_tok_s"] = opt_json(r.decode_tok_s);
    for (const SpeedField& f : kSpeeds) {
        const std::optional<QuantTableSpread>& sp = r.*f.spread;
        const std::string p = f.prefix;
        j[p + "_runs"] = sp ? json(sp->runs) : json(nullptr);
        j[p + "_sd"] = sp ? json(sp->sd) : json(nullptr);
        j[p + "_min"] = sp ? json(sp->min) : json(nullptr);
        j[p + "_max"] = sp ? json(sp->max) : json(nullptr);
        j[p + "_values"] = sp ? json(sp->values) : json(nullptr);
    }
    j["note"] = r.note;
    return j;
}

// Reads one known key of an object; the error names `where` and the key.
class Fields {
public:
    Fields(const json& j, std::string where) : m_j(j), m_where(std::move(where)) {}

    Status text(const char* key, std::string& out) const {
        const json* v = find(key);
        if (!v) return missing(key);
        if (!v->is_string()) return wrong(key, "a string");
        out = v->get<std::string>();
        return Status::ok();
    }
    Status number(const char* key, std::optional<double>& out, double lo = -INFINITY, double hi = INFINITY) const {
        const json* v = find(key);
        if (!v) return missing(key);
        if (v->is_null()) {
            out.reset();
            return Status::ok();
        }
        if (!v->is_number()) return wrong(key, "a number or null");
        const double x = v->get<double>();
        if (!std::isfinite(x)) {  // a number too large for a double parses as inf
            char buf[160];
            std::snprintf(buf, sizeof buf, "\"%s\" is %g, expected a finite number", key, x);
            return Status::error(m_where + ": " + buf);
        }
        if (!(x >= lo && x <= hi)) return out_of_range(key, x, lo, hi);
        out = x;
        return Status::ok();
    }
    Status count(const char* key, std::optional<int64_t>& out) const {
        const json* v = find(key);
        if (!v) return missing(key);
        if (v->is_null()) {
            out.reset();
            return Status::ok();
        }
        if (!v->is_number_integer()) return wrong(key, "a whole number or null");
        const int64_t x = v->get<int64_t>();
        if (x < 0) return Status::error(m_where + ": \"" + key + "\" is " + std::to_string(x) + ", expected >= 0");
        out = x;
        return Status::ok();
    }

    Status numbers(const char* key, std::optional<std::vector<double>>& out) const {
        const json* v = find(key);
        if (!v) return missing(key);
        if (v->is_null()) {
            out.reset();
            return Status::ok();
        }
        if (!v->is_array()) return wrong(key, "an array of numbers or null");
        std::vector<double> xs;
        for (size_t i = 0; i < v->size(); ++i) {
            const json& x = (*v)[i];
            if (!x.is_number() || !(x.get<double>() >= 0) || !std::isfinite(x.get<double>()))
                return Status::error(m_where + ": \"" + key + "\"[" + std::to_string(i) + "] is " + x.dump() +
                                     ", expected a number >= 0");
            xs.push_back(x.get<double>());
        }
        out = std::move(xs);
        return Status::ok();
    }
    const std::string& where() const { return m_where; }

private:
    const json* find(const char* key) const {
        auto it = m_j.find(key);
        return it == m_j.end() ? nullptr : &*it;
    }
    Status missing(const char* key) const { return Status::error(m_where + ": the key \"" + key + "\" is missing"); }
    Status wrong(const char* key, const char* expected) const {
        return Status::error(m_where + ": \"" + key + "\" is " + std::string(m_j.at(key).type_name()) + ", expected " +
                             expected);
    }
    Status out_of_range(const char* key, double x, double lo, double hi) const {
        char buf[160];
        std::snprintf(buf, sizeof buf, "\"%s\" is %g, expected %g .. %g", key, x, lo, hi);
        return Status::error(m_where + ": " + buf);
    }
    const json& m_j;
    std::string m_where;
};

// The runs behind one speed: all five keys null (none) or all set and consistent.
Status spread_from_json(const Fields& f, const SpeedField& sf, QuantTableRow& r) {
    const std::string p = sf.prefix, k_runs = p + "_runs", k_sd = p + "_sd", k_min = p + "_min", k_max = p + "_max",
                      k_values = p + "_values";
    std::optional<int64_t> runs;
    std::optional<double> sd, lo, hi;
    std::optional<std::vector<double>> values;
    KVS_RETURN_IF_ERROR(f.count(k_runs.c_str(), runs));
    KVS_RETURN_IF_ERROR(f.number(k_sd.c_str(), sd, 0));
    KVS_RETURN_IF_ERROR(f.number(k_min.c_str(), lo, 0));
    KVS_RETURN_IF_ERROR(f.number(k_max.c_str(), hi, 0));
    KVS_RETURN_IF_ERROR(f.numbers(k_values.c_str(), values));
    const std::pair<bool, const std::string*> set[] = {{runs.has_value(), &k_runs},
                                                       {sd.has_value(), &k_sd},
                                                       {lo.has_value(), &k_min},
                                                       {hi.has_value(), &k_max},
                                                       {values.has_value(), &k_values}};
    const auto n_set = std::count_if(std::begin(set), std::end(set), [](const auto& s) { return s.first; });
    if (n_set == 0) {
        (r.*sf.spread).reset();
        return Status::ok();
    }
    const std::string& w = f.where();
    if (n_set != std::ssize(set))
        for (const auto& [is_set, key] : set)
            if (!is_set)
                return Status::error(w + ": \"" + *key + "\" is null while other " + p +
                                     "_ spread keys are set (all five null or all set)");
    if (*runs < 1 || *runs > 1000000)
        return Status::error(w + ": \"" + k_runs + "\" is " + std::to_string(*runs) + ", expected 1 .. 1000000");
    if (int64_t(values->size()) != *runs)
        return Status::error(w + ": \"" + k_values + "\" has " + std::to_string(values->size()) + " values, \"" +
                             k_runs + "\" says " + std::to_string(*runs));
    if (*lo > *hi) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "\"%s\" %g is above \"%s\" %g", k_min.c_str(), *lo, k_max.c_str(), *hi);
        return Status::error(w + ": " + buf);
    }
    if (!(r.*sf.mean).has_value())
        return Status::error(w + ": \"" + k_runs + "\" is set but \"" + p + "_tok_s\" is null");
    r.*sf.spread = QuantTableSpread{int(*runs), *sd, *lo, *hi, std::move(*values)};
    return Status::ok();
}

// A paired value and its error: both null (not measured) or both set, the error >= 0.
Status paired_from_json(const Fields& f, const PairedField& pf, QuantTableRow& r) {
    std::optional<double> v, e;
    KVS_RETURN_IF_ERROR(f.number(pf.key, v));
    KVS_RETURN_IF_ERROR(f.number(pf.err_key, e, 0));
    if (v.has_value() != e.has_value()) {
        const char* set = v ? pf.key : pf.err_key;
        const char* unset = v ? pf.err_key : pf.key;
        return Status::error(f.where() + ": \"" + set + "\" is set but \"" + unset +
                             "\" is null (a paired value and its standard error go together)");
    }
    r.*pf.value = v;
    r.*pf.err = e;
    return Status::ok();
}

// `version`: the file's; version 1 rows have no spread keys, version 1 and 2 rows no paired values.
Result<QuantTableRow> row_from_json(const json& j, const std::string& where, int64_t version) {
    if (!j.is_object()) return Status::error(where + ": not a JSON object");
    const Fields f(j, where);
    QuantTableRow r;
    KVS_RETURN_IF_ERROR(f.text("scheme", r.scheme));
    if (r.scheme.empty()) return Status::error(where + ": \"scheme\" is empty");
    KVS_RETURN_IF_ERROR(f.text("label", r.label));
    KVS_RETURN_IF_ERROR(f.number("bits_per_weight", r.bits_per_weight, 0));
    KVS_RETURN_IF_ERROR(f.count("size_bytes", r.size_bytes));
    KVS_RETURN_IF_ERROR(f.number("ppl", r.ppl, 0));
    KVS_RETURN_IF_ERROR(f.number("ppl_err", r.ppl_err, 0));
    if (version >= 3)
        for (const PairedField& pf : kPaired) KVS_RETURN_IF_ERROR(paired_from_json(f, pf, r));
    KVS_RETURN_IF_ERROR(f.number("mean_kl", r.mean_kl, 0));
    KVS_RETURN_IF_ERROR(f.number("top1", r.top1, 0, 1));
    KVS_RETURN_IF_ERROR(f.number("first_divergence", r.first_divergence, 0));
    KVS_RETURN_IF_ERROR(f.number("prefill_tok_s", r.prefill_tok_s, 0));
    KVS_RETURN_IF_ERROR(f.number("decode_tok_s", r.decode_tok_s, 0));
    if (version >= 2)
        for (const SpeedField& sf : kSpeeds) KVS_RETURN_IF_ERROR(spread_from_json(f, sf, r));
    KVS_RETURN_IF_ERROR(f.text("note", r.note));
    return r;
}

std::string csv_text(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

std::string csv_number(const std::optional<double>& v) {
    if (!v || !std::isfinite(*v)) return "";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.10g", *v);
    return buf;
}

// runs, sd, min, max, values (one cell, ';' between them): five cells, empty without a spread.
std::string csv_spread(const std::optional<QuantTableSpread>& sp) {
    if (!sp) return ",,,,";
    std::string values;
    for (double v : sp->values) values += (values.empty() ? "" : ";") + csv_number(v);
    return std::to_string(sp->runs) + "," + csv_number(sp->sd) + "," + csv_number(sp->min) + "," + csv_number(sp->max) +
           "," + values;
}

// Writes `text` to path through a temporary file in the same folder, so a reader never
// sees half a table.
Status write_whole(const std::string& path, const std::string& text, const char* what) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return Status::error("cannot write the " + std::string(what) + " file " + path);
        f << text;
        f.flush();
        if (!f) {
            std::error_code ec;
            std::filesystem::remove(tmp, ec);
            return Status::error("cannot write the " + std::string(what) + " file " + path);
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::filesystem::remove(tmp, ec);
        return Status::error("cannot write the " + std::string(what) + " file " + path + ": " + ec.message());
    }
    return Status::ok();
}

}  // namespace

const QuantTableRow* QuantTable::find(const std::string& scheme) const {
    for (const QuantTableRow& r : rows)
        if (r.scheme == scheme) return &r;
    return nullptr;
}

const std::vector<QuantTableScheme>& quant_table_schemes() {
    static const std::vector<QuantTableScheme> kSchemes = {
        {"ref", "reference"},
        {"int8", "INT8 RTN"},
        {"llm-int8", "LLM.int8()"},
        {"nf4", "NF4"},
        {"fp4", "FP4"},
        {"int4-rtn", "INT4 RTN"},
        {"int4-gptq", "GPTQ"},
        {"int4-gptq-act", "GPTQ act-order"},
        {"int4-awq", "AWQ"},
        {"q4_k", "Q4_K_M-style GGUF"},
        {"q8_0", "Q8_0"},
    };
    return kSchemes;
}

std::string quant_table_label(const std::string& scheme) {
    for (const QuantTableScheme& s : quant_table_schemes())
        if (scheme == s.scheme) return s.label;
    return scheme;
}

nlohmann::json quant_table_to_json(const QuantTable& t) {
    json rows = json::array();
    for (const QuantTableRow& r : t.rows) rows.push_back(row_json(r));
    json j = json::object();
    j["format"] = kQuantTableFormat;
    j["version"] = kQuantTableVersion;
    j["model"] = t.model;
    j["n_params"] = opt_json(t.n_params);
    j["machine"] = t.machine;
    j["rows"] = std::move(rows);
    return j;
}

Result<QuantTable> quant_table_from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) return Status::error(where + ": not a JSON object");
    const Fields f(j, where);
    std::string format;
    KVS_RETURN_IF_ERROR(f.text("format", format));
    if (format != kQuantTableFormat)
        return Status::error(where + ": \"format\" is \"" + format + "\", expected \"" + kQuantTableFormat + "\"");
    auto v = j.find("version");
    if (v == j.end()) return Status::error(where + ": the key \"version\" is missing");
    if (!v->is_number_integer()) return Status::error(where + ": \"version\" is not a whole number");
    const int64_t version = v->get<int64_t>();
    if (version < 1 || version > kQuantTableVersion)
        return Status::error(where + ": version " + std::to_string(version) + " is not supported (this reads 1 .. " +
                             std::to_string(kQuantTableVersion) + ")");
    QuantTable t;
    KVS_RETURN_IF_ERROR(f.text("model", t.model));
    KVS_RETURN_IF_ERROR(f.count("n_params", t.n_params));
    KVS_RETURN_IF_ERROR(f.text("machine", t.machine));
    auto rows = j.find("rows");
    if (rows == j.end()) return Status::error(where + ": the key \"rows\" is missing");
    if (!rows->is_array()) return Status::error(where + ": \"rows\" is not an array");
    for (size_t i = 0; i < rows->size(); ++i) {
        auto r = row_from_json((*rows)[i], where + ": rows[" + std::to_string(i) + "]", version);
        if (!r) return r.status();
        t.rows.push_back(std::move(r.value()));
    }
    return t;
}

std::string quant_table_csv(const QuantTable& t) {
    std::string out;
    for (const char* k : kRowKeys) out += (out.empty() ? "" : ",") + std::string(k);
    out += "\n";
    for (const QuantTableRow& r : t.rows) {
        const std::string cells[] = {csv_text(r.scheme),
                                     csv_text(r.label),
                                     csv_number(r.bits_per_weight),
                                     r.size_bytes ? std::to_string(*r.size_bytes) : std::string(),
                                     csv_number(r.ppl),
                                     csv_number(r.ppl_err),
                                     paired_set(r, kPaired[0]) ? csv_number(r.ln_ppl_vs_ref) : std::string(),
                                     paired_set(r, kPaired[0]) ? csv_number(r.ln_ppl_vs_ref_err) : std::string(),
                                     paired_set(r, kPaired[1]) ? csv_number(r.ln_ppl_vs_int4_rtn) : std::string(),
                                     paired_set(r, kPaired[1]) ? csv_number(r.ln_ppl_vs_int4_rtn_err) : std::string(),
                                     csv_number(r.mean_kl),
                                     csv_number(r.top1),
                                     csv_number(r.first_divergence),
                                     csv_number(r.prefill_tok_s),
                                     csv_number(r.decode_tok_s)};
        std::string line;
        for (const std::string& c : cells) line += (&c == cells ? "" : ",") + c;
        for (const SpeedField& sf : kSpeeds) line += "," + csv_spread(r.*sf.spread);
        out += line + "," + csv_text(r.note) + "\n";
    }
    return out;
}

Status write_quant_table_json(const QuantTable& t, const std::string& path) {
    return write_whole(path, quant_table_to_json(t).dump(2) + "\n", "JSON");
}

Status write_quant_table_csv(const QuantTable& t, const std::string& path) {
    return write_whole(path, quant_table_csv(t), "CSV");
}

Result<QuantTable> read_quant_table(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::error(path + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    json j;
    try {
        j = json::parse(ss.str());
    } catch (const json::exception& e) {  // its text says where (and e.g. "number overflow parsing '1e999'")
        return Status::error(path + ": not valid JSON: " + e.what());
    }
    return quant_table_from_json(j, path);
}

}  // namespace kvs
