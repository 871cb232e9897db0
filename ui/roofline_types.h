#pragma once
// What the roofline view draws (plain Qt-side data; app/view_convert fills RooflineFrame from
// the engine snapshot's op_steps, the app gives the measured roof). Part of EngineFrame.
#include <QString>
#include <QVector>
#include <QtGlobal>

namespace kvs::ui {

struct RooflineOp {
    QString op;         // "qkv", "attn_out", "ffn_gate_up", "ffn_down", "attention", "lm_head", "elementwise"
    double flops = 0;   // FLOPs of the op group over all layers
    double bytes = 0;   // bytes it must move
    double ms = 0;      // measured; 0: not timed
    double intensity() const { return bytes > 0 ? flops / bytes : 0; }  // FLOP per byte
    double gflops() const { return ms > 0 ? flops / (ms * 1e6) : 0; }
};

// One timed engine step: the newest prefill step or the newest decode step of a batch class.
struct RooflineStep {
    qint64 step = -1;
    bool prefill = false;
    int tokens = 0;        // tokens of the pass
    int seqs = 0;          // sequences
    int decodeTokens = 0;  // the decode batch
    QVector<RooflineOp> ops;
    const RooflineOp* op(const QString& name) const {
        for (const RooflineOp& o : ops)
            if (o.op == name) return &o;
        return nullptr;
    }
};

struct RooflineFrame {
    QVector<RooflineStep> steps;  // prefill first, then decode steps by batch
};

// The machine's roof as measured by KV Scope (engine/runtime/machine_roof.h).
struct MachineRoofInfo {
    double peakGflops = 0;  // best matmul kernel, all threads
    double memGbps = 0;     // streaming read
    QString cpu, kernel;
    int threads = 0;
    qint64 measuredAt = 0;  // Unix seconds
    bool valid() const { return peakGflops > 0 && memGbps > 0; }
    double ridge() const { return memGbps > 0 ? peakGflops / memGbps : 0; }
};

}  // namespace kvs::ui
