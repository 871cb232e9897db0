// Perplexity, KL divergence, top-1 agreement, first greedy divergence, memory and speed
// of quantized variants against their reference (see eval.h for the definitions).
#include "engine/quant/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <tuple>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/runtime/generate.h"
#include "engine/sampling/sampler.h"
#include "engine/telemetry/latency_stats.h"

namespace kvs {

namespace {

// KL(p || q) from logit rows whose log-sum-exps are known: sum_i p_i (log p_i - log q_i).
double kl_rows(const float* ref, double lse_ref, const float* var, double lse_var, int n) {
    double sum = 0;
    for (int i = 0; i < n; ++i) {
        const double lp = double(ref[i]) - lse_ref, lq = double(var[i]) - lse_var;
        sum += std::exp(lp) * (lp - lq);
    }
    return sum;
}

// What one scored row of a model says: log-sum-exp, argmax, NLL of the target.
struct RowStats {
    double lse = 0, nll = 0;
    int32_t top = 0;
};

// Row j of `logits` ([n_rows, n_vocab]) for j in [0, n_rows), split over a few threads.
template <typename F>
void for_rows(int n_rows, F&& f) {
    const int n_threads = std::clamp(int(std::thread::hardware_concurrency()), 1, 8);
    std::vector<std::thread> pool;
    for (int t = 1; t < n_threads; ++t)
        pool.emplace_back([&, t] {
            for (int j = t; j < n_rows; j += n_threads) f(j);
        });
    for (int j = 0; j < n_rows; j += n_threads) f(j);
    for (auto& th : pool) th.join();
}

// Sums of per-token values, as llama.cpp keeps them, for mean ± stderr and covariance.
struct Sums {
    double x = 0, x2 = 0;
    void add(double v) { x += v, x2 += v * v; }
};
// Mean and its standard error: sqrt((E[x^2] - E[x]^2) / (n - 1)).
std::pair<double, double> mean_err(const Sums& s, int64_t n) {
    if (n < 1) return {0, 0};
    const double m = s.x / double(n), var = s.x2 / double(n) - m * m;
    return {m, var > 0 && n > 1 ? std::sqrt(var / double(n - 1)) : 0.0};
}

PerplexityResult make_ppl(const Sums& nll, const ChunkPlan& plan) {
    PerplexityResult r;
    r.n_scored = plan.n_scored();
    r.n_chunks = plan.n_chunks;
    r.n_ctx = plan.n_ctx;
    std::tie(r.mean_nll, r.nll_err) = mean_err(nll, r.n_scored);
    r.ppl = std::exp(r.mean_nll);
    r.ppl_err = r.ppl * r.nll_err;
    return r;
}

// A variant's running totals over the chunks.
struct VariantAcc {
    Sums nll, kl;
    double nll_cross = 0;  // sum of nll_variant * nll_reference
    int64_t n_same_top = 0;
    std::vector<double> kl_values;   // [n_scored] per-token KL
    std::vector<double> nll_values;  // [n_scored] per-token NLL
};

VariantQuality finish_variant(VariantAcc& a, const Sums& ref_nll, const ChunkPlan& plan) {
    VariantQuality q;
    const int64_t n = plan.n_scored();
    q.ppl = make_ppl(a.nll, plan);
    q.token_nll = std::move(a.nll_values);
    const PerplexityResult ref = make_ppl(ref_nll, plan);
    // Covariance of the two mean NLLs (llama.cpp's kl_divergence report).
    const double cov =
        n > 1 ? (a.nll_cross / double(n) - (a.nll.x / double(n)) * (ref_nll.x / double(n))) / double(n - 1) : 0.0;
    q.ln_ppl_ratio = q.ppl.mean_nll - ref.mean_nll;
    q.ln_ppl_ratio_err = std::sqrt(std::max(0.0, q.ppl.nll_err * q.ppl.nll_err + ref.nll_err * ref.nll_err - 2 * cov));
    q.delta_ppl = q.ppl.ppl - ref.ppl;
    q.delta_ppl_err = std::sqrt(
        std::max(0.0, q.ppl.ppl_err * q.ppl.ppl_err + ref.ppl_err * ref.ppl_err - 2 * q.ppl.ppl * ref.ppl * cov));
    KlStats& k = q.kl;
    k.n = n;
    std::tie(k.mean, k.mean_err) = mean_err(a.kl, n);
    std::sort(a.kl_values.begin(), a.kl_values.end());
    k.median = percentile_sorted(a.kl_values, 50);
    k.p90 = percentile_sorted(a.kl_values, 90);
    k.p95 = percentile_sorted(a.kl_values, 95);
    k.p99 = percentile_sorted(a.kl_values, 99);
    k.max = a.kl_values.empty() ? 0 : a.kl_values.back();
    const double p = n > 0 ? double(a.n_same_top) / double(n) : 0;
    k.top1_pct = 100 * p;
    k.top1_err_pct = n > 1 ? 100 * std::sqrt(p * (1 - p) / double(n - 1)) : 0;
    return q;
}

// Runs one chunk from an empty cache: the unscored first half without logits, then the
// second half with logits for every row. *logits gets [n_ctx - first, n_vocab].
Status run_chunk(SequenceRunner& r, const std::vector<int32_t>& chunk, int first, std::vector<float>* logits) {
    r.clear();
    std::vector<float> unused;  // [1, n_vocab]
    KVS_RETURN_IF_ERROR(r.eval(std::vector<int32_t>(chunk.begin(), chunk.begin() + first), false, &unused));
    return r.eval(std::vector<int32_t>(chunk.begin() + first, chunk.end()), true, logits);
}

// Per scored row of one chunk: log-sum-exp, argmax and NLL of the next token.
std::vector<RowStats> row_stats(const std::vector<float>& logits, const std::vector<int32_t>& chunk, int first,
                                int n_rows, int n_vocab) {
    std::vector<RowStats> s(static_cast<size_t>(n_rows));  // [n_rows]
    for_rows(n_rows, [&](int j) {
        const float* row = logits.data() + size_t(j) * n_vocab;
        s[j].lse = log_sum_exp(row, n_vocab);
        s[j].top = argmax_lowest_id(row, n_vocab);
        s[j].nll = s[j].lse - double(row[chunk[size_t(first + 1 + j)]]);
    });
    return s;
}

}  // namespace

Result<ChunkPlan> plan_chunks(int64_t n_tokens, int n_ctx) {
    if (n_ctx < 3)
        return Result<ChunkPlan>::error("evaluation context must be at least 3 tokens (half of it is scored), got " +
                                        std::to_string(n_ctx));
    if (n_tokens < n_ctx)
        return Result<ChunkPlan>::error("the evaluation text has " + std::to_string(n_tokens) +
                                        " tokens, fewer than one chunk of " + std::to_string(n_ctx) +
                                        " tokens (use a longer text or a smaller --ctx)");
    ChunkPlan p;
    p.n_ctx = n_ctx;
    p.n_chunks = int(n_tokens / n_ctx);
    p.first = n_ctx / 2;
    return p;
}

std::vector<int64_t> scored_targets(const ChunkPlan& plan) {
    std::vector<int64_t> out;
    out.reserve(size_t(plan.n_scored()));
    for (int c = 0; c < plan.n_chunks; ++c)
        for (int j = plan.first + 1; j < plan.n_ctx; ++j) out.push_back(int64_t(c) * plan.n_ctx + j);
    return out;
}

double log_sum_exp(const float* logits, int n) {
    float mx = logits[0];
    for (int i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - double(mx));
    return double(mx) + std::log(sum);
}

double kl_divergence(const float* ref_logits, const float* var_logits, int n) {
    return kl_rows(ref_logits, log_sum_exp(ref_logits, n), var_logits, log_sum_exp(var_logits, n), n);
}

Result<QualityReport> compare_quality(std::shared_ptr<const Model> reference,
                                      const std::vector<std::shared_ptr<const Model>>& variants,
                                      const std::vector<int32_t>& tokens, const EvalOptions& opt) {
    using R = Result<QualityReport>;
    if (!reference) return R::error("compare_quality: no reference model");
    auto plan = plan_chunks(int64_t(tokens.size()), opt.n_ctx);
    if (!plan) return plan.status();
    const int n_vocab = reference->config.n_vocab, first = plan->first, n_rows = plan->n_scored_per_chunk();
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab)
            return R::error("evaluation token id " + std::to_string(t) + " is outside the vocabulary of " +
                            std::to_string(n_vocab));
    std::string note;
    std::shared_ptr<Backend> backend = make_backend(opt.runner.backend, opt.runner.n_threads, &note, opt.runner.simd);
    if (!backend) return R::error(note);
    RunnerOptions ro = opt.runner;
    ro.n_ctx = opt.n_ctx;
    ro.n_batch = opt.n_ctx - first;
    std::vector<std::shared_ptr<const Model>> models{reference};  // [1 + n_variants], the reference first
    models.insert(models.end(), variants.begin(), variants.end());
    std::vector<std::unique_ptr<SequenceRunner>> runners;  // [1 + n_variants]
    for (const auto& m : models) {
        if (!m) return R::error("compare_quality: a model is missing");
        if (m->config.n_vocab != n_vocab)
            return R::error("a variant has " + std::to_string(m->config.n_vocab) +
                            " vocabulary entries, the reference " + std::to_string(n_vocab));
        auto r = SequenceRunner::create(m, ro, backend);
        if (!r) return r.status();
        runners.push_back(std::move(r.value()));
    }

