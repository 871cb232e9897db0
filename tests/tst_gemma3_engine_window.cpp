// ctest-labels: unit engine model
// Gemma 3's sliding-window layers in the batching Engine (EngineOptions::free_out_of_window,
// engine/kv_cache/sliding_window_blocks.h): the local layers' K/V in a pool of their own whose
// blocks go back as they fall out of each request's window.
//  - a tiny random gemma3 model (window 8, layers 0 and 1 local, layer 2 global) runs five
//    requests at once (greedy ones, an n = 3 request forked copy-on-write, an n-gram
//    speculative one) through a main pool too small for all of them (preemption) and a small
//    local pool: every request's tokens equal the same request alone through SequenceRunner
//    and the same mix with nothing freed (one pool for every layer), and the same with swap
//    preemption asked for (it recomputes) and with room for everything; blocks are freed,
//    local copy-on-write copies happen, no request ever holds more local blocks than its
//    window and one step need, and the KV invariants (both pools) hold after every step;
//  - prefix caching: a hit is kept only as far as the local blocks its first query's window
//    reads are still cached (a later request takes them, from the free queue); once another
//    request's blocks have pushed them out, the same prompt gets no hit and is computed, with
//    the same tokens; a pool for every layer keeps the hit;
//  - the KV tiers: global-layer blocks evicted to the CPU tier come back as a prefix hit when
//    the local blocks are still cached, with the same tokens as alone;
//  - Gemma 3 270M (when installed): a five-turn chat past its 512-token window through the
//    Session's engine, the local layers' blocks in use bounded while the global layers' grow,
//    tokens identical to the run that frees nothing (numbers printed).
#include <QtTest>
#include <algorithm>
#include <map>
#include <tuple>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/runtime/session.h"
#include "engine/telemetry/snapshot.h"
#include "tests/support/greedy_alone.h"
#include "tests/support/greedy_params.h"
#include "tests/support/kv_invariants.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "tests/support/token_ids.h"

using namespace kvs;

namespace {

constexpr int kWindow = 8, kBlock = 8, kBudget = 16;

struct EngineSetup {
    bool freeing = true;
    int kv_blocks = 24;
    int local_blocks = 10;
    PreemptionMode preemption = PreemptionMode::recompute;
    int64_t cpu_tier_bytes = 0;
};

// What a run saw, step by step.
struct RunStats {
    int64_t freed = 0;              // local blocks freed out of the window
    int64_t preemptions = 0;        // the scheduler's count
    int64_t swap_outs = 0;          // requests swapped out
    int64_t swa_copies = 0;         // local-layer copy-on-write copies
    int max_local_per_request = 0;  // local blocks one request held at once
    int max_local_in_use = 0;
    int max_main_per_request = 0;
    QString error;  // the first broken invariant
};

SamplingParams sampled(int n, uint64_t seed) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.max_tokens = n;
    p.ignore_eos = true;
    return p;
}

// Steps until idle, checking both pools after every step.
RunStats run_checked(Engine& e) {
    RunStats st;
    for (int steps = 0; e.has_work() && steps < 5000; ++steps) {
        auto r = e.step();
        if (!r) {
            st.error = QString::fromStdString(r.message());
            return st;
        }
        st.swa_copies += static_cast<int64_t>(r->out.swa_copies.size());
        if (QString bad = test::kv_pool_invariants(e.kv_cache()); !bad.isEmpty()) {
            st.error = QString("step %1: %2").arg(steps).arg(bad);
            return st;
        }
        const KVCacheManager& kv = e.kv_cache();
        for (RequestId id : kv.request_ids()) {
            const auto& local = kv.swa_block_table(id);
            st.max_local_per_request =
                std::max(st.max_local_per_request,
                         int(std::count_if(local.begin(), local.end(), [](int32_t b) { return b >= 0; })));
            st.max_main_per_request = std::max(st.max_main_per_request, int(kv.block_table(id).size()));
        }
        if (const SlidingWindowBlocks* swa = kv.sliding_window())
            st.max_local_in_use = std::max(st.max_local_in_use, swa->n_in_use());
    }
    if (e.has_work()) st.error = "the engine did not finish in 5000 steps";
    if (const SlidingWindowBlocks* swa = e.kv_cache().sliding_window()) st.freed = swa->n_freed_total();
    st.preemptions = e.scheduler().counters().preemptions;
    st.swap_outs = e.scheduler().counters().swap_outs;
    return st;
}

}  // namespace

class TestGemma3EngineWindow : public QObject {
    Q_OBJECT
    std::shared_ptr<const Model> m_model;
    int m_vocab = 0;

