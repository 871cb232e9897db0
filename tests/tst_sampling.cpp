// ctest-labels: unit
// Sampling: greedy and its tie break, top-k / top-p / min-p candidate sets on hand-made
// distributions, penalties against hand-computed logits, the no-repeat-n-gram ban, a
// chi-square goodness-of-fit test of the draws, seed reproducibility, and streamed
// stop-string matching. Every expected value below is computed by hand or by a plain
// brute-force reference written in this file, never by the code under test.
// Qt's `emit` keyword macro would clash with kvs::StopCheck::emit.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/sampling/penalties.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop_matcher.h"

using kvs::Sampler;
using kvs::SamplingParams;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Chi-square critical value, 4 degrees of freedom, significance 0.001.
constexpr double kChi2Crit4 = 18.467;

SamplingParams plain_params(float temperature, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
}

std::vector<float> logits_from_probs(const std::vector<double>& probs, double offset = 0.0) {
    std::vector<float> l;  // [n_vocab]
    for (double p : probs) l.push_back(p > 0 ? static_cast<float>(std::log(p) + offset) : kNegInf);
    return l;
}

std::vector<float> random_logits(int n_vocab, uint32_t seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    std::vector<float> l(static_cast<size_t>(n_vocab));  // [n_vocab]
    for (auto& x : l) x = nd(gen);
    return l;
}

std::vector<int32_t> ids_of(const std::vector<kvs::TokenProb>& d) {
    std::vector<int32_t> ids;
    for (const auto& t : d) ids.push_back(t.id);
    return ids;
}

QList<int> to_qlist(const std::vector<int32_t>& v) { return QList<int>(v.begin(), v.end()); }

double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
    double chi2 = 0.0;
    for (size_t i = 0; i < counts.size(); ++i) {
        const double e = probs[i] * n;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi2;
}

}  // namespace

class TestSampling : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void greedy_argmax_data();
    void greedy_argmax();
    void top_k_one_equals_greedy();
    void temperature_to_zero_is_greedy();
    void top_k_keeps_the_k_best();
    void truncation_sets_data();
    void truncation_sets();
    void nucleus_fast_path_with_heavy_tail();
    void nucleus_fast_path_matches_brute_force();
    void penalties_data();
    void penalties();
    void penalties_change_greedy_choice();
    void no_repeat_ngram_data();
    void no_repeat_ngram();
    void chi_square_fit_data();
    void chi_square_fit();
    void seeds_reproduce();
    void stop_matcher_data();
    void stop_matcher();
    void stop_matcher_after_stop();
};

void TestSampling::greedy_argmax_data() {
    QTest::addColumn<QList<float>>("logits");
    QTest::addColumn<int>("expected");
    QTest::newRow("simple") << QList<float>{0.1f, 2.5f, -1.0f, 2.4f} << 1;
    QTest::newRow("tie picks lowest id") << QList<float>{1.0f, 3.0f, 0.0f, 3.0f, 3.0f} << 1;
    QTest::newRow("all negative") << QList<float>{-5.0f, -4.0f, -7.0f} << 1;
    QTest::newRow("last is best") << QList<float>{-1.0f, 0.0f, 0.5f, 0.25f, 9.0f} << 4;
    QTest::newRow("-inf ignored") << QList<float>{kNegInf, -100.0f, kNegInf} << 1;
    QTest::newRow("all equal") << QList<float>{0.5f, 0.5f, 0.5f} << 0;
}

void TestSampling::greedy_argmax() {
    QFETCH(QList<float>, logits);
    QFETCH(int, expected);
    std::vector<float> l(logits.begin(), logits.end());  // [n_vocab]
    Sampler s(plain_params(0.0f, 40, 0.95f, 0.05f));
    const std::vector<int32_t> history;
    QCOMPARE(s.sample(l.data(), static_cast<int>(l.size()), history), expected);
    QCOMPARE(kvs::argmax_lowest_id(l.data(), static_cast<int>(l.size())), expected);
}

