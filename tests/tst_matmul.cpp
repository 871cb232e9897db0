// ctest-labels: kernels
// The CPU matmul and its building blocks: vec_dot of every weight type at every SIMD
// level against a double-precision dot of the dequantized operands; matmul against a
// naive float reference over shapes, types, levels and thread counts; bitwise
// independence of the result from batching and threads; the thread pool.
// kernels headers first: backend.h has a field named `slots`, which Qt defines as a macro.
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/thread_pool.h"

#include <QtTest>

#include <atomic>
#include <cmath>
#include <random>
#include <vector>

using namespace kvs;
using namespace kvs::cpu;

namespace {

const DType kWeightTypes[] = {DType::F32,  DType::F16,    DType::BF16,    DType::Q4_0,  DType::Q4_1,
                              DType::Q5_0, DType::Q5_1,   DType::Q8_0,    DType::Q4_K,  DType::Q5_K,
                              DType::Q6_K, DType::I8_ROW, DType::I4_G128, DType::I4_G64};

bool is_int_format(DType t) { return t == DType::I8_ROW || i4_group_size(t) != 0; }

std::vector<float> gaussian(size_t n, uint32_t seed, float mean = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(mean, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

// A weight matrix in type t built from random floats; `deq` holds what it dequantizes to.
struct TestWeights {
    std::vector<uint8_t> data;  // [n_out, row_bytes]
    std::vector<float> deq;     // [n_out, n_in]
    WeightView view;
};

TestWeights make_weights(DType t, int64_t n_out, int64_t n_in, uint32_t seed) {
    TestWeights w;
    const auto src = gaussian(static_cast<size_t>(n_out * n_in), seed, 0.1f);  // a mean exercises the min terms
    const size_t rb = row_bytes(t, n_in);
    w.data.resize(rb * static_cast<size_t>(n_out));
    w.deq.resize(src.size());
    for (int64_t r = 0; r < n_out; ++r) {
        quantize_row(t, src.data() + r * n_in, w.data.data() + r * rb, n_in);
        dequantize_row(t, w.data.data() + r * rb, w.deq.data() + r * n_in, n_in);
    }
    w.view = WeightView{t, w.data.data(), n_in, n_out};
    return w;
}

std::vector<SimdLevel> levels() {
    std::vector<SimdLevel> l{SimdLevel::Scalar};
    if (detect_simd() >= SimdLevel::Avx2) l.push_back(SimdLevel::Avx2);
    return l;
}

bool fits(DType t, int64_t n_in) { return n_in % dtype_info(t).block_size == 0; }

}  // namespace

class TestMatmul : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void vec_dot_matches_dequantized_data();
    void vec_dot_matches_dequantized();
    void matmul_matches_reference_data();
    void matmul_matches_reference();
    void result_independent_of_batch_and_threads_data();
    void result_independent_of_batch_and_threads();
    void q4_tiles_give_the_same_bits();
    void thread_pool_runs_every_task_once();
    void thread_pool_many_small_regions();
};

void TestMatmul::vec_dot_matches_dequantized_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("level");
    QTest::addColumn<int>("n");
    for (DType t : kWeightTypes)
        for (SimdLevel l : levels())
            for (int n : {64, 128, 192, 256, 576, 1536})
                if (fits(t, n) && (n == 256 || n == 576 || n == 1536 || is_int_format(t)))
                    QTest::addRow("%s/%s/%d", dtype_name(t).data(), simd_name(l), n) << int(t) << int(l) << n;
}

// vec_dot(w, quantized a) == sum(dequant(w) * dequant(quantized a)) up to float rounding:
// both sides see the same quantized operands, so only accumulation order differs.
void TestMatmul::vec_dot_matches_dequantized() {
    QFETCH(int, type);
    QFETCH(int, level);
    QFETCH(int, n);
    const auto t = static_cast<DType>(type);
    const DType at = activation_type(t);
    const TestWeights w = make_weights(t, 1, n, 100u + static_cast<uint32_t>(type));
    const auto x = gaussian(static_cast<size_t>(n), 7u, 0.2f);
    std::vector<uint8_t> act(row_bytes(at, n));
    quantize_row(at, x.data(), act.data(), n);
    std::vector<float> a_deq(static_cast<size_t>(n));
    dequantize_row(at, act.data(), a_deq.data(), n);

    double ref = 0, nw = 0, na = 0;
    for (int i = 0; i < n; ++i) {
        ref += double(w.deq[i]) * a_deq[i];
        nw += double(w.deq[i]) * w.deq[i];
        na += double(a_deq[i]) * a_deq[i];
    }
    const double got = vec_dot(static_cast<SimdLevel>(level), t, w.data.data(), act.data(), n);
    const double err = std::fabs(got - ref) / std::sqrt(nw * na);
    // Q8_1 stores d * sum(q) as fp16 (relative error 2^-11 on the min term)
    const double bound = at == DType::Q8_1 ? 2e-4 : 2e-6;
    if (!(err < bound))
        QFAIL(qPrintable(
            QString("got %1, reference %2, normalized error %3 (bound %4)").arg(got).arg(ref).arg(err).arg(bound)));
}

