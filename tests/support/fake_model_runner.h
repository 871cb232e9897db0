#pragma once
// A fake model runner for model-free scheduler tests (the way vLLM tests its scheduler):
// it owns a KVCacheManager and a Scheduler and plays the engine over a simulated KV cache.
// Every slot holds a fingerprint of the prefix that produced it, so a wrong prefix hit, a
// missed copy-on-write, a bad swap mapping or a lost token shows up as a request reading
// back KV that is not its own. Each step it performs the swap-outs, swap-ins and copies
// in the engine's order, writes the scheduled tokens through the block tables, reads
// every running request's KV back, and "samples" a token that hashes the request id and
// the KV it read (deterministic, so a preempted run must reproduce an unpreempted one).
// After every step it checks the scheduler's contract and the block accounting.
// It reports back through the engine's own Scheduler::update (tokens per chunk), and with
// max_drafts > 0 it also plays speculative decoding: drafts that are the fake model's own
// next tokens up to a random point and wrong after it, verified against what it "samples".
#include <QString>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/scheduler.h"

namespace kvs::test {

// Fingerprint of each prefix: fp[i] depends on tokens[0..i] (real KV depends on every
// earlier token). Never 0, the value of a slot that was never written.
std::vector<uint64_t> prefix_fingerprints(const std::vector<int32_t>& tokens);

// The block pool's invariants (free queue consistent, ref_cnt = number of tables holding
// the block, tables sized to their tokens); an empty string when all hold.
QString pool_invariants(const KVCacheManager& m);

struct FakeModelRunner {
    SchedulerConfig cfg;
    int bs = 0;
    int n_blocks = 0;
    std::unique_ptr<KVCacheManager> kv;
    std::unique_ptr<Scheduler> s;
    std::vector<std::vector<uint64_t>> dev;   // [n_blocks][bs] fingerprint per device slot
    std::vector<std::vector<uint64_t>> host;  // [n_host_blocks][bs] fingerprint per host slot
    SchedulerOutput last;                     // the latest step's output
    std::vector<RequestId> last_finished;     // what the latest update() finished
    bool sample_minus_one = false;            // report no token for sampled chunks (the engine appends)
    // Speculative decoding: before each step every running request that waits on a decode
    // gets 0..max_drafts drafts (set_spec_tokens); draft_rng picks how many and how many are right.
    int max_drafts = 0;
    std::mt19937 draft_rng{12345};
    int64_t spec_drafted = 0, spec_accepted = 0;  // draft tokens verified / accepted over the run
    // Seen over the run: most tokens in a step, most running at once, most chunks.
    int max_step_tokens = 0, max_running = 0, max_chunks = 0;
    int steps_with_mixed = 0;  // steps with a prefill chunk and a decode together

    FakeModelRunner(const SchedulerConfig& c, int n_blocks, int block_size, bool prefix_caching);

    // The token the fake model "samples" after reading KV whose last fingerprint is last_fp.
    static int32_t sample_token(RequestId id, uint64_t last_fp);
    // The next n tokens the fake model generates for a request after its tokens so far
    // (what drafts must be to be accepted).
    std::vector<int32_t> own_tokens(RequestId id, int n) const;

    // One engine step: drafts, schedule, swaps and copies, forward (write + read back),
    // sample and verify, update, then check_state(). Returns an empty string or what went wrong.
    QString step();
    // Between steps: what each request holds matches its state (device and host tiers).
    QString check_state() const;
    // Everything done: no request holds anything, every block and host block is free.
    QString check_drained() const;
    // Steps until nothing is unfinished (at most max_steps), then check_drained().
    QString run(int max_steps = 10000);

    std::vector<RequestId> chunk_ids() const;         // of the latest step, in batch order
    const ScheduledChunk* chunk(RequestId id) const;  // of the latest step, or nullptr

private:
    // Gives drafts to the requests that will decode next (max_drafts > 0).
    void propose_drafts();
    // The tokens chunk i produced: the fake model's token after the chunk's last position,
    // or for a chunk with drafts the accepted drafts then its own token (none with sample_minus_one).
    std::vector<int32_t> emit(const ScheduledChunk& c);
    // The step's limits: budget, max_num_seqs, nobody admitted in a step that preempted.
    QString check_limits(const SchedulerOutput& out, const std::set<RequestId>& was_running);
    // The engine's part: swap-outs, swap-ins, copies, then each chunk checked against its
    // request and written through its block table, then every running request reads back.
    // `drafts`: what each request carried into schedule() (the chunk's drafts must be a prefix).
    QString forward(const SchedulerOutput& out, const std::map<RequestId, std::vector<int32_t>>& drafts);
    // Reads the request's KV for positions [0, n) through `table` in `mem` and compares it
    // with its tokens (prompt, output, then the drafts it is verifying).
    QString read_back(const SchedRequest& r, const std::vector<int32_t>& table, int n,
                      const std::vector<std::vector<uint64_t>>& mem, const char* where) const;
};

}  // namespace kvs::test
