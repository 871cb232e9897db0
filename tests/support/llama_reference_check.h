// A model checked against llama.cpp through a reference fixture written by
// tests/tools/make_llama_reference.py (default model) or make_gemma3_reference.py (Gemma 3):
// {"cases": [{"name", "prompt", "prompt_ids", "greedy_ids", "top1_margin", "steps":
// [{"top_ids", "top_logits", "logsumexp", "variants": {name: {"top_logits", "logsumexp"}}}],
// "variant_greedy_ids": {name: [...]}}], "n_generate", "generator": {...}}.
//
// The checks, shared by tst_llama_reference and tst_gemma3_reference:
//  - load(): the fixture and the model, and a SequenceRunner on it;
//  - greedy_case(): our tokenizer gives llama.cpp's prompt ids; fed llama.cpp's greedy tokens,
//    our argmax equals llama.cpp's wherever llama.cpp's choice is decisive (top-1 margin >=
//    kNearTie); the logits of the detailed positions agree within per-position bounds;
//  - spread_within_own(): our mean KL to llama.cpp's default run is within a factor of the
//    widest of llama.cpp's own valid configurations (the fixture's variants);
//  - greedy_within_own(): our greedy continuations stay identical to llama.cpp's default for
//    at least a share of what its own variants manage.
// Header-only because its checks are QVERIFYs: a failed check returns from the member
// function and marks the calling test function failed.
#pragma once

#include <QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_paths.h"

namespace kvs::test {

class LlamaReferenceCheck {
public:
    // Logit agreement with llama.cpp's default configuration over the detailed positions.
    struct Spread {
        double worst_delta = 0, worst_kl = 0, sum_kl = 0;
        int n = 0;
        void add(double delta, double kl) {
            worst_delta = std::max(worst_delta, delta);
            worst_kl = std::max(worst_kl, kl);
            sum_kl += kl;
            ++n;
        }
        double mean_kl() const { return n ? sum_kl / n : 0.0; }
    };
    static constexpr double kNearTie = 0.75;

    nlohmann::json fixture;
    std::shared_ptr<Model> model;
    std::unique_ptr<SequenceRunner> runner;
    double delta_bound = 1.5, kl_bound = 0.1;  // per-position gross-error bounds (check_logits)

    // The script that writes the fixture, named in the messages asking to regenerate it.
    explicit LlamaReferenceCheck(std::string script) : m_script(std::move(script)) {}

    // Reads the fixture, loads the model, makes a runner with n_ctx positions (0: the
    // fixture's generator n_ctx).
    void load(const std::string& model_path, const std::string& fixture_name, int n_ctx) {
        std::ifstream f(fixture_path(fixture_name));
        QVERIFY2(f.good(), fixture_name.c_str());
        fixture = nlohmann::json::parse(f);
        auto m = load_model(model_path);
        QVERIFY2(m.is_ok(), m.message().c_str());
        model = m.value();
        RunnerOptions ro;
        ro.n_ctx = n_ctx > 0 ? n_ctx : fixture["generator"]["n_ctx"].get<int>();
        ro.n_threads = 2;
        auto r = SequenceRunner::create(model, ro);
        QVERIFY2(r.is_ok(), r.message().c_str());
        runner = std::move(r.value());
    }

    // Per-position bounds from llama.cpp's own spread on this model: factor x the largest
    // |delta| and KL any of its variants shows against its default run.
    void bounds_from_variants(double factor) {
        delta_bound = kl_bound = 0;
        for (const nlohmann::json& c : fixture["cases"])
            for (const nlohmann::json& step : c["steps"])
                for (const auto& [name, v] : step["variants"].items()) {
                    const auto [delta, kl] =
                        top_k_agreement(step["top_logits"].get<std::vector<double>>(), step["logsumexp"].get<double>(),
                                        v["top_logits"].get<std::vector<double>>(), v["logsumexp"].get<double>());
                    delta_bound = std::max(delta_bound, factor * delta);
                    kl_bound = std::max(kl_bound, factor * kl);
                }
        QVERIFY(delta_bound > 0 && kl_bound > 0);
    }

    // One row per fixture case, for a test function's _data slot.
    void add_case_rows() const {
        QTest::addColumn<int>("index");
        if (fixture.is_null()) return;
        for (size_t i = 0; i < fixture["cases"].size(); ++i)
            QTest::newRow(fixture["cases"][i]["name"].get<std::string>().c_str()) << int(i);
    }

