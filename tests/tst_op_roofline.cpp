// ctest-labels: unit engine
// The roofline's numbers: the FLOPs and bytes each op group of a pass moves
// (engine/model/op_costs.h), checked against hand arithmetic on the tiny model's shapes
// (F32, Q4_1 and NF4_DQ weights, the last with its per-tensor tail); the engine's history
// of timed steps (one prefill step, one decode step per batch class) as snapshots carry it;
// and the machine's roof micro-benchmark (finite positive numbers, no timing assertions)
// with its cache file.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "engine/model/op_costs.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/machine_roof.h"
#include "engine/telemetry/snapshot_ring.h"
#include "tests/support/test_backend.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

class TestOpRoofline : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    std::shared_ptr<Model> tiny(DType t) {
        test::TinyModelSpec spec;  // 2 layers, n_embd 64, 4 heads of 16, 2 kv heads, n_ff 128, tied
        spec.weight_type = t;
        spec.embd_type = DType::F32;
        auto m = test::write_and_load_tiny_gguf(m_dir.filePath(QString("tiny_%1.gguf").arg(int(t))).toStdString(), spec);
        if (!m) qFatal("%s", m.message().c_str());
        return m.value();
    }

private Q_SLOTS:
    void f32CountsMatchHandArithmetic() {
        auto m = tiny(DType::F32);
        const double V = m->config.n_vocab;
        const OpCostModel cm = op_cost_model(*m, DType::F16);
        // a 5-token prompt chunk at 0, decodes at positions 7 and 3; 3 rows of logits
        const OpStepRecord r = op_costs(cm, {{0, 5}, {7, 1}, {3, 1}}, 3);
        QCOMPARE(r.n_tokens, 7);
        QCOMPARE(r.n_seqs, 3);
        QCOMPARE(r.context_tokens, int64_t(5 + 8 + 4));
        // qkv per layer: [64+32+32, 64] = 8192 weights, 2 layers; 7 tokens
        QCOMPARE(r.op(OpKind::qkv).flops, 2.0 * 7 * 2 * 8192);
        QCOMPARE(r.op(OpKind::qkv).bytes, 2 * 8192 * 4.0 + 2 * 4.0 * 7 * (64 + 128));
        // o: [64, 64]
        QCOMPARE(r.op(OpKind::attn_out).flops, 2.0 * 7 * 2 * 4096);
        QCOMPARE(r.op(OpKind::attn_out).bytes, 2 * 4096 * 4.0 + 2 * 4.0 * 7 * (64 + 64));
        // gate + up: 2 x [128, 64]; down [64, 128]
        QCOMPARE(r.op(OpKind::ffn_gate_up).flops, 2.0 * 7 * 2 * 16384);
        QCOMPARE(r.op(OpKind::ffn_gate_up).bytes, 2 * 16384 * 4.0 + 2 * 4.0 * 7 * (64 + 256));
        QCOMPARE(r.op(OpKind::ffn_down).flops, 2.0 * 7 * 2 * 8192);
        QCOMPARE(r.op(OpKind::ffn_down).bytes, 2 * 8192 * 4.0 + 2 * 4.0 * 7 * (128 + 64));
        // attention: contexts 1+2+3+4+5, 8, 4 = 27 positions attended; 4 x 64 flops each, 2 layers.
        // K and V read once per sequence: 5 + 8 + 4 positions x 32 fp16 values x 2 bytes, x2 (K, V);
        // q in and out: 7 x 64 floats each
        QCOMPARE(r.op(OpKind::attention).flops, 2 * 4.0 * 64 * 27);
        QCOMPARE(r.op(OpKind::attention).bytes, 2 * (2.0 * 17 * 64 + 8.0 * 7 * 64));
        // lm_head (tied: the F32 embedding [V, 64]) over the 3 logit rows
        QCOMPARE(r.op(OpKind::lm_head).flops, 2.0 * 3 * 64 * V);
        QCOMPARE(r.op(OpKind::lm_head).bytes, V * 64 * 4 + 4.0 * 3 * (64 + V));
        QVERIFY(r.op(OpKind::elementwise).flops > 0 && r.op(OpKind::elementwise).bytes > 0);
        // no logits wanted: no head
        QCOMPARE(op_costs(cm, {{0, 4}}, 0).op(OpKind::lm_head).flops, 0.0);
    }

    void quantizedWeightsCountTheirBlocks() {
        auto m = tiny(DType::Q4_1);  // 32 weights per 20-byte block (fp16 d, fp16 m, 16 bytes of nibbles)
        const OpCostModel cm = op_cost_model(*m, DType::Q8_0);
        const OpStepRecord r = op_costs(cm, {{10, 1}}, 1);  // one decode at position 10
        QCOMPARE(r.op(OpKind::qkv).bytes, 2 * (128 * 2 * 20.0) + 2 * 4.0 * (64 + 128));
        QCOMPARE(r.op(OpKind::ffn_down).bytes, 2 * (64 * 4 * 20.0) + 2 * 4.0 * (128 + 64));
        // the INT8 cache: a 32-value kv row is one Q8_0 block of 34 bytes; 11 positions, K and V
        QCOMPARE(r.op(OpKind::attention).bytes, 2 * (2.0 * 11 * 34 + 8.0 * 64));
        // decode: 2 flops per weight over 20/32 bytes per weight (+ activations): about 3 flops per byte
        const OpCost& up = r.op(OpKind::ffn_gate_up);
        QCOMPARE(up.intensity(), 2.0 * 2 * 16384 / (2 * (256 * 2 * 20.0) + 2 * 4.0 * (64 + 256)));
        // 64 decodes share one read of the weights; on this tiny model the float activations
        // (64 x 320 per layer) then outweigh the weights, so the intensity grows 8x, not 64x
        std::vector<ChunkShape> b64(64, ChunkShape{10, 1});
        const double ai64 = op_costs(cm, b64, 64).op(OpKind::ffn_gate_up).intensity();
        QCOMPARE(ai64, 2.0 * 64 * 2 * 16384 / (2 * (256 * 2 * 20.0) + 2 * 4.0 * 64 * (64 + 256)));
        QVERIFY(ai64 > 7 * up.intensity());
    }

    // NF4 with double quantization: a tensor's bytes are its rows and the tail after them (one
    // float per 256 blocks of 64 over the whole tensor, and the offset: kernels/dtype.h).
    void nf4DqCountsEachTensorsTail() {
        auto m = quantize_model(tiny(DType::F32), QuantScheme::parse("nf4-dq").value());
        QVERIFY2(m, m.message().c_str());
        QCOMPARE(m.value()->layers[0].wq.dtype, DType::NF4_DQ);
        const OpCostModel cm = op_cost_model(*m.value(), DType::F16);
        // 64 weights are one 33-byte block (32 bytes of nibbles, an 8-bit absmax); each of
        // these tensors has at most 256 blocks, so its tail is 2 floats (8 bytes)
        QCOMPARE(cm.qkv.weight_bytes, 2 * ((64 * 33 + 8) + 2 * (32 * 33 + 8.0)));  // wq [64, 64], wk / wv [32, 64]
        QCOMPARE(cm.attn_out.weight_bytes, 2 * (64 * 33 + 8.0));
        QCOMPARE(cm.ffn_gate_up.weight_bytes, 2 * 2 * (128 * 33 + 8.0));  // [128, 64] each
        QCOMPARE(cm.ffn_down.weight_bytes, 2 * (64 * 2 * 33 + 8.0));      // [64, 128]
    }

    void historyKeepsOnePrefillAndOneDecodePerClass() {
        QCOMPARE(decode_batch_class(1), 1);
        QCOMPARE(decode_batch_class(3), 2);
        QCOMPARE(decode_batch_class(64), 64);
        QCOMPARE(decode_batch_class(100), 64);
        std::vector<OpStepRecord> h;
        auto rec = [](int64_t step, bool prefill, int decodes, int tokens = 0) {
            OpStepRecord r;
            r.step = step;
            r.prefill = prefill;
            r.decode_tokens = decodes;
            r.n_tokens = std::max(tokens, decodes);
            return r;
        };
        keep_op_step(h, rec(1, false, 4));
        keep_op_step(h, rec(2, true, 1, 10));
        keep_op_step(h, rec(3, false, 1));
        keep_op_step(h, rec(4, false, 5));     // replaces step 1 (class 4)
        keep_op_step(h, rec(5, true, 0, 20));  // replaces step 2: more tokens
        keep_op_step(h, rec(6, true, 3, 8));   // fewer tokens: the larger prefill stays
        QCOMPARE(h.size(), size_t(3));
        QCOMPARE(h[0].step, int64_t(5));
        QCOMPARE(h[1].step, int64_t(3));
        QCOMPARE(h[2].step, int64_t(4));
    }

    void engineSnapshotsCarryTimedSteps() {
        auto m = tiny(DType::F32);
        EngineOptions o;
        o.n_threads = 2;
        o.backend = test::test_backend();
        o.kv_blocks = 64;
        auto e = Engine::create(m, nullptr, o);
        QVERIFY2(e.is_ok(), e.is_ok() ? "" : e.message().c_str());
        Engine& eng = *e.value();
        for (int i = 0; i < 4; ++i) {
            GenerationRequest g;
            g.prompt = std::vector<int32_t>(static_cast<size_t>(6 + i), 5 + i);
            g.params.max_tokens = 4;
            g.params.ignore_eos = true;
            QVERIFY(eng.submit(std::move(g)).is_ok());
        }
        QVERIFY(eng.run_until_idle().is_ok());
        const auto snap = eng.telemetry()->latest();
        QVERIFY(snap);
        const auto& steps = snap->op_steps;
        QVERIFY(steps.size() >= 2);
        QVERIFY(steps.front().prefill);
        QCOMPARE(steps.front().n_tokens, 6 + 7 + 8 + 9);  // all four prompts in the first step
        const OpCostModel cm = op_cost_model(*m, DType::F16);
        const OpStepRecord want = op_costs(cm, {{0, 6}, {0, 7}, {0, 8}, {0, 9}}, 4);
        for (int k = 0; k < n_op_kinds; ++k) {
            QCOMPARE(steps.front().ops[k].flops, want.ops[k].flops);
            QCOMPARE(steps.front().ops[k].bytes, want.ops[k].bytes);
        }
        bool decode4 = false;
        for (const OpStepRecord& s : steps) {
            if (!s.prefill && s.decode_tokens == 4) decode4 = true;
            double sum = 0;
            for (const OpCost& c : s.ops) {
                QVERIFY(c.ms >= 0 && std::isfinite(c.ms));
                sum += c.ms;
            }
            QVERIFY(sum > 0);  // the pass was timed
        }
        QVERIFY(decode4);
        // the timer can be turned off
        o.op_timing = false;
        auto off = Engine::create(m, nullptr, o);
        QVERIFY(off.is_ok());
        GenerationRequest g;
        g.prompt = {5, 6, 7};
        g.params.max_tokens = 2;
        QVERIFY(off.value()->submit(std::move(g)).is_ok());
        QVERIFY(off.value()->run_until_idle().is_ok());
        QVERIFY(off.value()->telemetry()->latest()->op_steps.empty());
    }

    void machineRoofIsMeasuredAndCached() {
        RoofOptions opt;
        opt.n_threads = 2;
        opt.seconds = 0.2;
        opt.stream_bytes = int64_t{32} << 20;
        auto r = measure_machine_roof(opt);
        QVERIFY2(r.is_ok(), r.is_ok() ? "" : r.message().c_str());
        const MachineRoof& roof = r.value();
        QVERIFY(std::isfinite(roof.peak_gflops) && roof.peak_gflops > 0);
        QVERIFY(std::isfinite(roof.mem_gbps) && roof.mem_gbps > 0);
        QCOMPARE(roof.ridge(), roof.peak_gflops / roof.mem_gbps);
        QCOMPARE(roof.attainable_gflops(roof.ridge() / 2), roof.peak_gflops / 2);
        QCOMPARE(roof.attainable_gflops(roof.ridge() * 4), roof.peak_gflops);
        QCOMPARE(roof.n_threads, 2);
        QVERIFY(!roof.cpu.empty() && !roof.kernel.empty());

        const std::string path = m_dir.filePath("cache/kvscope/machine_roof.json").toStdString();
        QVERIFY(!load_machine_roof(path, 2));
        QVERIFY(save_machine_roof(path, roof).is_ok());
        MachineRoof other = roof;
        other.n_threads = 1;
        other.peak_gflops = 1.5;
        QVERIFY(save_machine_roof(path, other).is_ok());
        const auto back = load_machine_roof(path, 2);
        QVERIFY(back);
        QCOMPARE(back->peak_gflops, roof.peak_gflops);
        QCOMPARE(back->mem_gbps, roof.mem_gbps);
        QCOMPARE(load_machine_roof(path, 1)->peak_gflops, 1.5);
        QVERIFY(!load_machine_roof(path, 3));
    }
};

QTEST_MAIN(TestOpRoofline)
#include "tst_op_roofline.moc"
