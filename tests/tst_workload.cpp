// ctest-labels: unit
// Benchmark workload generation (engine/runtime/workload.h): the same seed gives the same
// workload and pinned token ids, another seed another one; the random streams are
// independent (a new rate moves arrivals only); Poisson gaps have the exponential's mean,
// spread and tail; shared-prefix prompts really share their first tokens; mixed lengths
// are log-uniform (checked against the distribution's closed form); and the spec parser
// accepts the documented forms and rejects bad ones with messages naming the key.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "engine/runtime/workload.h"

using namespace kvs;

namespace QTest {
template <>
inline char* toString(const std::vector<int32_t>& v) {
    QString s = "[";
    for (size_t i = 0; i < v.size() && i < 64; ++i) s += (i ? ", " : "") + QString::number(v[i]);
    s += v.size() > 64 ? ", ...]" : "]";
    return qstrdup(qPrintable(s));
}
}  // namespace QTest

namespace {
double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}
}  // namespace

class TestWorkload : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void workload_deterministic();
    void workload_poisson_mean_gap();
    void workload_all_at_once();
    void workload_shared_prefix();
    void workload_mixed_is_heavy_tailed();
    void workload_spec_parses_data();
    void workload_spec_parses();
    void workload_spec_errors_data();
    void workload_spec_errors();
    void workload_spec_round_trip();
};

void TestWorkload::workload_deterministic() {
    auto spec = parse_workload_spec("poisson:n=50,rate=4,seed=11");
    QVERIFY2(spec.is_ok(), spec.message().c_str());
    auto w1 = make_workload(*spec), w2 = make_workload(*spec);
    QVERIFY2(w1.is_ok(), w1.message().c_str());
    QCOMPARE(w1->size(), size_t(50));
    for (size_t i = 0; i < w1->size(); ++i) {
        const WorkloadRequest &x = (*w1)[i], &y = (*w2)[i];
        QCOMPARE(x.arrival_s, y.arrival_s);
        QCOMPARE(x.prompt, y.prompt);
        QCOMPARE(x.max_tokens, y.max_tokens);
        QCOMPARE(x.priority, y.priority);
        QVERIFY(static_cast<int>(x.prompt.size()) >= spec->prompt_min &&
                static_cast<int>(x.prompt.size()) <= spec->prompt_max);
        QVERIFY(x.max_tokens >= spec->output_min && x.max_tokens <= spec->output_max);
        for (int32_t t : x.prompt) QVERIFY2(t >= spec->first_token_id && t < spec->n_vocab, "token id out of range");
        if (i > 0) QVERIFY2(x.arrival_s >= (*w1)[i - 1].arrival_s, "sorted by arrival");
    }

    WorkloadSpec other = *spec;
    other.seed = 12;
    auto w3 = make_workload(other);
    int same_prompts = 0;
    for (size_t i = 0; i < w1->size(); ++i) same_prompts += (*w1)[i].prompt == (*w3)[i].prompt;
    QCOMPARE(same_prompts, 0);
    QVERIFY((*w1)[1].arrival_s != (*w3)[1].arrival_s);

    // Streams are independent: another rate moves arrivals only.
    WorkloadSpec faster = *spec;
    faster.rate_rps = 40;
    auto w4 = make_workload(faster);
    for (size_t i = 0; i < w1->size(); ++i) {
        QCOMPARE((*w4)[i].prompt, (*w1)[i].prompt);
        QCOMPARE((*w4)[i].max_tokens, (*w1)[i].max_tokens);
    }
    QVERIFY((*w4).back().arrival_s < (*w1).back().arrival_s);

    // Fixed values: the generator must not drift between builds or platforms.
    WorkloadSpec tiny;
    tiny.kind = "uniform";
    tiny.n_requests = 2;
    tiny.prompt_min = tiny.prompt_max = 3;
    tiny.output_min = tiny.output_max = 5;
    tiny.seed = 1;
    auto wt = make_workload(tiny);
    QCOMPARE((*wt)[0].prompt, (std::vector<int32_t>{18569, 32272, 34645}));
    QCOMPARE((*wt)[1].max_tokens, 5);
}

