// ctest-labels: unit
// The OpenAI routes' penalties follow vLLM (SamplingParams::PenaltyScope::vllm): the
// repetition penalty over prompt and output, presence and frequency over the generated
// tokens only. apply_penalties is checked against a numpy transcription of vLLM's
// apply_penalties (tests/tools/vllm_penalties_reference.py) over random logits, prompts and
// outputs with each penalty alone and all together; a token seen only in the prompt must
// get the repetition penalty and no presence / frequency penalty (the llama.cpp scope, kept
// for the window and the CLI, gives it all three: the test also checks that they differ
// there, so it can tell the two apart). Skips when numpy is missing.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/sampling/penalties.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"

using namespace kvs;
using json = nlohmann::json;

class TestVllmPenalties : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void againstNumpy() {
        if (!test::run_python({"-c", "import numpy"}).ok) QSKIP("numpy is not installed");
        constexpr int kVocab = 50;
        std::mt19937 rng(17);
        std::normal_distribution<float> logit(0.0f, 3.0f);
        std::uniform_int_distribution<int> tok(0, kVocab - 1);
        struct Case {
            std::vector<float> logits;
            std::vector<int32_t> prompt, output;
            float presence, frequency, repetition;
        };
        std::vector<Case> cases;
        const float settings[][3] = {{0.5f, 0, 1}, {0, 0.7f, 1}, {0, 0, 1.3f}, {0.4f, 0.3f, 1.2f}, {-0.5f, -0.2f, 0.8f}};
        for (const auto& s : settings)
            for (int k = 0; k < 4; ++k) {
                Case c;
                for (int i = 0; i < kVocab; ++i) c.logits.push_back(logit(rng));
                for (int i = 0; i < 12; ++i) c.prompt.push_back(tok(rng));
                for (int i = 0; i < 3 + 4 * k; ++i) c.output.push_back(tok(rng));
                c.presence = s[0];
                c.frequency = s[1];
                c.repetition = s[2];
                cases.push_back(std::move(c));
            }
        json in = {{"cases", json::array()}};
        for (const Case& c : cases)
            in["cases"].push_back({{"logits", c.logits},
                                   {"prompt", c.prompt},
                                   {"output", c.output},
                                   {"presence", c.presence},
                                   {"frequency", c.frequency},
                                   {"repetition", c.repetition}});
        QTemporaryDir dir;
        const std::string path = dir.filePath("cases.json").toStdString();
        std::ofstream(path) << in.dump();
        const test::PythonRun r = test::run_python(
            {QString::fromStdString(test::tool_path("vllm_penalties_reference.py")), QString::fromStdString(path)});
        QVERIFY2(r.ok, qPrintable(r.error));
        const json ref = json::parse(r.out.toStdString());
        int n_differ_from_llama = 0;
        for (size_t i = 0; i < cases.size(); ++i) {
            const Case& c = cases[i];
            std::vector<int32_t> history = c.prompt;
            history.insert(history.end(), c.output.begin(), c.output.end());
            SamplingParams p;
            p.presence_penalty = c.presence;
            p.frequency_penalty = c.frequency;
            p.repeat_penalty = c.repetition;
            p.penalty_scope = SamplingParams::PenaltyScope::vllm;
            std::vector<float> ours = c.logits;
            apply_penalties(ours.data(), kVocab, history, p, c.prompt.size());
            for (int t = 0; t < kVocab; ++t)
                QVERIFY2(std::abs(ours[size_t(t)] - ref["logits"][i][size_t(t)].get<float>()) <= 1e-5f,
                         qPrintable(QString("case %1 token %2: %3 vs vLLM %4")
                                        .arg(i)
                                        .arg(t)
                                        .arg(ours[size_t(t)])
                                        .arg(ref["logits"][i][size_t(t)].get<float>())));
            p.penalty_scope = SamplingParams::PenaltyScope::llama_cpp;
            p.penalty_last_n = -1;
            std::vector<float> llama = c.logits;
            apply_penalties(llama.data(), kVocab, history, p);
            if (llama != ours) ++n_differ_from_llama;
        }
        // Every case with a presence or frequency penalty has prompt-only tokens: the scopes differ.
        QCOMPARE(n_differ_from_llama, 16);
    }
};

QTEST_GUILESS_MAIN(TestVllmPenalties)
#include "tst_vllm_penalties.moc"
