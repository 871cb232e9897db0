#pragma once
// What the views draw: plain Qt-side data, filled by app/view_convert from the engine's
// telemetry snapshots (engine/telemetry/snapshot.h). The ui/ library never includes
// engine headers; widgets take these structs and nothing else, so each view can be
// tested and screenshotted from a recorded snapshot.
#include <QString>
#include <QVector>
#include <QtGlobal>

namespace kvs::ui {

// ---- KV block map ---------------------------------------------------------------------

enum class BlockState { Free, Used, Cached, Swapped };  // Cached: free but findable by prefix hash

struct BlockCell {
    int id = 0;
    BlockState state = BlockState::Free;
    int refCount = 0;             // > 1: shared (prefix or copy-on-write fork)
    QVector<qint64> owners;       // request ids whose block table holds it, sorted
    int filled = 0;               // token slots written (0..blockSize)
    bool hashed = false;          // registered in the prefix cache
};

struct HostCell {                 // one occupied block of the CPU swap tier
    int hostBlock = 0;
    qint64 owner = 0;
};

// ---- requests / batch slots ---------------------------------------------------------

// What a request did in one step (the slot timeline's cell colour).
enum class SlotState { Waiting, Prefill, Decode, Padding, Preempted, Swapped, Finished };

struct RequestRow {
    qint64 id = 0;
    QString label;                // e.g. "chat 2" or "req 17"
    QString status;               // "waiting", "running", "swapped", "finished"
    SlotState slot = SlotState::Waiting;  // this step's activity
    int priority = 0;
    int promptTokens = 0;
    int outputTokens = 0;
    int maxTokens = 0;
    int computedTokens = 0;       // tokens whose KV is cached
    int cachedTokens = -1;        // prefix-cache hit when first scheduled (-1: not yet)
    QVector<int> blockIds;        // block table, in position order
    int hostBlocks = 0;           // while swapped
    int preemptions = 0;
    int scheduledTokens = 0;      // tokens run for it this step
};

// ---- one engine step ----------------------------------------------------------------

struct StepPoint {
    qint64 step = 0;
    double tStartMs = 0;          // since engine start
    double durationMs = 0;
    int prefillTokens = 0;
    int decodeTokens = 0;
    int paddingTokens = 0;        // static batching: seats of finished requests
    int tokenBudget = 0;
    int nSeqs = 0;                // requests in the batch
    int maxSeqs = 0;              // seats (max_num_seqs)
    int preemptions = 0;
    int swapOutBlocks = 0;
    int swapInBlocks = 0;
    int cowCopies = 0;
    int prefixHitTokens = 0;
    int running = 0, waiting = 0, swapped = 0;
    int blocksUsed = 0, blocksCached = 0, nBlocks = 0;
    double kvUsage = 0;           // blocksUsed / nBlocks
    double internalWaste = 0;     // 1 - tokens in KV / slots of used blocks
    int batchTokens() const { return prefillTokens + decodeTokens + paddingTokens; }
};

// The whole observable state after one step: what the block map, slot table and
// request list show.
struct EngineFrame {
    StepPoint step;
    int blockSize = 16;
    int maxModelLen = 0;          // the contiguous baseline reserves this per request
    QVector<BlockCell> blocks;    // [nBlocks], by id
    QVector<HostCell> hostBlocks; // occupied host blocks
    int nHostBlocks = 0;
    QVector<RequestRow> requests; // every known request, by id
    double prefixHitRate = 0;
    qint64 totalPreemptions = 0;
    qint64 totalGeneratedTokens = 0;
};

// ---- metrics over time ----------------------------------------------------------------

struct MetricsPoint {
    double tMs = 0;               // since engine start
    double tokPerS = 0;           // output tokens per second over the window
    double ttftP50Ms = 0, ttftP99Ms = 0;
    double tpotP50Ms = 0, tpotP99Ms = 0;
    qint64 weightBytes = 0, kvBytes = 0, scratchBytes = 0;
};

}  // namespace kvs::ui