    Sums ref_nll;
    std::vector<VariantAcc> acc(variants.size());
    std::vector<float> ref_logits, var_logits;  // [n_ctx - first, n_vocab] each, one chunk
    const int n_models = int(variants.size()) + 1;
    for (int c = 0; c < plan->n_chunks; ++c) {
        KVS_RETURN_IF_ERROR(opt.progress.check("evaluation at chunk " + std::to_string(c + 1) + " of " +
                                               std::to_string(plan->n_chunks)));
        const std::string stage = "evaluating chunk " + std::to_string(c + 1) + " / " + std::to_string(plan->n_chunks);
        const Progress chunk_progress = opt.progress.step(c, plan->n_chunks);
        std::vector<int32_t> chunk(tokens.begin() + int64_t(c) * opt.n_ctx,
                                   tokens.begin() + int64_t(c + 1) * opt.n_ctx);
        if (opt.bos >= 0) chunk[0] = opt.bos;
        KVS_RETURN_IF_ERROR(run_chunk(*runners[0], chunk, first, &ref_logits));
        const std::vector<RowStats> rs = row_stats(ref_logits, chunk, first, n_rows, n_vocab);
        for (const RowStats& s : rs) ref_nll.add(s.nll);
        chunk_progress.report(stage, 1, n_models);
        for (size_t v = 0; v < variants.size(); ++v) {
            KVS_RETURN_IF_ERROR(opt.progress.check("evaluation at chunk " + std::to_string(c + 1) + " of " +
                                                   std::to_string(plan->n_chunks)));
            KVS_RETURN_IF_ERROR(run_chunk(*runners[v + 1], chunk, first, &var_logits));
            const std::vector<RowStats> vs = row_stats(var_logits, chunk, first, n_rows, n_vocab);
            std::vector<double> kl(static_cast<size_t>(n_rows));  // [n_rows]
            for_rows(n_rows, [&](int j) {
                kl[j] = kl_rows(ref_logits.data() + size_t(j) * n_vocab, rs[j].lse,
                                var_logits.data() + size_t(j) * n_vocab, vs[j].lse, n_vocab);
            });
            VariantAcc& a = acc[v];
            for (int j = 0; j < n_rows; ++j) {
                a.nll.add(vs[j].nll);
                a.nll_values.push_back(vs[j].nll);
                a.nll_cross += vs[j].nll * rs[j].nll;
                a.kl.add(kl[j]);
                a.kl_values.push_back(kl[j]);
                a.n_same_top += vs[j].top == rs[j].top ? 1 : 0;
            }
            chunk_progress.report(stage, int64_t(v) + 2, n_models);
        }
    }
    opt.progress.report("evaluated " + std::to_string(plan->n_chunks) + " chunks", 1.0);
    QualityReport rep;
    rep.plan = plan.value();
    rep.reference = make_ppl(ref_nll, rep.plan);
    for (VariantAcc& a : acc) rep.variants.push_back(finish_variant(a, ref_nll, rep.plan));
    return rep;
}

