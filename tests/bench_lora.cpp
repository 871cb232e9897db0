// ctest-labels: bench model
// What LoRA adapters cost on the default model: prefill and decode speed of one engine with
// no adapter, with one adapter, and with a batch mixing three (the demo adapters of
// tests/data: pirate, cowboy, robot; rank 8 on the last layer's gate / up / down), at batch
// 3 (three requests of 128 random prompt tokens, 64 generated tokens each, greedy, EOS
// ignored) and at batch 1 (no adapter vs pirate). The configurations alternate within each
// round (KVS_BENCH_ROUNDS, default 5) so a machine's changing load falls on all of them;
// prefill tok/s is the first step's (every prompt in one step), decode tok/s the tokens of
// the steps after it over their wall time. Prints a table (median and min..max over the
// rounds) and writes bench_lora.json to the test output folder. Never fails on the numbers.
// Five rounds take about 4 minutes on 2 busy cores (the function timeout is raised to 30 min).
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"

using namespace kvs;
using Clock = std::chrono::steady_clock;

namespace {

struct Config {
    const char* name;
    std::vector<std::string> adapters;  // one per request; "" the base model
};

struct Speed {
    double prefill = 0, decode = 0;  // tok/s
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

class BenchLora : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void overhead() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
        const std::string data = test::source_root() + "/tests/data/";
        auto session = Session::open(model);
        QVERIFY2(session, session.message().c_str());
        for (const char* name : {"pirate", "cowboy", "robot"}) {
            auto info = (*session)->load_adapter(name, data + "lora_" + name);
            QVERIFY2(info, info.message().c_str());
        }
        const char* env = std::getenv("KVS_BENCH_ROUNDS");
        const int rounds = env ? std::max(1, std::atoi(env)) : 5;
        constexpr int kPrompt = 128, kGen = 64;
        const std::vector<Config> configs = {
            {"batch 3, no adapter", {"", "", ""}},
            {"batch 3, one adapter (pirate x3)", {"pirate", "pirate", "pirate"}},
            {"batch 3, three adapters", {"pirate", "cowboy", "robot"}},
            {"batch 1, no adapter", {""}},
            {"batch 1, pirate", {"pirate"}},
        };
        EngineOptions eo;
        eo.n_threads = 2;
        eo.snapshot_every = 0;
        eo.scheduler.max_num_batched_tokens = 512;
        auto engine = (*session)->make_engine(eo, false);
        QVERIFY2(engine, engine.message().c_str());
        Engine& e = **engine;
        std::vector<std::vector<Speed>> speed(configs.size());
        uint64_t x = 0x9E3779B97F4A7C15ull;
        const int n_vocab = (*session)->model().config.n_vocab;
        for (int r = 0; r < rounds; ++r) {
            for (size_t c = 0; c < configs.size(); ++c) {
                int n_req = 0;
                for (const std::string& a : configs[c].adapters) {
                    GenerationRequest g;
                    for (int t = 0; t < kPrompt; ++t) {  // fresh random prompts: no prefix-cache hits
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        g.prompt.push_back(static_cast<int32_t>(32 + x % static_cast<uint64_t>(n_vocab - 32)));
                    }
                    g.params.temperature = 0;
                    g.params.max_tokens = kGen;
                    g.params.ignore_eos = true;
                    if (!a.empty()) {
                        auto ad = (*session)->adapter(a);
                        QVERIFY2(ad, ad.message().c_str());
                        g.adapter = ad.value();
                    }
                    QVERIFY(e.submit(std::move(g)));
                    ++n_req;
                }
                const auto t0 = Clock::now();
                auto first = e.step();
                QVERIFY2(first, first.message().c_str());
                const auto t1 = Clock::now();
                QCOMPARE(first->record.prefill_tokens, n_req * kPrompt);  // every prompt in the first step
                int decoded = 0;
                while (e.has_work()) {
                    auto s = e.step();
                    QVERIFY2(s, s.message().c_str());
                    decoded += s->record.decode_tokens;
                }
                const auto t2 = Clock::now();
                QCOMPARE(decoded, n_req * (kGen - 1));  // the first token came with the prefill
                Speed sp;
                sp.prefill = n_req * kPrompt / std::chrono::duration<double>(t1 - t0).count();
                sp.decode = decoded / std::chrono::duration<double>(t2 - t1).count();
                speed[c].push_back(sp);
                e.remove_finished(0);
            }
        }
        nlohmann::json out = {{"model", model}, {"rounds", rounds}, {"prompt_tokens", kPrompt},
                              {"gen_tokens", kGen},  {"threads", eo.n_threads}, {"configs", nlohmann::json::array()}};
        std::printf("\n%-34s %26s %26s\n", "LoRA overhead (wall clock)", "prefill tok/s med (min..max)",
                    "decode tok/s med (min..max)");
        for (size_t c = 0; c < configs.size(); ++c) {
            std::vector<double> p, d;
            for (const Speed& s : speed[c]) p.push_back(s.prefill), d.push_back(s.decode);
            std::printf("%-34s %10.1f (%6.1f..%6.1f) %10.1f (%6.1f..%6.1f)\n", configs[c].name, median(p),
                        *std::min_element(p.begin(), p.end()), *std::max_element(p.begin(), p.end()), median(d),
                        *std::min_element(d.begin(), d.end()), *std::max_element(d.begin(), d.end()));
            out["configs"].push_back({{"name", configs[c].name}, {"prefill_tok_s", p}, {"decode_tok_s", d}});
        }
        std::ofstream(test::output_path("bench_lora.json")) << out.dump(2) << "\n";
    }
};

// Qt Test stops a test function after 300 s; five rounds on a loaded 2-core machine take longer.
int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QTEST_FUNCTION_TIMEOUT")) qputenv("QTEST_FUNCTION_TIMEOUT", "1800000");
    QCoreApplication app(argc, argv);
    BenchLora bench;
    QTEST_SET_MAIN_SOURCE_PATH
    return QTest::qExec(&bench, argc, argv);
}
#include "bench_lora.moc"
