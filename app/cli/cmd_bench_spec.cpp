// kvscope bench --spec PROPOSERS: speculative decoding against plain decoding, greedy,
// one request at a time through the batching engine.
//
// Workloads (the prompts go through the model's chat template):
//   repetitive: "rewrite this text" requests whose answers copy most of a given passage
//               (where prompt lookup shines);
//   chat:       open-ended questions.
// Per workload the plain run comes first; then every proposer at every k. Decode tok/s
// counts the tokens after the first over the time from the first token to the last (the
// prompt's pass is excluded; a draft model's own prompt pass is included, it happens
// during decoding). Every speculative output is checked token-identical to the plain one.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/commands.h"

namespace kvs::app {
namespace {

const char* kPassage =
    "The lighthouse stood at the end of a narrow spit of rock, and for forty years the same family had kept "
    "its lamp burning. Every evening the keeper climbed the one hundred and twelve steps, trimmed the wick, "
    "polished the great lens and wrote the weather in a leather book. Ships passed in the dark and never "
    "knew his name. When the electric beacon came, the family moved to the village, but the old keeper "
    "still walked out to the rock each evening to watch the light come on by itself.";

std::vector<std::string> workload_prompts(const std::string& name) {
    const std::string p = kPassage;
    if (name == "repetitive")
        return {"Rewrite the following text exactly, but in the present tense:\n\n" + p,
                "Copy the following text and put every sentence on its own line:\n\n" + p,
                "Correct any mistakes in this text and return it in full:\n\n" + p};
    return {"Tell me about the history of lighthouses.", "What should I pack for a week of hiking in the mountains?",
            "Explain how a bicycle stays upright while it moves."};
}

std::vector<int> parse_ints(const std::string& s) {
    std::vector<int> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) v.push_back(std::stoi(item));
    return v;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) v.push_back(item);
    return v;
}

struct Run {
    std::string workload, proposer;
    int k = 0;
    double decode_tps = 0;
    int64_t tokens = 0;
    double decode_s = 0;
    SpecStats stats;
    bool identical = true;
    std::vector<std::vector<int32_t>> outputs;
    nlohmann::json fates = nlohmann::json::array();  // per request: the fate of every streamed token and refused draft
};

// Runs every prompt alone (one request at a time), plain or with the given proposer.
Result<Run> run_one(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int n_gen, const std::string& proposer,
                    int k) {
    Run run;
    run.proposer = proposer.empty() ? "plain" : proposer;
    run.k = proposer.empty() ? 0 : k;
    const SpecStats before = e.spec_totals();
    for (const auto& p : prompts) {
        GenerationRequest g;
        g.prompt = p;
        g.params.temperature = 0;
        g.params.max_tokens = n_gen;
        g.spec.proposer = proposer;
        g.spec.k = k;
        auto id = e.submit(g);
        if (!id) return Result<Run>::error(id.message());
        KVS_RETURN_IF_ERROR(e.run_until_idle());
        const auto out = e.output_tokens(*id);
        nlohmann::json req = nlohmann::json::array();  // [[token, fate, draft position, step], ...]
        for (const SpecTokenEvent& ev : e.spec_events(*id))
            req.push_back({ev.token, token_fate_name(ev.fate), ev.draft_pos, ev.step});
        run.fates.push_back(std::move(req));
        for (const auto& m : e.request_metrics())
            if (m.id == *id && m.n_output > 1) {
                run.decode_s += (m.token_times_ms.back() - m.first_token_ms) / 1000.0;
                run.tokens += m.n_output - 1;
            }
        run.outputs.push_back(out);
        e.remove_finished();
    }
    run.decode_tps = run.decode_s > 0 ? run.tokens / run.decode_s : 0;
    SpecStats after = e.spec_totals();
    SpecStats delta;  // this run's share of the engine's totals
    delta.verify_steps = after.verify_steps - before.verify_steps;
    delta.drafted = after.drafted - before.drafted;
    delta.evaluated = after.evaluated - before.evaluated;
    delta.accepted = after.accepted - before.accepted;
    delta.discarded = after.discarded - before.discarded;
    delta.bonus = after.bonus - before.bonus;
    delta.emitted = after.emitted - before.emitted;
    delta.sum_k = after.sum_k - before.sum_k;
    delta.draft_ms = after.draft_ms - before.draft_ms;
    delta.verify_ms = after.verify_ms - before.verify_ms;
    run.stats = delta;
    return run;
}

}  // namespace