Result<PairedDifference> paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
    using R = Result<PairedDifference>;
    if (a.size() != b.size())
        return R::error("paired values of different counts: " + std::to_string(a.size()) + " and " +
                        std::to_string(b.size()));
    if (a.empty()) return R::error("no paired values");
    Sums d;
    for (size_t i = 0; i < a.size(); ++i) d.add(a[i] - b[i]);
    PairedDifference r;
    r.n = int64_t(a.size());
    std::tie(r.mean, r.err) = mean_err(d, r.n);
    return r;
}

Result<PerplexityResult> perplexity(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens,
                                    const EvalOptions& opt) {
    auto rep = compare_quality(std::move(model), {}, tokens, opt);
    if (!rep) return rep.status();
    return rep->reference;
}

namespace {

// The variant's argmax at each of the reference's generated positions, from one pass over
// prompt + ref_tokens[0 .. n-2]; returns the first index where it is not ref_tokens[i].
Result<int> first_disagreement(SequenceRunner& var, const std::vector<int32_t>& prompt,
                               const std::vector<int32_t>& ref_tokens) {
    var.clear();
    std::vector<float> logits;  // [n_rows, n_vocab]
    if (prompt.size() > 1)
        KVS_RETURN_IF_ERROR(var.eval(std::vector<int32_t>(prompt.begin(), prompt.end() - 1), false, &logits));
    std::vector<int32_t> rest{prompt.back()};  // row i predicts ref_tokens[i]
    rest.insert(rest.end(), ref_tokens.begin(), ref_tokens.end() - 1);
    KVS_RETURN_IF_ERROR(var.eval(rest, true, &logits));
    const int n_vocab = var.model().config.n_vocab;
    for (size_t i = 0; i < ref_tokens.size(); ++i)
        if (argmax_lowest_id(logits.data() + i * size_t(n_vocab), n_vocab) != ref_tokens[i]) return int(i);
    return -1;
}

}  // namespace

