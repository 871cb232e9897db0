// ctest-labels: unit
// Watermarking (engine/sampling/watermark.h): green lists of the right size, fresh per
// previous token and reproducible; the processor biases exactly the green logits; the
// Sampler applies it only when asked; the detector's green flags, z and p-value against an
// independent Python + numpy transcription (tests/tools/watermark_reference.py); and the
// proof the issue asks for: 200 watermarked tokens sampled from a model score z well above 4,
// the same prompt and seed without the watermark |z| < 2 (a tiny random model always, the
// default model when it is installed). The program end to end: tst_watermark_cli.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <random>
#include <set>

#include "engine/runtime/session.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/watermark.h"
#include "tests/support/greedy_alone.h"
#include "tests/support/run_python.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

// n tokens sampled after prompt (end-of-generation is not special here: 200 tokens are
// always 200), through the Sampler as the engine uses it.
std::vector<int32_t> sample_tokens(const Session& s, const std::vector<int32_t>& prompt, const SamplingParams& sp,
                                   int n) {
    RunnerOptions ro;
    ro.n_ctx = static_cast<int>(prompt.size()) + n + 8;
    ro.n_threads = 2;
    auto runner = s.make_runner(ro);
    if (!runner) qFatal("make_runner: %s", runner.message().c_str());
    return test::sampled_alone(**runner, s.model().config.n_vocab, prompt, sp, n);
}

// The detector over the generated tokens, the first one scored against the prompt's last.
WatermarkScore score_generation(const std::vector<int32_t>& prompt, const std::vector<int32_t>& gen, int n_vocab) {
    std::vector<int32_t> ids{prompt.back()};
    ids.insert(ids.end(), gen.begin(), gen.end());
    auto r = detect_watermark(ids, n_vocab);
    if (!r) qFatal("detect: %s", r.message().c_str());
    return *r;
}

void check_generation(const Session& s, const std::vector<int32_t>& prompt, uint64_t seed) {
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = seed;
    const int n_vocab = s.model().config.n_vocab;
    const std::vector<int32_t> plain = sample_tokens(s, prompt, sp, 200);
    sp.watermark = true;
    const std::vector<int32_t> marked = sample_tokens(s, prompt, sp, 200);
    const WatermarkScore zp = score_generation(prompt, plain, n_vocab);
    const WatermarkScore zm = score_generation(prompt, marked, n_vocab);
    qInfo("200 tokens: watermarked %lld/%lld green, z = %.2f (p = %.3g); plain %lld/%lld green, z = %.2f",
          static_cast<long long>(zm.n_green), static_cast<long long>(zm.n_scored), zm.z, zm.p_value,
          static_cast<long long>(zp.n_green), static_cast<long long>(zp.n_scored), zp.z);
    QCOMPARE(zm.n_scored, 200);
    QVERIFY2(zm.z > 4.0, qPrintable(QString("watermarked z = %1").arg(zm.z)));
    QVERIFY2(std::abs(zp.z) < 2.0, qPrintable(QString("plain z = %1").arg(zp.z)));
    QVERIFY(zm.p_value < 1e-4);
}

}  // namespace

