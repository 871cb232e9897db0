#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/cli/commands.h"
#include "engine/runtime/generate.h"

namespace kvs::app {

std::shared_ptr<Session> open_session_or_report(const std::string& name_or_path, const SessionOptions& opt) {
    auto session = Session::open(name_or_path, opt);
    if (!session) {
        std::fprintf(stderr, "error: %s\n", session.message().c_str());
        return nullptr;
    }
    for (const auto& w : (*session)->warnings()) std::fprintf(stderr, "warning: %s\n", w.c_str());
    return std::move(session.value());
}

EngineOptions engine_options_from(const RunnerOptions& r) {
    EngineOptions e;
    e.backend = r.backend;
    e.n_threads = r.n_threads;
    e.simd = r.simd;
    e.block_size = r.block_size;
    e.kv_type = r.kv_type;
    e.max_model_len = r.n_ctx;
    return e;
}

namespace {

void write_piece(const std::string& piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
}

// --lora NAME=PATH or PATH: loads the adapter into the session; null (after printing why) on error.
std::shared_ptr<const LoraAdapter> load_lora(const GenerateOptions& o, Session& session, bool* failed) {
    *failed = false;
    if (o.lora.empty()) return nullptr;
    std::string name = "lora", path = o.lora;
    if (const size_t eq = o.lora.find('='); eq != std::string::npos && eq > 0) {
        name = o.lora.substr(0, eq);
        path = o.lora.substr(eq + 1);
    }
    auto info = session.load_adapter(name, path, o.lora_scale);
    auto adapter = info ? session.adapter(name) : Result<std::shared_ptr<const LoraAdapter>>(info.status());
    if (!adapter) {
        std::fprintf(stderr, "error: %s\n", adapter.message().c_str());
        *failed = true;
        return nullptr;
    }
    if (!o.quiet_stats) {
        std::string targets;
        for (const auto& t : info->targets) targets += (targets.empty() ? "" : ",") + t;
        std::fprintf(stderr, "LoRA adapter '%s': %s, rank %d, alpha %g, scale %g, %s\n", info->name.c_str(),
                     info->format.c_str(), info->rank, info->alpha, info->scale, targets.c_str());
    }
    return std::move(adapter.value());
}

// generate through the batching engine (--spec, --lora, --beams, --min-new-tokens): one
// request; with --spec, the acceptance statistics after the usual timings.
int generate_with_engine(const GenerateOptions& o, Session& session, const std::vector<int32_t>& prompt) {
    bool failed = false;
    auto adapter = load_lora(o, session, &failed);
    if (failed) return 1;
    if (!o.spec.empty() && o.spec != "ngram") {
        if (Status st = session.add_draft(o.spec); !st) {
            std::fprintf(stderr, "error: %s\n", st.message().c_str());
            return 1;
        }
    }
    EngineOptions eo = engine_options_from(o.runner);
    eo.kv_blocks = 2 * ((o.runner.n_ctx + o.runner.block_size - 1) / o.runner.block_size);
    eo.kv_blocks *= std::max(1, o.beams);
    // Beam search forks up to width - 1 new beams while the width old ones still run.
    eo.scheduler.max_num_seqs = std::max(1, 2 * o.beams - 1);
    eo.snapshot_every = 0;
    o.tiers.apply(eo);
    auto engine = session.make_engine(eo);
    if (!engine) {
        std::fprintf(stderr, "error: %s\n", engine.message().c_str());
        return 1;
    }
    Engine& e = **engine;
    if (!o.quiet_stats && !o.spec.empty())
        std::fprintf(stderr, "%s | speculative: %s, k %d%s\n", e.backend_note().c_str(), o.spec.c_str(), o.spec_k,
                     o.spec_adaptive ? " (adaptive)" : "");
    else if (!o.quiet_stats)
        std::fprintf(stderr, "%s\n", e.backend_note().c_str());
    GenerationRequest g;
    if (!o.kv_evict.empty()) {
        auto ev = parse_kv_eviction(o.kv_evict);
        if (!ev) {
            std::fprintf(stderr, "error: --kv-evict: %s\n", ev.message().c_str());
            return 1;
        }
        g.kv_eviction = *ev;
    }
    g.prompt = prompt;
    g.params = o.sampling;
    g.adapter = adapter;
    g.beam_width = o.beams;
    g.spec.proposer = o.spec;
    g.spec.k = o.spec_k;
    g.spec.adaptive = o.spec_adaptive;
    g.spec.k_max = std::max(g.spec.k_max, o.spec_k);
    std::string error;
    FinishReason why = FinishReason::none;
    g.on_event = [&](const TokenEvent& ev) {
        write_piece(ev.text);
        if (!ev.error.empty()) error = ev.error;
        if (ev.finished) why = ev.finish_reason;
    };
    auto id = e.submit(std::move(g));
    Status st = id ? e.run_until_idle() : id.status();
    std::fputc('\n', stdout);
    if (st && !error.empty()) st = Status::error(error);
    if (!st) {
        std::fprintf(stderr, "error: %s\n", st.message().c_str());
        return 1;
    }
    if (o.quiet_stats) return 0;
    std::fflush(stdout);
    if (o.beams > 1) {  // the hypotheses instead of token timings (a beam request streams nothing)
        for (const BeamHypothesis& h : e.beam_hypotheses(*id))
            std::fprintf(stderr, "beam: score %.4f | sum log p %.4f | %zu tokens | %s\n", h.score, h.logprob,
                         h.tokens.size(), session.decode(h.tokens).c_str());
        return 0;
    }
    for (const RequestMetrics& m : e.request_metrics()) {
        if (m.id != *id) continue;
        const double decode_s = m.n_output > 1 ? (m.token_times_ms.back() - m.first_token_ms) / 1000.0 : 0.0;
        std::fprintf(stderr,
                     "\nload %.0f ms | prompt %d tok | TTFT %.1f ms | decode %d tok, %.1f tok/s | stop: %s | "
                     "peak memory %.1f MiB\n",
                     session.load_ms(), m.n_prompt, m.ttft_ms(), m.n_output,
                     decode_s > 0 ? (m.n_output - 1) / decode_s : 0.0, finish_reason_name(why),
                     peak_rss_bytes() / 1048576.0);
    }
    if (o.tiers.any()) {
        const KVCacheStats s = e.kv_cache().stats();
        std::fprintf(stderr, "KV tiers: %lld prompt tokens loaded (%lld from the CPU tier, %lld from disk)\n",
                     static_cast<long long>(s.cpu_hit_tokens + s.disk_hit_tokens),
                     static_cast<long long>(s.cpu_hit_tokens), static_cast<long long>(s.disk_hit_tokens));
    }
    if (const KvEvictionState* ev = e.kv_eviction(*id))
        std::fprintf(stderr,
                     "KV eviction %s: budget %d tokens | %d cached in the last step (before its eviction), at most %d "
                     "| %lld evicted | %lld blocks given back\n",
                     ev->setting.describe().c_str(), ev->budget, ev->n_entries(), ev->peak_entries,
                     static_cast<long long>(ev->n_evicted), static_cast<long long>(ev->n_freed_blocks));
    if (o.spec.empty()) return 0;
    const SpecStats& s = e.spec_totals();
    std::fprintf(stderr,
                 "speculative: %lld target passes with drafts | drafted %lld, judged %lld, accepted %lld, bonus %lld | "
                 "alpha %.3f | %.2f tokens per pass (theory %.2f) | draft %.0f ms, verify %.0f ms\n",
                 (long long)s.verify_steps, (long long)s.drafted, (long long)s.evaluated, (long long)s.accepted,
                 (long long)s.bonus, s.alpha(), s.tokens_per_pass(), theoretical_tokens_per_pass(s.alpha(), s.mean_k()),
                 s.draft_ms, s.verify_ms);
    return 0;
}

}  // namespace

int cmd_generate(const GenerateOptions& o) {
    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    std::string text = o.prompt;
    if (!o.prompt_file.empty()) {
        std::ifstream f(o.prompt_file, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        if (!f) {
            std::fprintf(stderr, "error: cannot read the prompt file %s\n", o.prompt_file.c_str());
            return 1;
        }
        text = ss.str();
    }
    const std::vector<int32_t> prompt = o.chat ? session->encode_user(text, o.system) : session->encode_text(text);
    if (!o.spec.empty() || !o.lora.empty() || o.beams > 1 || o.sampling.min_new_tokens > 0 || o.tiers.any() ||
        !o.kv_evict.empty())
        return generate_with_engine(o, *session, prompt);

    auto runner = session->make_runner(o.runner);
    if (!runner) {
        std::fprintf(stderr, "error: %s\n", runner.message().c_str());
        return 1;
    }
    if (!o.quiet_stats) std::fprintf(stderr, "%s\n", (*runner)->backend_note().c_str());
    auto st = generate(**runner, session->tokenizer(), prompt, o.sampling, [](const std::string& piece) {
        write_piece(piece);
        return true;
    });
    std::fputc('\n', stdout);
    if (!st) {
        std::fprintf(stderr, "error: %s\n", st.message().c_str());
        return 1;
    }
    if (!o.quiet_stats) {
        std::fprintf(stderr,
                     "\nload %.0f ms | prompt %d tok, %.1f tok/s | TTFT %.1f ms | decode %d tok, %.1f tok/s | "
                     "stop: %s | peak memory %.1f MiB\n",
                     session->load_ms(), st->n_prompt, st->prompt_tps(), st->ttft_ms, st->n_generated, st->decode_tps(),
                     st->stop_reason.c_str(), peak_rss_bytes() / 1048576.0);
    }
    return 0;
}

}  // namespace kvs::app