void TestMatmul::matmul_matches_reference_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("level");
    QTest::addColumn<int>("n_threads");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("n_in");
    QTest::addColumn<int>("n_out");
    struct Shape {
        int n_tokens, n_in, n_out;
    };
    // n_in 100 (float types only) exercises the tail after the last 8-wide step
    const Shape shapes[] = {{1, 256, 33}, {3, 576, 100}, {7, 1536, 33}, {64, 512, 100},
                            {5, 256, 1},  {3, 100, 17},  {1, 100, 5}};
    // I8_ROW / I4_G128 / I4_G64 also over n_in 64 .. 1536 (multiples of 128, and of 64 only:
    // 576 is SmolLM2-135M's n_embd, 4.5 groups of 128) and odd n_out
    const Shape int_shapes[] = {{1, 128, 7},  {3, 384, 35},  {7, 640, 13},  {64, 1152, 21}, {1, 1536, 61}, {64, 128, 3},
                                {1, 576, 61}, {5, 576, 195}, {64, 576, 21}, {3, 192, 35},   {9, 64, 5},    {1, 64, 9}};
    for (DType t : kWeightTypes)
        for (SimdLevel l : levels())
            for (int th : {1, 2})
                for (const Shape& s : shapes)
                    if (fits(t, s.n_in))
                        QTest::addRow("%s/%s/t%d/%dx%dx%d", dtype_name(t).data(), simd_name(l), th, s.n_tokens, s.n_in,
                                      s.n_out)
                            << int(t) << int(l) << th << s.n_tokens << s.n_in << s.n_out;
    for (DType t : {DType::I8_ROW, DType::I4_G128, DType::I4_G64})
        for (SimdLevel l : levels())
            for (int th : {1, 2})
                for (const Shape& s : int_shapes)
                    if (fits(t, s.n_in))
                        QTest::addRow("%s/%s/t%d/%dx%dx%d", dtype_name(t).data(), simd_name(l), th, s.n_tokens, s.n_in,
                                      s.n_out)
                            << int(t) << int(l) << th << s.n_tokens << s.n_in << s.n_out;
}

// y = x . W^T against a naive double loop over the dequantized W and the float x. The
// matmul quantizes x to 8 bits, so the bound is the activation quantization error.
void TestMatmul::matmul_matches_reference() {
    QFETCH(int, type);
    QFETCH(int, level);
    QFETCH(int, n_threads);
    QFETCH(int, n_tokens);
    QFETCH(int, n_in);
    QFETCH(int, n_out);
    const auto t = static_cast<DType>(type);
    const TestWeights w = make_weights(t, n_out, n_in, 200u + static_cast<uint32_t>(type));
    const auto x = gaussian(static_cast<size_t>(n_tokens) * n_in, 11u);
    std::vector<float> y(static_cast<size_t>(n_tokens) * n_out, std::nanf(""));
    ThreadPool pool(n_threads);
    matmul(pool, static_cast<SimdLevel>(level), w.view, x.data(), y.data(), n_tokens);

    const bool float_act = activation_type(t) == DType::F32;
    const double bound = float_act ? 1e-5 : 3e-3;
    double worst = 0;
    for (int tok = 0; tok < n_tokens; ++tok) {
        double nx = 0;
        for (int i = 0; i < n_in; ++i) nx += double(x[tok * n_in + i]) * x[tok * n_in + i];
        for (int o = 0; o < n_out; ++o) {
            double ref = 0, nw = 0;
            for (int i = 0; i < n_in; ++i) {
                ref += double(w.deq[o * n_in + i]) * x[tok * n_in + i];
                nw += double(w.deq[o * n_in + i]) * w.deq[o * n_in + i];
            }
            const double err = std::fabs(y[tok * n_out + o] - ref) / std::sqrt(nw * nx);
            if (!(err < bound))
                QFAIL(qPrintable(QString("token %1 row %2: got %3, reference %4, normalized error %5")
                                     .arg(tok)
                                     .arg(o)
                                     .arg(y[tok * n_out + o])
                                     .arg(ref)
                                     .arg(err)));
            worst = std::max(worst, err);
        }
    }
    QVERIFY(worst > 0.0 || float_act);  // quantized activations cannot be exact
}

void TestMatmul::result_independent_of_batch_and_threads_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("level");
    QTest::addColumn<int>("n_in");
    for (DType t : kWeightTypes)
        for (SimdLevel l : levels())
            for (int n_in : {512, 576})  // 576: the 64-multiple rows only the 64-element groups fit
                if (fits(t, n_in) && (n_in == 512 || is_int_format(t)))
                    QTest::addRow("%s/%s/%d", dtype_name(t).data(), simd_name(l), n_in) << int(t) << int(l) << n_in;
}

