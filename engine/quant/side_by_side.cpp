// SideBySide: a reference and a variant generating together, one event per position.
#include "engine/quant/side_by_side.h"

#include <algorithm>
#include <chrono>

#include "engine/quant/eval.h"
#include "engine/runtime/text_stream.h"
#include "engine/sampling/sampler.h"

namespace kvs {

namespace {

// One model's side of the comparison: its runner, sampler, text stream and context.
struct Side {
    SequenceRunner* runner;
    Sampler sampler;
    TextStream stream;
    std::vector<int32_t> history;  // [n_prompt + n_generated] ids this model has been fed
    std::vector<float> logits;     // [1, n_vocab] next-token logits
};

// Fills the event's comparison fields from the two logit rows (before sampling changes them).
void compare_rows(const std::vector<float>& ref, const std::vector<float>& var, int n_vocab, SideBySideEvent& ev) {
    ev.kl = kl_divergence(ref.data(), var.data(), n_vocab);
    ev.top1_agree = argmax_lowest_id(ref.data(), n_vocab) == argmax_lowest_id(var.data(), n_vocab);
}

// Why step i is the last one, or "" to go on.
std::string stop_reason(const TextStep& ref, const TextStep& var, const SideBySideOptions& opt, int i,
                        const SequenceRunner& ref_runner) {
    if (ref.eog) return "eos";
    if (!opt.teacher_forced && var.eog) return "eos (variant)";
    if (ref.stopped) return "stop string";
    if (opt.sampling.max_tokens >= 0 && i + 1 >= opt.sampling.max_tokens) return "max tokens";
    if (ref_runner.n_past() + 1 >= ref_runner.n_ctx()) return "context full";
    return "";
}

// Runs tokens through one side, adding the pass's wall time in ms to *ms.
Status timed_eval(Side& side, const std::vector<int32_t>& tokens, double* ms) {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = side.runner->eval(tokens, false, &side.logits);
    *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return st;
}

}  // namespace

Result<std::unique_ptr<SideBySide>> SideBySide::create(std::shared_ptr<const Model> reference,
                                                       std::shared_ptr<const Model> variant,
                                                       const RunnerOptions& runner,
                                                       std::shared_ptr<Backend> shared_backend) {
    using R = Result<std::unique_ptr<SideBySide>>;
    if (!reference || !variant) return R::error("side by side: a model is missing");
    if (reference->config.n_vocab != variant->config.n_vocab)
        return R::error("side by side: the reference has " + std::to_string(reference->config.n_vocab) +
                        " vocabulary entries but the variant has " + std::to_string(variant->config.n_vocab));
    if (!shared_backend) {
        std::string note;
        shared_backend = make_backend(runner.backend, runner.n_threads, &note, runner.simd);
        if (!shared_backend) return R::error(note);
    }
    std::unique_ptr<SideBySide> s(new SideBySide);
    auto ref = SequenceRunner::create(std::move(reference), runner, shared_backend);
    if (!ref) return ref.status();
    auto var = SequenceRunner::create(std::move(variant), runner, shared_backend);
    if (!var) return var.status();
    s->m_ref = std::move(ref.value());
    s->m_var = std::move(var.value());
    return s;
}

Result<SideBySideSummary> SideBySide::run(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                          const SideBySideOptions& opt, const SideBySideCallback& on_event) {
    using R = Result<SideBySideSummary>;
    if (prompt.empty()) return R::error("side by side: the prompt is empty");
    if (int(prompt.size()) + 1 >= m_ref->n_ctx())
        return R::error("side by side: the prompt is " + std::to_string(prompt.size()) +
                        " tokens, which does not fit the context of " + std::to_string(m_ref->n_ctx()) + " tokens");
    const int n_vocab = m_ref->model().config.n_vocab;
    m_ref->clear();
    m_var->clear();
    Side ref{m_ref.get(), Sampler(opt.sampling), TextStream(&tok, opt.sampling), prompt, {}};
    Side var{m_var.get(), Sampler(opt.sampling), TextStream(&tok, opt.sampling), prompt, {}};
    double ref_ms = 0, var_ms = 0;  // the passes that made the current logits
    KVS_RETURN_IF_ERROR(timed_eval(ref, prompt, &ref_ms));
    KVS_RETURN_IF_ERROR(timed_eval(var, prompt, &var_ms));

    SideBySideSummary sum;
    double kl_sum = 0;
    for (int i = 0;; ++i) {
        if (opt.sampling.max_tokens > 0)
            opt.progress.report(
                "side by side: token " + std::to_string(i) + " / " + std::to_string(opt.sampling.max_tokens), i,
                opt.sampling.max_tokens);
        if (opt.progress.cancelled()) {
            sum.stop_reason = "cancelled";
            break;
        }
        SideBySideEvent ev;
        ev.index = i;
        ev.teacher_forced = opt.teacher_forced && sum.first_divergence >= 0;
        ev.ref_ms = ref_ms;
        ev.variant_ms = var_ms;
        compare_rows(ref.logits, var.logits, n_vocab, ev);
        ev.ref_token = ref.sampler.sample(ref.logits.data(), n_vocab, ref.history);
        ev.variant_token = var.sampler.sample(var.logits.data(), n_vocab, var.history);
        if (ev.ref_token != ev.variant_token && sum.first_divergence < 0) sum.first_divergence = i;
        ev.diverged = sum.first_divergence >= 0;
        const TextStep tr = ref.stream.push(ev.ref_token), tv = var.stream.push(ev.variant_token);
        ev.ref_piece = tr.text;
        ev.variant_piece = tv.text;

        ++sum.n_steps;
        sum.n_top1_agree += ev.top1_agree ? 1 : 0;
        kl_sum += ev.kl;
        sum.max_kl = std::max(sum.max_kl, ev.kl);
        sum.ref_tokens.push_back(ev.ref_token);
        sum.variant_tokens.push_back(ev.variant_token);

        const std::string stop = stop_reason(tr, tv, opt, i, *ref.runner);
        if (!stop.empty()) {  // the held-back text goes out with the last event
            ev.ref_piece += ref.stream.flush();
            ev.variant_piece += var.stream.flush();
        }
        sum.ref_text += ev.ref_piece;
        sum.variant_text += ev.variant_piece;
        if (on_event && !on_event(ev)) {
            sum.stop_reason = "cancelled";
            break;
        }
        if (!stop.empty()) {
            sum.stop_reason = stop;
            break;
        }
        // Next position: the reference continues its own text; the variant its own, or the
        // reference's once they have diverged (teacher forcing).
        const int32_t var_input = opt.teacher_forced && ev.diverged ? ev.ref_token : ev.variant_token;
        ref.history.push_back(ev.ref_token);
        var.history.push_back(var_input);
        KVS_RETURN_IF_ERROR(timed_eval(ref, {ev.ref_token}, &ref_ms));
        KVS_RETURN_IF_ERROR(timed_eval(var, {var_input}, &var_ms));
    }
    sum.mean_kl = sum.n_steps > 0 ? kl_sum / sum.n_steps : 0;
    return sum;
}

}  // namespace kvs