    std::unique_ptr<Engine> make_engine(const EngineSetup& s) {
        EngineOptions o;
        o.n_threads = 2;
        o.backend = "cpu";  // gemma3's ops run on the CPU backend
        o.kv_blocks = s.kv_blocks;
        o.block_size = kBlock;
        o.free_out_of_window = s.freeing;
        o.local_kv_blocks = s.local_blocks;
        o.max_model_len = 256;
        o.scheduler.max_num_batched_tokens = kBudget;
        o.scheduler.max_num_seqs = 8;
        o.scheduler.preemption = s.preemption;
        o.scheduler.n_host_blocks = s.preemption == PreemptionMode::swap ? 64 : 0;
        o.kv_cpu_tier_bytes = s.cpu_tier_bytes;
        auto e = Engine::create(m_model, nullptr, o);
        if (!e) qFatal("Engine::create: %s", e.message().c_str());
        return std::move(*e);
    }

    std::unique_ptr<SequenceRunner> runner() {
        RunnerOptions ro;
        ro.n_ctx = 256;
        ro.n_batch = 32;
        ro.block_size = kBlock;
        ro.n_threads = 2;
        ro.backend = "cpu";
        auto r = SequenceRunner::create(m_model, ro);
        if (!r) qFatal("SequenceRunner::create: %s", r.message().c_str());
        return std::move(*r);
    }
    std::vector<int32_t> greedy_alone(const std::vector<int32_t>& prompt, int n) {
        return test::greedy_alone(*runner(), m_vocab, prompt, n);
    }
    std::vector<int32_t> sampled_alone(const std::vector<int32_t>& prompt, const SamplingParams& p) {
        return test::sampled_alone(*runner(), m_vocab, prompt, p, p.max_tokens);
    }

    // The mix of five requests (seven sequences): id -> (prompt, params, expected alone).
    struct Job {
        std::vector<int32_t> prompt;
        SamplingParams params;
        std::vector<int32_t> alone;
    };
    std::map<RequestId, Job> m_jobs;

    void submit_mix(Engine& e) {
        for (RequestId id : {1, 2, 3, 5}) {
            const Job& j = m_jobs.at(id);
            GenerationRequest g;
            g.prompt = j.prompt;
            g.params = j.params;
            if (id == 5) {  // drafts from the context: rejected ones roll both tables back
                g.spec.proposer = "ngram";
                g.spec.k = 3;
            }
            auto got = e.submit(std::move(g), id);
            if (!got) qFatal("submit %lld: %s", static_cast<long long>(id), got.message().c_str());
        }
        GenerationRequest g;  // n = 3: ids 4, 6, 7 fork from 4's prompt copy-on-write
        g.prompt = m_jobs.at(4).prompt;
        g.params = m_jobs.at(4).params;
        g.choices.push_back({6, m_jobs.at(6).params.seed, {}});
        g.choices.push_back({7, m_jobs.at(7).params.seed, {}});
        auto got = e.submit(std::move(g), 4);
        if (!got) qFatal("submit 4: %s", got.message().c_str());
    }

private Q_SLOTS:
    void initTestCase() {
        test::TinyModelSpec spec;
        spec.arch = "gemma3";
        spec.n_layer = 3;
        spec.n_embd = 64;
        spec.n_head = 4;
        spec.n_kv_head = 2;
        spec.n_ff = 128;
        spec.sliding_window = kWindow;
        spec.swa_pattern = 3;  // layers 0, 1 local; 2 global
        spec.weight_std = 0.2f;
        auto m = test::write_and_load_tiny_gguf(test::output_path("tiny_gemma3_engine_window.gguf"), spec);
        QVERIFY2(m, m.message().c_str());
        m_model = *m;
        m_vocab = m_model->config.n_vocab;
        QCOMPARE(m_model->config.layer_swa, (std::vector<uint8_t>{1, 1, 0}));

        std::vector<int32_t> repeating;  // for prompt lookup: a phrase said three times
        for (int k = 0; k < 3; ++k)
            for (int32_t t : test::random_tokens(8, m_vocab, 5)) repeating.push_back(t);
        m_jobs[1] = {test::random_tokens(13, m_vocab, 10), test::greedy(45), {}};
        m_jobs[2] = {test::random_tokens(30, m_vocab, 11), test::greedy(40), {}};
        m_jobs[3] = {test::random_tokens(5, m_vocab, 12), test::greedy(50), {}};
        m_jobs[4] = {test::random_tokens(21, m_vocab, 13), sampled(30, 400), {}};  // 21: a partial last block
        m_jobs[6] = {m_jobs[4].prompt, sampled(30, 401), {}};
        m_jobs[7] = {m_jobs[4].prompt, sampled(30, 402), {}};
        m_jobs[5] = {repeating, test::greedy(30), {}};
        for (auto& [id, j] : m_jobs)
            j.alone = j.params.temperature > 0 ? sampled_alone(j.prompt, j.params)
                                               : greedy_alone(j.prompt, j.params.max_tokens);
    }

