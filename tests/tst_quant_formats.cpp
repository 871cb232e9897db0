// ctest-labels: kernels
// GGML block formats: fp16/bf16 conversion, dequantization of hand-built blocks against
// hand-computed values, agreement with the `gguf` Python package (fixture written by
// tests/tools/make_quant_fixtures.py), and quantize -> dequantize error bounds. KV Scope's
// own I4_G128 / I4_G64 / I8_ROW: ids GGUF cannot claim, hand-built rows, per-element error bounds,
// and the pack / unpack helpers engine/quant uses.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/quant_formats.h"
#include "kernels/dtype.h"
#include "tests/support/test_paths.h"

using namespace kvs;
using namespace kvs::cpu;

Q_DECLARE_METATYPE(std::vector<float>)

namespace {

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
    b[off] = static_cast<uint8_t>(v & 0xFF);
    b[off + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<uint8_t> from_hex(const std::string& h) {
    std::vector<uint8_t> out(h.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoi(h.substr(2 * i, 2), nullptr, 16));
    return out;
}

std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

}  // namespace

class TestQuantFormats : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void fp16_values_data();
    void fp16_values();
    void fp16_roundtrip_all();
    void bf16_values_data();
    void bf16_values();
    void dequant_hand_blocks_data();
    void dequant_hand_blocks();
    void gguf_fixture_dequant();
    void gguf_fixture_quantize();
    void roundtrip_error_data();
    void roundtrip_error();
    void q8_1_sum_field();
    void q8_k_bsums();
    void activation_types();
    void int_format_ids();
    void int_error_bound_data();
    void int_error_bound();
    void i4_pack_unpack_data();
    void i4_pack_unpack();
    void i4_g128_splits_into_g64();
    void i8_pack();
};

void TestQuantFormats::fp16_values_data() {
    QTest::addColumn<float>("f");
    QTest::addColumn<int>("h");
    QTest::newRow("one") << 1.0f << 0x3C00;
    QTest::newRow("minus two") << -2.0f << 0xC000;
    QTest::newRow("max") << 65504.0f << 0x7BFF;
    QTest::newRow("rounds to inf") << 65520.0f << 0x7C00;
    QTest::newRow("just below inf threshold") << 65519.0f << 0x7BFF;
    QTest::newRow("smallest subnormal") << 5.9604644775390625e-8f << 0x0001;
    QTest::newRow("smallest normal") << 6.103515625e-5f << 0x0400;
    QTest::newRow("0.1") << 0.1f << 0x2E66;
    QTest::newRow("1/3") << (1.0f / 3.0f) << 0x3555;
    QTest::newRow("tie to even down") << (1.0f + 1.0f / 2048.0f) << 0x3C00;
    QTest::newRow("tie to even up") << (1.0f + 3.0f / 2048.0f) << 0x3C02;
    QTest::newRow("subnormal tie") << (1.5f * 5.9604644775390625e-8f) << 0x0002;
    QTest::newRow("negative zero") << -0.0f << 0x8000;
}

void TestQuantFormats::fp16_values() {
    QFETCH(float, f);
    QFETCH(int, h);
    QCOMPARE(static_cast<int>(fp32_to_fp16(f)), h);
    if (h != 0x7C00) {
        // every row is exactly representable except the rounding rows
        const float back = fp16_to_fp32(static_cast<uint16_t>(h));
        QVERIFY(std::fabs(back - f) <= std::fabs(f) * (1.0f / 1024.0f) + 6e-8f);
    }
}

void TestQuantFormats::fp16_roundtrip_all() {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = fp16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(f)) {
            QVERIFY((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0);
            continue;
        }
        QCOMPARE(static_cast<uint32_t>(fp32_to_fp16(f)), h);
    }
    QVERIFY(std::isinf(fp16_to_fp32(0x7C00)));
    QCOMPARE(fp16_to_fp32(0x3555), 0.333251953125f);
}

void TestQuantFormats::bf16_values_data() {
    QTest::addColumn<float>("f");
    QTest::addColumn<int>("h");
    QTest::newRow("one") << 1.0f << 0x3F80;
    QTest::newRow("minus 2.5") << -2.5f << 0xC020;
    QTest::newRow("tie to even down") << (1.0f + 1.0f / 256.0f) << 0x3F80;
    QTest::newRow("tie to even up") << (1.0f + 3.0f / 256.0f) << 0x3F82;
    QTest::newRow("pi") << 3.14159265f << 0x4049;
}

void TestQuantFormats::bf16_values() {
    QFETCH(float, f);
    QFETCH(int, h);
    QCOMPARE(static_cast<int>(fp32_to_bf16(f)), h);
    QCOMPARE(fp32_to_bf16(bf16_to_fp32(static_cast<uint16_t>(h))), static_cast<uint16_t>(h));
}

