// "Which quantization fits?": sizes, fit and ranking (quant_fit.h).
#include "engine/quant/quant_fit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "engine/quant/quant_table.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/session.h"

namespace kvs {

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

std::string gib(int64_t bytes) {
    const double g = double(bytes) / double(int64_t(1) << 30);
    if (std::abs(g) >= 1.0) return fmt(std::abs(g) >= 100 ? "%.0f GiB" : "%.2f GiB", g);
    return fmt("%.0f MiB", double(bytes) / double(1 << 20));
}

// The AWQ paper's Table 4 (Lin et al. 2023, "AWQ: Activation-aware Weight Quantization for
// LLM Compression and Acceleration", arXiv 2306.00978, MLSys 2024): WikiText-2 perplexity,
// weights INT4 with groups of 128; GPTQ-R is GPTQ with reordering (act-order). Read from the
// paper's text; the issue quotes the Llama-2-7B row.
constexpr const char* kAwqTable4 = "AWQ paper (arXiv 2306.00978) Table 4, WikiText-2, INT4 g128";

struct Preset {
    const char* name;
    int n_layer;
    int64_t n_embd;
    int n_head, n_kv_head;
    int64_t n_ff, n_vocab;
    int n_ctx_train;
    double fp16, rtn, gptq, gptq_r, awq;  // Table 4
};

// Shapes from each model's config.json (Llama-2 and LLaMA are untied, vocabulary 32000).
constexpr Preset kPresets[] = {
    {"Llama-2-7B", 32, 4096, 32, 32, 11008, 32000, 4096, 5.47, 5.73, 5.69, 5.63, 5.60},
    {"Llama-2-13B", 40, 5120, 40, 40, 13824, 32000, 4096, 4.88, 4.98, 4.98, 4.99, 4.97},
    {"Llama-2-70B", 80, 8192, 64, 8, 28672, 32000, 4096, 3.32, 3.46, 3.42, 3.43, 3.41},
    {"LLaMA-7B", 32, 4096, 32, 32, 11008, 32000, 2048, 5.68, 5.96, 6.22, 5.83, 5.78},
    {"LLaMA-13B", 40, 5120, 40, 40, 13824, 32000, 2048, 5.09, 5.25, 5.23, 5.20, 5.19},
    {"LLaMA-30B", 60, 6656, 52, 52, 17920, 32000, 2048, 4.10, 4.23, 4.24, 4.22, 4.21},
    {"LLaMA-65B", 80, 8192, 64, 64, 22016, 32000, 2048, 3.53, 3.67, 3.66, 3.66, 3.62},
};

// The chooser's row labels: the comparison table's (quant_table_label), and for the schemes
// the table has no row for, FP16 or the GGML type's name ("q5_k" -> "Q5_K").
std::string scheme_label(const std::string& s) {
    const std::string t = quant_table_label(s);
    if (t != s) return t;
    if (s == "f16") return "FP16";
    std::string up = s;
    std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return char(std::toupper(c)); });
    return up;
}

// A loose name match: one contains the other, case ignored ("SmolLM2-135M" and
// "SmolLM2-135M-Instruct", a path and its model's name).
bool same_model(const std::string& a, const std::string& b) {
    if (a.empty() || b.empty()) return false;
    const std::string x = lower(a), y = lower(b);
    return x.find(y) != std::string::npos || y.find(x) != std::string::npos;
}

Status check_shape(const FitModel& m) {
    auto positive = [](int64_t v, const char* what) {
        return v >= 1 ? Status::ok()
                      : Status::error(std::string("model: ") + what + " must be at least 1 (got " + std::to_string(v) +
                                      ")");
    };
    KVS_RETURN_IF_ERROR(positive(m.n_layer, "layers"));
    KVS_RETURN_IF_ERROR(positive(m.n_kv_head, "kv_heads"));
    KVS_RETURN_IF_ERROR(positive(m.head_dim, "head_dim"));
    KVS_RETURN_IF_ERROR(positive(m.n_params, "parameters"));
    return Status::ok();
}