Result<std::vector<std::vector<DivergenceResult>>> first_greedy_divergence(
    std::shared_ptr<const Model> reference, const std::vector<std::shared_ptr<const Model>>& variants,
    const Tokenizer& tok, const std::vector<std::vector<int32_t>>& prompts, int n_tokens, const RunnerOptions& runner,
    const Progress& progress) {
    using R = Result<std::vector<std::vector<DivergenceResult>>>;
    if (n_tokens < 1) return R::error("first divergence: the number of tokens must be at least 1");
    if (!reference) return R::error("first divergence: no reference model");
    size_t longest = 0;
    for (const auto& p : prompts) {
        if (p.empty()) return R::error("first divergence: a prompt is empty");
        longest = std::max(longest, p.size());
    }
    RunnerOptions ro = runner;
    ro.n_ctx = int(longest) + n_tokens + 2;
    ro.n_batch = ro.n_ctx;
    std::string note;
    std::shared_ptr<Backend> backend = make_backend(runner.backend, runner.n_threads, &note, runner.simd);
    if (!backend) return R::error(note);
    auto ref = SequenceRunner::create(reference, ro, backend);
    if (!ref) return ref.status();
    std::vector<std::unique_ptr<SequenceRunner>> vars;  // [n_variants]
    for (const auto& v : variants) {
        if (!v || v->config.n_vocab != reference->config.n_vocab)
            return R::error("first divergence: a variant is missing or has another vocabulary size");
        auto r = SequenceRunner::create(v, ro, backend);
        if (!r) return r.status();
        vars.push_back(std::move(r.value()));
    }
    SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = n_tokens;
    std::vector<std::vector<DivergenceResult>> out(variants.size());
    const int64_t n_prompts = int64_t(prompts.size()), n_steps = int64_t(vars.size()) + 1;
    for (int64_t i = 0; i < n_prompts; ++i) {
        const std::vector<int32_t>& p = prompts[size_t(i)];
        const std::string what =
            "first divergence at prompt " + std::to_string(i + 1) + " of " + std::to_string(n_prompts);
        const Progress step = progress.step(i, n_prompts);
        KVS_RETURN_IF_ERROR(progress.check(what));
        (*ref)->clear();
        auto g = generate(**ref, tok, p, greedy, nullptr);
        if (!g) return g.status();
        step.report(what, 1, n_steps);
        for (size_t v = 0; v < vars.size(); ++v) {
            KVS_RETURN_IF_ERROR(progress.check(what));
            auto first = first_disagreement(*vars[v], p, g->tokens);
            if (!first) return first.status();
            out[v].push_back({first.value(), int(g->tokens.size())});
            step.report(what, int64_t(v) + 2, n_steps);
        }
    }
    progress.report("first divergence on " + std::to_string(n_prompts) + " prompts", 1.0);
    return out;
}

