// ctest-labels: model
// The default model against llama.cpp (tests/fixtures/smollm2_reference.json, written by
// tests/tools/make_llama_reference.py through llama-cpp-python): our tokenizer gives the
// same prompt ids, greedy continuations are token-identical, and the logits of the first
// generated positions agree (max |Δ| over llama.cpp's top-20 and KL on them).
#include <QtTest>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_paths.h"

using nlohmann::json;

class TestLlamaReference : public QObject {
    Q_OBJECT
    json m_fixture;
    std::shared_ptr<kvs::Model> m_model;
    std::unique_ptr<kvs::SequenceRunner> m_runner;
    double m_worst_delta = 0, m_worst_kl = 0, m_sum_kl = 0;
    int m_n_kl = 0;
    int m_positions = 0, m_flips = 0, m_identical_cases = 0;
    static constexpr double kNearTie = 0.75;

private Q_SLOTS:
    void initTestCase() {
        const std::string path = kvs::test::default_model_path();
        if (path.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        std::ifstream f(kvs::test::fixture_path("smollm2_reference.json"));
        QVERIFY(f.good());
        m_fixture = json::parse(f);
        auto m = kvs::load_model(path);
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = m.value();
        kvs::RunnerOptions ro;
        ro.n_ctx = 512;
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
        // SmolLM2's logits move by a few tenths under any change of rounding (llama.cpp and
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
        m_positions += int(ours.size());
        m_flips += near_tie_flips;
        if (identical_prefix == int(ours.size())) ++m_identical_cases;
        qInfo("%s: greedy identical for %d of %zu tokens before the first difference; %d near-tie flips",
              c["name"].get<std::string>().c_str(), identical_prefix, ours.size(), near_tie_flips);
    }

    void cleanupTestCase() {
        if (m_n_kl == 0) return;
        qInfo("logits vs llama.cpp over %d positions: max |delta| (top-20) %.5f, KL (top-20 mass) mean %.2e max %.2e",
              m_n_kl, m_worst_delta, m_sum_kl / m_n_kl, m_worst_kl);
        qInfo("greedy: %d of %d cases identical for all tokens; %d near-tie flips in %d positions", m_identical_cases,
              int(m_fixture["cases"].size()), m_flips, m_positions);
    }

private:
    void check_logits(const json& step, const std::vector<float>& logits) {
        const auto ids = step["top_ids"].get<std::vector<int32_t>>();
        const auto ref = step["top_logits"].get<std::vector<double>>();
        const double ref_lse = step["logsumexp"].get<double>();
        double mx = -1e30;
        for (float l : logits) mx = std::max(mx, double(l));
        double s = 0;
        for (float l : logits) s += std::exp(double(l) - mx);
        const double our_lse = mx + std::log(s);
        double delta = 0, kl = 0;
        for (size_t i = 0; i < ids.size(); ++i) {
            const double ours = logits[size_t(ids[i])];
            delta = std::max(delta, std::abs(ours - ref[i]));
            const double lp_ref = ref[i] - ref_lse, lp_ours = ours - our_lse;
            kl += std::exp(lp_ref) * (lp_ref - lp_ours);
        }
        m_worst_delta = std::max(m_worst_delta, delta);
        m_worst_kl = std::max(m_worst_kl, kl);
        m_sum_kl += kl;
        ++m_n_kl;
        // Bounds from the rounding noise measured between implementations (see above);
        // a wrong RoPE, norm or quant layout moves logits by several units.
        QVERIFY2(delta < 1.5, qPrintable(QString("logit |delta| %1 vs llama.cpp").arg(delta)));
        QVERIFY2(std::abs(kl) < 0.1, qPrintable(QString("KL %1 vs llama.cpp").arg(kl)));
    }
};

QTEST_GUILESS_MAIN(TestLlamaReference)
#include "tst_llama_reference.moc"