// Blocks built byte by byte from the layout in ggml-common.h, expected values by formula.
void TestQuantFormats::dequant_hand_blocks_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<std::vector<float>>("expected");

    {  // Q4_1: d = 0.5, m = -1; element j = nibble j, element 16 + j = 15 - j
        std::vector<uint8_t> b(20);
        put16(b, 0, 0x3800), put16(b, 2, 0xBC00);
        std::vector<float> e(32);
        for (int j = 0; j < 16; ++j) {
            b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
            e[j] = 0.5f * j - 1.0f;
            e[16 + j] = 0.5f * (15 - j) - 1.0f;
        }
        QTest::newRow("Q4_1") << int(DType::Q4_1) << QByteArray(reinterpret_cast<char*>(b.data()), 20) << e;
    }
    {  // Q4_0: d = 0.25; low nibble j, high nibble (j + 3) % 16; x = d * (q - 8)
        std::vector<uint8_t> b(18);
        put16(b, 0, 0x3400);
        std::vector<float> e(32);
        for (int j = 0; j < 16; ++j) {
            b[2 + j] = static_cast<uint8_t>(j | (((j + 3) % 16) << 4));
            e[j] = 0.25f * (j - 8);
            e[16 + j] = 0.25f * (((j + 3) % 16) - 8);
        }
        QTest::newRow("Q4_0") << int(DType::Q4_0) << QByteArray(reinterpret_cast<char*>(b.data()), 18) << e;
    }
    {  // Q5_0: d = 1; 5th bit set for every element j with j % 3 == 0; x = q - 16
        std::vector<uint8_t> b(22);
        put16(b, 0, 0x3C00);
        uint32_t qh = 0;
        std::vector<float> e(32);
        for (int j = 0; j < 32; ++j)
            if (j % 3 == 0) qh |= 1u << j;
        std::memcpy(&b[2], &qh, 4);
        for (int j = 0; j < 16; ++j) {
            b[6 + j] = static_cast<uint8_t>((15 - j) | (j << 4));
            e[j] = static_cast<float>((15 - j) + (j % 3 == 0 ? 16 : 0) - 16);
            e[16 + j] = static_cast<float>(j + ((16 + j) % 3 == 0 ? 16 : 0) - 16);
        }
        QTest::newRow("Q5_0") << int(DType::Q5_0) << QByteArray(reinterpret_cast<char*>(b.data()), 22) << e;
    }
    {  // Q5_1: d = 0.5, m = 2; bit 31 and bit 0 set only
        std::vector<uint8_t> b(24);
        put16(b, 0, 0x3800), put16(b, 2, 0x4000);
        const uint32_t qh = 0x80000001u;
        std::memcpy(&b[4], &qh, 4);
        std::vector<float> e(32);
        for (int j = 0; j < 16; ++j) {
            b[8 + j] = static_cast<uint8_t>(7 | (9 << 4));
            e[j] = 0.5f * (7 + (j == 0 ? 16 : 0)) + 2.0f;
            e[16 + j] = 0.5f * (9 + (j == 15 ? 16 : 0)) + 2.0f;
        }
        QTest::newRow("Q5_1") << int(DType::Q5_1) << QByteArray(reinterpret_cast<char*>(b.data()), 24) << e;
    }
    {  // Q8_0: d = 2, q = j - 16
        std::vector<uint8_t> b(34);
        put16(b, 0, 0x4000);
        std::vector<float> e(32);
        for (int j = 0; j < 32; ++j)
            b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16)), e[j] = 2.0f * (j - 16);
        QTest::newRow("Q8_0") << int(DType::Q8_0) << QByteArray(reinterpret_cast<char*>(b.data()), 34) << e;
    }
    {  // Q4_K: d = 1, dmin = 0.5, 6-bit scales/mins with high bits in use
        const int sc[8] = {1, 17, 33, 63, 5, 40, 60, 21};
        const int mn[8] = {0, 2, 50, 63, 7, 30, 45, 16};
        std::vector<uint8_t> b(144);
        put16(b, 0, 0x3C00), put16(b, 2, 0x3800);
        for (int j = 0; j < 4; ++j) {
            b[4 + j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
            b[8 + j] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
            b[12 + j] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
        }
        std::vector<float> e(256);
        for (int c = 0; c < 4; ++c)  // 64-element chunk c: sub-blocks 2c (low nibbles), 2c+1 (high)
            for (int l = 0; l < 32; ++l) {
                const int lo = (l + c) % 16, hi = (3 * l + c) % 16;
                b[16 + 32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
                e[64 * c + l] = 1.0f * sc[2 * c] * lo - 0.5f * mn[2 * c];
                e[64 * c + 32 + l] = 1.0f * sc[2 * c + 1] * hi - 0.5f * mn[2 * c + 1];
            }
        QTest::newRow("Q4_K") << int(DType::Q4_K) << QByteArray(reinterpret_cast<char*>(b.data()), 144) << e;
    }
    {  // Q6_K: d = 0.5, scales j - 8, q(e) = (5 * e) % 64; x = d * scale[e / 16] * (q - 32)
        std::vector<uint8_t> b(210, 0);
        std::vector<float> e(256);
        auto q = [](int el) { return (5 * el) % 64; };
        for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 8));
        put16(b, 208, 0x3800);
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 32; ++l) {
                const int base = 128 * h;
                const int q1 = q(base + l), q2 = q(base + 32 + l), q3 = q(base + 64 + l), q4 = q(base + 96 + l);
                b[64 * h + l] = static_cast<uint8_t>((q1 & 15) | ((q3 & 15) << 4));
                b[64 * h + 32 + l] = static_cast<uint8_t>((q2 & 15) | ((q4 & 15) << 4));
                b[128 + 32 * h + l] =
                    static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        for (int el = 0; el < 256; ++el)
            e[el] = 0.5f * static_cast<float>(el / 16 - 8) * static_cast<float>(q(el) - 32);
        QTest::newRow("Q6_K") << int(DType::Q6_K) << QByteArray(reinterpret_cast<char*>(b.data()), 210) << e;
    }
    {  // I4_G128: two groups; d = 0.5, z = 8 then d = 0.25, z = 3; q(e) = (7 * e + 3) % 16
        std::vector<uint8_t> b(136, 0);
        auto q = [](int el) { return (7 * el + 3) % 16; };
        const uint16_t d16[2] = {0x3800, 0x3400};
        const int z[2] = {8, 3};
        const float d[2] = {0.5f, 0.25f};
        std::vector<float> e(256);
        for (int g = 0; g < 2; ++g) {
            uint8_t* blk = &b[68 * g];
            put16(b, 68 * g, d16[g]);
            blk[2] = static_cast<uint8_t>(z[g]);
            for (int sb = 0; sb < 4; ++sb)  // byte 4 + 16 sb + j: element 32 sb + j low, 32 sb + j + 16 high
                for (int j = 0; j < 16; ++j) {
                    const int e0 = 128 * g + 32 * sb + j;
                    blk[4 + 16 * sb + j] = static_cast<uint8_t>(q(e0) | (q(e0 + 16) << 4));
                }
            for (int i = 0; i < 128; ++i) e[128 * g + i] = d[g] * static_cast<float>(q(128 * g + i) - z[g]);
        }
        QTest::newRow("I4_G128") << int(DType::I4_G128) << QByteArray(reinterpret_cast<char*>(b.data()), 136) << e;
    }
    {  // I4_G64: three groups of 64 in 36-byte blocks; d = 0.5, 0.25, 2; z = 8, 3, 0; q(e) = (5 * e + 1) % 16
        std::vector<uint8_t> b(108, 0);
        auto q = [](int el) { return (5 * el + 1) % 16; };
        const uint16_t d16[3] = {0x3800, 0x3400, 0x4000};
        const int z[3] = {8, 3, 0};
        const float d[3] = {0.5f, 0.25f, 2.0f};
        std::vector<float> e(192);
        for (int g = 0; g < 3; ++g) {
            uint8_t* blk = &b[36 * g];
            put16(b, 36 * g, d16[g]);
            blk[2] = static_cast<uint8_t>(z[g]);
            for (int sb = 0; sb < 2; ++sb)  // byte 4 + 16 sb + j: element 32 sb + j low, 32 sb + j + 16 high
                for (int j = 0; j < 16; ++j) {
                    const int e0 = 64 * g + 32 * sb + j;
                    blk[4 + 16 * sb + j] = static_cast<uint8_t>(q(e0) | (q(e0 + 16) << 4));
                }
            for (int i = 0; i < 64; ++i) e[64 * g + i] = d[g] * static_cast<float>(q(64 * g + i) - z[g]);
        }
        QTest::newRow("I4_G64") << int(DType::I4_G64) << QByteArray(reinterpret_cast<char*>(b.data()), 108) << e;
    }
    {  // I8_ROW: float scale 0.01, q = (3 * e % 255) - 127 over 64 elements
        std::vector<uint8_t> b(4 + 64);
        const float scale = 0.01f;
        std::memcpy(&b[0], &scale, 4);
        std::vector<float> e(64);
        for (int el = 0; el < 64; ++el) {
            const int q = (3 * el) % 255 - 127;
            b[4 + el] = static_cast<uint8_t>(static_cast<int8_t>(q));
            e[el] = 0.01f * static_cast<float>(q);
        }
        QTest::newRow("I8_ROW") << int(DType::I8_ROW) << QByteArray(reinterpret_cast<char*>(b.data()), 68) << e;
    }
    {  // Q8_K: float d = 0.25, q = (e % 255) - 127
        std::vector<uint8_t> b(292, 0);
        const float d = 0.25f;
        std::memcpy(&b[0], &d, 4);
        std::vector<float> e(256);
        for (int el = 0; el < 256; ++el) {
            b[4 + el] = static_cast<uint8_t>(static_cast<int8_t>((el % 255) - 127));
            e[el] = 0.25f * ((el % 255) - 127);
        }
        QTest::newRow("Q8_K") << int(DType::Q8_K) << QByteArray(reinterpret_cast<char*>(b.data()), 292) << e;
    }
}