    // The mix, four ways: freeing with preemption, nothing freed, swap asked for, room for all.
    void mixedBatchMatchesAloneAndUnfreed_data() {
        QTest::addColumn<bool>("freeing");
        QTest::addColumn<int>("kvBlocks");
        QTest::addColumn<int>("localBlocks");
        QTest::addColumn<bool>("swap");
        QTest::addColumn<bool>("expectPreemption");
        QTest::newRow("freed, small pools (preemption)") << true << 24 << 10 << false << true;
        QTest::newRow("nothing freed, one pool (preemption)") << false << 24 << 0 << false << true;
        QTest::newRow("freed, swap asked (recomputes)") << true << 24 << 10 << true << true;
        QTest::newRow("freed, only the local pool small (preemption)") << true << 200 << 6 << false << true;
        QTest::newRow("freed, room for all") << true << 200 << 64 << false << false;
    }
    void mixedBatchMatchesAloneAndUnfreed() {
        QFETCH(bool, freeing);
        QFETCH(int, kvBlocks);
        QFETCH(int, localBlocks);
        QFETCH(bool, swap);
        QFETCH(bool, expectPreemption);
        auto e = make_engine({freeing, kvBlocks, localBlocks, swap ? PreemptionMode::swap : PreemptionMode::recompute});
        QCOMPARE(e->kv_cache().sliding_window() != nullptr, freeing);
        submit_mix(*e);
        const RunStats st = run_checked(*e);
        QVERIFY2(st.error.isEmpty(), qPrintable(st.error));
        for (const auto& [id, j] : m_jobs)
            QVERIFY2(e->output_tokens(id) == j.alone, qPrintable(QString("request %1 differs from alone").arg(id)));
        if (expectPreemption) QVERIFY2(st.preemptions > 0, "the small pool preempted nobody");
        QCOMPARE(st.swap_outs, int64_t(0));  // local blocks are never swapped: recompute
        const SlidingWindowBlocks* swa = e->kv_cache().sliding_window();
        if (freeing) {
            QVERIFY2(st.freed >= 20, qPrintable(QString("only %1 local blocks freed").arg(st.freed)));
            // Every copy-on-write copy of a shared partial block is made in both pools (under
            // preemption the forks may have been preempted first: then nobody writes a shared block).
            const int64_t main_copies = e->scheduler().counters().cow_copies;
            QCOMPARE(st.swa_copies, main_copies);
            if (!expectPreemption) QVERIFY2(st.swa_copies >= 2, qPrintable(QString::number(st.swa_copies)));
            // A request holds its window and one step's tokens at most; the global layers keep all.
            QVERIFY2(st.max_local_per_request <= swa->max_blocks_per_request(kBudget),
                     qPrintable(QString("a request held %1 local blocks").arg(st.max_local_per_request)));
            QVERIFY(st.max_main_per_request >= (5 + 50 - 1 + kBlock - 1) / kBlock);
            QVERIFY(st.max_local_in_use <= swa->n_blocks());
            const EngineSnapshot snap = e->snapshot(StepRecord{});
            QCOMPARE(snap.total_freed_blocks, st.freed);
            QCOMPARE(int(snap.local_blocks.size()), swa->n_blocks());
            QCOMPARE(snap.n_local_layers, 2);
            QCOMPARE(snap.sliding_window, kWindow);
            int freed_cells = 0;
            for (const BlockView& b : snap.local_blocks) freed_cells += b.state == BlockSlotState::freed ? 1 : 0;
            QVERIFY2(freed_cells > 0, "no local block shows as freed");
            qInfo(
                "%s: %lld local blocks freed, %lld preemptions, %lld local CoW copies, at most %d local blocks per "
                "request (%d main), %d of %d local blocks in use at most",
                QTest::currentDataTag(), static_cast<long long>(st.freed), static_cast<long long>(st.preemptions),
                static_cast<long long>(st.swa_copies), st.max_local_per_request, st.max_main_per_request,
                st.max_local_in_use, swa->n_blocks());
        } else {
            QVERIFY(swa == nullptr);
            QVERIFY(e->snapshot(StepRecord{}).local_blocks.empty());
        }
    }