int cmd_bench_spec(const BenchOptions& o) {
    auto session = open_session_or_report(o.model);
    if (!session) return 1;
    std::vector<int> ks;
    std::vector<std::string> proposers = split(o.spec), workloads;
    try {
        ks = parse_ints(o.spec_k);
    } catch (...) {
        std::fprintf(stderr, "error: --spec-k wants a comma list of integers, got '%s'\n", o.spec_k.c_str());
        return 1;
    }
    if (o.spec_workload == "both") workloads = {"repetitive", "chat"};
    else
        workloads = {o.spec_workload};
    EngineOptions eo = engine_options_from(o.runner);
    eo.max_model_len = 1024;
    eo.kv_blocks = 1024 / o.runner.block_size * 2;
    eo.scheduler.max_num_seqs = 1;
    eo.snapshot_every = 0;
    for (const auto& p : proposers) {
        if (p == "ngram") continue;
        if (Status st = session->add_draft(p); !st) {
            std::fprintf(stderr, "error: %s\n", st.message().c_str());
            return 1;
        }
    }
    auto created = session->make_engine(eo);
    if (!created) {
        std::fprintf(stderr, "error: %s\n", created.message().c_str());
        return 1;
    }
    Engine& e = **created;
    std::fprintf(stderr, "%s | greedy, %d tokens per request, one request at a time\n", e.backend_note().c_str(),
                 o.spec_gen);

    nlohmann::json rows = nlohmann::json::array();
    std::printf(
        "| workload | proposer | k | decode tok/s | speedup | alpha | mean accepted | tokens/pass | theory tokens/pass "
        "| draft ms / token | identical |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (const auto& w : workloads) {
        std::vector<std::vector<int32_t>> prompts;
        for (const auto& text : workload_prompts(w)) prompts.push_back(session->encode_user(text));
        auto plain = run_one(e, prompts, o.spec_gen, "", 0);
        if (!plain) {
            std::fprintf(stderr, "error: %s\n", plain.message().c_str());
            return 1;
        }
        std::vector<Run> runs = {*plain};
        for (const auto& p : proposers)
            for (int k : ks) {
                auto r = run_one(e, prompts, o.spec_gen, p, k);
                if (!r) {
                    std::fprintf(stderr, "error: %s\n", r.message().c_str());
                    return 1;
                }
                r->identical = r->outputs == plain->outputs;
                runs.push_back(*r);
            }
        for (auto& r : runs) {
            r.workload = w;
            const double speedup = plain->decode_tps > 0 ? r.decode_tps / plain->decode_tps : 0;
            const double theory = r.k ? theoretical_tokens_per_pass(r.stats.alpha(), r.stats.mean_k()) : 1.0;
            const double draft_per_tok = r.tokens ? r.stats.draft_ms / r.tokens : 0;
            std::printf("| %s | %s | %d | %.1f | %.2fx | %.3f | %.2f | %.2f | %.2f | %.2f | %s |\n", w.c_str(),
                        r.proposer.c_str(), r.k, r.decode_tps, speedup, r.stats.alpha(), r.stats.mean_accepted(),
                        r.k ? r.stats.tokens_per_pass() : 1.0, theory, draft_per_tok, r.identical ? "yes" : "NO");
            rows.push_back({{"workload", w},
                            {"proposer", r.proposer},
                            {"k", r.k},
                            {"decode_tok_per_s", r.decode_tps},
                            {"speedup", speedup},
                            {"alpha", r.stats.alpha()},
                            {"mean_accepted", r.stats.mean_accepted()},
                            {"tokens_per_pass", r.k ? r.stats.tokens_per_pass() : 1.0},
                            {"theory_tokens_per_pass", theory},
                            {"drafted", r.stats.drafted},
                            {"accepted", r.stats.accepted},
                            {"evaluated", r.stats.evaluated},
                            {"bonus", r.stats.bonus},
                            {"draft_ms", r.stats.draft_ms},
                            {"verify_ms", r.stats.verify_ms},
                            {"tokens", r.tokens},
                            {"decode_s", r.decode_s},
                            {"identical_to_plain", r.identical},
                            {"token_fates", r.fates}});
        }
        std::fflush(stdout);
    }
    if (!o.json_out.empty()) {
        nlohmann::json j = {
            {"model", session->model().path},
            {"backend", e.backend_note()},
            {"n_gen", o.spec_gen},
            {"sampling", "greedy"},
            {"token_fates_format",
             "per row, per request: [token, fate, draft position (1..k, 0 for "
             "non-drafts), engine step] for every token the request streamed (plain, accepted, "
             "corrected, bonus) and every refused draft (rejected, discarded: not in the output), in order"},
            {"rows", rows}};
        std::ofstream(o.json_out) << j.dump(2) << "\n";
    }
    return 0;
}

}  // namespace kvs::app
