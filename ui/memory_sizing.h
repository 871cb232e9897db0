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
    int heads = 0;                // query heads (num_attention_heads); 0: as many as kvHeads
};

// ---- attention variants and tensor parallelism ------------------------------------------
//
// The same model with MHA (kv_heads = heads), GQA (kv_heads = heads / group) and MQA
// (kv_heads = 1), and split over tp GPUs as Megatron-LM does (Shoeybi et al. 2019, §3):
// attention heads and FFN columns divided among the GPUs, so weights per GPU = weights / tp
// (the embedding and head split by vocabulary too); a GPU keeps the KV of its own KV heads,
// ceil(kv_heads / tp) of them (with fewer KV heads than GPUs each head is replicated, as
// vLLM does); two all-reduces per layer (after attention's output projection and after the
// FFN's down projection), each over one hidden-size activation per token:
//   all-reduced per token      = 2 x layers x hidden x activation bytes
//   sent per GPU per token     = that x 2 (tp - 1) / tp      (ring all-reduce: reduce-scatter
//                                                             then all-gather, each (tp-1)/tp)
// hidden = heads x head_dim.

struct ParallelInputs {
    int heads = 32;           // query heads
    int group = 8;            // GQA: query heads per KV head
    int tp = 1;               // tensor-parallel degree (GPUs)
    int activationBytes = 2;  // FP16 / BF16 activations
};

struct AttentionVariant {
    QString name;  // "MHA", "GQA-8", "MQA"
    int kvHeads = 0;
    qint64 bytesPerToken = 0;       // the engine's number for this shape
    qint64 kvBytesPerSequence = 0;  // whole blocks of `context` tokens
    qint64 kvBytes = 0;             // x batch
    int kvHeadsPerGpu = 0;          // ceil(kvHeads / tp)
    qint64 kvBytesPerGpu = 0;       // the batch's KV that one GPU holds
};

struct ParallelPlan {
    bool valid = false;
    QString error;                      // why not: names the input
    QVector<AttentionVariant> variants;  // MHA, GQA, MQA
    qint64 hidden = 0;                  // heads x head_dim
    qint64 weightBytesPerGpu = 0;
    qint64 allReduceBytesPerToken = 0;   // 2 x layers x hidden x activation bytes
    qint64 ringBytesPerGpuPerToken = 0;  // x 2 (tp - 1) / tp
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
    static QString formatDecimalBytes(qint64 bytes);  // "1.07 GB", "512 kB" (powers of 1000)
    // Where the weights and KV go, as the memory estimate names it: "GPU VRAM (NVIDIA H100 80GB HBM3:
    // 70.1 GiB free of 79.6 GiB)" on a GPU, "CPU RAM (23.5 GiB)" otherwise ("CPU RAM (size unknown)"
    // for 0 bytes).
    static QString memoryTargetText(bool gpu, const QString& device, qint64 freeBytes, qint64 totalBytes);
    // MHA / GQA / MQA and the tensor-parallel split for in's layers, head dim, context,
    // batch, block size, KV type and weights; bytes per token from kvBytesPerToken (the
    // engine's definition). Invalid when heads < 1, the group does not divide the heads, tp < 1.
    static ParallelPlan parallel(const MemoryInputs& in, const ParallelInputs& p,
                                 const KvBytesPerTokenFn& kvBytesPerToken);
};

}  // namespace kvs::ui