void TestQuantFormats::dequant_hand_blocks() {
    QFETCH(int, type);
    QFETCH(QByteArray, bytes);
    QFETCH(std::vector<float>, expected);
    const auto t = static_cast<DType>(type);
    QCOMPARE(static_cast<size_t>(bytes.size()), row_bytes(t, static_cast<int64_t>(expected.size())));
    std::vector<float> got(expected.size());
    dequantize_row(t, bytes.constData(), got.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != expected[i])
            QFAIL(qPrintable(QString("element %1: got %2, expected %3").arg(i).arg(got[i]).arg(expected[i])));
}

namespace {
nlohmann::json load_fixture() {
    std::ifstream in(kvs::test::fixture_path("quant_blocks.json"));
    if (!in) return {};
    return nlohmann::json::parse(in);
}
}  // namespace

void TestQuantFormats::gguf_fixture_dequant() {
    const auto j = load_fixture();
    QVERIFY2(!j.is_null(), "tests/fixtures/quant_blocks.json missing (tests/tools/make_quant_fixtures.py)");
    int n_checked = 0;
    for (const auto& e : j["entries"]) {
        const auto info = dtype_info(static_cast<uint32_t>([&] {
            for (DType t : {DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                            DType::Q4_K, DType::Q5_K, DType::Q6_K})
                if (dtype_name(t) == e["type"].get<std::string>()) return static_cast<uint32_t>(t);
            return 999u;
        }()));
        QVERIFY2(info.has_value(), e["type"].get<std::string>().c_str());
        const int64_t n = e["n"].get<int64_t>();
        const auto bytes = from_hex(e["bytes"].get<std::string>());
        const auto want = e["dequant"].get<std::vector<float>>();
        QCOMPARE(bytes.size(), row_bytes(info->type, n));
        std::vector<float> got(static_cast<size_t>(n));
        dequantize_row(info->type, bytes.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            const float tol = 1e-6f * std::max(1.0f, std::fabs(want[i]));
            if (std::fabs(got[i] - want[i]) > tol)
                QFAIL(qPrintable(QString("%1 element %2: got %3, gguf %4")
                                     .arg(QString::fromStdString(e["type"]))
                                     .arg(i)
                                     .arg(got[i])
                                     .arg(want[i])));
        }
        ++n_checked;
    }
    QVERIFY(n_checked >= 27);
}