// The reference perplexity and the scheme's, from the anchors or the table; the source in words.
struct Quality {
    std::optional<double> ppl, increase_pct;
    std::string source = "no measurement";
    std::optional<double> decode_tok_s, prefill_tok_s;
};

Quality quality_of(const std::string& scheme, const FitRequest& rq) {
    Quality q;
    auto anchor = [&](const std::string& s) -> const FitAnchor* {
        for (const FitAnchor& a : rq.model.anchors)
            if (a.scheme == s) return &a;
        return nullptr;
    };
    if (const FitAnchor* a = anchor(scheme), *ref = anchor("f16"); a && ref) {
        q.ppl = a->ppl;
        q.increase_pct = (a->ppl / ref->ppl - 1.0) * 100.0;
        q.source = a->source + fmt(": %.2f", a->ppl) + fmt(" vs FP16 %.2f", ref->ppl);
        return q;
    }
    if (!rq.table) return q;
    const FitMeasurements& t = *rq.table;
    auto row = [&](const std::string& s) -> const FitMeasurement* {
        for (const FitMeasurement& r : t.rows)
            if (r.scheme == s && r.ppl) return &r;
        return nullptr;
    };
    const FitMeasurement* ref = row("f16") ? row("f16") : row("ref");
    // F16 of the reference: the table's reference row when it has no F16 row (the reference is
    // the dequantized source; F16 holds it up to fp16 rounding).
    const FitMeasurement* r = row(scheme) ? row(scheme) : (scheme == "f16" ? ref : nullptr);
    if (!r || !ref) return q;
    const bool own = same_model(t.model, rq.model.name);
    q.increase_pct = (*r->ppl / *ref->ppl - 1.0) * 100.0;
    if (own) {
        q.ppl = r->ppl;
        q.decode_tok_s = r->decode_tok_s;
        q.prefill_tok_s = r->prefill_tok_s;
    }
    q.source =
        (own ? "measured on this model" : "measured on " + t.model + " (a stand-in: its ratio to its reference)") +
        fmt(": PPL %.3f", *r->ppl) + fmt(" vs %.3f", *ref->ppl) +
        (r == ref && scheme == "f16" ? std::string(" (the reference row)") : std::string());
    return q;
}

struct Sizes {
    bool applies = true;
    std::string why_not;
    int64_t weight_bytes = 0;
    double bits = 0;
};

Sizes sizes_of(const FitModel& m, const QuantScheme& s) {
    Sizes z;
    if (m.linears.empty()) {                          // a parameter count only: every weight at the scheme's bits
        const DType t = *quant_linear_type(4096, s);  // 4096: every block and group divides it
        z.bits = double(tensor_bytes(t, 4096, 4096)) * 8.0 / (4096.0 * 4096.0);  // NF4_DQ: its tail too
        z.weight_bytes = int64_t(std::ceil(double(m.n_params) * z.bits / 8.0));
        return z;
    }
    double bytes = 0, params = 0;
    for (const FitModel::Linears& l : m.linears) {
        auto t = quant_linear_type(l.n_in, s);
        if (!t) {
            z.applies = false;
            z.why_not = "a row of " + std::to_string(l.n_in) + " weights is not a multiple of " +
                        std::string(dtype_name(s.dtype)) + "'s block of " +
                        std::to_string(dtype_info(s.dtype).block_size);
            return z;
        }
        bytes += double(tensor_bytes(*t, l.n_in, l.n_out)) * double(l.count);  // NF4_DQ: a tail per tensor
        params += double(l.n_in) * double(l.n_out) * double(l.count);
    }
    z.bits = params > 0 ? bytes * 8.0 / params : 0.0;
    z.weight_bytes = int64_t(bytes) + m.kept_bytes;
    return z;
}

}  // namespace

// ---- models