    // A prefix hit needs the local blocks its first query's window reads.
    void prefixHitOnlyWithCachedLocalBlocks() {
        const auto p = test::random_tokens(40, m_vocab, 21);
        const auto y = test::cat(p, {5, 6, 7});
        const auto want = greedy_alone(y, 10);
        const auto z = test::random_tokens(60, m_vocab, 22);
        for (bool freeing : {true, false}) {
            auto e = make_engine({freeing, 200, freeing ? 16 : 0});
            auto run = [&](RequestId id, const std::vector<int32_t>& prompt, int n) {
                GenerationRequest g;
                g.prompt = prompt;
                g.params = test::greedy(n);
                if (!e->submit(std::move(g), id)) qFatal("submit");
                const RunStats st = run_checked(*e);
                if (!st.error.isEmpty()) qFatal("%s", qPrintable(st.error));
                return e->scheduler().request(id)->num_cached_tokens;
            };
            run(1, p, 4);
            const int hit1 = run(2, y, 10);
            QCOMPARE(e->output_tokens(2), want);
            run(3, z, 100);  // its 20 local blocks push every cached local block out of a pool of 16
            const int hit2 = run(4, y, 10);
            QCOMPARE(e->output_tokens(4), want);
            QCOMPARE(hit1, 40);  // five full blocks; the window of position 40 reads block 4, still cached
            QCOMPARE(hit2, freeing ? 0 : 40);
            qInfo("%s: prefix hit %d tokens while the local blocks are cached, %d after they were pushed out",
                  freeing ? "freed" : "one pool", hit1, hit2);
        }
    }

    // Global-layer blocks come back from the CPU tier when the local blocks are still cached.
    void tierHitWithCachedLocalBlocks() {
        auto e = make_engine({true, 12, 40, PreemptionMode::recompute, 4 << 20});
        const auto p = test::random_tokens(40, m_vocab, 31);
        const auto y = test::cat(p, {9, 10, 11});
        for (auto [id, prompt, n] : std::vector<std::tuple<RequestId, std::vector<int32_t>, int>>{
                 {1, p, 4}, {2, test::random_tokens(60, m_vocab, 32), 30}, {3, y, 10}}) {
            GenerationRequest g;
            g.prompt = prompt;
            g.params = test::greedy(n);
            QVERIFY(e->submit(std::move(g), id));
            const RunStats st = run_checked(*e);
            QVERIFY2(st.error.isEmpty(), qPrintable(st.error));
        }
        QCOMPARE(e->output_tokens(3), greedy_alone(y, 10));
        const KVCacheStats s = e->kv_cache().stats();
        QVERIFY2(s.cpu_hit_tokens >= kBlock, qPrintable(QString("%1 tokens from the CPU tier").arg(s.cpu_hit_tokens)));
        QCOMPARE(e->scheduler().request(3)->num_cached_tokens, 40);
    }