// gguf's quantizers reproduce ggml's reference quantizers; ours must give the same bytes.
void TestQuantFormats::gguf_fixture_quantize() {
    const auto j = load_fixture();
    QVERIFY(!j.is_null());
    int n_checked = 0;
    for (const auto& e : j["entries"]) {
        if (!e.contains("input")) continue;
        const std::string name = e["type"];
        DType t = DType::F32;
        for (DType c : {DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0})
            if (dtype_name(c) == name) t = c;
        QVERIFY2(t != DType::F32, name.c_str());
        const auto x = e["input"].get<std::vector<float>>();
        const auto want = from_hex(e["bytes"].get<std::string>());
        std::vector<uint8_t> got(row_bytes(t, static_cast<int64_t>(x.size())));
        quantize_row(t, x.data(), got.data(), static_cast<int64_t>(x.size()));
        QCOMPARE(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
            if (got[i] != want[i])
                QFAIL(qPrintable(QString("%1 byte %2: got %3, gguf %4")
                                     .arg(QString::fromStdString(name))
                                     .arg(i)
                                     .arg(got[i])
                                     .arg(want[i])));
        ++n_checked;
    }
    QCOMPARE(n_checked, 21);
}

void TestQuantFormats::roundtrip_error_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<double>("max_rel_rms");
    // relative RMS error of quantize -> dequantize on N(0, 1) rows; uniform noise over
    // the same range would give ~1.4, a bug in the layout far more than these bounds
    QTest::newRow("F16") << int(DType::F16) << 3e-4;
    QTest::newRow("BF16") << int(DType::BF16) << 2.5e-3;
    QTest::newRow("Q8_0") << int(DType::Q8_0) << 0.0075;
    QTest::newRow("Q8_1") << int(DType::Q8_1) << 0.0075;
    QTest::newRow("Q8_K") << int(DType::Q8_K) << 0.0105;
    QTest::newRow("Q6_K") << int(DType::Q6_K) << 0.027;
    QTest::newRow("Q5_0") << int(DType::Q5_0) << 0.06;
    QTest::newRow("Q5_1") << int(DType::Q5_1) << 0.053;
    QTest::newRow("Q5_K") << int(DType::Q5_K) << 0.053;
    QTest::newRow("Q4_0") << int(DType::Q4_0) << 0.12;
    QTest::newRow("Q4_1") << int(DType::Q4_1) << 0.11;
    QTest::newRow("Q4_K") << int(DType::Q4_K) << 0.11;
    QTest::newRow("I8_ROW") << int(DType::I8_ROW) << 0.012;
    QTest::newRow("I4_G128") << int(DType::I4_G128) << 0.15;
    QTest::newRow("I4_G64") << int(DType::I4_G64) << 0.13;
}

