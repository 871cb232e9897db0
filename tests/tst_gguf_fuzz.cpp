// ctest-labels: unit
// Bad GGUF input never crashes, hangs or allocates absurd memory: hundreds of mutated
// copies of a tiny model and of the default model's header region (truncations at many
// offsets including 0 bytes, random bit flips in the header / metadata / tensor infos,
// huge counts and lengths) must each either load or fail with a non-empty message.
// Deterministic (fixed seed); the address space is capped so a runaway allocation fails.
#include <QtTest>

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "engine/model/gguf_reader.h"
#include "engine/model/model.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"

using namespace kvs;

namespace {

struct Tally {
    int loaded = 0;
    int rejected = 0;
};

std::vector<uint8_t> read_file(const std::string& path, size_t max_bytes) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> b(max_bytes);
    in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(max_bytes));
    b.resize(static_cast<size_t>(in.gcount()));
    return b;
}

// Writes bytes and, when full_size is larger, extends the file with zeros (sparse) to it.
void write_file(const std::string& path, const std::vector<uint8_t>& b, size_t full_size) {
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    if (full_size > b.size()) QVERIFY(::truncate(path.c_str(), static_cast<off_t>(full_size)) == 0);
}

// Loads one mutated file; fails the test on an empty message, a slow load or a model
// whose basic invariants do not hold.
void check_one(const std::string& path, const std::string& what, Tally& t) {
    QElapsedTimer timer;
    timer.start();
    auto r = load_model(path);
    QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::fromStdString(what) + ": load took too long"));
    if (!r.is_ok()) {
        QVERIFY2(!r.message().empty() && r.message() != "ok", what.c_str());
        if (qEnvironmentVariableIsSet("KVS_FUZZ_VERBOSE")) qInfo("%s -> %s", what.c_str(), r.message().c_str());
        ++t.rejected;
        return;
    }
    const Model& m = *r.value();
    QVERIFY2(int(m.layers.size()) == m.config.n_layer, what.c_str());
    QVERIFY2(int(m.vocab.tokens.size()) == m.config.n_vocab, what.c_str());
    QVERIFY2(m.token_embd.data && m.output.data && m.output_norm, what.c_str());
    ++t.loaded;
}

// Truncations, bit flips and huge values over bytes [0, region) of `orig`.
void fuzz(const std::vector<uint8_t>& orig, size_t region, size_t full_size, int n_trunc, int n_flip, int n_huge,
          uint32_t seed, const std::string& tag, Tally& t) {
    std::mt19937 rng(seed);
    const std::string path = test::output_path("fuzz_" + tag + ".gguf");
    // Truncations: every byte of the first 64, then spread over the region and the data.
    std::vector<size_t> cuts;
    for (size_t i = 0; i < 64 && i < orig.size(); ++i) cuts.push_back(i);
    for (int i = 0; i < n_trunc; ++i) cuts.push_back(std::uniform_int_distribution<size_t>(0, region)(rng));
    for (size_t cut : cuts) {
        write_file(path, std::vector<uint8_t>(orig.begin(), orig.begin() + std::min(cut, orig.size())), 0);
        check_one(path, tag + " truncated to " + std::to_string(cut), t);
        if (QTest::currentTestFailed()) return;
    }
    std::uniform_int_distribution<size_t> pos(0, region - 1);
    for (int i = 0; i < n_flip; ++i) {
        std::vector<uint8_t> b = orig;
        const int n_bits = 1 + int(rng() % 4);
        std::string what = tag + " bits flipped at";
        for (int k = 0; k < n_bits; ++k) {
            const size_t p = pos(rng);
            b[p] ^= uint8_t(1u << (rng() % 8));
            what += " " + std::to_string(p);
        }
        write_file(path, b, full_size);
        check_one(path, what, t);
        if (QTest::currentTestFailed()) return;
    }
    const uint64_t huge[] = {~0ull, 1ull << 63, 1ull << 62, 1ull << 40, 0xffffffffull, 0x7fffffffull, 1ull << 31};
    for (int i = 0; i < n_huge; ++i) {
        std::vector<uint8_t> b = orig;
        const size_t p = std::min(pos(rng), region - 8);
        const uint64_t v = huge[rng() % 7];
        std::memcpy(&b[p], &v, 8);
        write_file(path, b, full_size);
        check_one(path, tag + " value " + std::to_string(v) + " at " + std::to_string(p), t);
        if (QTest::currentTestFailed()) return;
    }
}

}  // namespace

class TstGgufFuzz : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void tiny_model();
    void default_model_header();
};

void TstGgufFuzz::initTestCase() {
    // 16 GiB of address space: enough for Qt, the 100 MB mapping and the tests; an
    // allocation sized by a corrupt count fails instead of swapping the machine.
    // Under AddressSanitizer the cap would refuse ASan's own terabytes of shadow mappings;
    // there the same guard comes from ASAN_OPTIONS (max_allocation_size_mb=16384 with
    // allocator_may_return_null=1, set for every test in cmake/KvscopeBuildFlags.cmake).
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit lim {};
    lim.rlim_cur = lim.rlim_max = rlim_t(16) << 30;
    setrlimit(RLIMIT_AS, &lim);
#endif
}

void TstGgufFuzz::tiny_model() {
    test::TinyModelSpec spec;
    spec.n_embd = 32;
    spec.n_head = 2;
    spec.n_kv_head = 1;
    spec.n_ff = 64;
    spec.n_merges = 16;
    spec.weight_type = DType::Q8_0;
    spec.tied = false;
    const std::string path = test::output_path("fuzz_tiny_src.gguf");
    QVERIFY(test::write_tiny_gguf(path, spec).is_ok());
    auto g = GgufFile::open(path);
    QVERIFY2(g.is_ok(), g.message().c_str());
    const size_t header = g.value()->data_offset(), size = g.value()->file_size();
    const auto orig = read_file(path, size);
    Tally t;
    check_one(path, "unmutated", t);
    QCOMPARE(t.loaded, 1);
    fuzz(orig, header, size, 150, 250, 100, 1234, "tiny", t);
    if (QTest::currentTestFailed()) return;
    // Truncations inside the tensor data too.
    fuzz(orig, size, size, 40, 0, 0, 99, "tiny_data", t);
    qInfo("tiny: %d loaded, %d rejected", t.loaded, t.rejected);
    QVERIFY(t.rejected > 200);  // most header damage must be caught
    QVERIFY(t.loaded > 10);     // flips inside token text, scores, ... still load
}

void TstGgufFuzz::default_model_header() {
    const std::string path = test::default_model_path();
    if (path.empty()) QSKIP("default model not installed (run the set-up script)");
    auto g = GgufFile::open(path);
    QVERIFY2(g.is_ok(), g.message().c_str());
    const size_t header = g.value()->data_offset(), size = g.value()->file_size();
    // The header region only; the tensor data of each mutated copy is zeros (a sparse file).
    const auto orig = read_file(path, header);
    QCOMPARE(orig.size(), header);
    Tally t;
    fuzz(orig, header, size, 40, 80, 40, 777, "default", t);
    qInfo("default model header: %d loaded, %d rejected", t.loaded, t.rejected);
    QVERIFY(t.rejected > 40);
}

QTEST_GUILESS_MAIN(TstGgufFuzz)
#include "tst_gguf_fuzz.moc"