    // The greedy check of case `index`. The runner keeps the case's positions afterwards.
    void greedy_case(int index) {
        const nlohmann::json& c = fixture["cases"][size_t(index)];
        const auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
        const auto ref_ids = c["greedy_ids"].get<std::vector<int32_t>>();

        auto tok = Tokenizer::create(model->vocab);
        QVERIFY(tok.is_ok());
        QCOMPARE(tok->encode(c["prompt"].get<std::string>(), true, true), prompt_ids);

        const int n_vocab = model->config.n_vocab;
        runner->clear();
        std::vector<float> logits;  // [1, n_vocab]
        QVERIFY(runner->eval(prompt_ids, false, &logits).is_ok());
        std::vector<int32_t> ours;
        for (size_t pos = 0; pos < ref_ids.size(); ++pos) {
            if (pos < c["steps"].size()) {
                check_logits(c["steps"][pos], logits);
                if (QTest::currentTestFailed()) return;
            }
            ours.push_back(argmax_lowest_id(logits.data(), n_vocab));
            // Keep following llama.cpp's tokens so one near-tie cannot hide later errors.
            QVERIFY(runner->eval({ref_ids[pos]}, false, &logits).is_ok());
        }
        // Logits move by tenths under any change of rounding (llama.cpp and we both quantize
        // activations to Q8, in different orders), so where llama.cpp's top-1 margin is below
        // kNearTie the argmax is a coin toss for every implementation. Every decisive
        // position must match; near-tie flips are counted and reported.
        int identical_prefix = int(ours.size()), near_tie_flips = 0;
        for (size_t i = 0; i < ours.size(); ++i) {
            if (ours[i] == ref_ids[i]) continue;
            identical_prefix = std::min(identical_prefix, int(i));
            const double margin = c["top1_margin"][i].get<double>();
            QVERIFY2(margin < kNearTie,
                     qPrintable(QString("greedy token differs at decisive position %1: ours %2, llama.cpp %3 "
                                        "(llama.cpp top-1 margin %4)")
                                    .arg(i)
                                    .arg(ours[i])
                                    .arg(ref_ids[i])
                                    .arg(margin)));
            ++near_tie_flips;
        }
        m_positions += int(ours.size());
        m_flips += near_tie_flips;
        if (identical_prefix == int(ours.size())) ++m_identical_cases;
        m_identical_prefix_sum += identical_prefix;
        qInfo("%s: greedy identical for %d of %zu tokens before the first difference; %d near-tie flips",
              c["name"].get<std::string>().c_str(), identical_prefix, ours.size(), near_tie_flips);
    }

    // After every greedy_case: our mean KL to llama.cpp's default must be at most factor x
    // the widest mean KL of llama.cpp's own variants over the same positions. A fixed logit
    // bound cannot tell rounding noise from a small error on these models (residual-stream
    // outliers move llama.cpp's own logits by up to units between its valid settings).
    void spread_within_own(double factor) {
        if (m_ours.n == 0) QSKIP("no logits compared (the greedy function did not run)");
        for (const nlohmann::json& c : fixture["cases"])
            for (const nlohmann::json& step : c["steps"]) {
                QVERIFY2(step.contains("variants") && !step["variants"].empty(),
                         qPrintable(QString("fixture has no llama.cpp variants; regenerate it with %1")
                                        .arg(QString::fromStdString(m_script))));
                const auto ref = step["top_logits"].get<std::vector<double>>();
                const double ref_lse = step["logsumexp"].get<double>();
                for (const auto& [name, v] : step["variants"].items()) {
                    const auto cand = v["top_logits"].get<std::vector<double>>();
                    QCOMPARE(cand.size(), ref.size());
                    const auto [delta, kl] = top_k_agreement(ref, ref_lse, cand, v["logsumexp"].get<double>());
                    m_variants[name].add(delta, kl);
                }
            }
        double widest = 0;
        std::string widest_name;
        for (const auto& [name, s] : m_variants) {
            QCOMPARE(s.n, m_ours.n);  // same positions as ours
            if (s.mean_kl() > widest) widest = s.mean_kl(), widest_name = name;
        }
        QVERIFY(widest > 0);
        QVERIFY2(m_ours.mean_kl() <= factor * widest,
                 qPrintable(QString("mean KL vs llama.cpp %1 exceeds %2 x llama.cpp's own spread (%3, mean KL %4)")
                                .arg(m_ours.mean_kl())
                                .arg(factor)
                                .arg(QString::fromStdString(widest_name))
                                .arg(widest)));
    }