void TestQuantFormats::roundtrip_error() {
    QFETCH(int, type);
    QFETCH(double, max_rel_rms);
    const auto t = static_cast<DType>(type);
    const int64_t n = 4096;
    const auto x = gaussian(static_cast<size_t>(n), 42u + static_cast<uint32_t>(type));
    std::vector<uint8_t> q(row_bytes(t, n));
    std::vector<float> y(static_cast<size_t>(n));
    quantize_row(t, x.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) err += (y[i] - x[i]) * double(y[i] - x[i]), ref += x[i] * double(x[i]);
    const double rel = std::sqrt(err / ref);
    qInfo("%s relative rms error %.5f (bound %.5f)", dtype_name(t).data(), rel, max_rel_rms);
    QVERIFY(rel < max_rel_rms);
    QVERIFY(rel > 0.0 || t == DType::F32);

    // an all-zero row quantizes to a row that dequantizes to exact zeros
    std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    quantize_row(t, zeros.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    for (float v : y) QCOMPARE(v, 0.0f);
}

void TestQuantFormats::q8_1_sum_field() {
    const auto x = gaussian(64, 7);
    std::vector<uint8_t> q(row_bytes(DType::Q8_1, 64));
    quantize_row(DType::Q8_1, x.data(), q.data(), 64);
    for (int b = 0; b < 2; ++b) {
        const uint8_t* blk = q.data() + 36 * b;
        uint16_t d16, s16;
        std::memcpy(&d16, blk, 2);
        std::memcpy(&s16, blk + 2, 2);
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(blk[4 + j]);
        const float expect = static_cast<float>(sum) * fp16_to_fp32(d16);  // s = d * sum(q), stored as fp16
        QVERIFY(std::fabs(fp16_to_fp32(s16) - expect) <= std::fabs(expect) * 2e-3f + 1e-6f);
    }
}

void TestQuantFormats::q8_k_bsums() {
    const auto x = gaussian(512, 9);
    std::vector<uint8_t> q(row_bytes(DType::Q8_K, 512));
    quantize_row(DType::Q8_K, x.data(), q.data(), 512);
    for (int b = 0; b < 2; ++b) {
        const uint8_t* blk = q.data() + 292 * b;
        for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += static_cast<int8_t>(blk[4 + 16 * g + l]);
            int16_t bs;
            std::memcpy(&bs, blk + 4 + 256 + 2 * g, 2);
            QCOMPARE(static_cast<int>(bs), sum);
        }
        for (int l = 0; l < 256; ++l) QVERIFY(static_cast<int8_t>(blk[4 + l]) >= -127);
    }
}

void TestQuantFormats::activation_types() {
    QCOMPARE(activation_type(DType::Q4_0), DType::Q8_0);
    QCOMPARE(activation_type(DType::Q5_0), DType::Q8_0);
    QCOMPARE(activation_type(DType::Q8_0), DType::Q8_0);
    QCOMPARE(activation_type(DType::Q4_1), DType::Q8_1);
    QCOMPARE(activation_type(DType::Q5_1), DType::Q8_1);
    QCOMPARE(activation_type(DType::Q4_K), DType::Q8_K);
    QCOMPARE(activation_type(DType::Q5_K), DType::Q8_K);
    QCOMPARE(activation_type(DType::Q6_K), DType::Q8_K);
    QCOMPARE(activation_type(DType::F16), DType::F32);
    QCOMPARE(activation_type(DType::BF16), DType::F32);
    QCOMPARE(activation_type(DType::I8_ROW), DType::Q8_0);
    QCOMPARE(activation_type(DType::I4_G128), DType::Q8_1);
    QCOMPARE(activation_type(DType::I4_G64), DType::Q8_1);
}