void TestWorkload::workload_poisson_mean_gap() {
    // n - 1 exponential gaps with mean 1/rate: their mean has standard deviation
    // (1/rate)/sqrt(n - 1); allow 5 of them. The gaps' std equals their mean (exponential).
    constexpr int kN = 20000;
    constexpr double kRate = 8.0;
    WorkloadSpec s;
    s.kind = "poisson";
    s.n_requests = kN;
    s.rate_rps = kRate;
    s.prompt_min = s.prompt_max = 1;
    s.output_min = s.output_max = 1;
    s.seed = 3;
    auto w = make_workload(s);
    QVERIFY2(w.is_ok(), w.message().c_str());
    QCOMPARE((*w)[0].arrival_s, 0.0);
    std::vector<double> gaps;
    for (size_t i = 1; i < w->size(); ++i) gaps.push_back((*w)[i].arrival_s - (*w)[i - 1].arrival_s);
    const double m = mean(gaps);
    double var = 0;
    for (double g : gaps) var += (g - m) * (g - m);
    const double sd = std::sqrt(var / static_cast<double>(gaps.size() - 1));
    const double se = (1.0 / kRate) / std::sqrt(static_cast<double>(kN - 1));
    QVERIFY2(std::fabs(m - 1.0 / kRate) < 5 * se,
             qPrintable(QString("mean gap %1, expected %2 +- %3").arg(m).arg(1.0 / kRate).arg(5 * se)));
    QVERIFY2(std::fabs(sd / m - 1.0) < 0.05, qPrintable(QString("gap std/mean %1, exponential gives 1").arg(sd / m)));
    // Memoryless: about e^-1 of the gaps are longer than the mean.
    int longer = 0;
    for (double g : gaps) longer += g > 1.0 / kRate;
    const double frac = static_cast<double>(longer) / static_cast<double>(gaps.size());
    QVERIFY2(std::fabs(frac - std::exp(-1.0)) < 0.02, qPrintable(QString("fraction of gaps > mean: %1").arg(frac)));
}

void TestWorkload::workload_all_at_once() {
    for (const char* text : {"mixed:n=20", "mixed:n=20,rate=0", "poisson:n=20,rate=inf"}) {
        auto s = parse_workload_spec(text);
        QVERIFY2(s.is_ok(), s.message().c_str());
        auto w = make_workload(*s);
        QVERIFY2(w.is_ok(), w.message().c_str());
        for (const auto& r : *w) QVERIFY2(r.arrival_s == 0.0, text);
    }
    auto s = parse_workload_spec("uniform:n=40,priorities=3,prompt=8,output=4");
    QVERIFY2(s.is_ok(), s.message().c_str());
    auto w = make_workload(*s);
    std::set<int> prios;
    for (const auto& r : *w) {
        QCOMPARE(r.prompt.size(), size_t(8));
        QCOMPARE(r.max_tokens, 4);
        prios.insert(r.priority);
    }
    QCOMPARE(prios, (std::set<int>{0, 1, 2}));
}

void TestWorkload::workload_shared_prefix() {
    auto s = parse_workload_spec("shared-prefix:n=32,prefix=256");
    QVERIFY2(s.is_ok(), s.message().c_str());
    QCOMPARE(s->shared_prefix_len, 256);
    auto w = make_workload(*s);
    QVERIFY2(w.is_ok(), w.message().c_str());
    QCOMPARE(w->size(), size_t(32));
    const std::vector<int32_t> prefix((*w)[0].prompt.begin(), (*w)[0].prompt.begin() + 256);
    std::set<std::vector<int32_t>> tails;
    for (const auto& r : *w) {
        const int n = static_cast<int>(r.prompt.size());
        QVERIFY2(n >= 256 + s->prompt_min && n <= 256 + s->prompt_max, qPrintable(QString("prompt length %1").arg(n)));
        QVERIFY2(std::equal(prefix.begin(), prefix.end(), r.prompt.begin()),
                 "every prompt starts with the shared prefix");
        tails.insert(std::vector<int32_t>(r.prompt.begin() + 256, r.prompt.end()));
        QVERIFY2(r.prompt[256] != prefix[0] || r.prompt[257] != prefix[1], "the tail is not a copy of the prefix");
    }
    QCOMPARE(tails.size(), size_t(32));  // each tail is the request's own

    // The prefix is shared inside one workload, not constant across seeds.
    WorkloadSpec other = *s;
    other.seed = s->seed + 1;
    auto w2 = make_workload(other);
    QVERIFY(!std::equal(prefix.begin(), prefix.end(), (*w2)[0].prompt.begin()));

    // Without prefix, prompts of other kinds share nothing.
    auto m = make_workload(*parse_workload_spec("mixed:n=8"));
    QVERIFY((*m)[0].prompt[0] != (*m)[1].prompt[0] || (*m)[0].prompt[1] != (*m)[1].prompt[1]);
}

