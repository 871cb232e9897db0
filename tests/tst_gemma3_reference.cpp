// ctest-labels: model
// Gemma 3 270M against llama.cpp (tests/fixtures/gemma3_reference.json, written by
// tests/tools/make_gemma3_reference.py through llama-cpp-python), checked as
// tst_llama_reference checks the default model, one prompt past the 512-position sliding
// window included: our tokenizer gives the
// same prompt ids; fed llama.cpp's greedy tokens, our argmax equals llama.cpp's at every
// position where llama.cpp's choice is decisive (top-1 margin >= 0.75); the logits of the
// first generated positions agree (max |Δ| over llama.cpp's top-20 and KL on them); and we
// are about as close to llama.cpp as llama.cpp is to itself under another equally valid
// configuration (flash attention on, F32 KV cache, the prompt fed token by token: the
// fixture's "variants"), both in logits and in how long greedy continuations stay identical.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_paths.h"

using nlohmann::json;

class TestGemma3Reference : public QObject {
    Q_OBJECT
    json m_fixture;
    std::shared_ptr<kvs::Model> m_model;
    std::unique_ptr<kvs::SequenceRunner> m_runner;
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
    Spread m_ours;                             // our engine
    std::map<std::string, Spread> m_variants;  // llama.cpp under the fixture's other configurations
    int m_positions = 0, m_flips = 0, m_identical_cases = 0;
    int m_identical_prefix_sum = 0;  // over the cases: tokens before our first greedy difference
    static constexpr double kNearTie = 0.75;
    double m_delta_bound = 0, m_kl_bound = 0;  // per-position bounds (initTestCase)

private Q_SLOTS:
    void initTestCase() {
        const std::string path = kvs::test::gemma3_model_path();
        if (path.empty()) QSKIP("Gemma 3 270M not installed (installer/fetch_model.sh gemma3-270m)");
        std::ifstream f(kvs::test::fixture_path("gemma3_reference.json"));
        QVERIFY(f.good());
        m_fixture = json::parse(f);
        auto m = kvs::load_model(path);
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = m.value();
        // Per-position gross-error bounds from llama.cpp's own spread on this model: 1.5x the
        // largest |delta| and KL any of its variants shows against its default run. (Gemma's
        // logits move by up to ~2.5 between llama.cpp's own valid settings, more than
        // SmolLM2's; a wrong RoPE base, norm or window moves them by many units.)
        for (const json& c : m_fixture["cases"])
            for (const json& step : c["steps"])
                for (const auto& [name, v] : step["variants"].items()) {
                    const auto [delta, kl] =
                        top_k_agreement(step["top_logits"].get<std::vector<double>>(), step["logsumexp"].get<double>(),
                                        v["top_logits"].get<std::vector<double>>(), v["logsumexp"].get<double>());
                    m_delta_bound = std::max(m_delta_bound, 1.5 * delta);
                    m_kl_bound = std::max(m_kl_bound, 1.5 * kl);
                }
        QVERIFY(m_delta_bound > 0 && m_kl_bound > 0);
        kvs::RunnerOptions ro;
        ro.n_ctx = m_fixture["generator"]["n_ctx"].get<int>();
        ro.n_threads = 2;
        auto r = kvs::SequenceRunner::create(m_model, ro);
        QVERIFY2(r.is_ok(), r.message().c_str());
        m_runner = std::move(r.value());
    }

