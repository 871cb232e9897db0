#pragma once
// What the views draw: plain Qt-side data, filled by app/view_convert from the engine's
// telemetry snapshots (engine/telemetry/snapshot.h). The ui/ library never includes
// engine headers; widgets take these structs and nothing else, so each view can be
// tested and screenshotted from a recorded snapshot.
#include <QString>
#include <QVector>
#include <QtGlobal>

#include "ui/roofline_types.h"

namespace kvs::ui {

// ---- KV block map ---------------------------------------------------------------------

// Cached: free but findable by prefix hash. Freed: free again because a request that goes on
// gave it back (KV eviction compacted its cache; the sliding window moved past it).
enum class BlockState { Free, Used, Cached, Swapped, Freed };

struct BlockCell {
    int id = 0;
    BlockState state = BlockState::Free;
    int refCount = 0;        // > 1: shared (prefix or copy-on-write fork)
    QVector<qint64> owners;  // request ids whose block table holds it, sorted
    int filled = 0;          // token slots written (0..blockSize)
    bool hashed = false;     // registered in the prefix cache
};

struct HostCell {  // one occupied block of the CPU swap tier
    int hostBlock = 0;
    qint64 owner = 0;
};

// ---- requests / batch slots ---------------------------------------------------------

// What a request did in one step (the slot timeline's cell colour).
enum class SlotState { Waiting, Prefill, Decode, Padding, Preempted, Swapped, Finished };

struct RequestRow {
    qint64 id = 0;
    QString label;                        // e.g. "chat 2" or "req 17"
    QString status;                       // "waiting", "running", "swapped", "finished"
    SlotState slot = SlotState::Waiting;  // this step's activity
    int priority = 0;
    int promptTokens = 0;
    int outputTokens = 0;
    int maxTokens = 0;
    int computedTokens = 0;  // tokens whose KV is cached
    int cachedTokens = -1;   // prefix-cache hit when first scheduled (-1: not yet)
    QVector<int> blockIds;   // block table, in position order
    int hostBlocks = 0;      // while swapped
    int preemptions = 0;
    int scheduledTokens = 0;  // tokens run for it this step
    QString adapter;          // the LoRA adapter it runs with ("": the base model)
    // The sliding-window layers' table beside it, entry for entry (-1: the block fell out of
    // the window and was freed); empty when one pool holds every layer.
    QVector<int> localBlockIds;
    // A watermarked request (TGI's green-list watermark): its output tokens that are in the
    // green list their predecessor seeds, of outputTokens; -1 when it is not watermarked.
    int greenTokens = -1;
    // KV eviction ("h2o:512", "" : none): cache entries now (of computedTokens), dropped or
    // merged so far, blocks given back; the logical position of each cache entry, in cache order.
    QString kvEviction;
    int kvBudget = 0;
    int kvEntries = 0;
    qint64 kvEvicted = 0;
    qint64 kvFreedBlocks = 0;
    QVector<int> kvEntryPos;
};

// ---- one engine step ----------------------------------------------------------------

struct StepPoint {
    qint64 step = 0;
    double tStartMs = 0;  // since engine start
    double durationMs = 0;
    int prefillTokens = 0;
    int decodeTokens = 0;
    int paddingTokens = 0;  // static batching: seats of finished requests
    int tokenBudget = 0;
    int nSeqs = 0;    // requests in the batch
    int maxSeqs = 0;  // seats (max_num_seqs)
    int preemptions = 0;
    int swapOutBlocks = 0;
    int swapInBlocks = 0;
    int cowCopies = 0;
    int prefixHitTokens = 0;
    int running = 0, waiting = 0, swapped = 0;
    int blocksUsed = 0, blocksCached = 0, nBlocks = 0;
    double kvUsage = 0;        // blocksUsed / nBlocks
    double internalWaste = 0;  // 1 - tokens in KV / slots of used blocks
    int batchTokens() const { return prefillTokens + decodeTokens + paddingTokens; }
};

// The whole observable state after one step: what the block map, slot table and
// request list show.
// The KV tiers below the device pool (engine/kv_cache/kv_tiers.h); enabled false: none.
struct KvTierRow {
    bool enabled = false;
    qint64 cpuBytes = 0, cpuLimitBytes = 0;  // limit 0: no CPU tier
    int cpuBlocks = 0;
    qint64 diskBytes = 0, diskLimitBytes = 0;  // limit 0: no disk store
    int diskBlocks = 0;
    qint64 deviceHitTokens = 0, cpuHitTokens = 0, diskHitTokens = 0;  // prefix hits by tier since start
    qint64 spilledBlocks = 0;  // evicted device blocks handed to the tiers
    qint64 badFiles = 0;       // damaged or foreign block files skipped
    QString diskFolder;
};

struct EngineFrame {
    StepPoint step;
    int blockSize = 16;
    int maxModelLen = 0;           // the contiguous baseline reserves this per request
    QVector<BlockCell> blocks;     // [nBlocks], by id
    QVector<HostCell> hostBlocks;  // occupied host blocks
    int nHostBlocks = 0;
    QVector<RequestRow> requests;  // every known request, by id
    double prefixHitRate = 0;
    qint64 totalPreemptions = 0;
    qint64 totalGeneratedTokens = 0;
    KvTierRow tiers;  // the CPU tier and disk store under the pool
    RooflineFrame roofline;  // the engine's timed steps, per op (ui/roofline_types.h)
    // Sliding-window layers in a pool of their own (gemma3's local layers): that pool's blocks
    // by id (owners from RequestRow::localBlockIds; `blocks` then holds the global layers),
    // the window, the model's local and total layers, and the local blocks freed out of the
    // window since the engine started. Empty / 0 when one pool holds every layer.
    QVector<BlockCell> localBlocks;
    int slidingWindow = 0;
    int nLocalLayers = 0, nLayers = 0;
    qint64 freedBlocksTotal = 0;
};

// ---- metrics over time ----------------------------------------------------------------

struct MetricsPoint {
    double tMs = 0;      // since engine start
    double tokPerS = 0;  // output tokens per second over the window
    double ttftP50Ms = 0, ttftP99Ms = 0;
    double tpotP50Ms = 0, tpotP99Ms = 0;
    qint64 weightBytes = 0, kvBytes = 0, scratchBytes = 0;
};

// ---- speculative decoding ----------------------------------------------------------------

// What happened to a token of a speculative request (engine/telemetry/spec_stats.h).
enum class TokenFate {
    Plain,      // an ordinary decode (no drafts that step)
    Accepted,   // a draft token the target kept
    Corrected,  // the target's own token at the first rejected position
    Bonus,      // the target's extra token after a fully accepted draft
    Rejected,   // a draft token refused: not part of the output
    Discarded,  // a draft after the rejection, never judged: not part of the output
};

struct FateToken {
    QString text;  // the token's piece of text
    TokenFate fate = TokenFate::Plain;
    int draftPos = 0;  // 1..k for draft tokens, 0 otherwise
    qint64 step = 0;   // engine step
};

// One speculative request. Counts as in engine/telemetry/spec_stats.h: evaluated = drafts
// the acceptance rule judged (up to and including the first rejection).
struct SpecRequestFrame {
    qint64 id = 0;
    QString label;     // e.g. "chat 2"
    QString proposer;  // "prompt lookup", "layer-skip:10", "int4", ...
    int k = 0;         // drafts per step asked for (the start when adaptive)
    bool adaptive = false;
    bool finished = false;
    qint64 verifySteps = 0, drafted = 0, evaluated = 0, accepted = 0, discarded = 0, bonus = 0, emitted = 0;
    qint64 sumK = 0;                  // drafts summed over verify steps
    QVector<qint64> posEvaluated;     // [k_max] by draft position (index 0 = position 1)
    QVector<qint64> posAccepted;      // [k_max]
    QVector<qint64> acceptedLenHist;  // [k_max + 1] verify steps by drafts accepted
    double draftMs = 0, verifyMs = 0;
    QVector<FateToken> tokens;  // in order, the newest few thousand
    double decodeTokPerS = 0;   // 0: not measured yet
    bool decodeSolo = true;     // no other request shared its decode steps