// KV Scope's own formats have ids outside GGML's range: a GGUF type field can never name
// them (dtype_info(uint32_t) is what the GGUF reader uses), while dtype_info(DType) knows them.
void TestQuantFormats::int_format_ids() {
    QVERIFY(!dtype_info(uint32_t{1000}).has_value());
    QVERIFY(!dtype_info(uint32_t{1001}).has_value());
    QVERIFY(!dtype_info(uint32_t{1002}).has_value());
    QVERIFY(dtype_info(uint32_t{3}).has_value());  // Q4_1 still parses
    QCOMPARE(QString::fromLatin1(dtype_name(DType::I8_ROW).data()), QString("I8_ROW"));
    QCOMPARE(QString::fromLatin1(dtype_name(DType::I4_G128).data()), QString("I4_G128"));
    QVERIFY(!dtype_info(DType::I4_G128).ggml && !dtype_info(DType::I8_ROW).ggml && dtype_info(DType::Q4_1).ggml);
    QVERIFY(dtype_info(DType::I4_G128).weight_type && dtype_info(DType::I8_ROW).weight_type);
    QCOMPARE(row_bytes(DType::I4_G128, 128), size_t{68});  // 4.25 bits per weight
    QCOMPARE(row_bytes(DType::I4_G128, 1536), size_t{12 * 68});
    QCOMPARE(QString::fromLatin1(dtype_name(DType::I4_G64).data()), QString("I4_G64"));
    QVERIFY(!dtype_info(DType::I4_G64).ggml && dtype_info(DType::I4_G64).weight_type);
    QCOMPARE(dtype_info(DType::I4_G64).block_size, 64);
    QCOMPARE(row_bytes(DType::I4_G64, 64), size_t{36});       // 4.5 bits per weight
    QCOMPARE(row_bytes(DType::I4_G64, 576), size_t{9 * 36});  // SmolLM2-135M's n_embd
    QCOMPARE(row_bytes(DType::I4_G64, 1536), size_t{24 * 36});
    QCOMPARE(i4_group_size(DType::I4_G128), 128);
    QCOMPARE(i4_group_size(DType::I4_G64), 64);
    QCOMPARE(i4_group_size(DType::Q4_1), 0);
    QVERIFY(i4_type_for_group(64) == DType::I4_G64 && i4_type_for_group(128) == DType::I4_G128);
    QVERIFY(!i4_type_for_group(32) && !i4_type_for_group(0));
    QCOMPARE(row_bytes(DType::I8_ROW, 576), size_t{4 + 576});  // scale + one byte per weight
    QCOMPARE(row_bytes(DType::I8_ROW, 32), size_t{36});
    QCOMPARE(row_bytes(DType::Q4_1, 64), size_t{40});  // GGML types unchanged
}

void TestQuantFormats::int_error_bound_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<QString>("kind");
    for (DType t : {DType::I4_G128, DType::I4_G64, DType::I8_ROW})
        for (const char* k : {"gaussian", "positive", "negative", "constant", "spike", "zero_mixed", "tiny"})
            QTest::addRow("%s/%s", dtype_name(t).data(), k) << int(t) << QString(k);
}