    void greedyMatchesLlamaCpp_data() {
        QTest::addColumn<int>("index");
        if (m_fixture.is_null()) return;
        for (size_t i = 0; i < m_fixture["cases"].size(); ++i)
            QTest::newRow(m_fixture["cases"][i]["name"].get<std::string>().c_str()) << int(i);
    }
    void greedyMatchesLlamaCpp() {
        QFETCH(int, index);
        const json& c = m_fixture["cases"][size_t(index)];
        const auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
        const auto ref_ids = c["greedy_ids"].get<std::vector<int32_t>>();

        auto tok = kvs::Tokenizer::create(m_model->vocab);
        QVERIFY(tok.is_ok());
        QCOMPARE(tok->encode(c["prompt"].get<std::string>(), true, true), prompt_ids);

        const int n_vocab = m_model->config.n_vocab;
        m_runner->clear();
        std::vector<float> logits;  // [1, n_vocab]
        QVERIFY(m_runner->eval(prompt_ids, false, &logits).is_ok());
        std::vector<int32_t> ours;
        for (size_t pos = 0; pos < ref_ids.size(); ++pos) {
            if (pos < c["steps"].size()) check_logits(c["steps"][pos], logits);
            const int32_t id = kvs::argmax_lowest_id(logits.data(), n_vocab);
            ours.push_back(id);
            // Keep following llama.cpp's tokens so one near-tie cannot hide later errors.
            QVERIFY(m_runner->eval({ref_ids[pos]}, false, &logits).is_ok());
        }
        // Gemma's logits move by tenths to units under any change of rounding (llama.cpp and
        // we both quantize activations to Q8, in different orders), so where llama.cpp's
        // top-1 margin is below kNearTie the argmax is a coin toss for every implementation.
        // Every decisive position must match; near-tie flips are counted and reported.
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
        if (prompt_ids.size() + ref_ids.size() > size_t(m_model->config.sliding_window) + 32) {
            // past the window: the local layers' blocks before it went back to their pool
            QVERIFY(m_runner->swa_pool_blocks() > 0);
            QVERIFY2(m_runner->n_swa_blocks_freed() > 0, "no local-layer block was freed past the window");
            qInfo("%s: %lld local-layer blocks freed so far, %d of %d in use", c["name"].get<std::string>().c_str(),
                  static_cast<long long>(m_runner->n_swa_blocks_freed()), m_runner->swa_blocks_in_use(),
                  m_runner->swa_pool_blocks());
        }
        m_positions += int(ours.size());
        m_flips += near_tie_flips;
        if (identical_prefix == int(ours.size())) ++m_identical_cases;
        m_identical_prefix_sum += identical_prefix;
        qInfo("%s: greedy identical for %d of %zu tokens before the first difference; %d near-tie flips",
              c["name"].get<std::string>().c_str(), identical_prefix, ours.size(), near_tie_flips);
    }