void TestSampling::top_k_one_equals_greedy() {
    const int n_vocab = 2000;
    for (uint32_t row = 0; row < 50; ++row) {
        std::vector<float> l = random_logits(n_vocab, 100 + row);  // [n_vocab]
        if (row % 5 == 0) l[1500] = l[700] = 50.0f;                // a tie: id 700 must win
        const int32_t expect = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        Sampler s(plain_params(0.7f, 1, 0.95f, 0.05f));
        std::vector<float> work = l;
        QCOMPARE(s.sample(work.data(), n_vocab, {}), expect);
    }
}

void TestSampling::temperature_to_zero_is_greedy() {
    const int n_vocab = 500;
    for (uint32_t row = 0; row < 20; ++row) {
        const std::vector<float> l = random_logits(n_vocab, 7 + row);  // [n_vocab]
        std::vector<float> sorted = l;
        std::sort(sorted.rbegin(), sorted.rend());
        if (sorted[0] - sorted[1] < 1e-2f) continue;  // the limit needs a strict maximum
        const int32_t expect = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        SamplingParams p = plain_params(1e-4f);
        p.seed = row;
        Sampler s(p);
        for (int draw = 0; draw < 20; ++draw) {
            std::vector<float> work = l;
            QCOMPARE(s.sample(work.data(), n_vocab, {}), expect);
        }
        std::vector<float> work = l;
        const auto& d = s.distribution(work.data(), n_vocab, {});
        QCOMPARE(d.front().id, expect);
        QVERIFY(d.front().p > 0.999999f);
    }
}

