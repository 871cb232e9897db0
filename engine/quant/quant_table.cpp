// The quantization comparison table's JSON and CSV (see quant_table.h for the format).
#include "engine/quant/quant_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <type_traits>

namespace kvs {

namespace {

using json = nlohmann::json;
using Row = QuantTableRow;
using Spread = QuantTableSpread;

template <typename... A>
std::string printed(const char* format, A... a) {
    char buf[160];
    std::snprintf(buf, sizeof buf, format, a...);
    return buf;
}

// What a key holds, which decides how the reader checks it: a string, a number or null (in a
// range), a whole number >= 0 or null, an array of numbers >= 0 or null.
enum class Kind { text, number, count, values };

// The value type of a member: T of a T or of a std::optional<T>.
template <typename C, typename T>
T value_of(T C::*);
template <typename C, typename T>
T value_of(std::optional<T> C::*);

template <typename T>
constexpr Kind kind_of() {
    if constexpr (std::is_same_v<T, std::string>) return Kind::text;
    if constexpr (std::is_same_v<T, double>) return Kind::number;
    if constexpr (std::is_same_v<T, std::vector<double>>) return Kind::values;
    return Kind::count;  // int, int64_t
}

// A check of a key together with the keys before it, run once the key itself has been read.
using RowCheck = Status (*)(const json& row, const std::string& key, const std::string& where);

// One key of a row, which is also its CSV column: how it is written, read and checked.
struct Column {
    const char* key;
    Kind kind;
    json (*get)(const Row&);         // the value written: null for none
    void (*set)(Row&, const json&);  // stores a checked value that is not null
    int since = 1;                   // the first file version whose rows have the key
    double lo = 0, hi = INFINITY;    // a number's range
    RowCheck check = nullptr;

