// Measuring the quantization comparison table (see quant_table_run.h).
#include "engine/quant/quant_table_run.h"

#include <algorithm>
#include <filesystem>

#include "engine/quant/eval.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/machine_roof.h"

namespace kvs {

namespace {

// Where each phase sits in the run's 0..1 progress.
struct Phases {
    double quantize_end, quality_end, divergence_end;  // speed runs from divergence_end to 1
};
Phases phases(bool speed) { return speed ? Phases{0.45, 0.8, 0.85} : Phases{0.5, 0.9, 1.0}; }

// What a cancelled run says it stopped (Progress::cancelled_status adds ": cancelled").
constexpr const char* kWhat = "quantization table";

std::string model_name(const Model& m) {
    const std::filesystem::path p(m.path);
    std::string name = std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
    if (name.empty()) name = p.parent_path().filename().string();  // a folder path ending in '/'
    return name.empty() ? m.config.name : name;
}

// One measured model and what its row will say.
struct Entry {
    QuantTableRow row;
    std::shared_ptr<const Model> model;  // null: the scheme could not be made (row.note says why)
};

// Every scheme of the list, parsed before anything slow runs ("ref" dropped: it is row 0).
Result<std::vector<QuantScheme>> parse_schemes(const std::vector<std::string>& names) {
    std::vector<QuantScheme> out;
    if (names.empty())
        for (const QuantTableScheme& s : quant_table_schemes()) {
            auto q = QuantScheme::parse(s.scheme);
            if (!q) return Status::error("the table's scheme " + std::string(s.scheme) + ": " + q.message());
            if (q->kind != QuantScheme::Kind::Reference) out.push_back(q.value());
        }
    for (const std::string& n : names) {
        auto q = QuantScheme::parse(n);
        if (!q) return q.status();
        if (q->kind == QuantScheme::Kind::Reference) continue;
        if (std::any_of(out.begin(), out.end(), [&](const QuantScheme& s) { return s.name == q->name; }))
            return Status::error("the scheme " + q->name + " is named twice");
        out.push_back(q.value());
    }
    return out;
}

// Makes every variant; a scheme that cannot be made gets its reason as the row's note.
Status make_entries(const std::shared_ptr<const Model>& source, const std::vector<QuantScheme>& schemes,
                    const QuantTableOptions& o, double end, std::vector<Entry>& entries) {
    double total = 0;
    for (const QuantScheme& s : schemes) total += s.calibrated() ? 8 : 1;  // GPTQ / AWQ take far longer
    double done = 0;
    for (const QuantScheme& s : schemes) {
        const double w = s.calibrated() ? 8 : 1;
        const Progress part = o.progress.part(end * done / total, end * (done + w) / total);
        part.report("Quantizing to " + s.name, 0.0);
        KVS_RETURN_IF_ERROR(part.check(kWhat));
        Entry e;
        e.row.scheme = s.name;
        e.row.label = quant_table_label(s.name);
        if (s.calibrated() && o.calibration_tokens.empty()) {
            e.row.note = s.name + " needs calibration tokens and none were given";
        } else {
            QuantOptions qo;
            if (s.calibrated()) qo.calibration_tokens = o.calibration_tokens;
            qo.progress = part;  // its layers (and AWQ / GPTQ calibration and search) within the part
            auto m = quantize_model(source, s, qo);
            if (!m && Progress::is_cancelled(m.status()))
                return Status::error(std::string(kWhat) + ", making " + s.name + ": " + m.message());
            if (m) e.model = std::move(m.value());
            else
                e.row.note = "cannot be made for this model: " + m.message();
        }
        entries.push_back(std::move(e));
        done += w;
    }
    return Status::ok();
}

// Every made row's ln(PPL / PPL_int4-rtn) on the same tokens (paired_difference of the two
// rows' per-token NLLs; 0 ± 0 for int4-rtn itself); left null when int4-rtn was not made.
// `made` and rep.variants are in the same order.
Status pair_with_int4_rtn(const std::vector<Entry*>& made, const QualityReport& rep) {
    const VariantQuality* rtn = nullptr;
    for (size_t i = 0; i < made.size(); ++i)
        if (made[i]->row.scheme == "int4-rtn") rtn = &rep.variants[i];
    if (!rtn) return Status::ok();
    for (size_t i = 0; i < made.size(); ++i) {
        auto d = paired_difference(rep.variants[i].token_nll, rtn->token_nll);
        if (!d) return Status::error("pairing " + made[i]->row.scheme + " with int4-rtn: " + d.message());
        made[i]->row.ln_ppl_vs_int4_rtn = d->mean;
        made[i]->row.ln_ppl_vs_int4_rtn_err = d->err;
    }
    return Status::ok();
}

// Quality and first divergence of every made model (the reference scored against itself too).
Status measure_quality(std::vector<Entry>& entries, const QuantTableOptions& o, const Phases& ph) {
    std::vector<Entry*> made;
    for (Entry& e : entries)
        if (e.model) made.push_back(&e);
    std::vector<std::shared_ptr<const Model>> variants;  // [n_made], the reference first
    for (Entry* e : made) variants.push_back(e->model);
    EvalOptions eo;
    eo.n_ctx = o.n_ctx;
    eo.bos = o.bos;
    eo.runner = o.runner;
    eo.progress = o.progress.part(ph.quantize_end, ph.quality_end);  // per chunk and model
    KVS_RETURN_IF_ERROR(o.progress.check(kWhat));
    auto rep = compare_quality(entries[0].model, variants, o.eval_tokens, eo);
    if (!rep && Progress::is_cancelled(rep.status()))
        return Status::error(std::string(kWhat) + ", scoring: " + rep.message());
    if (!rep) return rep.status();
    for (size_t i = 0; i < made.size(); ++i) {
        const VariantQuality& q = rep->variants[i];
        QuantTableRow& r = made[i]->row;
        r.ppl = q.ppl.ppl;
        r.ppl_err = q.ppl.ppl_err;
        r.mean_kl = q.kl.mean;
        r.top1 = q.kl.top1_pct / 100.0;
        r.ln_ppl_vs_ref = q.ln_ppl_ratio;
        r.ln_ppl_vs_ref_err = q.ln_ppl_ratio_err;
    }
    KVS_RETURN_IF_ERROR(pair_with_int4_rtn(made, rep.value()));
    if (o.prompts.empty()) return Status::ok();
    const Progress div_progress = o.progress.part(ph.quality_end, ph.divergence_end);  // per prompt and model
    div_progress.report("First greedy divergence on " + std::to_string(o.prompts.size()) + " prompts", 0.0);
    KVS_RETURN_IF_ERROR(o.progress.check(kWhat));
    auto div = first_greedy_divergence(entries[0].model, variants, *o.tokenizer, o.prompts, o.divergence_tokens,
                                       o.runner, div_progress);
    if (!div && Progress::is_cancelled(div.status()))
        return Status::error(std::string(kWhat) + ", first divergence: " + div.message());
    if (!div) return div.status();
    for (size_t i = 0; i < made.size(); ++i) {
        double sum = 0;
        for (const DivergenceResult& d : (*div)[i]) sum += d.first < 0 ? d.n_compared : d.first;
        made[i]->row.first_divergence = (*div)[i].empty() ? 0.0 : sum / double((*div)[i].size());
    }
    return Status::ok();
}

QuantTableSpread spread_of(const SpeedSample& s) { return {int(s.values.size()), s.sd, s.min, s.max, s.values}; }

Status measure_speeds(std::vector<Entry>& entries, const QuantTableOptions& o, const Phases& ph, std::string& machine) {
    SpeedOptions so;
    so.n_prompt = o.n_prompt;
    so.n_gen = o.n_gen;
    so.repeat = o.repeat;
    so.runner = o.runner;
    const Progress speed_progress = o.progress.part(ph.divergence_end, 1.0);
    for (size_t i = 0; i < entries.size(); ++i) {
        Entry& e = entries[i];
        so.progress = speed_progress.step(int64_t(i), int64_t(entries.size()));  // per timed run
        so.stage = "Timing " + e.row.scheme;
        so.progress.report(so.stage + " (pp" + std::to_string(o.n_prompt) + ", tg" + std::to_string(o.n_gen) + ")",
                           0.0);
        KVS_RETURN_IF_ERROR(o.progress.check(kWhat));
        if (!e.model) continue;
        auto sp = measure_speed(e.model, o.eval_tokens, so);
        if (!sp) return Status::error("timing " + e.row.scheme + ": " + sp.message());
        e.row.prefill_tok_s = sp->pp.mean;
        e.row.decode_tok_s = sp->tg.mean;
        e.row.prefill_spread = spread_of(sp->pp);
        e.row.decode_spread = spread_of(sp->tg);
        if (i == 0) machine = quant_table_machine(sp->backend, sp->n_threads);
    }
    return Status::ok();
}

}  // namespace

const std::vector<std::string>& default_divergence_prompts() {
    static const std::vector<std::string> kPrompts = {
        "The capital of France is",
        "Once upon a time, in a small village by the sea,",
        "To make a cup of tea, first",
    };
    return kPrompts;
}

std::string quant_table_machine(const std::string& backend, int n_threads) {
    std::string s = cpu_model_name();
    if (!backend.empty())
        s += " (" + backend + ", " + std::to_string(n_threads) + " thread" + (n_threads == 1 ? "" : "s") + ")";
    return s;
}

Result<QuantTable> measure_quant_table(const std::shared_ptr<const Model>& source, const QuantTableOptions& o) {
    if (!source) return Status::error("quantization table: no model");
    auto schemes = parse_schemes(o.schemes);
    if (!schemes) return schemes.status();
    auto plan = plan_chunks(int64_t(o.eval_tokens.size()), o.n_ctx);
    if (!plan) return plan.status();
    if (!o.prompts.empty() && !o.tokenizer)
        return Status::error("quantization table: prompts given without a tokenizer");
    const Phases ph = phases(o.speed);

    const QuantScheme ref = QuantScheme::parse("ref").value();
    auto ref_model = quantize_model(source, ref);
    if (!ref_model) return Status::error("making the reference: " + ref_model.message());
    std::vector<Entry> entries(1);  // [1 + n_schemes], the reference first
    entries[0].row.scheme = ref.name;
    entries[0].row.label = quant_table_label(ref.name);
    entries[0].model = std::move(ref_model.value());
    KVS_RETURN_IF_ERROR(make_entries(source, schemes.value(), o, ph.quantize_end, entries));
    KVS_RETURN_IF_ERROR(measure_quality(entries, o, ph));

    QuantTable t;
    t.model = model_name(*source);
    t.n_params = source->n_params;
    t.machine = quant_table_machine("", 0);
    if (o.speed) KVS_RETURN_IF_ERROR(measure_speeds(entries, o, ph, t.machine));
    for (Entry& e : entries) {
        if (e.model) {
            const MemoryInfo mi = memory_info(*e.model);
            e.row.bits_per_weight = mi.linear_bits_per_weight;
            e.row.size_bytes = mi.weight_bytes;
        }
        t.rows.push_back(std::move(e.row));
    }
    o.progress.report("Done", 1.0);
    return t;
}

}  // namespace kvs