// Brute-force reference: sort every id by (logit desc, id asc), take k, softmax in double.
void TestSampling::top_k_keeps_the_k_best() {
    const int n_vocab = 49152, k = 40;
    const float temp = 0.8f;
    std::vector<float> l = random_logits(n_vocab, 4242);  // [n_vocab]
    l[123] = l[40000] = 20.0f;                            // a tie at the top
    std::vector<int32_t> order(n_vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    order.resize(k);
    double z = 0.0;
    for (int32_t id : order) z += std::exp((l[id] - l[order[0]]) / temp);

    Sampler s(plain_params(temp, k));
    std::vector<float> work = l;
    const auto& d = s.distribution(work.data(), n_vocab, {});
    QCOMPARE(to_qlist(ids_of(d)), to_qlist(order));
    for (size_t i = 0; i < d.size(); ++i) {
        const double p = std::exp((l[order[i]] - l[order[0]]) / temp) / z;
        QVERIFY2(std::abs(d[i].p - p) < 1e-5, qPrintable(QString("rank %1: %2 vs %3").arg(i).arg(d[i].p).arg(p)));
    }
}

// Five tokens with probabilities 0.5, 0.2, 0.15, 0.1, 0.05 at shuffled ids; the kept set
// follows by hand (cumulative sums 0.5, 0.7, 0.85, 0.95, 1; at T = 2 the probabilities
// are proportional to sqrt(p): 0.340, 0.215, 0.186, 0.152, 0.107).
void TestSampling::truncation_sets_data() {
    QTest::addColumn<float>("temperature");
    QTest::addColumn<int>("top_k");
    QTest::addColumn<float>("top_p");
    QTest::addColumn<float>("min_p");
    QTest::addColumn<QList<int>>("kept");  // ids, most likely first
    // ids: p=0.5 -> 3, 0.2 -> 0, 0.15 -> 4, 0.1 -> 1, 0.05 -> 2
    QTest::newRow("top-p 0.4") << 1.0f << 0 << 0.4f << 0.0f << QList<int>{3};
    QTest::newRow("top-p 0.6") << 1.0f << 0 << 0.6f << 0.0f << QList<int>{3, 0};
    QTest::newRow("top-p 0.8") << 1.0f << 0 << 0.8f << 0.0f << QList<int>{3, 0, 4};
    QTest::newRow("top-p 0.9") << 1.0f << 0 << 0.9f << 0.0f << QList<int>{3, 0, 4, 1};
    QTest::newRow("top-p 0.6 at T=2") << 2.0f << 0 << 0.6f << 0.0f << QList<int>{3, 0, 4};
    // After top-k 3 the mass is renormalized: 0.588, 0.824, 1.
    QTest::newRow("top-k 3 + top-p 0.6") << 1.0f << 3 << 0.6f << 0.0f << QList<int>{3, 0};
    QTest::newRow("top-k 3 + top-p 0.85") << 1.0f << 3 << 0.85f << 0.0f << QList<int>{3, 0, 4};
    QTest::newRow("top-k 2") << 1.0f << 2 << 1.0f << 0.0f << QList<int>{3, 0};
    QTest::newRow("min-p 0.25 (>= 0.125)") << 1.0f << 0 << 1.0f << 0.25f << QList<int>{3, 0, 4};
    QTest::newRow("min-p 0.35 (>= 0.175)") << 1.0f << 0 << 1.0f << 0.35f << QList<int>{3, 0};
    QTest::newRow("min-p 0.05 keeps all") << 1.0f << 0 << 1.0f << 0.05f << QList<int>{3, 0, 4, 1, 2};
    QTest::newRow("top-k 4 then min-p 0.25") << 1.0f << 4 << 1.0f << 0.25f << QList<int>{3, 0, 4};
    // T = 2: sqrt ratios to the best: 0.632, 0.548, 0.447, 0.316.
    QTest::newRow("min-p 0.5 at T=2") << 2.0f << 0 << 1.0f << 0.5f << QList<int>{3, 0, 4};
    QTest::newRow("top-p 0.9 then min-p 0.25") << 1.0f << 0 << 0.9f << 0.25f << QList<int>{3, 0, 4};
}

void TestSampling::truncation_sets() {
    QFETCH(float, temperature);
    QFETCH(int, top_k);
    QFETCH(float, top_p);
    QFETCH(float, min_p);
    QFETCH(QList<int>, kept);
    const std::vector<double> probs = {0.2, 0.1, 0.05, 0.5, 0.15};  // by id
    std::vector<float> l = logits_from_probs(probs, 1.5);           // [5]
    Sampler s(plain_params(temperature, top_k, top_p, min_p));
    const auto& d = s.distribution(l.data(), 5, {});
    QCOMPARE(to_qlist(ids_of(d)), kept);
    // Survivors keep their relative weights p^(1/T), renormalized.
    double z = 0.0;
    for (int id : kept) z += std::pow(probs[id], 1.0 / temperature);
    for (const auto& t : d) QVERIFY(std::abs(t.p - std::pow(probs[t.id], 1.0 / temperature) / z) < 1e-5);
}

// 5 heavy tokens (0.25, 0.1, 0.08, 0.05, 0.02) and 10000 tail tokens of 5e-5 each.
// top-p 0.51052 needs the heavy 0.5 plus 0.01052 of tail: 211 tail tokens, lowest ids
// first. The first threshold pass sees only the heavy tokens, so the fast path must
// lower its threshold twice to reach the tail.
void TestSampling::nucleus_fast_path_with_heavy_tail() {
    const int n_tail = 10000;
    std::vector<double> probs(5 + n_tail, 0.5 / n_tail);
    const int heavy_ids[5] = {9000, 12, 5004, 3, 10004};
    const double heavy_p[5] = {0.25, 0.1, 0.08, 0.05, 0.02};
    std::set<int> heavy(std::begin(heavy_ids), std::end(heavy_ids));
    for (int i = 0; i < 5; ++i) probs[heavy_ids[i]] = heavy_p[i];
    std::vector<float> l = logits_from_probs(probs);  // [10005]

    struct Row {
        float top_p;
        int n_kept;
    };
    for (const Row row : {Row{0.3f, 2}, Row{0.45f, 4}, Row{0.51052f, 5 + 211}}) {
        std::vector<float> work = l;
        Sampler s(plain_params(1.0f, 0, row.top_p));
        const auto& d = s.distribution(work.data(), static_cast<int>(work.size()), {});
        QCOMPARE(static_cast<int>(d.size()), row.n_kept);
        for (int i = 0; i < std::min(5, row.n_kept); ++i) QCOMPARE(d[static_cast<size_t>(i)].id, heavy_ids[i]);
        int expect_tail = 0;  // the tail comes in id order, skipping heavy ids
        for (size_t i = 5; i < d.size(); ++i, ++expect_tail) {
            while (heavy.count(expect_tail)) ++expect_tail;
            QCOMPARE(d[i].id, expect_tail);
        }
    }
}

// Brute force: softmax of every logit in double, sort all, take the nucleus.
void TestSampling::nucleus_fast_path_matches_brute_force() {
    const int n_vocab = 8000;
    for (uint32_t row = 0; row < 10; ++row) {
        const float temp = 0.6f + 0.1f * row, top_p = 0.5f + 0.05f * row;
        const std::vector<float> l = random_logits(n_vocab, 900 + row);  // [n_vocab]
        const double mx = *std::max_element(l.begin(), l.end());
        std::vector<double> w(l.size());
        for (size_t i = 0; i < l.size(); ++i) w[i] = std::exp((l[i] - mx) / temp);
        const double z = std::accumulate(w.begin(), w.end(), 0.0);
        std::vector<int32_t> order(n_vocab);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
        double cum = 0.0;
        size_t n_keep = 0;
        while (n_keep < order.size() && cum < top_p * z) cum += w[order[n_keep++]];
        order.resize(n_keep);

        std::vector<float> work = l;
        Sampler s(plain_params(temp, 0, top_p));
        const auto& d = s.distribution(work.data(), n_vocab, {});
        QCOMPARE(to_qlist(ids_of(d)), to_qlist(order));
    }
}

// Logits [2, -1, 0.5, 3, -2, 1]; history [0 1 1 3 5 0 1]: counts 0:2 1:3 3:1 5:1.
// repeat 2, frequency 0.5, presence 0.25:
//   id0: 2/2 - 2*0.5 - 0.25 = -0.25     id1: -1*2 - 3*0.5 - 0.25 = -3.75
//   id3: 3/2 - 0.5 - 0.25 = 0.75        id5: 1/2 - 0.5 - 0.25 = -0.25
// last_n 3 (window [5 0 1], each once): id0 0.25, id1 -2.75, id3 untouched 3, id5 -0.25.
void TestSampling::penalties_data() {
    QTest::addColumn<float>("repeat");
    QTest::addColumn<float>("frequency");
    QTest::addColumn<float>("presence");
    QTest::addColumn<int>("last_n");
    QTest::addColumn<QList<float>>("expected");
    QTest::newRow("all three, window 64")
        << 2.0f << 0.5f << 0.25f << 64 << QList<float>{-0.25f, -3.75f, 0.5f, 0.75f, -2.0f, -0.25f};
    QTest::newRow("all three, whole history")
        << 2.0f << 0.5f << 0.25f << -1 << QList<float>{-0.25f, -3.75f, 0.5f, 0.75f, -2.0f, -0.25f};
    QTest::newRow("all three, window 3") << 2.0f << 0.5f << 0.25f << 3
                                         << QList<float>{0.25f, -2.75f, 0.5f, 3.0f, -2.0f, -0.25f};
    QTest::newRow("repeat only") << 1.25f << 0.0f << 0.0f << 64 << QList<float>{1.6f, -1.25f, 0.5f, 2.4f, -2.0f, 0.8f};
    QTest::newRow("frequency only") << 1.0f << 1.0f << 0.0f << 64 << QList<float>{0.0f, -4.0f, 0.5f, 2.0f, -2.0f, 0.0f};
    QTest::newRow("presence only") << 1.0f << 0.0f << 1.0f << 64 << QList<float>{1.0f, -2.0f, 0.5f, 2.0f, -2.0f, 0.0f};
    QTest::newRow("window 0 is off") << 2.0f << 0.5f << 0.25f << 0
                                     << QList<float>{2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
}

void TestSampling::penalties() {
    QFETCH(float, repeat);
    QFETCH(float, frequency);
    QFETCH(float, presence);
    QFETCH(int, last_n);
    QFETCH(QList<float>, expected);
    std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};  // [6]
    const std::vector<int32_t> history = {99 /* out of vocabulary: ignored */, 0, 1, 1, 3, 5, 0, 1};
    SamplingParams p;
    p.repeat_penalty = repeat;
    p.frequency_penalty = frequency;
    p.presence_penalty = presence;
    p.penalty_last_n = last_n;
    kvs::apply_penalties(l.data(), 6, history, p);
    for (int i = 0; i < 6; ++i)
        QVERIFY2(std::abs(l[i] - expected[i]) < 1e-6f,
                 qPrintable(QString("id %1: %2 vs %3").arg(i).arg(l[i]).arg(expected[i])));
}

void TestSampling::penalties_change_greedy_choice() {
    const std::vector<int32_t> history = {0};
    SamplingParams p = plain_params(0.0f);
    std::vector<float> l = {2.0f, 1.9f};  // [2]
    QCOMPARE(Sampler(p).sample(l.data(), 2, history), 0);
    p.repeat_penalty = 1.1f;  // 2 / 1.1 = 1.818 < 1.9
    l = {2.0f, 1.9f};
    QCOMPARE(Sampler(p).sample(l.data(), 2, history), 1);
}

void TestSampling::no_repeat_ngram_data() {
    QTest::addColumn<QList<int>>("history");
    QTest::addColumn<int>("n");
    QTest::addColumn<QList<int>>("banned");
    QTest::newRow("trigram 5 6 -> 7") << QList<int>{5, 6, 7, 5, 6} << 3 << QList<int>{7};
    QTest::newRow("bigram 6 -> 7") << QList<int>{5, 6, 7, 5, 6} << 2 << QList<int>{7};
    QTest::newRow("two continuations") << QList<int>{1, 2, 3, 1, 2, 4, 1, 2} << 3 << QList<int>{3, 4};
    QTest::newRow("unigram bans history") << QList<int>{4, 2, 4, 9} << 1 << QList<int>{2, 4, 9};
    QTest::newRow("no earlier prefix") << QList<int>{1, 2, 3, 1, 2} << 4 << QList<int>{};
    QTest::newRow("history shorter than n") << QList<int>{1, 1} << 3 << QList<int>{};
    QTest::newRow("repeated token run") << QList<int>{8, 8, 8} << 2 << QList<int>{8};
    QTest::newRow("off") << QList<int>{5, 6, 7, 5, 6} << 0 << QList<int>{};
}

void TestSampling::no_repeat_ngram() {
    QFETCH(QList<int>, history);
    QFETCH(int, n);
    QFETCH(QList<int>, banned);
    const int n_vocab = 12;
    std::vector<float> l(n_vocab);  // [n_vocab]
    for (int i = 0; i < n_vocab; ++i) l[i] = 0.1f * i;
    const std::vector<int32_t> h(history.begin(), history.end());
    QCOMPARE(kvs::ban_repeated_ngrams(l.data(), n_vocab, h, n), static_cast<int>(banned.size()));
    for (int i = 0; i < n_vocab; ++i) QCOMPARE(std::isinf(l[i]) && l[i] < 0, banned.contains(i));

    // Through the sampler: the best token (id 7 here) is banned in the first row, so
    // greedy falls back to the next best, id 6... unless 6 is banned too.
    std::vector<float> g(n_vocab, 0.0f);  // [n_vocab]
    g[7] = 5.0f;
    g[6] = 4.0f;
    g[3] = 3.0f;
    SamplingParams p = plain_params(0.0f);
    p.no_repeat_ngram_size = n;
    int expect = 7;
    if (banned.contains(7)) expect = banned.contains(6) ? 3 : 6;
    QCOMPARE(Sampler(p).sample(g.data(), n_vocab, h), expect);
}

void TestSampling::chi_square_fit_data() {
    QTest::addColumn<int>("top_k");
    QTest::addColumn<float>("top_p");
    QTest::newRow("full distribution") << 0 << 1.0f;
    QTest::newRow("top-k path") << 5 << 1.0f;
    QTest::newRow("top-p fast path") << 0 << 0.9999f;
}

// 20000 draws at temperature 1 from p = (0.4, 0.25, 0.2, 0.1, 0.05) must fit p (chi-square
// below the 0.001 critical value for 4 degrees of freedom) and must not fit a distribution
// that moves 0.05 of mass, which proves the statistic can fail.
void TestSampling::chi_square_fit() {
    QFETCH(int, top_k);
    QFETCH(float, top_p);
    const std::vector<double> probs = {0.4, 0.25, 0.2, 0.1, 0.05};
    const std::vector<double> wrong = {0.35, 0.3, 0.2, 0.1, 0.05};
    const std::vector<float> l = logits_from_probs(probs, 3.7);  // [5]
    SamplingParams p = plain_params(1.0f, top_k, top_p);
    p.seed = 20240611;
    Sampler s(p);
    const int n_draws = 20000;
    std::vector<int> counts(5, 0);
    for (int i = 0; i < n_draws; ++i) {
        std::vector<float> work = l;
        const int32_t id = s.sample(work.data(), 5, {});
        QVERIFY(id >= 0 && id < 5);
        ++counts[static_cast<size_t>(id)];
    }
    const double chi2 = chi_square(counts, probs, n_draws);
    const double chi2_wrong = chi_square(counts, wrong, n_draws);
    qInfo("counts %d %d %d %d %d, chi2 %.2f (wrong: %.1f)", counts[0], counts[1], counts[2], counts[3], counts[4], chi2,
          chi2_wrong);
    QVERIFY2(chi2 < kChi2Crit4, qPrintable(QString("chi2 %1").arg(chi2)));
    QVERIFY2(chi2_wrong > kChi2Crit4, qPrintable(QString("wrong distribution accepted, chi2 %1").arg(chi2_wrong)));
}

void TestSampling::seeds_reproduce() {
    const int n_vocab = 1000;
    auto run = [&](uint64_t seed) {
        SamplingParams p;  // llama.cpp-like defaults: top-k 40, top-p 0.95, min-p 0.05, T 0.8
        p.temperature = 1.5f;
        p.seed = seed;
        Sampler s(p);
        std::vector<int32_t> history;
        for (uint32_t step = 0; step < 200; ++step) {
            std::vector<float> l = random_logits(n_vocab, step);  // [n_vocab]
            for (auto& x : l) x *= 0.3f;                          // flat enough to vary
            history.push_back(s.sample(l.data(), n_vocab, history));
        }
        return history;
    };
    const auto a = run(7), b = run(7), c = run(8);
    QCOMPARE(to_qlist(a), to_qlist(b));
    QVERIFY(a != c);
    QVERIFY(std::set<int32_t>(a.begin(), a.end()).size() > 20);  // it really samples
}

void TestSampling::stop_matcher_data() {
    QTest::addColumn<QStringList>("stops");
    QTest::addColumn<QStringList>("chunks");
    QTest::addColumn<QStringList>("emits");  // what each push emits
    QTest::addColumn<bool>("stopped");
    QTest::addColumn<int>("stop_index");
    QTest::addColumn<QString>("flushed");
    QTest::newRow("split across two") << QStringList{"<|im_end|>"} << QStringList{"Hello <|im", "_end|> tail"}
                                      << QStringList{"Hello ", ""} << true << 0 << "";
    QTest::newRow("split across three") << QStringList{"<|im_end|>"} << QStringList{"ok<|", "im_", "end|>x"}
                                        << QStringList{"ok", "", ""} << true << 0 << "";
    QTest::newRow("false alarm released")
        << QStringList{"</s>"} << QStringList{"a<", "/b", "c"} << QStringList{"a", "</b", "c"} << false << -1 << "";
    QTest::newRow("tail held until flush")
        << QStringList{"###"} << QStringList{"abc#", "#"} << QStringList{"abc", ""} << false << -1 << "##";
    QTest::newRow("several stops") << QStringList{"\n\n", "User:"} << QStringList{"Answer: 4", "\nUs", "er: hi"}
                                   << QStringList{"Answer: 4", "\n", ""} << true << 1 << "";
    QTest::newRow("earliest occurrence wins")
        << QStringList{"bc", "ab"} << QStringList{"xabc"} << QStringList{"x"} << true << 1 << "";
    QTest::newRow("stop at very start") << QStringList{"END"} << QStringList{"END", "more"} << QStringList{"", ""}
                                        << true << 0 << "";
    QTest::newRow("utf8 stop") << QStringList{"。"} << QStringList{"日本", "語。次"} << QStringList{"日本", "語"}
                               << true << 0 << "";
    QTest::newRow("utf8 partial then mismatch") << QStringList{"café au"} << QStringList{"un caf", "é noir"}
                                                << QStringList{"un ", "café noir"} << false << -1 << "";
    QTest::newRow("utf8 stop split inside")
        << QStringList{"→ fin"} << QStringList{"a →", " fi", "n!"} << QStringList{"a ", "", ""} << true << 0 << "";
    QTest::newRow("no stops") << QStringList{} << QStringList{"plain ", "text"} << QStringList{"plain ", "text"}
                              << false << -1 << "";
    QTest::newRow("empty stop ignored") << QStringList{""} << QStringList{"abc"} << QStringList{"abc"} << false << -1
                                        << "";
}

void TestSampling::stop_matcher() {
    QFETCH(QStringList, stops);
    QFETCH(QStringList, chunks);
    QFETCH(QStringList, emits);
    QFETCH(bool, stopped);
    QFETCH(int, stop_index);
    QFETCH(QString, flushed);
    std::vector<std::string> s;
    for (const auto& x : stops) s.push_back(x.toStdString());
    kvs::StopMatcher m(s);
    bool any_stop = false;
    int index = -1;
    for (int i = 0; i < chunks.size(); ++i) {
        const kvs::StopCheck r = m.push(chunks[i].toStdString());
        QCOMPARE(QString::fromStdString(r.emit), emits[i]);
        if (r.stopped && !any_stop) index = r.stop_index;
        any_stop = any_stop || r.stopped;
    }
    QCOMPARE(any_stop, stopped);
    QCOMPARE(index, stop_index);
    QCOMPARE(QString::fromStdString(m.flush()), flushed);
}

void TestSampling::stop_matcher_after_stop() {
    kvs::StopMatcher m({"STOP"});
    QCOMPARE(m.push("abcST").emit, std::string("abc"));
    QCOMPARE(m.n_held(), size_t{2});
    const auto r = m.push("OPxyz");
    QVERIFY(r.stopped);
    QVERIFY(r.emit.empty());
    const auto later = m.push("more text");
    QVERIFY(later.stopped);
    QVERIFY(later.emit.empty());
    QVERIFY(m.flush().empty());
}

QTEST_GUILESS_MAIN(TestSampling)
#include "tst_sampling.moc"