class TestWatermark : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void green_list_size_and_seeding() {
        WatermarkGreenList lists;
        const WatermarkParams p;  // TGI's gamma 0.5
        for (int n_vocab : {1000, 49152, 7}) {
            const std::vector<uint8_t> a = lists.mask(17, n_vocab, p);
            int count = 0;
            for (uint8_t m : a) count += m;
            QCOMPARE(count, static_cast<int>(n_vocab * 0.5));  // floor(n_vocab * gamma), as TGI
        }
        const std::vector<uint8_t> a = lists.mask(17, 49152, p);
        const std::vector<uint8_t> b = lists.mask(18, 49152, p);
        int both = 0;
        for (size_t i = 0; i < a.size(); ++i) both += a[i] & b[i];
        // Independent halves overlap on about a quarter: 12288, sd ~ 96.
        QVERIFY2(std::abs(both - 12288) < 600, qPrintable(QString::number(both)));
        WatermarkGreenList other;  // a fresh cache gives the same list
        QVERIFY(other.mask(18, 49152, p) == b);
        WatermarkParams q = p;
        q.gamma = 0.25f;
        int count = 0;
        for (uint8_t m : other.mask(18, 49152, q)) count += m;
        QCOMPARE(count, 12288);
    }

    void processor_biases_green_logits_only() {
        const int n_vocab = 500;
        std::mt19937 gen(3);
        std::normal_distribution<float> nd(0.0f, 2.0f);
        std::vector<float> logits(n_vocab), before;  // [n_vocab]
        for (auto& x : logits) x = nd(gen);
        before = logits;
        WatermarkGreenList lists;
        WatermarkParams p;
        p.delta = 3.5f;
        apply_watermark(logits.data(), n_vocab, 42, p, lists);
        WatermarkGreenList check;
        for (int i = 0; i < n_vocab; ++i) {
            const float want = before[i] + (check.is_green(42, i, n_vocab, p) ? 3.5f : 0.0f);
            QCOMPARE(logits[i], want);
        }
    }

    void sampler_applies_it_only_when_asked() {
        // Flat logits, greedy: without the watermark the lowest id wins; with it, the lowest
        // green id of the list seeded by the last history token.
        const int n_vocab = 300;
        const std::vector<int32_t> history{5, 9, 11};
        SamplingParams sp;
        sp.temperature = 0;
        std::vector<float> flat(n_vocab, 0.0f);  // [n_vocab]
        QCOMPARE(Sampler(sp).sample(flat.data(), n_vocab, history), 0);
        sp.watermark = true;
        std::vector<float> flat2(n_vocab, 0.0f);
        const int32_t id = Sampler(sp).sample(flat2.data(), n_vocab, history);
        WatermarkGreenList lists;
        int32_t lowest_green = -1;
        for (int i = 0; i < n_vocab && lowest_green < 0; ++i)
            if (lists.is_green(11, i, n_vocab, WatermarkParams{})) lowest_green = i;
        QCOMPARE(id, lowest_green);
        // Sampled: with delta 2 green tokens carry e^2 / (1 + e^2) = 0.881 of the mass.
        sp.temperature = 1.0f;
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        std::vector<float> flat3(n_vocab, 0.0f);
        double green_mass = 0;
        Sampler sampled(sp);
        for (const TokenProb& t : sampled.probabilities(flat3.data(), n_vocab, history))
            if (lists.is_green(11, t.id, n_vocab, WatermarkParams{})) green_mass += t.p;
        QVERIFY2(std::abs(green_mass - std::exp(2.0) / (1 + std::exp(2.0))) < 1e-4,
                 qPrintable(QString::number(green_mass)));
    }

    void detector_matches_numpy_transcription_data() {
        QTest::addColumn<int>("vocab");
        QTest::addColumn<float>("gamma");
        QTest::addColumn<int>("n");
        QTest::addColumn<bool>("biased");
        QTest::newRow("v1000 g0.5 random") << 1000 << 0.5f << 300 << false;
        QTest::newRow("v1000 g0.25 green-heavy") << 1000 << 0.25f << 300 << true;
        QTest::newRow("v49152 g0.5 random") << 49152 << 0.5f << 40 << false;
    }
    void detector_matches_numpy_transcription() {
        QFETCH(int, vocab);
        QFETCH(float, gamma);
        QFETCH(int, n);
        QFETCH(bool, biased);
        WatermarkParams p;
        p.gamma = gamma;
        std::mt19937 gen(11);
        std::uniform_int_distribution<int> pick(0, vocab - 1);
        std::vector<int32_t> ids{pick(gen)};
        WatermarkGreenList lists;
        while (static_cast<int>(ids.size()) < n) {
            int32_t id = pick(gen);
            // biased: keep drawing (at most 3 times) until green, so the text scores high
            for (int t = 0; biased && t < 3 && !lists.is_green(ids.back(), id, vocab, p); ++t) id = pick(gen);
            ids.push_back(id);
        }
        auto ours = detect_watermark(ids, vocab, p);
        QVERIFY2(ours, ours.message().c_str());

        QTemporaryDir dir;
        QJsonObject in;
        in["vocab"] = vocab;
        in["gamma"] = static_cast<double>(gamma);
        in["hash_key"] = static_cast<qint64>(p.hash_key);
        QJsonArray arr;
        for (int32_t id : ids) arr.append(id);
        in["ids"] = arr;
        const QString path = dir.filePath("in.json");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QJsonDocument(in).toJson());
        f.close();
        const test::PythonRun r =
            test::run_python({QString::fromStdString(test::tool_path("watermark_reference.py")), path});
        if (!r.ok && r.error.contains("ModuleNotFoundError")) QSKIP("numpy not installed in the project venv");
        QVERIFY2(r.ok, qPrintable(r.error));
        const QJsonObject ref = QJsonDocument::fromJson(r.out.toUtf8()).object();
        const QJsonArray green = ref["green"].toArray();
        QCOMPARE(green.size(), static_cast<qsizetype>(ids.size()));
        for (qsizetype i = 0; i < green.size(); ++i) QCOMPARE(static_cast<int>(ours->green[i]), green[i].toInt());
        QCOMPARE(ours->n_scored, static_cast<int64_t>(ref["n_scored"].toInteger()));
        QCOMPARE(ours->n_green, static_cast<int64_t>(ref["n_green"].toInteger()));
        QVERIFY(std::abs(ours->z - ref["z"].toDouble()) < 1e-9);
        QVERIFY(std::abs(ours->p_value - ref["p_value"].toDouble()) <= 1e-12 + 1e-9 * ref["p_value"].toDouble());
        if (biased) QVERIFY(ours->z > 4.0);
    }

    void bad_input_is_refused() {
        const std::vector<int32_t> ids{1, 2, 70000};
        auto r = detect_watermark(ids, 49152);
        QVERIFY(!r);
        QVERIFY2(r.message().find("token 2 has id 70000") != std::string::npos, r.message().c_str());
        WatermarkParams p;
        p.gamma = 1.0f;
        auto g = detect_watermark(std::vector<int32_t>{1, 2}, 100, p);
        QVERIFY(!g);
        QVERIFY2(g.message().find("gamma") != std::string::npos, g.message().c_str());
        // Nothing to score: z is NaN and p is 1, not an error.
        auto one = detect_watermark(std::vector<int32_t>{5}, 100);
        QVERIFY(one);
        QCOMPARE(one->n_scored, 0);
        QVERIFY(std::isnan(one->z));
        QCOMPARE(one->p_value, 1.0);
    }

    void tiny_model_200_tokens() {
        QTemporaryDir dir;
        test::TinyModelSpec spec;
        spec.weight_std = 0.1f;
        auto m = test::write_and_load_tiny_gguf(dir.filePath("tiny.gguf").toStdString(), spec);
        QVERIFY2(m, m.message().c_str());
        auto s = Session::from_model(*m);
        QVERIFY2(s, s.message().c_str());
        check_generation(**s, (*s)->encode_text("Once upon a time"), 7);
    }

    void default_model_200_tokens() {
        const std::string path = test::default_model_path();
        if (path.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        auto s = Session::open(path);
        QVERIFY2(s, s.message().c_str());
        check_generation(**s, (*s)->encode_user("Tell me a story about a lighthouse keeper and a storm."), 7);
    }
};

QTEST_GUILESS_MAIN(TestWatermark)
#include "tst_watermark.moc"