    // After every greedy_case: greedy continuations are a chaotic measure (one near-tie
    // decided the other way changes every token after it). The fixture holds llama.cpp's own
    // free-running greedy ids under its variants; ours must stay identical to llama.cpp's
    // default for at least factor x the fewest tokens any variant manages (summed over cases).
    void greedy_within_own(double factor) {
        if (m_positions == 0) QSKIP("no greedy runs compared (the greedy function did not run)");
        std::map<std::string, std::pair<int, int>> variants;  // name -> (prefix sum, identical cases)
        for (const nlohmann::json& c : fixture["cases"]) {
            QVERIFY2(c.contains("variant_greedy_ids"),
                     qPrintable(QString("fixture has no variant greedy ids; regenerate it with %1")
                                    .arg(QString::fromStdString(m_script))));
            const auto ref = c["greedy_ids"].get<std::vector<int32_t>>();
            for (const auto& [name, ids_json] : c["variant_greedy_ids"].items()) {
                const auto ids = ids_json.get<std::vector<int32_t>>();
                QCOMPARE(ids.size(), ref.size());
                const int prefix = int(std::mismatch(ref.begin(), ref.end(), ids.begin()).first - ref.begin());
                variants[name].first += prefix;
                variants[name].second += prefix == int(ref.size()) ? 1 : 0;
            }
        }
        QVERIFY(!variants.empty());
        const int n_cases = int(fixture["cases"].size());
        int fewest = std::numeric_limits<int>::max();
        qInfo("greedy tokens identical to llama.cpp default before the first difference (sum over %d cases of %d):",
              n_cases, n_cases * int(fixture["n_generate"].get<int>()));
        qInfo("  ours:                            %4d, %d cases identical throughout", m_identical_prefix_sum,
              m_identical_cases);
        for (const auto& [name, v] : variants) {
            qInfo("  llama.cpp %-22s %4d, %d cases identical throughout", (name + ":").c_str(), v.first, v.second);
            fewest = std::min(fewest, v.first);
        }
        QVERIFY2(m_identical_prefix_sum >= factor * fewest,
                 qPrintable(QString("our greedy continuations leave llama.cpp's after %1 tokens in all; "
                                    "llama.cpp's own variants stay for at least %2")
                                .arg(m_identical_prefix_sum)
                                .arg(fewest)));
    }

    // The summary, for cleanupTestCase.
    void report() const {
        if (m_ours.n == 0) return;
        qInfo("logits vs llama.cpp default over %d positions (top-20 max |delta|, KL on top-20 mass mean / max):",
              m_ours.n);
        qInfo("  ours:                            max |delta| %.5f  KL mean %.2e max %.2e", m_ours.worst_delta,
              m_ours.mean_kl(), m_ours.worst_kl);
        for (const auto& [name, s] : m_variants)
            qInfo("  llama.cpp %-22s max |delta| %.5f  KL mean %.2e max %.2e", (name + ":").c_str(), s.worst_delta,
                  s.mean_kl(), s.worst_kl);
        qInfo("greedy: %d of %d cases identical for all tokens; %d near-tie flips in %d positions", m_identical_cases,
              int(fixture["cases"].size()), m_flips, m_positions);
    }

    // Max |delta| over llama.cpp's top-k ids, and the KL between the two distributions
    // coarsened to k+1 bins - the reference's top-k tokens and "the rest of the vocabulary" -
    // each log-probability normalized by its own full-vocabulary logsumexp: never negative,
    // and a lower bound on the full-vocabulary KL(ref || cand).
    static std::pair<double, double> top_k_agreement(const std::vector<double>& ref, double ref_lse,
                                                     const std::vector<double>& cand, double cand_lse) {
        double delta = 0, kl = 0, mass_ref = 0, mass_cand = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            delta = std::max(delta, std::abs(cand[i] - ref[i]));
            const double lp_ref = ref[i] - ref_lse, lp_cand = cand[i] - cand_lse;
            kl += std::exp(lp_ref) * (lp_ref - lp_cand);
            mass_ref += std::exp(lp_ref);
            mass_cand += std::exp(lp_cand);
        }
        const double rest_ref = std::max(1.0 - mass_ref, 1e-12), rest_cand = std::max(1.0 - mass_cand, 1e-12);
        kl += rest_ref * std::log(rest_ref / rest_cand);
        return {delta, kl};
    }

private:
    void check_logits(const nlohmann::json& step, const std::vector<float>& logits) {
        const auto ids = step["top_ids"].get<std::vector<int32_t>>();
        const auto ref = step["top_logits"].get<std::vector<double>>();
        const double ref_lse = step["logsumexp"].get<double>();
        double mx = -1e30;
        for (float l : logits) mx = std::max(mx, double(l));
        double s = 0;
        for (float l : logits) s += std::exp(double(l) - mx);
        const double our_lse = mx + std::log(s);
        std::vector<double> ours(ids.size());
        for (size_t i = 0; i < ids.size(); ++i) ours[i] = logits[size_t(ids[i])];
        const auto [delta, kl] = top_k_agreement(ref, ref_lse, ours, our_lse);
        m_ours.add(delta, kl);
        // A wrong RoPE, norm or quant layout moves logits by several units.
        QVERIFY2(delta < delta_bound,
                 qPrintable(QString("logit |delta| %1 vs llama.cpp (bound %2)").arg(delta).arg(delta_bound)));
        QVERIFY2(std::abs(kl) < kl_bound, qPrintable(QString("KL %1 vs llama.cpp (bound %2)").arg(kl).arg(kl_bound)));
    }

    std::string m_script;
    Spread m_ours;                             // our engine
    std::map<std::string, Spread> m_variants;  // llama.cpp under the fixture's other configurations
    int m_positions = 0, m_flips = 0, m_identical_cases = 0;
    int m_identical_prefix_sum = 0;  // over the cases: tokens before our first greedy difference
};

}  // namespace kvs::test