void TestWorkload::workload_mixed_is_heavy_tailed() {
    // Log-uniform over 16..512: P(L < 64) = ln(64/16) / ln(513/16) = 0.3998, where a uniform
    // draw would give 48/497 = 0.097. 4000 draws: standard error 0.008.
    auto w = make_workload(*parse_workload_spec("mixed:n=4000,seed=5"));
    QVERIFY2(w.is_ok(), w.message().c_str());
    int short_prompts = 0, lo = 1 << 30, hi = 0;
    double out_sum = 0;
    for (const auto& r : *w) {
        const int n = static_cast<int>(r.prompt.size());
        short_prompts += n < 64;
        lo = std::min(lo, n);
        hi = std::max(hi, n);
        out_sum += r.max_tokens;
    }
    const double frac = short_prompts / 4000.0;
    const double expected = std::log(4.0) / std::log(513.0 / 16.0);
    QVERIFY2(std::fabs(frac - expected) < 0.04,
             qPrintable(QString("P(prompt < 64) = %1, log-uniform gives %2").arg(frac).arg(expected)));
    QVERIFY2(lo < 20 && hi > 450, qPrintable(QString("lengths span %1..%2").arg(lo).arg(hi)));
    // Mean output of floor(log-uniform over [16, 257)): about 241/ln(257/16) - 0.5 = 86.3.
    const double out_mean = out_sum / 4000.0;
    QVERIFY2(std::fabs(out_mean - 86.3) < 5.0, qPrintable(QString("mean output %1").arg(out_mean)));
}

void TestWorkload::workload_spec_parses_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("kind");
    QTest::addColumn<int>("n");
    QTest::addColumn<double>("rate");
    QTest::addColumn<int>("prompt_min");
    QTest::addColumn<int>("prompt_max");
    QTest::addColumn<int>("output_max");
    QTest::addColumn<int>("prefix");
    QTest::newRow("mixed defaults") << "mixed"
                                    << "mixed" << 64 << 0.0 << 16 << 512 << 256 << 0;
    QTest::newRow("mixed n rate") << "mixed:n=64,rate=8"
                                  << "mixed" << 64 << 8.0 << 16 << 512 << 256 << 0;
    QTest::newRow("poisson default rate") << "poisson"
                                          << "poisson" << 64 << 1.0 << 16 << 512 << 256 << 0;
    QTest::newRow("shared prefix") << "shared-prefix:n=32,prefix=256"
                                   << "shared-prefix" << 32 << 0.0 << 16 << 64 << 128 << 256;
    QTest::newRow("uniform fixed") << "uniform:prompt=128,output=64"
                                   << "uniform" << 64 << 0.0 << 128 << 128 << 64 << 0;
    QTest::newRow("ranges") << "uniform:prompt=10..20,output_min=2,output_max=9"
                            << "uniform" << 64 << 0.0 << 10 << 20 << 9 << 0;
    QTest::newRow("inf rate") << "poisson:rate=inf,n=3"
                              << "poisson" << 3 << std::numeric_limits<double>::infinity() << 16 << 512 << 256 << 0;
    QTest::newRow("fractional rate") << "poisson:rate=0.5"
                                     << "poisson" << 64 << 0.5 << 16 << 512 << 256 << 0;
    QTest::newRow("prefix on mixed") << "mixed:prefix=32,prompt_max=40"
                                     << "mixed" << 64 << 0.0 << 16 << 40 << 256 << 32;
}

void TestWorkload::workload_spec_parses() {
    QFETCH(QString, text);
    QFETCH(QString, kind);
    QFETCH(int, n);
    QFETCH(double, rate);
    QFETCH(int, prompt_min);
    QFETCH(int, prompt_max);
    QFETCH(int, output_max);
    QFETCH(int, prefix);
    auto s = parse_workload_spec(text.toStdString());
    QVERIFY2(s.is_ok(), s.message().c_str());
    QCOMPARE(QString::fromStdString(s->kind), kind);
    QCOMPARE(s->n_requests, n);
    QCOMPARE(s->rate_rps, rate);
    QCOMPARE(s->prompt_min, prompt_min);
    QCOMPARE(s->prompt_max, prompt_max);
    QCOMPARE(s->output_max, output_max);
    QCOMPARE(s->shared_prefix_len, prefix);
    QVERIFY(make_workload(*s).is_ok());
}