MemoryInfo memory_info(const Model& m) {
    MemoryInfo info;
    info.weight_bytes = m.weight_bytes;
    info.kv_bytes_per_token = kv_cache_bytes_per_token(m.config, DType::F16);
    double bytes = 0, weights = 0;
    for (const LayerWeights& L : m.layers)
        for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
            bytes += double(tensor_bytes(w->dtype, w->n_in, w->n_out));  // NF4_DQ: its tail too
            weights += double(w->n_in) * double(w->n_out);
        }
    info.linear_bits_per_weight = weights > 0 ? 8 * bytes / weights : 0;
    return info;
}

namespace {

SpeedSample describe_speed(std::vector<double> v) {
    SpeedSample s;
    s.values = v;
    if (v.empty()) return s;
    s.mean = mean(v);
    s.min = *std::min_element(v.begin(), v.end());
    s.max = *std::max_element(v.begin(), v.end());
    if (v.size() > 1) {
        double ss = 0;
        for (double x : v) ss += (x - s.mean) * (x - s.mean);
        s.sd = std::sqrt(ss / double(v.size() - 1));
    }
    return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<SpeedResult> measure_speed(std::shared_ptr<const Model> model, const std::vector<int32_t>& tokens,
                                  const SpeedOptions& opt) {
    using R = Result<SpeedResult>;
    if (tokens.empty()) return R::error("speed: no tokens to feed");
    if (opt.n_prompt < 1 || opt.n_gen < 1 || opt.repeat < 1)
        return R::error("speed: prompt tokens, generated tokens and repeats must be at least 1");
    RunnerOptions ro = opt.runner;
    ro.n_ctx = std::max(opt.n_prompt, opt.n_gen) + 16;
    ro.n_batch = opt.n_prompt;
    auto rr = SequenceRunner::create(std::move(model), ro);
    if (!rr) return rr.status();
    SequenceRunner& r = **rr;
    auto take = [&](int n) {
        std::vector<int32_t> t(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) t[size_t(i)] = tokens[size_t(i) % tokens.size()];
        return t;
    };
    const std::vector<int32_t> prompt = take(opt.n_prompt), gen = take(opt.n_gen);
    std::vector<float> logits;                                                      // [1, n_vocab]
    KVS_RETURN_IF_ERROR(r.eval(take(std::min(16, opt.n_prompt)), false, &logits));  // warm-up
    std::vector<double> pp, tg;
    const int64_t n_runs = 2 * int64_t(opt.repeat);
    for (int k = 0; k < opt.repeat; ++k) {
        KVS_RETURN_IF_ERROR(opt.progress.check("speed at pp run " + std::to_string(k + 1)));
        opt.progress.report(opt.stage + ": pp" + std::to_string(opt.n_prompt), k, n_runs);
        r.clear();
        const auto t0 = std::chrono::steady_clock::now();
        KVS_RETURN_IF_ERROR(r.eval(prompt, false, &logits));
        pp.push_back(opt.n_prompt / seconds_since(t0));
    }
    for (int k = 0; k < opt.repeat; ++k) {
        KVS_RETURN_IF_ERROR(opt.progress.check("speed at tg run " + std::to_string(k + 1)));
        opt.progress.report(opt.stage + ": tg" + std::to_string(opt.n_gen), opt.repeat + k, n_runs);
        r.clear();
        const auto t0 = std::chrono::steady_clock::now();
        for (int32_t id : gen) KVS_RETURN_IF_ERROR(r.eval({id}, false, &logits));
        tg.push_back(opt.n_gen / seconds_since(t0));
    }
    opt.progress.report(opt.stage + ": done", 1.0);
    SpeedResult out;
    out.n_prompt = opt.n_prompt;
    out.n_gen = opt.n_gen;
    out.pp = describe_speed(pp);
    out.tg = describe_speed(tg);
    out.backend = r.backend().name();
    out.n_threads = r.backend().n_threads();
    return out;
}

}  // namespace kvs
