// ctest-labels: kernels
// GGML block formats: fp16/bf16 conversion, dequantization of hand-built blocks against
// hand-computed values, agreement with the `gguf` Python package (fixture written by
// tests/tools/make_quant_fixtures.py), and quantize -> dequantize error bounds.
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
        for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16)), e[j] = 2.0f * (j - 16);
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
        for (int c = 0; c < 4; ++c)      // 64-element chunk c: sub-blocks 2c (low nibbles), 2c+1 (high)
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
                b[128 + 32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        for (int el = 0; el < 256; ++el) e[el] = 0.5f * static_cast<float>(el / 16 - 8) * static_cast<float>(q(el) - 32);
        QTest::newRow("Q6_K") << int(DType::Q6_K) << QByteArray(reinterpret_cast<char*>(b.data()), 210) << e;
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
        if (got[i] != expected[i]) QFAIL(qPrintable(QString("element %1: got %2, expected %3").arg(i).arg(got[i]).arg(expected[i])));
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
                QFAIL(qPrintable(QString("%1 element %2: got %3, gguf %4").arg(QString::fromStdString(e["type"]))
                                     .arg(i).arg(got[i]).arg(want[i])));
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
                QFAIL(qPrintable(QString("%1 byte %2: got %3, gguf %4").arg(QString::fromStdString(name)).arg(i)
                                     .arg(got[i]).arg(want[i])));
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
}

QTEST_GUILESS_MAIN(TestQuantFormats)
#include "tst_quant_formats.moc"
