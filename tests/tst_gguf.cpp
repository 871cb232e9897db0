// ctest-labels: unit
// The GGUF reader and writer: a file written by the reference Python package (gguf-py)
// read back exactly; our writer round-trips every metadata type and tensor type in
// versions 2 and 3 with several alignments; hand-built corrupt headers give clear errors;
// the default model's header matches what gguf-py reports for it.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/model/gguf_reader.h"
#include "engine/model/gguf_writer.h"
#include "engine/model/model_config_io.h"
#include "kernels/cpu/quant_formats.h"
#include "tests/support/test_paths.h"

using namespace kvs;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<float> dequantize(const GgufTensorInfo& t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements));  // [n_elements]
    const int64_t n_in = t.ne[0], n_rows = t.n_elements / n_in;
    const size_t rb = row_bytes(t.type, n_in);
    for (int64_t r = 0; r < n_rows; ++r) cpu::dequantize_row(t.type, t.data + r * rb, &out[r * n_in], n_in);
    return out;
}

// Hand-assembled GGUF bytes, independent of GgufWriter, for the corrupt-header table.
struct RawGguf {
    std::vector<uint8_t> b;
    template <typename T>
    RawGguf& put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof(T));
        return *this;
    }
    RawGguf& str(const std::string& s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        return put<uint32_t>(0x46554747).put(version).put(n_tensors).put(n_kv);
    }
    RawGguf& kv_u32(const std::string& key, uint32_t v) { return str(key).put<uint32_t>(4).put(v); }
    // A tensor info: name, dims, type, offset.
    RawGguf& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
        str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
        for (uint64_t d : ne) put(d);
        return put(type).put(offset);
    }
    RawGguf& pad_to(size_t alignment) {
        b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
        return *this;
    }
    RawGguf& zeros(size_t n) {
        b.resize(b.size() + n, 0);
        return *this;
    }
};

}  // namespace

class TstGguf : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void reads_file_written_by_gguf_py();
    void round_trip_data();
    void round_trip();
    void corrupt_header_data();
    void corrupt_header();
    void default_model_header();
};