    // Runs after greedyMatchesLlamaCpp (slots run in declaration order) and uses the KLs it
    // collected. A fixed logit bound cannot tell "rounding noise" from "slightly wrong" on this
    // model: its residual stream has outliers near 22000, so llama.cpp itself moves logits by
    // up to about a unit between its own valid settings. The yardstick is therefore llama.cpp's
    // own spread: the same positions, the same fed tokens, flash attention on or an F32 KV cache.
    void zzSpreadWithinLlamaCppOwn() {
        if (m_ours.n == 0) QSKIP("no logits compared (greedyMatchesLlamaCpp did not run)");
        for (const json& c : m_fixture["cases"])
            for (const json& step : c["steps"]) {
                QVERIFY2(step.contains("variants") && !step["variants"].empty(),
                         "fixture has no llama.cpp variants; regenerate it with tests/tools/make_gemma3_reference.py");
                const auto ids = step["top_ids"].get<std::vector<int32_t>>();
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
        // Measured with the committed fixture (112 positions, the long prompt's past the
        // 512-position window included), mean KL (21-bin, see top_k_agreement) vs llama.cpp
        // default: ours 4.69e-3, flash_attn 3.97e-3, kv_f32 5.69e-3, prompt_token_by_token
        // 3.39e-3 — ours is inside llama.cpp's own spread (0.82x the widest variant). The
        // factor 1.5 is the default model's test's.
        constexpr double kSpreadFactor = 1.5;
        QVERIFY2(m_ours.mean_kl() <= kSpreadFactor * widest,
                 qPrintable(QString("mean KL vs llama.cpp %1 exceeds %2 x llama.cpp's own spread (%3, mean KL %4)")
                                .arg(m_ours.mean_kl())
                                .arg(kSpreadFactor)
                                .arg(QString::fromStdString(widest_name))
                                .arg(widest)));
    }

    // Greedy continuations are a chaotic measure: one near-tie decided the other way changes
    // every token after it. The fixture holds llama.cpp's own free-running greedy ids under
    // its variant configurations; they measure how long llama.cpp's continuations stay
    // identical to its default run, the yardstick for ours (same cases, same 64 tokens).
    void zzGreedyAgreementWithinLlamaCppOwn() {
        if (m_positions == 0) QSKIP("no greedy runs compared (greedyMatchesLlamaCpp did not run)");
        std::map<std::string, std::pair<int, int>> variants;  // name -> (prefix sum, identical cases)
        for (const json& c : m_fixture["cases"]) {
            QVERIFY2(c.contains("variant_greedy_ids"),
                     "fixture has no variant greedy ids; regenerate it with tests/tools/make_gemma3_reference.py");
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
        const int n_cases = int(m_fixture["cases"].size());
        int fewest = std::numeric_limits<int>::max();
        qInfo("greedy tokens identical to llama.cpp default before the first difference (sum over %d cases of %d):",
              n_cases, n_cases * int(m_fixture["n_generate"].get<int>()));
        qInfo("  ours:                            %4d, %d cases identical throughout", m_identical_prefix_sum,
              m_identical_cases);
        for (const auto& [name, v] : variants) {
            qInfo("  llama.cpp %-22s %4d, %d cases identical throughout", (name + ":").c_str(), v.first, v.second);
            fewest = std::min(fewest, v.first);
        }
        // Measured with the committed fixture (7 cases of 32 tokens): ours 136 (2 cases
        // identical throughout); llama.cpp flash_attn 91, kv_f32 111, prompt_token_by_token
        // 112 (1, 2 and 2 cases identical throughout).
        // A forward pass with a real error diverges within a few tokens of every prompt.
        constexpr double kPrefixFactor = 0.6;
        QVERIFY2(m_identical_prefix_sum >= kPrefixFactor * fewest,
                 qPrintable(QString("our greedy continuations leave llama.cpp's after %1 tokens in all; "
                                    "llama.cpp's own variants stay for at least %2")
                                .arg(m_identical_prefix_sum)
                                .arg(fewest)));
    }

    void cleanupTestCase() {
        if (m_ours.n == 0) return;
        qInfo("logits vs llama.cpp default over %d positions (top-20 max |delta|, KL on top-20 mass mean / max):",
              m_ours.n);
        qInfo("  ours:                            max |delta| %.5f  KL mean %.2e max %.2e", m_ours.worst_delta,
              m_ours.mean_kl(), m_ours.worst_kl);
        for (const auto& [name, s] : m_variants)
            qInfo("  llama.cpp %-22s max |delta| %.5f  KL mean %.2e max %.2e", (name + ":").c_str(), s.worst_delta,
                  s.mean_kl(), s.worst_kl);
        qInfo("greedy: %d of %d cases identical for all tokens; %d near-tie flips in %d positions", m_identical_cases,
              int(m_fixture["cases"].size()), m_flips, m_positions);
    }

private:
    // Max |Δ| over llama.cpp's top-k ids, and KL(ref || cand) restricted to the reference's
    // top-k mass: sum over those ids of p_ref * (log p_ref - log p_cand), each log-probability
    // normalized by its own full-vocabulary logsumexp.
    static std::pair<double, double> top_k_agreement(const std::vector<double>& ref, double ref_lse,
                                                     const std::vector<double>& cand, double cand_lse) {
        // KL between the two distributions coarsened to 21 bins — the reference's top-20
        // tokens and "the rest of the vocabulary" — so it is never negative and is a lower
        // bound on the full-vocabulary KL.
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

    void check_logits(const json& step, const std::vector<float>& logits) {
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
        // Bounds from the rounding noise measured between implementations (see above);
        // a wrong RoPE, norm or quant layout moves logits by several units.
        QVERIFY2(delta < m_delta_bound,
                 qPrintable(QString("logit |delta| %1 vs llama.cpp (bound %2)").arg(delta).arg(m_delta_bound)));
        QVERIFY2(std::abs(kl) < m_kl_bound, qPrintable(QString("KL %1 vs llama.cpp (bound %2)").arg(kl).arg(m_kl_bound)));
    }
};

QTEST_GUILESS_MAIN(TestGemma3Reference)
#include "tst_gemma3_reference.moc"