    double alpha() const { return evaluated ? double(accepted) / double(evaluated) : 0.0; }
    double meanAccepted() const { return verifySteps ? double(accepted) / double(verifySteps) : 0.0; }
    double tokensPerPass() const { return verifySteps ? double(emitted) / double(verifySteps) : 0.0; }
    double meanK() const { return verifySteps ? double(sumK) / double(verifySteps) : 0.0; }
};

struct SpecFrame {
    qint64 step = -1;
    QVector<SpecRequestFrame> requests;  // by id
    // The plain decode speed measured in this session (0: none yet): the last finished
    // request without drafts that decoded alone.
    double baselineTokPerS = 0;
    QString baselineLabel;
};

// ---- quantization compare ----------------------------------------------------------------

// What the user asked the quantization compare view to run.
struct QuantCompareRequest {
    QString scheme;  // a QuantScheme spelling: "q4_0", "int8", "int4-awq", ...
    QString prompt;  // the user message (the chat template is applied to it)
    int maxTokens = 64;
    double temperature = 0;  // 0: greedy; > 0: both sides sample with the same seed
    qint64 seed = 1;
};

// One model of the comparison: its honest label and its memory.
struct QuantSideInfo {
    QString label;             // e.g. "reference (Q4_1 dequantized to F32)", "Q4_0 (RTN)"
    qint64 weightBytes = 0;    // all weights as held in memory
    double bitsPerWeight = 0;  // the per-layer linears only (what a scheme changes)
};

// One generated position of both models (engine/quant/side_by_side.h SideBySideEvent).
struct QuantTokenEvent {
    int index = 0;  // 0-based generated position
    qint32 refToken = -1, variantToken = -1;
    QString refPiece, variantPiece;   // text that became safe to show at this position
    double kl = 0;                    // KL(reference || variant) in nats
    bool top1Agree = false;           // the two argmaxes are the same token
    bool diverged = false;            // the picks differ here or earlier
    bool teacherForced = false;       // the variant was fed reference tokens it did not pick
    double refMs = 0, variantMs = 0;  // the forward pass that made this position's logits (index 0: the prompt's)
};

}  // namespace kvs::ui
