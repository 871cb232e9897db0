#include "ui/memory_sizing.h"

#include <cmath>
#include <limits>

namespace kvs::ui {

namespace {

constexpr qint64 kMiB = qint64(1) << 20;
constexpr qint64 kMax = std::numeric_limits<qint64>::max();

// Saturating product of non-negative sizes.
qint64 satMul(qint64 a, qint64 b) {
    if (a == 0 || b == 0) return 0;
    return a > kMax / b ? kMax : a * b;
}

// The first input that is out of range, as an error message; empty when all are fine.
QString checkInputs(const MemoryInputs& in, qint64 kvBytesPerToken) {
    const struct {
        qint64 value;
        const char* what;
    } positive[] = {{in.layers, "layers"},   {in.kvHeads, "KV heads"}, {in.headDim, "head dim"},
                    {in.context, "context"}, {in.batch, "batch"},      {in.blockSize, "block size"}};
    for (const auto& f : positive)
        if (f.value <= 0)
            return QStringLiteral("%1 must be at least 1 (got %2)").arg(QLatin1String(f.what)).arg(f.value);
    const struct {
        qint64 value;
        const char* what;
    } sizes[] = {
        {in.weightBytes, "weight bytes"}, {in.scratchBytes, "scratch bytes"}, {in.availableBytes, "available memory"}};
    for (const auto& f : sizes)
        if (f.value < 0)
            return QStringLiteral("%1 must not be negative (got %2)").arg(QLatin1String(f.what)).arg(f.value);
    if (kvBytesPerToken <= 0)
        return QStringLiteral("KV bytes per token unknown (got %1): the engine's number was not given")
            .arg(kvBytesPerToken);
    return {};
}

}  // namespace

qint64 MemorySizing::addSaturated(qint64 a, qint64 b) { return a > kMax - b ? kMax : a + b; }

MemoryPlan MemorySizing::plan(const MemoryInputs& in, qint64 kvBytesPerToken) {
    MemoryPlan p;
    p.error = checkInputs(in, kvBytesPerToken);
    if (!p.error.isEmpty()) return p;
    p.valid = true;
    p.bytesPerToken = kvBytesPerToken;
    p.bytesPerBlock = satMul(p.bytesPerToken, in.blockSize);
    p.blocksPerSequence = (in.context + in.blockSize - 1) / in.blockSize;
    p.kvBytesPerSequence = satMul(p.blocksPerSequence, p.bytesPerBlock);
    p.kvBytes = satMul(in.batch, p.kvBytesPerSequence);
    p.kvBytesUnpaged = satMul(satMul(in.batch, in.context), p.bytesPerToken);
    p.totalBytes = addSaturated(addSaturated(in.weightBytes, p.kvBytes), in.scratchBytes);
    p.fits = p.totalBytes <= in.availableBytes;
    p.headroomBytes = p.totalBytes == kMax ? std::numeric_limits<qint64>::min() : in.availableBytes - p.totalBytes;
    const qint64 room = in.availableBytes - addSaturated(in.weightBytes, in.scratchBytes);
    p.maxBlocks = room > 0 ? room / p.bytesPerBlock : 0;
    p.maxPoolTokens = satMul(p.maxBlocks, in.blockSize);
    p.maxBatch = p.maxBlocks / p.blocksPerSequence;
    p.maxContext = satMul(p.maxBlocks / in.batch, in.blockSize);
    return p;
}

QVector<ModelPreset> MemorySizing::presets() {
    // Layers, KV heads and head dim (hidden_size / num_attention_heads) from each model's
    // config.json; parameters as published. SmolLM2's size is the Q4_1 GGUF KV Scope installs.
    return {
        {QStringLiteral("SmolLM2-135M"), 30, 3, 64, 134'515'008, QStringLiteral("Q4_1"), qint64(92.1 * kMiB), 9},
        {QStringLiteral("Qwen2-0.5B"), 24, 2, 64, 494'032'768, QStringLiteral("Q8_0"), 0, 14},
        {QStringLiteral("TinyLlama-1.1B"), 22, 4, 64, 1'100'048'384, QStringLiteral("Q4_0"), 0, 32},
        {QStringLiteral("Mistral-7B"), 32, 8, 128, 7'241'732'096, QStringLiteral("Q4_K_M"), 0, 32},
        {QStringLiteral("Llama-3-8B"), 32, 8, 128, 8'030'261'248, QStringLiteral("Q4_K_M"), 0, 32},
        // The course's worked example: MHA, FP16; 2,048 tokens hold 1.07 GB of KV per sequence.
        {QStringLiteral("LLaMA-7B"), 32, 32, 128, 6'738'415'616, QStringLiteral("F16"), 0, 32},
    };
}

QVector<WeightFormat> MemorySizing::weightFormats() {
    return {{QStringLiteral("F16"), 16.0},     {QStringLiteral("Q8_0"), 8.5}, {QStringLiteral("Q6_K"), 6.5625},
            {QStringLiteral("Q4_K_M"), 4.85},  {QStringLiteral("Q4_1"), 5.0}, {QStringLiteral("Q4_0"), 4.5},
            {QStringLiteral("file size"), 0.0}};
}

qint64 MemorySizing::weightBytes(qint64 parameters, double bitsPerWeight) {
    return qint64(std::llround(double(parameters) * bitsPerWeight / 8.0));
}

QString MemorySizing::formatDecimalBytes(qint64 bytes) {
    if (bytes == kMax) return QStringLiteral("∞");
    static const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    double v = std::abs(double(bytes));
    int u = 0;
    while (v >= 1000 && u < 5) v /= 1000, ++u;
    return (bytes < 0 ? QStringLiteral("-") : QString()) +
           QString::number(v, 'f', u == 0 ? 0 : v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + units[u];
}

QString MemorySizing::memoryTargetText(bool gpu, const QString& device, qint64 freeBytes, qint64 totalBytes) {
    if (gpu)
        return QStringLiteral("GPU VRAM (%1: %2 free of %3)")
            .arg(device.isEmpty() ? QStringLiteral("CUDA device 0") : device, formatBytes(freeBytes),
                 formatBytes(totalBytes));
    return totalBytes > 0 ? QStringLiteral("CPU RAM (%1)").arg(formatBytes(totalBytes))
                          : QStringLiteral("CPU RAM (size unknown)");
}

ParallelPlan MemorySizing::parallel(const MemoryInputs& in, const ParallelInputs& p,
                                    const KvBytesPerTokenFn& kvBytesPerToken) {
    ParallelPlan r;
    if (p.heads < 1) return r.error = QStringLiteral("query heads must be at least 1"), r;
    if (p.group < 1 || p.heads % p.group != 0)
        return r.error = QStringLiteral("the GQA group (%1) must divide the %2 query heads").arg(p.group).arg(p.heads),
               r;
    if (p.tp < 1) return r.error = QStringLiteral("the tensor-parallel degree must be at least 1"), r;
    if (!kvBytesPerToken) return r.error = QStringLiteral("no KV bytes per token (the engine's number is missing)"), r;
    const struct {
        QString name;
        int kvHeads;
    } shapes[] = {{QStringLiteral("MHA"), p.heads},
                  {QStringLiteral("GQA-%1").arg(p.group), p.heads / p.group},
                  {QStringLiteral("MQA"), 1}};
    for (const auto& sh : shapes) {
        MemoryInputs v = in;
        v.kvHeads = sh.kvHeads;
        const MemoryPlan plan = MemorySizing::plan(v, kvBytesPerToken(in.layers, sh.kvHeads, in.headDim, in.kvInt8));
        if (!plan.valid) return r.error = plan.error, r;
        AttentionVariant a;
        a.name = sh.name;
        a.kvHeads = sh.kvHeads;
        a.bytesPerToken = plan.bytesPerToken;
        a.kvBytesPerSequence = plan.kvBytesPerSequence;
        a.kvBytes = plan.kvBytes;
        a.kvHeadsPerGpu = (sh.kvHeads + p.tp - 1) / p.tp;
        v.kvHeads = a.kvHeadsPerGpu;
        a.kvBytesPerGpu =
            MemorySizing::plan(v, kvBytesPerToken(in.layers, a.kvHeadsPerGpu, in.headDim, in.kvInt8)).kvBytes;
        r.variants.push_back(a);
    }
    r.hidden = qint64(p.heads) * in.headDim;
    r.weightBytesPerGpu = (in.weightBytes + p.tp - 1) / p.tp;
    r.allReduceBytesPerToken = 2 * qint64(in.layers) * r.hidden * p.activationBytes;
    r.ringBytesPerGpuPerToken = r.allReduceBytesPerToken * 2 * (p.tp - 1) / p.tp;
    r.valid = true;
    return r;
}

QString MemorySizing::formatBytes(qint64 bytes) {
    if (bytes == kMax) return QStringLiteral("∞");
    const bool negative = bytes < 0;
    double v = std::abs(double(bytes));
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        ++u;
    }
    QString text = u == 0 || v >= 100 ? QString::number(v, 'f', 0) : QString::number(v, 'f', 1);
    if (text.endsWith(QLatin1String(".0"))) text.chop(2);
    return (negative ? QStringLiteral("−") : QString()) + text + QLatin1Char(' ') + QLatin1String(units[u]);
}

}  // namespace kvs::ui