FitModel fit_model_of(const Model& m) {
    FitModel f;
    const ModelConfig& c = m.config;
    f.name = c.name.empty() ? m.path : c.name;
    f.n_layer = c.n_layer;
    f.n_head = c.n_head;
    f.n_kv_head = c.n_kv_head;
    f.head_dim = c.head_dim;
    f.n_embd = c.n_embd;
    f.n_ff = c.n_ff;
    f.n_vocab = c.n_vocab;
    f.tied_embeddings = c.tied_embeddings;
    f.n_ctx_train = c.n_ctx_train;
    f.n_params = m.n_params;
    f.stored_as = m.file_type;
    std::map<std::pair<int64_t, int64_t>, int64_t> shapes;  // (n_out, n_in) -> count
    for (const LayerWeights& L : m.layers)
        for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
            shapes[{w->n_out, w->n_in}] += 1;
    for (const auto& [shape, n] : shapes) f.linears.push_back({shape.first, shape.second, n});
    // The embedding and output head as stored: what a variant keeps (recount_weights counts
    // the same; the norms, a few KiB of floats, are not weights there).
    auto bytes_of = [](const WeightView& w) { return int64_t(tensor_bytes(w.dtype, w.n_in, w.n_out)); };
    f.kept_bytes = bytes_of(m.token_embd) + (c.tied_embeddings ? 0 : bytes_of(m.output));
    return f;
}

Result<FitModel> fit_model_of_shape(const std::string& name, int n_layer, int64_t n_embd, int n_head, int n_kv_head,
                                    int64_t n_ff, int64_t n_vocab, bool tied, int n_ctx_train) {
    const std::pair<int64_t, const char*> counts[] = {{n_layer, "layers"}, {n_embd, "hidden size"},
                                                      {n_head, "heads"},   {n_kv_head, "kv_heads"},
                                                      {n_ff, "ffn size"},  {n_vocab, "vocabulary"}};
    for (const auto& [v, what] : counts)
        if (v < 1)
            return Result<FitModel>::error(std::string("model: ") + what + " must be at least 1 (got " +
                                           std::to_string(v) + ")");
    if (n_head % n_kv_head != 0)
        return Result<FitModel>::error("model: kv_heads (" + std::to_string(n_kv_head) + ") must divide heads (" +
                                       std::to_string(n_head) + ")");
    if (n_embd % n_head != 0)
        return Result<FitModel>::error("model: the hidden size (" + std::to_string(n_embd) +
                                       ") must be a multiple of heads (" + std::to_string(n_head) + ")");
    FitModel f;
    f.name = name;
    f.n_layer = n_layer;
    f.n_head = n_head;
    f.n_kv_head = n_kv_head;
    f.head_dim = int(n_embd / n_head);
    f.n_embd = n_embd;
    f.n_ff = n_ff;
    f.n_vocab = n_vocab;
    f.tied_embeddings = tied;
    f.n_ctx_train = n_ctx_train;
    const int64_t q = int64_t(n_head) * f.head_dim, kv = int64_t(n_kv_head) * f.head_dim;
    f.linears = {{q, n_embd, n_layer},         // q
                 {kv, n_embd, 2 * n_layer},    // k, v
                 {n_embd, q, n_layer},         // o
                 {n_ff, n_embd, 2 * n_layer},  // gate, up
                 {n_embd, n_ff, n_layer}};     // down
    int64_t linear_params = 0;
    for (const auto& l : f.linears) linear_params += l.n_out * l.n_in * l.count;
    const int64_t embd = n_vocab * n_embd * (tied ? 1 : 2);
    const int64_t norms = (2 * int64_t(n_layer) + 1) * n_embd;
    f.n_params = linear_params + embd + norms;
    f.kept_bytes = embd * 2 + norms * 2;  // F16
    f.stored_as = "";
    return f;
}