// Every element within half a step of its original: I4 |err| <= d / 2 of its group, I8
// |err| <= scale / 2 of its row (up to the float rounding of d * (q - z) and w / d).
// Groups that are all positive, all negative, constant, one spike, half zeros.
void TestQuantFormats::int_error_bound() {
    QFETCH(int, type);
    QFETCH(QString, kind);
    const auto t = static_cast<DType>(type);
    const int64_t n = 512;
    std::vector<float> x = gaussian(static_cast<size_t>(n), 77u);
    for (int64_t i = 0; i < n; ++i) {
        if (kind == "positive") x[i] = 1.0f + std::fabs(x[i]);
        else if (kind == "negative")
            x[i] = -0.5f - std::fabs(x[i]) * 0.1f;
        else if (kind == "constant")
            x[i] = 0.46875f;  // 15 * 2^-5: d exact in fp16
        else if (kind == "spike")
            x[i] = i % 128 == 5 ? 3.75f : 0.0f;  // 15 * 0.25
        else if (kind == "zero_mixed")
            x[i] = i % 2 ? 0.0f : x[i];
        else if (kind == "tiny")
            x[i] *= 1e-6f;
    }
    std::vector<uint8_t> q(row_bytes(t, n));
    std::vector<float> y(static_cast<size_t>(n));
    quantize_row(t, x.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    const bool i4 = i4_group_size(t) != 0;
    const int group = i4 ? i4_group_size(t) : static_cast<int>(n);
    for (int64_t g = 0; g < n / group; ++g) {
        float step;
        if (i4) {
            const uint8_t* blk = q.data() + (4 + group / 2) * g;
            uint16_t d16;
            std::memcpy(&d16, blk, 2);
            step = fp16_to_fp32(d16);
            QVERIFY(blk[2] <= 15);
            QCOMPARE(int(blk[3]), 0);
            float amax = 0.0f;  // d = max(range including 0) / 15, rounded up to fp16
            float lo = 0.0f, hi = 0.0f;
            for (int i = 0; i < group; ++i) lo = std::min(lo, x[g * group + i]), hi = std::max(hi, x[g * group + i]);
            amax = (hi - lo) / 15.0f;
            QVERIFY(step >= amax && step <= amax * (1.0f + 1.0f / 512.0f) + 6e-8f);
        } else {
            std::memcpy(&step, q.data(), 4);
            float amax = 0.0f;
            for (float v : x) amax = std::max(amax, std::fabs(v));
            QCOMPARE(step, amax / 127.0f);
        }
        for (int i = 0; i < group; ++i) {
            const int64_t e = g * group + i;
            const double err = std::fabs(double(y[e]) - x[e]);
            const double bound = step / 2.0 * (1.0 + 1e-5) + std::fabs(x[e]) * 1e-6;
            if (!(err <= bound))
                QFAIL(qPrintable(QString("element %1: %2 -> %3, error %4 > step/2 = %5")
                                     .arg(e)
                                     .arg(x[e])
                                     .arg(y[e])
                                     .arg(err)
                                     .arg(step / 2)));
        }
    }
    // values on the grid (range / 15 and range / 127 exact in the stored scale) come back exactly
    if (kind == "constant" || kind == "spike")
        for (int64_t i = 0; i < n; ++i) QCOMPARE(y[i], x[i]);
}

void TestQuantFormats::i4_pack_unpack_data() {
    QTest::addColumn<int>("type");
    QTest::newRow("I4_G128") << int(DType::I4_G128);
    QTest::newRow("I4_G64") << int(DType::I4_G64);
}

// AWQ checkpoints bring their own per-group scales, zero points and 4-bit quants.
void TestQuantFormats::i4_pack_unpack() {
    QFETCH(int, type);
    const auto t = static_cast<DType>(type);
    const int group = i4_group_size(t), n_groups = 256 / group;
    const size_t block = 4 + static_cast<size_t>(group) / 2;
    const int64_t n = 256;
    const float d_in[4] = {0.0125f, 2.0f, 0.75f, 0.0f};  // 0.0125 is not an fp16 value: stored rounded
    const int z_in[4] = {0, 15, 7, 9};
    std::vector<float> d(d_in, d_in + n_groups);
    std::vector<int> z(z_in, z_in + n_groups);
    std::vector<uint8_t> q(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) q[i] = static_cast<uint8_t>((i * 5 + i / 16) % 16);
    std::vector<uint8_t> row(row_bytes(t, n));
    QCOMPARE(row.size(), block * static_cast<size_t>(n_groups));
    QVERIFY(pack_i4_row(t, d.data(), z.data(), q.data(), n, row.data()));
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, row.data(), y.data(), n);
    std::vector<float> d_stored(static_cast<size_t>(n_groups));
    for (int g = 0; g < n_groups; ++g) d_stored[g] = g == 0 ? fp16_to_fp32(fp32_to_fp16(0.0125f)) : d_in[g];
    QVERIFY(d_stored[0] != 0.0125f);
    for (int64_t i = 0; i < n; ++i) QCOMPARE(y[i], d_stored[i / group] * static_cast<float>(q[i] - z[i / group]));
    std::vector<float> d2(static_cast<size_t>(n_groups));
    std::vector<int> z2(static_cast<size_t>(n_groups));
    std::vector<uint8_t> q2(static_cast<size_t>(n));
    unpack_i4_row(t, row.data(), n, d2.data(), z2.data(), q2.data());
    for (int g = 0; g < n_groups; ++g) {
        QCOMPARE(d2[g], d_stored[g]);
        QCOMPARE(z2[g], z[g]);
        QCOMPARE(int(row[block * g + 2]), z[g]);  // header: fp16 d, z, pad 0
        QCOMPARE(int(row[block * g + 3]), 0);
    }
    QVERIFY(q2 == q);
    // the nibble layout, byte by byte: group 1, sub-block 1, j = 3 holds elements group + 32 + 3 and + 16
    QCOMPARE(int(row[block + 4 + 16 + 3]), int(q[group + 35] | (q[group + 51] << 4)));
    if (t == DType::I4_G128) {  // the old spellings still work
        std::vector<uint8_t> old(row.size());
        QVERIFY(pack_i4_g128_row(d.data(), z.data(), q.data(), n, old.data()));
        QVERIFY(old == row);
    }

    // quantize_i4_group's outputs pack to the row quantize_row writes
    const auto x = gaussian(static_cast<size_t>(n), 5u);
    std::vector<float> dq(static_cast<size_t>(n_groups));
    std::vector<int> zq(static_cast<size_t>(n_groups));
    std::vector<uint8_t> qq(static_cast<size_t>(n)), a(row.size()), b(row.size());
    for (int g = 0; g < n_groups; ++g)
        quantize_i4_group(x.data() + group * g, group, &dq[g], &zq[g], qq.data() + group * g);
    QVERIFY(pack_i4_row(t, dq.data(), zq.data(), qq.data(), n, a.data()));
    quantize_row(t, x.data(), b.data(), n);
    QVERIFY(a == b);

    // out-of-range inputs are refused and nothing is written
    std::vector<uint8_t> untouched(row.size(), 0xAB), dst = untouched;
    std::vector<int> bad_z = z;
    bad_z[1] = 16;
    QVERIFY(!pack_i4_row(t, d.data(), bad_z.data(), q.data(), n, dst.data()));
    std::vector<float> bad_d = d;
    bad_d[n_groups - 1] = INFINITY;
    QVERIFY(!pack_i4_row(t, bad_d.data(), z.data(), q.data(), n, dst.data()));
    QVERIFY(!pack_i4_row(DType::Q4_1, d.data(), z.data(), q.data(), n, dst.data()));
    q[7] = 16;
    QVERIFY(!pack_i4_row(t, d.data(), z.data(), q.data(), n, dst.data()));
    QVERIFY(dst == untouched);
}