void TestWorkload::workload_spec_errors_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("needle");  // the error must contain this
    QTest::newRow("unknown kind") << "bursty"
                                  << "unknown kind \"bursty\"";
    QTest::newRow("empty") << ""
                           << "unknown kind \"\"";
    QTest::newRow("unknown key") << "mixed:n=4,foo=1"
                                 << "unknown key \"foo\"";
    QTest::newRow("not a number") << "mixed:n=abc"
                                  << "n=\"abc\" is not an integer";
    QTest::newRow("trailing junk") << "mixed:n=5x"
                                   << "n=\"5x\"";
    QTest::newRow("empty value") << "mixed:n="
                                 << "n=\"\"";
    QTest::newRow("no equals") << "mixed:n"
                               << "\"n\" is not key=value";
    QTest::newRow("zero requests") << "mixed:n=0"
                                   << "n=0 must be at least 1";
    QTest::newRow("negative rate") << "poisson:rate=-2"
                                   << "rate=-2 must be >= 0";
    QTest::newRow("nan rate") << "poisson:rate=nan"
                              << "rate=\"nan\" is not a number";
    QTest::newRow("rate text") << "poisson:rate=fast"
                               << "rate=\"fast\" is not a number";
    QTest::newRow("reversed range") << "mixed:prompt=10..5"
                                    << "prompt=10..5 needs 1 <= min <= max";
    QTest::newRow("bad range") << "mixed:output=1..x"
                               << "output=\"1..x\" is not a length N or a range A..B";
    QTest::newRow("zero output") << "uniform:output_min=0"
                                 << "output=0..256";
    QTest::newRow("min over max") << "uniform:output_min=300"
                                  << "output=300..256";
    QTest::newRow("negative prefix") << "shared-prefix:prefix=-1"
                                     << "prefix=-1 must be >= 0";
    QTest::newRow("first token") << "mixed:first_token=50000"
                                 << "first_token=50000 must be in [0, vocab=49152)";
    QTest::newRow("priorities") << "mixed:priorities=0"
                                << "priorities=0 must be at least 1";
    QTest::newRow("overflow") << "mixed:n=99999999999"
                              << "n=\"99999999999\" is not in range";
    QTest::newRow("negative seed") << "mixed:seed=-1"
                                   << "seed=\"-1\"";
}

void TestWorkload::workload_spec_errors() {
    QFETCH(QString, text);
    QFETCH(QString, needle);
    auto s = parse_workload_spec(text.toStdString());
    QVERIFY2(!s.is_ok(), qPrintable("accepted: " + text));
    const QString msg = QString::fromStdString(s.message());
    QVERIFY2(msg.contains(needle), qPrintable(msg));
    QVERIFY2(msg.startsWith("workload spec"), qPrintable(msg));

    // make_workload checks a hand-built spec the same way.
    WorkloadSpec bad;
    bad.n_requests = -3;
    auto w = make_workload(bad);
    QVERIFY(!w.is_ok());
    QVERIFY2(w.message().find("n=-3") != std::string::npos, w.message().c_str());
}

void TestWorkload::workload_spec_round_trip() {
    for (const char* text : {"mixed", "poisson:rate=2.5,seed=99,priorities=4", "shared-prefix:prefix=100,prompt=3..9",
                             "uniform:rate=inf,vocab=1000,first_token=3"}) {
        auto s = parse_workload_spec(text);
        QVERIFY2(s.is_ok(), s.message().c_str());
        const std::string canon = workload_spec_string(*s);
        auto again = parse_workload_spec(canon);
        QVERIFY2(again.is_ok(), (canon + ": " + again.message()).c_str());
        QCOMPARE(workload_spec_string(*again), canon);
        auto w1 = make_workload(*s), w2 = make_workload(*again);
        QCOMPARE(w1->size(), w2->size());
        for (size_t i = 0; i < w1->size(); ++i) QCOMPARE((*w1)[i].prompt, (*w2)[i].prompt);
    }
    QCOMPARE(workload_spec_string(*parse_workload_spec("poisson:rate=2.5,seed=99")),
             std::string("poisson:n=64,rate=2.5,prompt=16..512,output=16..256,prefix=0,vocab=49152,first_token=32,"
                         "seed=99,priorities=1"));
}

QTEST_GUILESS_MAIN(TestWorkload)
#include "tst_workload.moc"