    // Gemma 3 270M: a chat growing past the 512-token window, turn by turn.
    void gemma3_270mChatPastItsWindow() {
        const std::string path = test::gemma3_model_path();
        if (path.empty()) QSKIP("Gemma 3 270M is not installed (installer/fetch_model.sh gemma3-270m)");
        auto session = Session::open(path);
        QVERIFY2(session, session.message().c_str());
        const Session& s = **session;
        QCOMPARE(s.model().config.sliding_window, 512);
        const char* para =
            "A key-value cache keeps the keys and values of every earlier token so that each new token only "
            "computes its own. Paged attention cuts that cache into blocks of sixteen tokens and hands them out "
            "as a sequence grows, the way an operating system hands out pages of memory. ";
        constexpr int kTurns = 5;
        std::vector<ChatMessage> chat;
        std::vector<std::vector<int32_t>> outputs[2];
        struct Turn {
            int prompt = 0, hit = 0, local_max = 0, main_used = 0;
            int decode_local = 0, decode_main = 0;  // the most in use during decode-only steps
        };
        std::vector<Turn> turns[2];
        int64_t freed = 0;
        int n_local = 0;
        // Bytes of one block of the local layers, of the global ones, of every layer.
        const ModelConfig& c = s.model().config;
        int n_local_layers = 0;
        for (int il = 0; il < c.n_layer; ++il) n_local_layers += c.is_swa(il) ? 1 : 0;
        ModelConfig local_cfg = c, global_cfg = c;
        local_cfg.n_layer = n_local_layers;
        global_cfg.n_layer = c.n_layer - n_local_layers;
        const int64_t local_block_bytes = kv_cache_bytes_per_token(local_cfg, DType::F16) * 16;
        const int64_t global_block_bytes = kv_cache_bytes_per_token(global_cfg, DType::F16) * 16;
        const int64_t all_block_bytes = kv_cache_bytes_per_token(c, DType::F16) * 16;
        for (int freeing = 1; freeing >= 0; --freeing) {
            EngineOptions o;
            o.backend = "cpu";
            o.n_threads = 2;
            o.max_model_len = 2048;
            o.scheduler.max_num_batched_tokens = 256;
            o.scheduler.max_num_seqs = 4;
            o.free_out_of_window = freeing == 1;
            auto e = s.make_engine(o, false);
            QVERIFY2(e, e.message().c_str());
            Engine& eng = **e;
            chat.clear();
            std::vector<int32_t> reply;
            for (int t = 0; t < kTurns; ++t) {
                if (t > 0) chat.push_back({"assistant", s.decode(reply, true)});
                std::string user = "Turn " + std::to_string(t + 1) + ". ";
                for (int k = 0; k < 4; ++k) user += para;
                user += "In one sentence: why does a sliding window bound the cache?";
                chat.push_back({"user", user});
                GenerationRequest g;
                g.prompt = s.encode_chat(chat);
                g.params = test::greedy(24);
                const RequestId id = t + 1;
                QVERIFY(eng.submit(std::move(g), id));
                Turn turn;
                turn.prompt = int(s.encode_chat(chat).size());
                while (eng.has_work()) {
                    auto r = eng.step();
                    QVERIFY2(r, r.message().c_str());
                    if (const SlidingWindowBlocks* swa = eng.kv_cache().sliding_window())
                        turn.local_max = std::max(turn.local_max, swa->n_in_use());
                    const int main_now = eng.kv_cache().n_blocks() - eng.kv_cache().num_free_blocks();
                    turn.main_used = std::max(turn.main_used, main_now);
                    if (r->ran && r->out.num_prefill_tokens == 0) {
                        turn.decode_main = std::max(turn.decode_main, main_now);
                        if (const SlidingWindowBlocks* swa = eng.kv_cache().sliding_window())
                            turn.decode_local = std::max(turn.decode_local, swa->n_in_use());
                    }
                }
                turn.hit = eng.scheduler().request(id)->num_cached_tokens;
                reply = eng.output_tokens(id);
                outputs[freeing].push_back(reply);
                turns[freeing].push_back(turn);
            }
            QCOMPARE(eng.block_size(), 16);
            if (const SlidingWindowBlocks* swa = eng.kv_cache().sliding_window()) {
                freed = swa->n_freed_total();
                n_local = swa->n_blocks();
            }
        }
        QCOMPARE(outputs[1], outputs[0]);
        QVERIFY2(turns[1].back().prompt > 512,
                 qPrintable(QString("the chat is %1 tokens").arg(turns[1].back().prompt)));
        QVERIFY(freed > 0);
        const int window_blocks = (512 - 1 + 256 + 15) / 16 + 1;  // one request: window and one step
        const int decode_blocks = (512 - 1 + 1 + 15) / 16 + 1;    // decoding: the window and the next block
        for (const Turn& turn : turns[1]) {
            QVERIFY2(turn.local_max <= window_blocks, qPrintable(QString::number(turn.local_max)));
            QVERIFY2(turn.decode_local <= decode_blocks, qPrintable(QString::number(turn.decode_local)));
        }
        QVERIFY(turns[1].back().decode_main > decode_blocks);  // the global layers keep growing
        const double mib = 1 << 20;
        for (int t = 0; t < kTurns; ++t) {
            const Turn& f = turns[1][size_t(t)];
            const Turn& o = turns[0][size_t(t)];
            qInfo(
                "Gemma 3 270M turn %d: prompt %d tokens, prefix hit %d (one pool: %d); KV blocks in use at most: "
                "local layers %d (%.2f MiB) + global layers %d (%.2f MiB) = %.2f MiB; one pool for all layers: %d "
                "blocks (%.2f MiB); decoding: local %d + global %d blocks (one pool %d)",
                t + 1, f.prompt, f.hit, o.hit, f.local_max, f.local_max * double(local_block_bytes) / mib, f.main_used,
                f.main_used * double(global_block_bytes) / mib,
                (f.local_max * double(local_block_bytes) + f.main_used * double(global_block_bytes)) / mib, o.main_used,
                o.main_used * double(all_block_bytes) / mib, f.decode_local, f.decode_main, o.decode_main);
        }
        qInfo("Gemma 3 270M: %lld local blocks freed out of the window over %d turns; local pool %d blocks",
              static_cast<long long>(freed), kTurns, n_local);
    }
};

QTEST_GUILESS_MAIN(TestGemma3EngineWindow)
#include "tst_gemma3_engine_window.moc"