// A group of 128 is two groups of 64 with the same d and z: an I4_G128 row re-packed
// that way as I4_G64 dequantizes to the same floats (how a mixed 64 / 128 model is saved
// as one group-64 AWQ folder).
void TestQuantFormats::i4_g128_splits_into_g64() {
    const int64_t n = 640;
    const auto x = gaussian(static_cast<size_t>(n), 21u);
    std::vector<uint8_t> r128(row_bytes(DType::I4_G128, n)), r64(row_bytes(DType::I4_G64, n));
    quantize_row(DType::I4_G128, x.data(), r128.data(), n);
    float d[5];
    int z[5];
    std::vector<uint8_t> q(static_cast<size_t>(n));
    unpack_i4_row(DType::I4_G128, r128.data(), n, d, z, q.data());
    float d64[10];
    int z64[10];
    for (int g = 0; g < 10; ++g) d64[g] = d[g / 2], z64[g] = z[g / 2];
    QVERIFY(pack_i4_row(DType::I4_G64, d64, z64, q.data(), n, r64.data()));
    std::vector<float> y128(static_cast<size_t>(n)), y64(static_cast<size_t>(n));
    dequantize_row(DType::I4_G128, r128.data(), y128.data(), n);
    dequantize_row(DType::I4_G64, r64.data(), y64.data(), n);
    QVERIFY(y128 == y64);
    // and group-64 RTN fits this row more tightly (each half's step is at most the whole's)
    quantize_row(DType::I4_G64, x.data(), r64.data(), n);
    dequantize_row(DType::I4_G64, r64.data(), y64.data(), n);
    double e128 = 0, e64 = 0;
    for (int64_t i = 0; i < n; ++i)
        e128 += (y128[i] - x[i]) * double(y128[i] - x[i]), e64 += (y64[i] - x[i]) * double(y64[i] - x[i]);
    QVERIFY(e64 < e128);
}

void TestQuantFormats::i8_pack() {
    const int64_t n = 64;
    std::vector<int8_t> q(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(i * 4 - 127);
    std::vector<uint8_t> row(row_bytes(DType::I8_ROW, n));
    QVERIFY(pack_i8_row(0.5f, q.data(), n, row.data()));
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(DType::I8_ROW, row.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) QCOMPARE(y[i], 0.5f * static_cast<float>(i * 4 - 127));
    // quantize_i8_row: the largest |w| maps to +-127
    std::vector<float> x(static_cast<size_t>(n), 0.1f);
    x[9] = -2.54f;
    quantize_i8_row(x.data(), n, row.data());
    QCOMPARE(static_cast<int8_t>(row[4 + 9]), int8_t{-127});
    QCOMPARE(static_cast<int8_t>(row[4 + 0]), int8_t{5});  // 0.1 / (2.54 / 127) = 5
    q[3] = -128;
    QVERIFY(!pack_i8_row(0.5f, q.data(), n, row.data()));
}

QTEST_GUILESS_MAIN(TestQuantFormats)
#include "tst_quant_formats.moc"
