#pragma once
// The memory planner's sizing maths, without widgets:
//
//   per block    = block_size × KV bytes per token
//   per sequence = ceil(context / block_size) blocks        (paged: whole blocks)
//   KV           = batch × per sequence;   total = weights + KV + scratch
//
// and from the memory available, the largest batch, context and KV pool that fit; weight
// sizes from parameter counts and bits per weight; model presets; byte formatting.
//
// KV bytes per token (2 (K and V) × layers × the bytes of one token's K row of
// kv_heads × head_dim values in the cache's type) are NOT derived here: their one
// definition is the engine's kv_cache_bytes_per_token(ModelConfig, DType) in
// engine/kv_cache/kv_tensors.h, which the window, the CLI and /metrics all report, and ui/
// never includes engine headers. The number comes in from outside: plan() takes it, and
// MemoryPlannerView asks a KvBytesPerTokenFn that the app side sets.
#include <QString>
#include <QVector>
#include <functional>

namespace kvs::ui {

// KV bytes per token of a model shape: K and V of one token over all layers, for an F16
// cache (int8 false) or the engine's INT8 cache (Q8_0 blocks: 34 bytes per 32 values).
// The app passes the engine's kv_cache_bytes_per_token behind this signature.
using KvBytesPerTokenFn = std::function<qint64(int nLayer, int nKvHead, int headDim, bool int8)>;

struct MemoryInputs {
    int layers = 30;
    int kvHeads = 3;
    int headDim = 64;
    qint64 context = 2048;  // tokens per sequence
    qint64 batch = 1;       // sequences
    bool kvInt8 = false;    // KV cache type: F16, or INT8 (Q8_0 blocks with fp16 scales)
    int blockSize = 16;     // tokens per KV block
    qint64 weightBytes = 0;
    qint64 scratchBytes = 0;    // activations, logits, runtime: whatever else must fit
    qint64 availableBytes = 0;  // RAM or VRAM to fit into
};

struct MemoryPlan {
    bool valid = false;
    QString error;             // why not valid: names the input
    qint64 bytesPerToken = 0;  // as given (the engine's number)
    qint64 bytesPerBlock = 0;
    qint64 blocksPerSequence = 0;
    qint64 kvBytesPerSequence = 0;  // whole blocks
    qint64 kvBytes = 0;             // batch × per sequence
    qint64 kvBytesUnpaged = 0;      // batch × context × bytes per token (no block rounding)
    qint64 totalBytes = 0;          // weights + KV + scratch
    qint64 headroomBytes = 0;       // available - total (negative: over)
    bool fits = false;
    qint64 maxBlocks = 0;      // KV blocks that fit next to weights and scratch
    qint64 maxPoolTokens = 0;  // maxBlocks × block size
    qint64 maxBatch = 0;       // sequences of `context` tokens that fit
    qint64 maxContext = 0;     // tokens per sequence for `batch` sequences (whole blocks)
};

// A model's KV-relevant shape (values from its config.json) and weight size.
struct ModelPreset {
    QString name;
    int layers = 0;
    int kvHeads = 0;
    int headDim = 0;
    qint64 parameters = 0;        // for weights = parameters × bits per weight / 8
    QString weightFormat;         // default format (a name from weightFormats())
    qint64 knownWeightBytes = 0;  // measured size of that format's file, 0: compute
};

struct WeightFormat {
    QString name;
    double bitsPerWeight = 0;  // 0: "file size", typed by hand
};

struct MemorySizing {
    // The plan for `in` with kvBytesPerToken bytes of K and V per token (from a
    // KvBytesPerTokenFn for in's shape and type). Invalid, with an error naming the input,
    // for a non-positive shape, context, batch, block size or bytes per token, or a
    // negative size. Sizes saturate: a huge context says "too much", never wraps around.
    static MemoryPlan plan(const MemoryInputs& in, qint64 kvBytesPerToken);
    static QVector<ModelPreset> presets();
    static QVector<WeightFormat> weightFormats();
    static qint64 weightBytes(qint64 parameters, double bitsPerWeight);
    static qint64 addSaturated(qint64 a, qint64 b);  // non-negative sizes
    static QString formatBytes(qint64 bytes);        // "92 MiB", "22.5 KiB", "1.3 GiB"
};

}  // namespace kvs::ui