// Token t of a 9-token call equals the same token alone, with 1 or 2 threads, bit for
// bit: the engine promises the same tokens for a fixed seed, batched or not.
void TestMatmul::result_independent_of_batch_and_threads() {
    QFETCH(int, type);
    QFETCH(int, level);
    QFETCH(int, n_in);
    const auto t = static_cast<DType>(type);
    const int n_out = 70, n_tokens = 9;
    const TestWeights w = make_weights(t, n_out, n_in, 300u + static_cast<uint32_t>(type));
    const auto x = gaussian(static_cast<size_t>(n_tokens) * n_in, 13u);
    ThreadPool one(1), two(2);
    std::vector<float> batched(static_cast<size_t>(n_tokens) * n_out), batched2(batched.size());
    matmul(one, static_cast<SimdLevel>(level), w.view, x.data(), batched.data(), n_tokens);
    matmul(two, static_cast<SimdLevel>(level), w.view, x.data(), batched2.data(), n_tokens);
    for (int tok = 0; tok < n_tokens; ++tok) {
        std::vector<float> single(static_cast<size_t>(n_out));
        matmul(two, static_cast<SimdLevel>(level), w.view, x.data() + tok * n_in, single.data(), 1);
        for (int o = 0; o < n_out; ++o) {
            QCOMPARE(batched[tok * n_out + o], single[o]);
            QCOMPARE(batched2[tok * n_out + o], single[o]);
        }
    }
}

// WeightView::cpu_tiles (the CPU backend's layout for Q4_0 / Q4_1) changes where the
// kernels read the weights, never the result: bit for bit the plain layout's output, for
// one token (decode), 2-4 (tiles decoded as they go), 5+ (decoded once per call), a row
// count that is not a multiple of 8 and several threads. Without the data pointer too:
// the tiles alone must be enough (the forward pass frees its fused row-major copies).
void TestMatmul::q4_tiles_give_the_same_bits() {
    if (detect_simd() < SimdLevel::Avx2) QSKIP("the tiled layout is an AVX2 kernel's");
    ThreadPool pool(2);
    for (DType t : {DType::Q4_0, DType::Q4_1})
        for (int64_t n_out : {int64_t{70}, int64_t{576}})
            for (int n_tokens : {1, 2, 3, 5, 9, 64}) {
                const int64_t n_in = 576;
                const TestWeights w = make_weights(t, n_out, n_in, 500u + static_cast<uint32_t>(n_out));
                std::vector<uint8_t> tiles(q4_tiles_bytes(n_in, n_out));
                pack_q4_tiles(t, w.view.data, n_in, n_out, tiles.data());
                WeightView tiled = w.view;
                tiled.cpu_tiles = tiles.data();
                tiled.data = nullptr;
                const auto x = gaussian(static_cast<size_t>(n_tokens) * n_in, 17u + static_cast<uint32_t>(n_tokens));
                std::vector<float> plain(static_cast<size_t>(n_tokens * n_out)), got(plain.size(), std::nanf(""));
                matmul(pool, SimdLevel::Avx2, w.view, x.data(), plain.data(), n_tokens);
                matmul(pool, SimdLevel::Avx2, tiled, x.data(), got.data(), n_tokens);
                for (size_t i = 0; i < plain.size(); ++i)
                    QVERIFY2(plain[i] == got[i], qPrintable(QString("%1 %2x%3, %4 tokens, output %5: %6 vs %7")
                                                                .arg(dtype_name(t).data())
                                                                .arg(n_out)
                                                                .arg(n_in)
                                                                .arg(n_tokens)
                                                                .arg(i)
                                                                .arg(got[i])
                                                                .arg(plain[i])));
            }
}

void TestMatmul::thread_pool_runs_every_task_once() {
    for (int n_threads : {1, 2, 3}) {
        ThreadPool pool(n_threads);
        QCOMPARE(pool.size(), n_threads);
        for (int64_t n_tasks : {0, 1, 2, 7, 1000}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n_tasks));
            std::atomic<bool> bad_thread{false};
            pool.parallel_for(n_tasks, [&](int64_t task, int thread) {
                hits[static_cast<size_t>(task)].fetch_add(1);
                if (thread < 0 || thread >= n_threads) bad_thread = true;
            });
            for (auto& h : hits) QCOMPARE(h.load(), 1);
            QVERIFY(!bad_thread);
        }
    }
    ThreadPool all(0);
    QVERIFY(all.size() >= 1);
}

// A decode step issues hundreds of small regions: they must stay correct and cheap.
void TestMatmul::thread_pool_many_small_regions() {
    ThreadPool pool(2);
    std::atomic<int64_t> sum{0};
    const int n_regions = 20000;
    QElapsedTimer timer;
    timer.start();
    for (int r = 0; r < n_regions; ++r) pool.parallel_for(4, [&](int64_t task, int) { sum.fetch_add(task + 1); });
    const double us = double(timer.nsecsElapsed()) / 1e3 / n_regions;
    QCOMPARE(sum.load(), int64_t{10} * n_regions);
    qInfo("parallel_for(4 tasks), 2 threads: %.2f us per region", us);
}

QTEST_GUILESS_MAIN(TestMatmul)
#include "tst_matmul.moc"