    constexpr Column range(double l, double h) const { return {key, kind, get, set, since, l, h, check}; }
    constexpr Column then(RowCheck f) const { return {key, kind, get, set, since, lo, hi, f}; }
};

json to_cell(const std::string& s) { return s; }
json to_cell(const std::optional<double>& v) { return v && std::isfinite(*v) ? json(*v) : json(); }
json to_cell(const std::optional<int64_t>& v) { return v ? json(*v) : json(); }

template <auto M>
json get_field(const Row& r) {
    return to_cell(r.*M);
}
template <auto M>
void set_field(Row& r, const json& v) {
    r.*M = v.get<decltype(value_of(M))>();
}
// A paired value or its error goes out with its partner, both finite, or not at all (null both).
template <auto M, auto Partner>
json get_paired(const Row& r) {
    const auto &v = r.*M, &p = r.*Partner;
    return v && p && std::isfinite(*v) && std::isfinite(*p) ? json(*v) : json();
}
// One of the five keys of a speed's runs (S), part P of them.
template <auto S, auto P>
json get_part(const Row& r) {
    return r.*S ? json((*(r.*S)).*P) : json();
}
template <auto S, auto P>
void set_part(Row& r, const json& v) {
    std::optional<Spread>& s = r.*S;
    if (!s) s.emplace();
    (*s).*P = v.get<decltype(value_of(P))>();
}

// The spreads came in version 2, the paired values in version 3.
constexpr int kSpreadSince = 2, kPairedSince = 3;

template <auto M>
constexpr Column field(const char* key, int since = 1) {
    return {key, kind_of<decltype(value_of(M))>(), get_field<M>, set_field<M>, since};
}
template <auto M, auto Partner>
constexpr Column paired(const char* key) {
    return {key, Kind::number, get_paired<M, Partner>, set_field<M>, kPairedSince};
}
template <auto S, auto P>
constexpr Column part(const char* key) {
    return {key, kind_of<decltype(value_of(P))>(), get_part<S, P>, set_part<S, P>, kSpreadSince};
}

Status check_not_empty(const json& row, const std::string& key, const std::string& where) {
    if (!row.at(key).get_ref<const std::string&>().empty()) return Status::ok();
    return Status::error(where + ": \"" + key + "\" is empty");
}

// After "<v>_err": the paired value "<v>" and its error both null (not measured) or both set.
Status check_paired(const json& row, const std::string& err_key, const std::string& where) {
    const std::string key = err_key.substr(0, err_key.rfind("_err"));
    const bool has_value = !row.at(key).is_null(), has_err = !row.at(err_key).is_null();
    if (has_value == has_err) return Status::ok();
    return Status::error(where + ": \"" + (has_value ? key : err_key) + "\" is set but \"" +
                         (has_value ? err_key : key) +
                         "\" is null (a paired value and its standard error go together)");
}

// After "<speed>_values": the speed's five spread keys all null (none), or all set and
// consistent with each other and with the speed's mean "<speed>_tok_s".
Status check_spread(const json& row, const std::string& values_key, const std::string& where) {
    const std::string p = values_key.substr(0, values_key.rfind("_values"));
    const std::string keys[] = {p + "_runs", p + "_sd", p + "_min", p + "_max", values_key};
    const auto is_set = [&](const std::string& k) { return !row.at(k).is_null(); };
    if (std::none_of(std::begin(keys), std::end(keys), is_set)) return Status::ok();
    for (const std::string& k : keys)
        if (!is_set(k))
            return Status::error(where + ": \"" + k + "\" is null while other " + p +
                                 "_ spread keys are set (all five null or all set)");
    const int64_t runs = row.at(keys[0]).get<int64_t>();
    const double lo = row.at(keys[2]).get<double>(), hi = row.at(keys[3]).get<double>();
    const size_t n_values = row.at(values_key).size();
    if (runs < 1 || runs > 1000000)
        return Status::error(where + ": \"" + keys[0] + "\" is " + std::to_string(runs) + ", expected 1 .. 1000000");
    if (int64_t(n_values) != runs)
        return Status::error(where + ": \"" + values_key + "\" has " + std::to_string(n_values) + " values, \"" +
                             keys[0] + "\" says " + std::to_string(runs));
    if (lo > hi)
        return Status::error(where + ": " +
                             printed("\"%s\" %g is above \"%s\" %g", keys[2].c_str(), lo, keys[3].c_str(), hi));
    if (!is_set(p + "_tok_s"))
        return Status::error(where + ": \"" + keys[0] + "\" is set but \"" + p + "_tok_s\" is null");
    return Status::ok();
}

// The row's keys in the order JSON and CSV write them; the reader reads and checks them in this
// order too. A number's range is 0 .. inf unless given. A new key is one line here (with the
// version that brings it: field<&Row::x>("x", 4)).
constexpr Column kColumns[] = {
    field<&Row::scheme>("scheme").then(check_not_empty),
    field<&Row::label>("label"),
    field<&Row::bits_per_weight>("bits_per_weight"),
    field<&Row::size_bytes>("size_bytes"),
    field<&Row::ppl>("ppl"),
    field<&Row::ppl_err>("ppl_err"),
    paired<&Row::ln_ppl_vs_ref, &Row::ln_ppl_vs_ref_err>("ln_ppl_vs_ref").range(-INFINITY, INFINITY),
    paired<&Row::ln_ppl_vs_ref_err, &Row::ln_ppl_vs_ref>("ln_ppl_vs_ref_err").then(check_paired),
    paired<&Row::ln_ppl_vs_int4_rtn, &Row::ln_ppl_vs_int4_rtn_err>("ln_ppl_vs_int4_rtn").range(-INFINITY, INFINITY),
    paired<&Row::ln_ppl_vs_int4_rtn_err, &Row::ln_ppl_vs_int4_rtn>("ln_ppl_vs_int4_rtn_err").then(check_paired),
    field<&Row::mean_kl>("mean_kl"),
    field<&Row::top1>("top1").range(0, 1),
    field<&Row::first_divergence>("first_divergence"),
    field<&Row::prefill_tok_s>("prefill_tok_s"),
    field<&Row::decode_tok_s>("decode_tok_s"),
    part<&Row::prefill_spread, &Spread::runs>("prefill_runs"),
    part<&Row::prefill_spread, &Spread::sd>("prefill_sd"),
    part<&Row::prefill_spread, &Spread::min>("prefill_min"),
    part<&Row::prefill_spread, &Spread::max>("prefill_max"),
    part<&Row::prefill_spread, &Spread::values>("prefill_values").then(check_spread),
    part<&Row::decode_spread, &Spread::runs>("decode_runs"),
    part<&Row::decode_spread, &Spread::sd>("decode_sd"),
    part<&Row::decode_spread, &Spread::min>("decode_min"),
    part<&Row::decode_spread, &Spread::max>("decode_max"),
    part<&Row::decode_spread, &Spread::values>("decode_values").then(check_spread),
    field<&Row::note>("note"),
};

// Checks that `key` of object `o` is there and holds a `kind` (a number in lo .. hi); the
// error names `where` and the key.
Status check_value(const json& o, const std::string& key, Kind kind, const std::string& where, double lo = 0,
                   double hi = INFINITY) {
    const auto it = o.find(key);
    if (it == o.end()) return Status::error(where + ": the key \"" + key + "\" is missing");
    const json& v = *it;
    const auto wrong = [&](const char* expected) {
        return Status::error(where + ": \"" + key + "\" is " + v.type_name() + ", expected " + expected);
    };
    if (kind == Kind::text) return v.is_string() ? Status::ok() : wrong("a string");
    if (v.is_null()) return Status::ok();
    if (kind == Kind::number) {
        if (!v.is_number()) return wrong("a number or null");
        const double x = v.get<double>();
        if (!std::isfinite(x))  // a number too large for a double parses as inf
            return Status::error(where + ": " + printed("\"%s\" is %g, expected a finite number", key.c_str(), x));
        if (!(x >= lo && x <= hi))
            return Status::error(where + ": " + printed("\"%s\" is %g, expected %g .. %g", key.c_str(), x, lo, hi));
    } else if (kind == Kind::count) {
        if (!v.is_number_integer()) return wrong("a whole number or null");
        if (v.get<int64_t>() < 0)
            return Status::error(where + ": \"" + key + "\" is " + std::to_string(v.get<int64_t>()) +
                                 ", expected >= 0");
    } else {
        if (!v.is_array()) return wrong("an array of numbers or null");
        for (size_t i = 0; i < v.size(); ++i)
            if (!v[i].is_number() || !(v[i].get<double>() >= 0) || !std::isfinite(v[i].get<double>()))
                return Status::error(where + ": \"" + key + "\"[" + std::to_string(i) + "] is " + v[i].dump() +
                                     ", expected a number >= 0");
    }
    return Status::ok();
}

json row_json(const Row& r) {
    json j = json::object();
    for (const Column& c : kColumns) j[c.key] = c.get(r);
    return j;
}

// `version`: the file's; the keys a later version added are not read.
Result<Row> row_from_json(const json& j, const std::string& where, int64_t version) {
    if (!j.is_object()) return Status::error(where + ": not a JSON object");
    Row r;
    for (const Column& c : kColumns) {
        if (version < c.since) continue;
        KVS_RETURN_IF_ERROR(check_value(j, c.key, c.kind, where, c.lo, c.hi));
        if (const json& v = j.at(c.key); !v.is_null()) c.set(r, v);
        if (c.check) KVS_RETURN_IF_ERROR(c.check(j, c.key, where));
    }
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

std::string csv_number(double v) { return std::isfinite(v) ? printed("%.10g", v) : std::string(); }

// A written value as a CSV cell: null empty, a list of numbers one cell with ';' between them.
std::string csv_cell(const json& v) {
    if (v.is_string()) return csv_text(v.get_ref<const std::string&>());
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number()) return csv_number(v.get<double>());
    std::string out;
    for (size_t i = 0; v.is_array() && i < v.size(); ++i) out += (i ? ";" : "") + csv_number(v[i].get<double>());
    return out;
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
    j["n_params"] = to_cell(t.n_params);
    j["machine"] = t.machine;
    j["rows"] = std::move(rows);
    return j;
}

Result<QuantTable> quant_table_from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) return Status::error(where + ": not a JSON object");
    KVS_RETURN_IF_ERROR(check_value(j, "format", Kind::text, where));
    const std::string& format = j.at("format").get_ref<const std::string&>();
    if (format != kQuantTableFormat)
        return Status::error(where + ": \"format\" is \"" + format + "\", expected \"" + kQuantTableFormat + "\"");
    auto v = j.find("version");
    if (v == j.end()) return Status::error(where + ": the key \"version\" is missing");
    if (!v->is_number_integer()) return Status::error(where + ": \"version\" is not a whole number");
    const int64_t version = v->get<int64_t>();
    if (version < 1 || version > kQuantTableVersion)
        return Status::error(where + ": version " + std::to_string(version) + " is not supported (this reads 1 .. " +
                             std::to_string(kQuantTableVersion) + ")");
    KVS_RETURN_IF_ERROR(check_value(j, "model", Kind::text, where));
    KVS_RETURN_IF_ERROR(check_value(j, "n_params", Kind::count, where));
    KVS_RETURN_IF_ERROR(check_value(j, "machine", Kind::text, where));
    QuantTable t;
    t.model = j.at("model").get<std::string>();
    if (!j.at("n_params").is_null()) t.n_params = j.at("n_params").get<int64_t>();
    t.machine = j.at("machine").get<std::string>();
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
    for (const Column& c : kColumns) out += (out.empty() ? "" : ",") + std::string(c.key);
    out += "\n";
    for (const Row& r : t.rows) {
        for (const Column& c : kColumns) out += (&c == kColumns ? "" : ",") + csv_cell(c.get(r));
        out += "\n";
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
