// ctest-labels: unit
// "Which quantization fits?" (engine/quant/quant_fit.h) against hand arithmetic:
// Llama-2-7B (shape from its config.json: 32 layers, hidden 4096, 32 heads and KV heads, FFN
// 11008, vocabulary 32000, untied) on an 8 GiB GPU at 4096 tokens: FP16 does not fit, INT4
// does, with the KV room and the batch it holds computed here from the storage layouts
// (F16: 2 bytes; I4_G128: 64 bytes of nibbles, an fp16 scale, a uint8 zero and a pad byte
// per 128 weights; KV: 2 x layers x KV heads x head size x 2 bytes per token, whole blocks
// of 16); the ranking per goal follows its stated rule on a table typed in here; bad
// inputs are refused naming the field; the loaded model's sizes equal the variants
// quantize_model makes.
#include <QtTest>

#include <cmath>

#include "engine/kv_cache/kv_tensors.h"
#include "engine/quant/quant_fit.h"
#include "engine/quant/quant_fit_table.h"
#include "engine/quant/quantize.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

const FitRow* row(const FitResult& r, const std::string& scheme) {
    for (const FitRow& x : r.rows)
        if (x.scheme == scheme) return &x;
    return nullptr;
}

std::vector<std::string> ranked(const FitResult& r) {
    std::vector<std::string> out;
    for (const FitRow& x : r.rows)
        if (x.rank > 0) out.push_back(x.scheme);
    return out;
}

// SmolLM2-135M's shape (config.json: 30 layers, hidden 576, 9 heads, 3 KV heads, FFN 1536,
// vocabulary 49152, tied, trained on 8192) and a table measured "on it" (typed in: the
// ranking rules are what is checked).
FitRequest smol_request(FitGoal goal) {
    FitRequest rq;
    rq.model = fit_model_of_shape("SmolLM2-135M", 30, 576, 9, 3, 1536, 49152, true, 8192).value();
    rq.device.memory_bytes = 2 * kGiB;
    rq.goal = goal;
    rq.context = 2048;
    rq.batch = 4;
    FitMeasurements t;
    t.model = "SmolLM2-135M-Instruct";
    auto m = [](const char* s, double ppl, double decode) {
        FitMeasurement x;
        x.scheme = s;
        x.ppl = ppl;
        x.decode_tok_s = decode;
        return x;
    };
    t.rows = {m("ref", 20.0, 30.0), m("q8_0", 20.1, 50.0), m("int4-awq", 21.5, 85.0),
              m("nf4", 22.0, 10.0), m("q4_0", 23.0, 95.0), m("int4-rtn", 24.0, 90.0)};
    rq.table = t;
    rq.schemes = {"f16", "q8_0", "int4-awq", "nf4", "q4_0", "int4-rtn", "q4_k"};
    return rq;
}

}  // namespace