Result<FitModel> fit_model_of_params(const std::string& name, int64_t n_params, int n_layer, int n_kv_head,
                                     int head_dim) {
    FitModel f;
    f.name = name;
    f.n_params = n_params;
    f.n_layer = n_layer;
    f.n_kv_head = n_kv_head;
    f.head_dim = head_dim;
    KVS_RETURN_IF_ERROR(check_shape(f));
    return f;
}

std::vector<std::string> fit_preset_names() {
    std::vector<std::string> out;
    for (const Preset& p : kPresets) out.emplace_back(p.name);
    return out;
}

Result<FitModel> fit_preset(const std::string& name) {
    for (const Preset& p : kPresets) {
        if (lower(p.name) != lower(name)) continue;
        auto f = fit_model_of_shape(p.name, p.n_layer, p.n_embd, p.n_head, p.n_kv_head, p.n_ff, p.n_vocab, false,
                                    p.n_ctx_train);
        if (!f) return f;
        f->anchors = {{"f16", p.fp16, kAwqTable4},
                      {"int4-rtn", p.rtn, kAwqTable4},
                      {"int4-gptq", p.gptq, kAwqTable4},
                      {"int4-gptq-act", p.gptq_r, std::string(kAwqTable4) + " (GPTQ-R: reordered, act-order)"},
                      {"int4-awq", p.awq, kAwqTable4}};
        return f;
    }
    std::string all;
    for (const auto& n : fit_preset_names()) all += (all.empty() ? "" : ", ") + n;
    return Result<FitModel>::error("unknown model preset '" + name + "' (expected one of: " + all + ")");
}

// ---- device, goal

int64_t available_ram_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return 0;
}

Result<FitGoal> parse_fit_goal(const std::string& text) {
    const std::string s = lower(text);
    if (s == "quality") return FitGoal::Quality;
    if (s == "edge-cpu" || s == "edge") return FitGoal::EdgeCpu;
    if (s == "throughput") return FitGoal::Throughput;
    return Result<FitGoal>::error("unknown goal '" + text + "' (expected quality, edge-cpu or throughput)");
}

std::string fit_goal_name(FitGoal g) {
    switch (g) {
        case FitGoal::Quality: return "quality";
        case FitGoal::EdgeCpu: return "edge-cpu";
        case FitGoal::Throughput: return "throughput";
    }
    return "?";
}

std::vector<std::string> fit_default_schemes() {
    return {"f16",      "q8_0",      "int8",          "llm-int8", "nf4",  "fp4",
            "int4-rtn", "int4-gptq", "int4-gptq-act", "int4-awq", "q4_k", "q4_0"};
}

// ---- the fit