void TstGguf::reads_file_written_by_gguf_py() {
    const std::string path = test::fixture_path("py_written.gguf.bin");
    auto f = GgufFile::open(path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    const GgufFile& g = *f.value();
    QCOMPARE(g.version(), 3u);
    QCOMPARE(g.alignment(), 64u);
    QCOMPARE(g.metadata().size(), size_t(20));  // general.architecture, general.alignment + 18 test keys
    QCOMPARE(g.metadata()[0].first, std::string("general.architecture"));
    QCOMPARE(*g.find("general.architecture")->as_string(), std::string("llama"));
    auto type_of = [&](const char* k) { return g.find(k) ? g.find(k)->type : GgufType::Array; };
    QCOMPARE(type_of("test.u8"), GgufType::UInt8);
    QCOMPARE(*g.find("test.u8")->as_int(), int64_t(200));
    QCOMPARE(type_of("test.i8"), GgufType::Int8);
    QCOMPARE(*g.find("test.i8")->as_int(), int64_t(-100));
    QCOMPARE(*g.find("test.u16")->as_int(), int64_t(60000));
    QCOMPARE(*g.find("test.i16")->as_int(), int64_t(-30000));
    QCOMPARE(type_of("test.u32"), GgufType::UInt32);
    QCOMPARE(*g.find("test.u32")->as_int(), int64_t(4000000000));
    QCOMPARE(*g.find("test.i32")->as_int(), int64_t(-2000000000));
    QCOMPARE(type_of("test.f32"), GgufType::Float32);
    QCOMPARE(*g.find("test.f32")->as_double(), 0.15625);
    QCOMPARE(*g.find("test.bool_true")->as_bool(), true);
    QCOMPARE(*g.find("test.bool_false")->as_bool(), false);
    QCOMPARE(*g.find("test.string")->as_string(), std::string("h\xc3\xa9llo GGUF \xe2\x9c\x93"));
    // 18e18 does not fit int64: as_int() refuses it, the raw value is intact.
    QCOMPARE(type_of("test.u64"), GgufType::UInt64);
    QVERIFY(!g.find("test.u64")->as_int());
    uint64_t u64 = 0;
    std::memcpy(&u64, g.find("test.u64")->scalar, 8);
    QCOMPARE(u64, uint64_t(18000000000000000000ull));
    QCOMPARE(*g.find("test.i64")->as_int(), int64_t(-9000000000000000000ll));
    QCOMPARE(*g.find("test.f64")->as_double(), -2.718281828459045);

    const GgufValue* ai = g.find("test.arr_i32");
    QVERIFY(ai && ai->is_array());
    QCOMPARE(ai->elem_type, GgufType::Int32);
    QCOMPARE(ai->n_elems, uint64_t(4));
    const int64_t want_i[] = {1, -2, 3, 2147483647};
    for (int i = 0; i < 4; ++i) QCOMPARE(*ai->int_at(i), want_i[i]);
    const GgufValue* af = g.find("test.arr_f32");
    QCOMPARE(af->elem_type, GgufType::Float32);
    QCOMPARE(*af->double_at(1), -1.25);
    const GgufValue* as = g.find("test.arr_str");
    QCOMPARE(as->strings, (std::vector<std::string>{"a", "", "\xc4\xa0the", "<|im_end|>"}));
    const GgufValue* ab = g.find("test.arr_bool");
    QCOMPARE(ab->elem_type, GgufType::Bool);
    QCOMPARE(*ab->int_at(0), int64_t(1));
    QCOMPARE(*ab->int_at(1), int64_t(0));
    const GgufValue* an = g.find("test.arr_nested");
    QCOMPARE(an->elem_type, GgufType::Array);
    QCOMPARE(an->items.size(), size_t(3));
    QCOMPARE(an->items[2].elem_type, GgufType::Int32);
    QCOMPARE(an->items[2].n_elems, uint64_t(3));
    QCOMPARE(*an->items[2].int_at(2), int64_t(6));
    QCOMPARE(*an->items[1].int_at(0), int64_t(3));

    std::ifstream in(test::fixture_path("py_written_expected.json"));
    const auto expected = nlohmann::json::parse(in)["tensors"];
    QCOMPARE(g.tensors().size(), size_t(3));
    for (const auto& [name, e] : expected.items()) {
        const GgufTensorInfo* t = g.tensor(name);
        QVERIFY2(t, name.c_str());
        QCOMPARE(std::string(dtype_name(t->type)), e["type"].get<std::string>());
        QCOMPARE(t->ne, e["ne"].get<std::vector<int64_t>>());
        QCOMPARE((g.data_offset() + t->offset) % 64, uint64_t(0));
        const auto want = e["values"].get<std::vector<float>>();
        const auto got = dequantize(*t);
        QCOMPARE(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i)
            if (got[i] != want[i])
                QFAIL(qPrintable(QString("%1[%2]: %3 != %4").arg(name.c_str()).arg(i).arg(got[i]).arg(want[i])));
    }
}

void TstGguf::round_trip_data() {
    QTest::addColumn<uint32_t>("version");
    QTest::addColumn<uint32_t>("alignment");
    QTest::newRow("v3 align 32") << 3u << 32u;
    QTest::newRow("v2 align 32") << 2u << 32u;
    QTest::newRow("v3 align 8") << 3u << 8u;
    QTest::newRow("v3 align 256") << 3u << 256u;
    QTest::newRow("v2 align 128") << 2u << 128u;
}

void TstGguf::round_trip() {
    QFETCH(uint32_t, version);
    QFETCH(uint32_t, alignment);
    GgufWriter w(version);
    if (alignment != 32) w.set_alignment(alignment);
    w.set("k.u8", GgufValue::of<uint8_t>(255));
    w.set("k.i8", GgufValue::of<int8_t>(-128));
    w.set("k.u16", GgufValue::of<uint16_t>(65535));
    w.set("k.i16", GgufValue::of<int16_t>(-32768));
    w.set("k.u32", GgufValue::of<uint32_t>(4294967295u));
    w.set("k.i32", GgufValue::of<int32_t>(std::numeric_limits<int32_t>::min()));
    w.set("k.f32", GgufValue::of<float>(-0.1f));
    w.set("k.bool", GgufValue::of<bool>(true));
    w.set_string("k.str", "tokens \xe2\x96\x81 and nulls");
    w.set_string("k.empty", "");
    w.set("k.u64", GgufValue::of<uint64_t>(9223372036854775807ull));
    w.set("k.i64", GgufValue::of<int64_t>(std::numeric_limits<int64_t>::min()));
    w.set("k.f64", GgufValue::of<double>(1e300));
    w.set("k.arr_u8", GgufValue::array_of(std::vector<uint8_t>{0, 7, 255}));
    w.set("k.arr_i16", GgufValue::array_of(std::vector<int16_t>{-5, 5}));
    w.set("k.arr_f64", GgufValue::array_of(std::vector<double>{0.25, -8.5}));
    w.set("k.arr_bool", GgufValue::array_of(std::vector<bool>{false, true}));
    w.set("k.arr_str", GgufValue::array_of(std::vector<std::string>{"x", "", "yz"}));
    w.set("k.arr_empty", GgufValue::array_of(std::vector<int32_t>{}));
    w.set("k.nested", GgufValue::array_of_arrays({GgufValue::array_of(std::vector<std::string>{"a", "b"}),
                                                  GgufValue::array_of(std::vector<std::string>{})}));
    w.set_u32("k.replaced", 1);
    w.set_u32("k.replaced", 2);

    // One tensor per type, random-ish values quantized by the reference quantizer.
    const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                           DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
    std::map<std::string, std::vector<uint8_t>> written;
    uint32_t state = 7;
    for (DType t : types) {
        const int64_t n_in = 256, n_rows = 3;
        std::vector<float> x(static_cast<size_t>(n_in * n_rows));  // [n_rows, n_in]
        for (float& v : x)
            v = static_cast<float>(((state = state * 1103515245u + 12345u) >> 8) % 2001) / 1000.0f - 1.0f;
        std::vector<uint8_t> bytes(row_bytes(t, n_in) * n_rows);
        for (int64_t r = 0; r < n_rows; ++r) cpu::quantize_row(t, &x[r * n_in], &bytes[r * row_bytes(t, n_in)], n_in);
        const std::string name = "w." + std::string(dtype_name(t));
        w.add_tensor(name, t, {n_in, n_rows}, bytes.data(), bytes.size());
        written[name] = bytes;
    }
    const float vec[] = {1.0f, 2.0f, 3.0f};  // a 1-D tensor whose size is not a multiple of the alignment
    w.add_tensor("v.f32", DType::F32, {3}, vec, sizeof(vec));
    written["v.f32"].assign(reinterpret_cast<const uint8_t*>(vec), reinterpret_cast<const uint8_t*>(vec) + sizeof(vec));

    const std::string path = test::output_path("round_trip.gguf");
    QVERIFY2(w.write(path).is_ok(), w.write(path).message().c_str());
    auto f = GgufFile::open(path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    const GgufFile& g = *f.value();
    QCOMPARE(g.version(), version);
    QCOMPARE(g.alignment(), alignment);
    QCOMPARE(g.data_offset() % alignment, uint64_t(0));
    QCOMPARE(*g.find("k.u8")->as_int(), int64_t(255));
    QCOMPARE(*g.find("k.i8")->as_int(), int64_t(-128));
    QCOMPARE(*g.find("k.u16")->as_int(), int64_t(65535));
    QCOMPARE(*g.find("k.i16")->as_int(), int64_t(-32768));
    QCOMPARE(*g.find("k.u32")->as_int(), int64_t(4294967295ll));
    QCOMPARE(*g.find("k.i32")->as_int(), int64_t(std::numeric_limits<int32_t>::min()));
    QCOMPARE(*g.find("k.f32")->as_double(), double(-0.1f));
    QCOMPARE(*g.find("k.bool")->as_bool(), true);
    QCOMPARE(*g.find("k.str")->as_string(), std::string("tokens \xe2\x96\x81 and nulls"));
    QCOMPARE(*g.find("k.empty")->as_string(), std::string());
    QCOMPARE(*g.find("k.u64")->as_int(), int64_t(9223372036854775807ll));
    QCOMPARE(*g.find("k.i64")->as_int(), std::numeric_limits<int64_t>::min());
    QCOMPARE(*g.find("k.f64")->as_double(), 1e300);
    QCOMPARE(*g.find("k.arr_u8")->int_at(2), int64_t(255));
    QCOMPARE(*g.find("k.arr_i16")->int_at(0), int64_t(-5));
    QCOMPARE(*g.find("k.arr_f64")->double_at(1), -8.5);
    QCOMPARE(*g.find("k.arr_bool")->int_at(1), int64_t(1));
    QCOMPARE(g.find("k.arr_str")->strings, (std::vector<std::string>{"x", "", "yz"}));
    QCOMPARE(g.find("k.arr_empty")->n_elems, uint64_t(0));
    QCOMPARE(g.find("k.arr_empty")->elem_type, GgufType::Int32);
    QCOMPARE(g.find("k.nested")->items.size(), size_t(2));
    QCOMPARE(g.find("k.nested")->items[0].strings, (std::vector<std::string>{"a", "b"}));
    QCOMPARE(g.find("k.nested")->items[1].n_elems, uint64_t(0));
    QCOMPARE(*g.find("k.replaced")->as_int(), int64_t(2));
    QVERIFY(!g.find("k.missing"));
    // Typed getters: a string key read as an integer is an error naming the key.
    auto wrong = g.get_int("k.str");
    QVERIFY(!wrong.is_ok());
    QVERIFY(wrong.message().find("k.str") != std::string::npos);

    QCOMPARE(g.tensors().size(), written.size());
    for (const auto& [name, bytes] : written) {
        const GgufTensorInfo* t = g.tensor(name);
        QVERIFY2(t, name.c_str());
        QCOMPARE(t->n_bytes, uint64_t(bytes.size()));
        QCOMPARE((g.data_offset() + t->offset) % alignment, uint64_t(0));
        QVERIFY2(std::memcmp(t->data, bytes.data(), bytes.size()) == 0, name.c_str());
    }
    QCOMPARE(g.tensor("w.Q4_K")->ne, (std::vector<int64_t>{256, 3}));
    QCOMPARE(g.tensor("w.Q4_K")->n_elements, int64_t(768));
}

namespace {
QByteArray qbytes(const RawGguf& r) { return QByteArray(reinterpret_cast<const char*>(r.b.data()), int(r.b.size())); }

// A valid file with one F32 tensor of 8 elements and the given extra tensors/kv spliced in.
RawGguf one_tensor_file(std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data_bytes) {
    RawGguf r;
    r.header(3, 1, 1).kv_u32("a.b", 1).tensor("t", std::move(ne), type, offset).pad_to(32).zeros(data_bytes);
    return r;
}
}  // namespace

void TstGguf::corrupt_header_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("expected");  // "" = must load
    QTest::newRow("valid control") << qbytes(one_tensor_file({8}, 0, 0, 32)) << "";
    QTest::newRow("empty file") << QByteArray() << "empty";
    QTest::newRow("short magic") << QByteArray("GG") << "truncated";
    QTest::newRow("bad magic") << QByteArray("GGML\x03\0\0\0", 8) << "not a GGUF";
    QTest::newRow("version 1") << qbytes(RawGguf().header(1, 0, 0)) << "version 1";
    QTest::newRow("version 4") << qbytes(RawGguf().header(4, 0, 0)) << "version 4";
    QTest::newRow("big-endian") << qbytes(RawGguf().header(0x03000000u, 0, 0)) << "big-endian";
    QTest::newRow("header cut") << qbytes(RawGguf().put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint32_t>(0))
                                << "truncated";
    QTest::newRow("huge kv count") << qbytes(RawGguf().header(3, 0, 1ull << 60).zeros(64)) << "metadata count";
    QTest::newRow("huge tensor count") << qbytes(RawGguf().header(3, 1ull << 59, 0).zeros(64)) << "tensor count";
    QTest::newRow("huge key length") << qbytes(RawGguf().header(3, 0, 1).put<uint64_t>(~0ull).zeros(16))
                                     << "string length";
    QTest::newRow("unknown value type") << qbytes(RawGguf().header(3, 0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0))
                                        << "unknown GGUF value type 13";
    QTest::newRow("huge array")
        << qbytes(
               RawGguf().header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1ull << 62).zeros(32))
        << "array of";
    QTest::newRow("bool 2") << qbytes(RawGguf().header(3, 0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2))
                            << "bool value";
    QTest::newRow("duplicate key") << qbytes(RawGguf().header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2)) << "duplicate";
    QTest::newRow("alignment 48") << qbytes(RawGguf().header(3, 0, 1).kv_u32("general.alignment", 48))
                                  << "general.alignment";
    QTest::newRow("alignment string")
        << qbytes(RawGguf().header(3, 0, 1).str("general.alignment").put<uint32_t>(8).str("32")) << "general.alignment";
    {
        RawGguf deep;
        deep.header(3, 0, 1).str("k").put<uint32_t>(9);
        for (int i = 0; i < 12; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
        deep.put<uint32_t>(4).put<uint64_t>(0);
        QTest::newRow("nested too deep") << qbytes(deep) << "nested";
    }
    QTest::newRow("0 dims") << qbytes(one_tensor_file({}, 0, 0, 32)) << "0 dimensions";
    QTest::newRow("5 dims") << qbytes(one_tensor_file({1, 1, 1, 1, 8}, 0, 0, 32)) << "5 dimensions";
    QTest::newRow("dim 0") << qbytes(one_tensor_file({8, 0}, 0, 0, 32)) << "dimension 1 = 0";
    QTest::newRow("negative dim") << qbytes(one_tensor_file({~0ull}, 0, 0, 32)) << "dimension 0 = -1";
    QTest::newRow("unknown type id") << qbytes(one_tensor_file({32}, 16, 0, 64)) << "GGML type id 16";
    QTest::newRow("not a block multiple") << qbytes(one_tensor_file({33}, 8, 0, 64)) << "multiple of the block size";
    QTest::newRow("element overflow") << qbytes(one_tensor_file({1ull << 40, 1ull << 40}, 0, 0, 32)) << "overflows";
    QTest::newRow("misaligned offset") << qbytes(one_tensor_file({8}, 0, 4, 64)) << "not a multiple of the alignment";
    QTest::newRow("data past end") << qbytes(one_tensor_file({64}, 0, 0, 128)) << "past the end";
    QTest::newRow("offset past end") << qbytes(one_tensor_file({8}, 0, 1ull << 62, 32)) << "past the end";
    {
        RawGguf r;
        r.header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad_to(32).zeros(96);
        QTest::newRow("overlap") << qbytes(r) << "overlap";
        RawGguf d;
        d.header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_to(32).zeros(64);
        QTest::newRow("duplicate tensor") << qbytes(d) << "duplicate tensor name 'a'";
    }
}