class TstQuantFit : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void presetShapeIsLlama2_7B() {
        auto m = fit_preset("llama-2-7b");  // case ignored
        QVERIFY2(m, m.message().c_str());
        QCOMPARE(m->n_params, int64_t(6'738'415'616));  // Meta's published count for Llama-2-7B
        QCOMPARE(m->head_dim, 128);
        QCOMPARE(int(m->anchors.size()), 5);
    }

    void sevenBInEightGiB() {
        FitRequest rq;
        rq.model = fit_preset("Llama-2-7B").value();
        rq.device.kind = FitDeviceKind::Gpu;
        rq.device.memory_bytes = 8 * kGiB;
        rq.context = 4096;
        rq.batch = 1;
        auto r = quant_fit(rq);
        QVERIFY2(r, r.message().c_str());

        const int64_t usable = int64_t(8.0 * double(kGiB) * 0.9);
        QCOMPARE(r->usable_bytes, usable);
        const int64_t kv_per_token = 2 * 32 * 32 * 128 * 2;  // 524288: 0.5 MiB per token
        QCOMPARE(r->kv_bytes_per_token, kv_per_token);
        const int64_t kv = 4096 * kv_per_token;  // 256 whole blocks of 16

        const int64_t linear = 32 * (4 * 4096LL * 4096 + 3 * 4096LL * 11008);  // q k v o, gate up down
        const int64_t kept = (2 * 32000LL * 4096 + 65 * 4096LL) * 2;           // embedding, head, norms in F16
        const FitRow* f16 = row(*r, "f16");
        QVERIFY(f16);
        QCOMPARE(f16->weight_bytes, linear * 2 + kept);
        QVERIFY(!f16->fits);
        QCOMPARE(f16->rank, 0);
        QVERIFY2(f16->why.find("weights alone") != std::string::npos, f16->why.c_str());

        const FitRow* awq = row(*r, "int4-awq");
        QVERIFY(awq);
        const int64_t awq_bytes = linear / 128 * 68 + kept;
        QCOMPARE(awq->weight_bytes, awq_bytes);
        QCOMPARE(awq->bits_per_weight, 68.0 * 8 / 128);  // 4.25
        QCOMPARE(awq->room_bytes, usable - awq_bytes);
        QCOMPARE(awq->kv_bytes, kv);
        QVERIFY(awq->fits);
        QCOMPARE(awq->max_batch, (usable - awq_bytes) / kv);  // 1
        QCOMPARE(awq->max_batch, int64_t(1));
        QCOMPARE(awq->max_context, int64_t(4096));  // the room holds 7168, the trained context is 4096

        // Quality first, from the AWQ paper's numbers: AWQ 5.60, GPTQ-R 5.63, GPTQ 5.69, RTN 5.73 (FP16 5.47).
        const auto order = ranked(*r);
        QVERIFY(order.size() >= 4);
        QCOMPARE(order[0], std::string("int4-awq"));
        QCOMPARE(order[1], std::string("int4-gptq-act"));
        QCOMPARE(order[2], std::string("int4-gptq"));
        QCOMPARE(order[3], std::string("int4-rtn"));
        QVERIFY(std::abs(*awq->ppl_increase_pct - (5.60 / 5.47 - 1) * 100) < 1e-9);
        QVERIFY2(awq->why.find("+2.4% perplexity") != std::string::npos, awq->why.c_str());
        QVERIFY2(awq->quality_source.find("2306.00978") != std::string::npos, awq->quality_source.c_str());
        QVERIFY(!row(*r, "q8_0")->fits);  // 7.4 GB of weights leave 0.3 GB, not 2 GiB of KV

        rq.batch = 2;  // two sequences need 4 GiB: INT4 no longer fits either
        auto r2 = quant_fit(rq);
        QVERIFY(r2);
        QVERIFY(!row(*r2, "int4-awq")->fits);
        QVERIFY(ranked(*r2).empty());
    }

    void parameterCountOnly() {
        FitRequest rq;
        rq.model = fit_model_of_params("7B", 7'000'000'000, 32, 8, 128).value();
        rq.device.memory_bytes = 16 * kGiB;
        rq.schemes = {"int4-rtn", "q8_0"};
        auto r = quant_fit(rq);
        QVERIFY2(r, r.message().c_str());
        const FitRow* rtn = row(*r, "int4-rtn");
        QVERIFY(rtn->weights_estimated);
        QCOMPARE(rtn->weight_bytes, int64_t(7'000'000'000LL * 68 / 128));
        QCOMPARE(row(*r, "q8_0")->weight_bytes, int64_t(7'000'000'000LL * 34 / 32));
        QCOMPARE(r->kv_bytes_per_token, int64_t(2 * 32 * 8 * 128 * 2));
    }

    void goalRanking() {
        {  // quality: the least perplexity increase (f16 is the reference row: +0%)
            auto r = quant_fit(smol_request(FitGoal::Quality));
            QVERIFY2(r, r.message().c_str());
            const std::vector<std::string> want{"f16", "q8_0", "int4-awq", "nf4", "q4_0", "int4-rtn"};
            QCOMPARE(ranked(*r), want);
            QVERIFY(!row(*r, "q4_k")->applies);  // rows of 576 are not whole Q4_K blocks of 256
            QVERIFY2(row(*r, "q4_k")->why.find("576") != std::string::npos, row(*r, "q4_k")->why.c_str());
        }
        {  // edge CPU: within +10%, fastest measured decode first; beyond it after, the same way
            auto r = quant_fit(smol_request(FitGoal::EdgeCpu));
            QVERIFY(r);
            const std::vector<std::string> want{"int4-awq", "q8_0", "f16", "q4_0", "int4-rtn", "nf4"};
            QCOMPARE(ranked(*r), want);
            QVERIFY2(row(*r, "q4_0")->why.find("quality floor") != std::string::npos, row(*r, "q4_0")->why.c_str());
            QVERIFY2(row(*r, "nf4")->why.find("quality floor") != std::string::npos, row(*r, "nf4")->why.c_str());
        }
        {  // throughput: within +5%, the most sequences in the room (smaller weights) first
            auto r = quant_fit(smol_request(FitGoal::Throughput));
            QVERIFY(r);
            const auto order = ranked(*r);
            QCOMPARE(order[0], std::string("q8_0"));
            QCOMPARE(order[1], std::string("f16"));
            QVERIFY(row(*r, "q8_0")->max_batch > row(*r, "f16")->max_batch);
            for (size_t i = 3; i < order.size(); ++i)  // beyond the floor: by sequences, descending
                QVERIFY(row(*r, order[i])->max_batch <= row(*r, order[i - 1])->max_batch);
        }
    }

    void tableFileFromTheEvalWriter() {
        // A table written by quant_table's writer (what `kvscope eval --all --json` writes) read
        // back for the chooser: measured rows only, and its ranking uses them.
        QuantTable t;
        t.model = "SmolLM2-135M-Instruct";
        t.machine = "test";
        auto add = [&](const char* s, std::optional<double> ppl, std::optional<double> decode) {
            QuantTableRow r;
            r.scheme = s;
            r.label = s;
            r.ppl = ppl;
            r.ppl_err = ppl ? std::optional<double>(0.1) : std::nullopt;
            r.decode_tok_s = decode;
            if (!ppl) r.note = "cannot apply";
            t.rows.push_back(r);
        };
        add("ref", 20.0, 30.0);
        add("int4-awq", 21.0, 80.0);
        add("int4-rtn", 23.0, 82.0);
        add("q4_k", std::nullopt, std::nullopt);
        const std::string path = test::output_path("fit_table.json");
        QVERIFY(write_quant_table_json(t, path).is_ok());
        auto m = read_fit_measurements(path);
        QVERIFY2(m, m.message().c_str());
        QCOMPARE(m->model, t.model);
        QCOMPARE(int(m->rows.size()), 3);  // the unmeasured q4_k row is left out
        FitRequest rq = smol_request(FitGoal::Quality);
        rq.table = m.value();
        rq.schemes = {"int4-rtn", "int4-awq", "f16"};
        auto r = quant_fit(rq);
        QVERIFY2(r, r.message().c_str());
        const std::vector<std::string> want{"f16", "int4-awq", "int4-rtn"};
        QCOMPARE(ranked(*r), want);
        QCOMPARE(*row(*r, "int4-awq")->ppl_increase_pct, 5.0);
        QCOMPARE(*row(*r, "int4-awq")->decode_tok_s, 80.0);  // the table is this model's: speeds used
        auto bad = read_fit_measurements(test::output_path("no_such_table.json"));
        QVERIFY(!bad);
        QVERIFY2(bad.message().find("no_such_table.json") != std::string::npos, bad.message().c_str());
    }

    void badInputsNamed_data() {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("expected");
        QTest::newRow("context") << "context"
                                 << "context must be at least 1";
        QTest::newRow("batch") << "batch"
                               << "batch must be at least 1";
        QTest::newRow("memory") << "memory"
                                << "device memory must be more than 0";
        QTest::newRow("usable") << "usable"
                                << "usable fraction";
        QTest::newRow("scheme") << "scheme"
                                << "unknown quantization scheme 'q9_9'";
        QTest::newRow("past trained") << "trained"
                                      << "past Llama-2-7B's trained context of 4096";
        QTest::newRow("layers") << "layers"
                                << "layers must be at least 1";
    }
    void badInputsNamed() {
        QFETCH(QString, field);
        QFETCH(QString, expected);
        FitRequest rq;
        rq.model = fit_preset("Llama-2-7B").value();
        rq.device.memory_bytes = 8 * kGiB;
        if (field == "context") rq.context = 0;
        if (field == "batch") rq.batch = 0;
        if (field == "memory") rq.device.memory_bytes = 0;
        if (field == "usable") rq.device.usable_fraction = 1.5;
        if (field == "scheme") rq.schemes = {"int4-awq", "q9_9"};
        if (field == "trained") rq.context = 8192;
        if (field == "layers") rq.model.n_layer = 0;
        auto r = quant_fit(rq);
        QVERIFY(!r);
        QVERIFY2(r.message().find(expected.toStdString()) != std::string::npos, r.message().c_str());
    }
    void badModelsNamed() {
        auto p = fit_preset("Llama-9-1B");
        QVERIFY(!p);
        QVERIFY2(p.message().find("Llama-2-70B") != std::string::npos, p.message().c_str());  // lists the presets
        auto s = fit_model_of_shape("x", 32, 4096, 32, 5, 11008, 32000, false, 4096);
        QVERIFY(!s);
        QVERIFY2(s.message().find("kv_heads (5) must divide heads (32)") != std::string::npos, s.message().c_str());
        auto q = fit_model_of_params("x", 7'000'000'000, 32, 0, 128);
        QVERIFY(!q);
        QVERIFY2(q.message().find("kv_heads") != std::string::npos, q.message().c_str());
        auto g = parse_fit_goal("fastest");
        QVERIFY(!g);
        QVERIFY2(g.message().find("quality, edge-cpu or throughput") != std::string::npos, g.message().c_str());
    }

    void loadedModelSizesAreTheVariants() {
        test::TinyModelSpec spec;
        spec.n_embd = 128;
        spec.n_ff = 256;
        spec.n_head = 4;
        spec.n_kv_head = 2;
        auto src = test::write_and_load_tiny_gguf(test::output_path("fit_tiny.gguf"), spec);
        QVERIFY2(src, src.message().c_str());
        FitRequest rq;
        rq.model = fit_model_of(*src.value());
        rq.device.memory_bytes = kGiB;
        rq.context = 256;
        rq.schemes = {"q8_0", "int8", "int4-rtn", "nf4", "nf4-dq", "q4_k"};
        auto r = quant_fit(rq);
        QVERIFY2(r, r.message().c_str());
        for (const char* s : {"q8_0", "int8", "int4-rtn", "nf4", "nf4-dq"}) {  // nf4-dq: each tensor's tail too
            auto v = quantize_model(src.value(), QuantScheme::parse(s).value());
            QVERIFY2(v, v.message().c_str());
            QCOMPARE(row(*r, s)->weight_bytes, v.value()->weight_bytes);
        }
        QVERIFY(!row(*r, "q4_k")->applies);  // 128-wide rows are not whole blocks of 256
        QCOMPARE(r->kv_bytes_per_token, kv_cache_bytes_per_token(src.value()->config, DType::F16));
        QCOMPARE(row(*r, "q8_0")->kv_bytes, 256 * r->kv_bytes_per_token);
    }
};

QTEST_APPLESS_MAIN(TstQuantFit)
#include "tst_quant_fit.moc"