Result<FitResult> quant_fit(const FitRequest& rq) {
    using R = Result<FitResult>;
    KVS_RETURN_IF_ERROR(check_shape(rq.model));
    if (rq.context < 1) return R::error("context must be at least 1 token (got " + std::to_string(rq.context) + ")");
    if (rq.batch < 1) return R::error("batch must be at least 1 sequence (got " + std::to_string(rq.batch) + ")");
    if (rq.model.n_ctx_train > 0 && rq.context > rq.model.n_ctx_train)
        return R::error("context " + std::to_string(rq.context) + " is past " + rq.model.name +
                        "'s trained context of " + std::to_string(rq.model.n_ctx_train) + " tokens");
    if (rq.device.memory_bytes <= 0)
        return R::error("device memory must be more than 0 bytes (got " + std::to_string(rq.device.memory_bytes) + ")");
    if (!(rq.device.usable_fraction > 0.0 && rq.device.usable_fraction <= 1.0))
        return R::error("the usable fraction of the device memory must be in (0, 1] (got " +
                        fmt("%g", rq.device.usable_fraction) + ")");
    if (rq.kv_type != DType::F16 && rq.kv_type != DType::Q8_0)
        return R::error("KV cache type must be f16 or int8 (got " + std::string(dtype_name(rq.kv_type)) + ")");
    const int block = rq.block_size > 0 ? rq.block_size : EngineOptions{}.block_size;
    std::vector<QuantScheme> schemes;
    for (const std::string& name : rq.schemes.empty() ? fit_default_schemes() : rq.schemes) {
        auto s = QuantScheme::parse(name);
        if (!s) return s.status();
        schemes.push_back(s.value());
    }

    FitResult out;
    out.block_size = block;
    out.usable_bytes = int64_t(double(rq.device.memory_bytes) * rq.device.usable_fraction);
    out.kv_bytes_per_token =
        Session::kv_bytes_per_token(rq.model.n_layer, rq.model.n_kv_head, rq.model.head_dim, rq.kv_type);
    const int64_t blocks_per_seq = (rq.context + block - 1) / block;
    const int64_t seq_bytes = blocks_per_seq * block * out.kv_bytes_per_token;
    const int64_t block_bytes = int64_t(block) * out.kv_bytes_per_token;

    for (const QuantScheme& s : schemes) {
        FitRow r;
        r.scheme = s.name;
        r.label = scheme_label(s.name);
        const Sizes z = sizes_of(rq.model, s);
        r.applies = z.applies;
        r.bits_per_weight = z.bits;
        r.weight_bytes = z.weight_bytes;
        r.weights_estimated = rq.model.linears.empty();
        r.kv_bytes = rq.batch * seq_bytes;
        const Quality q = quality_of(s.name, rq);
        r.ppl = q.ppl;
        r.ppl_increase_pct = q.increase_pct;
        r.quality_source = q.source;
        r.decode_tok_s = q.decode_tok_s;
        r.prefill_tok_s = q.prefill_tok_s;
        if (!r.applies) {
            r.why = "does not apply: " + z.why_not;
            out.rows.push_back(r);
            continue;
        }
        r.room_bytes = out.usable_bytes - r.weight_bytes;
        r.fits = r.room_bytes >= r.kv_bytes;
        if (r.room_bytes > 0) {
            r.max_batch = r.room_bytes / seq_bytes;
            r.max_context = (r.room_bytes / (rq.batch * block_bytes)) * block;
            if (rq.model.n_ctx_train > 0) r.max_context = std::min<int64_t>(r.max_context, rq.model.n_ctx_train);
        }
        if (r.room_bytes <= 0)
            r.why = "the weights alone (" + gib(r.weight_bytes) + ") exceed the usable " + gib(out.usable_bytes);
        else if (!r.fits)
            r.why = "KV for " + std::to_string(rq.batch) + " x " + std::to_string(rq.context) + " tokens needs " +
                    gib(r.kv_bytes) + ", the room is " + gib(r.room_bytes) + " (at most " +
                    std::to_string(r.max_context) + " tokens per sequence, or " + std::to_string(r.max_batch) +
                    " sequences)";
        out.rows.push_back(r);
    }

    // The ranking: a key per goal over the rows that fit; smaller keys first.
    const double floor_pct = rq.goal == FitGoal::EdgeCpu ? 10.0 : rq.goal == FitGoal::Throughput ? 5.0 : 1e300;
    auto key = [&](const FitRow& r) -> std::tuple<int, int, double, double> {
        const QuantScheme s = QuantScheme::parse(r.scheme).value();
        const bool known = r.ppl_increase_pct.has_value();
        const double inc = known ? *r.ppl_increase_pct : 0.0;
        const int below_floor = known && inc > floor_pct ? 1 : 0;
        switch (rq.goal) {
            case FitGoal::Quality: return {known ? 0 : 1, 0, known ? inc : -r.bits_per_weight, 0.0};
            case FitGoal::EdgeCpu: {
                const bool speed = r.decode_tok_s.has_value();
                return {0, below_floor, speed ? 0.0 : 1.0, speed ? -*r.decode_tok_s : double(r.weight_bytes)};
            }
            case FitGoal::Throughput: return {0, below_floor, -double(r.max_batch), known ? inc : -r.bits_per_weight};
        }
        return {0, 0, 0.0, 0.0};
    };
    std::stable_sort(out.rows.begin(), out.rows.end(), [&](const FitRow& a, const FitRow& b) {
        const bool ra = a.applies && a.fits, rb = b.applies && b.fits;
        if (ra != rb) return ra;
        if (!ra) return false;
        return key(a) < key(b);
    });
    int rank = 0;
    for (FitRow& r : out.rows) {
        if (!(r.applies && r.fits)) continue;
        r.rank = ++rank;
        const QuantScheme s = QuantScheme::parse(r.scheme).value();
        const std::string quality = r.ppl_increase_pct
                                        ? fmt("%+.1f%% perplexity", *r.ppl_increase_pct)
                                        : fmt("quality not measured (%.2f bits per weight)", r.bits_per_weight);
        std::string why;
        switch (rq.goal) {
            case FitGoal::Quality: why = quality; break;
            case FitGoal::EdgeCpu:
                why = r.decode_tok_s ? fmt("%.1f tok/s decode measured", *r.decode_tok_s)
                                     : gib(r.weight_bytes) + " of weights read per token";
                why += ", " + quality;
                break;
            case FitGoal::Throughput:
                why = std::to_string(r.max_batch) + " sequences of " + std::to_string(rq.context) + " tokens in " +
                      gib(r.room_bytes) + " of KV room, " + quality;
                break;
        }
        if (r.ppl_increase_pct && *r.ppl_increase_pct > floor_pct)
            why += fmt("; beyond the goal's quality floor of +%.0f%%", floor_pct);
        r.why = why;
    }

    const bool anchors = !rq.model.anchors.empty();
    out.notes.push_back("usable memory " + gib(out.usable_bytes) + " = " +
                        fmt("%.0f%%", rq.device.usable_fraction * 100) + " of " +
                        (rq.device.described.empty() ? gib(rq.device.memory_bytes) : rq.device.described) +
                        "; the engine's scratch (activations, logits) is not counted");
    out.notes.push_back("KV: " + std::to_string(out.kv_bytes_per_token) + " bytes per token (" +
                        std::string(rq.kv_type == DType::F16 ? "f16" : "int8") + ", " +
                        std::to_string(rq.model.n_layer) + " layers x " + std::to_string(rq.model.n_kv_head) +
                        " KV heads x " + std::to_string(rq.model.head_dim) + "), whole blocks of " +
                        std::to_string(block) + " tokens: " + gib(seq_bytes) + " per sequence of " +
                        std::to_string(rq.context));
    if (rq.model.linears.empty())
        out.notes.push_back("weights estimated: every one of the " + std::to_string(rq.model.n_params) +
                            " parameters at the scheme's bits per weight (no shape to separate the embedding)");
    else if (rq.model.stored_as.empty())
        out.notes.push_back("the embedding and output head stay F16 in every scheme (" + gib(rq.model.kept_bytes) +
                            "), as quantize keeps them");
    else
        out.notes.push_back("the embedding and output head stay as " + rq.model.name + " stores them (" +
                            gib(rq.model.kept_bytes) + "), as quantize keeps them");
    if (anchors) out.notes.push_back(std::string("quality: published perplexities, ") + kAwqTable4);
    if (rq.table)
        out.notes.push_back("quality" + std::string(anchors ? " where the paper has none" : "") +
                            ": comparison table of " + rq.table->model +
                            (rq.table->machine.empty() ? "" : " (" + rq.table->machine + ")") +
                            (same_model(rq.table->model, rq.model.name)
                                 ? ""
                                 : "; a different model: only its perplexity ratios are used, not its speeds"));
    if (!anchors && !rq.table)
        out.notes.push_back(
            "quality: no table and no published numbers for this model; ranked by bits per weight "
            "(run `kvscope eval --all --json FILE` and pass --table FILE)");
    return out;
}

}  // namespace kvs