void TstGguf::corrupt_header() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, expected);
    const std::string path = test::output_path("corrupt.gguf");
    write_bytes(path, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    auto f = GgufFile::open(path);
    if (expected.isEmpty()) {
        QVERIFY2(f.is_ok(), f.message().c_str());
        return;
    }
    QVERIFY2(!f.is_ok(), "a corrupt file was accepted");
    const QString msg = QString::fromStdString(f.message());
    QVERIFY2(msg.startsWith(QString::fromStdString(path)), qPrintable("message does not name the file: " + msg));
    QVERIFY2(msg.contains(expected), qPrintable("message: " + msg));
}

void TstGguf::default_model_header() {
    const std::string path = test::default_model_path();
    if (path.empty()) QSKIP("default model not installed (run the set-up script)");
    auto f = GgufFile::open(path);
    QVERIFY2(f.is_ok(), f.message().c_str());
    const GgufFile& g = *f.value();
    // Numbers as gguf-py's GGUFReader reports them for this file.
    QCOMPARE(g.version(), 3u);
    QCOMPARE(g.metadata().size(), size_t(33));
    QCOMPARE(g.tensors().size(), size_t(272));
    QCOMPARE(g.data_offset(), uint64_t(1785664));
    const GgufTensorInfo* e = g.tensor("token_embd.weight");
    QVERIFY(e);
    QCOMPARE(e->type, DType::Q8_0);
    QCOMPARE(e->ne, (std::vector<int64_t>{576, 49152}));
    QCOMPARE(g.tensor("blk.0.attn_q.weight")->type, DType::Q4_1);
    QCOMPARE(g.find("tokenizer.ggml.tokens")->n_elems, uint64_t(49152));
    QCOMPARE(g.find("tokenizer.ggml.merges")->n_elems, uint64_t(48900));
    auto c = read_gguf_config(g);
    QVERIFY2(c.is_ok(), c.message().c_str());
    QCOMPARE(c->arch, std::string("llama"));
    QCOMPARE(c->n_layer, 30);
    QCOMPARE(c->n_embd, 576);
    QCOMPARE(c->n_head, 9);
    QCOMPARE(c->n_kv_head, 3);
    QCOMPARE(c->head_dim, 64);
    QCOMPARE(c->n_rot, 64);
    QCOMPARE(c->n_ff, 1536);
    QCOMPARE(c->n_vocab, 49152);
    QCOMPARE(c->n_ctx_train, 8192);
    QCOMPARE(c->rope_freq_base, 100000.0f);
    QCOMPARE(c->rms_eps, 1e-5f);
    QCOMPARE(c->rope_style, RopeStyle::Normal);
}

QTEST_GUILESS_MAIN(TstGguf)
#include "tst_gguf.moc"
