// ctest-labels: unit engine
// KV tiers (engine/kv_cache/kv_tiers.h) end to end on a tiny generated model: a prompt's
// cached blocks evicted from a small device pool come back from the CPU tier, and from the
// disk store after the engine is destroyed and made again, with the greedy output equal to
// the prompt run alone on a fresh SequenceRunner (no prefix cache, no tiers); damaged store
// files (truncated, flipped bytes, changed header fields, swapped between blocks, garbage)
// are skipped with a message and never loaded; a long random workload never lets the CPU
// tier or the disk folder pass its bound; another model, adapter or KV type never hits; the
// model fingerprint covers an NF4_DQ tensor's per-tensor tail.
#include "engine/kv_cache/kv_disk_store.h"
#include "engine/kv_cache/kv_tiers.h"
#include "engine/lora/lora_adapter.h"
#include "engine/quant/quantize.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/sequence_runner.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <random>

#include "tests/support/greedy_alone.h"
#include "tests/support/greedy_params.h"
#include "tests/support/kv_invariants.h"
#include "tests/support/tiny_model.h"

using namespace kvs;
namespace fs = std::filesystem;

namespace {

constexpr int kBlock = 8;       // tokens per block
constexpr int kPoolBlocks = 12;  // device pool: 96 tokens
constexpr int kGen = 6;

test::TinyModelSpec spec(uint32_t seed) {
    test::TinyModelSpec s;
    s.n_embd = 64;
    s.n_head = 2;  // head_dim 32: an int8 cache works too
    s.n_kv_head = 2;
    s.weight_std = 0.3f;  // outputs that depend strongly on the context: a wrong KV block shows
    s.seed = seed;
    return s;
}

EngineOptions tier_options(const QString& root, int64_t cpu_bytes, int64_t disk_bytes, int pool_blocks = kPoolBlocks,
                           DType kv_type = DType::F16) {
    EngineOptions o;
    o.backend = "cpu";
    o.n_threads = 1;
    o.block_size = kBlock;
    o.kv_blocks = pool_blocks;
    o.kv_type = kv_type;
    o.max_model_len = 256;
    o.scheduler.max_num_batched_tokens = 64;
    o.snapshot_every = 0;
    o.kv_cpu_tier_bytes = cpu_bytes;
    o.kv_disk_bytes = disk_bytes;
    o.kv_disk_dir = root.toStdString();
    return o;
}

std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> m, const EngineOptions& o) {
    auto e = Engine::create(std::move(m), nullptr, o);
    if (!e) qFatal("Engine::create: %s", e.message().c_str());
    return std::move(*e);
}

std::vector<int32_t> run_one(Engine& e, const std::vector<int32_t>& prompt, int n,
                             std::shared_ptr<const LoraAdapter> adapter = nullptr) {
    GenerationRequest g;
    g.prompt = prompt;
    g.params = test::greedy(n);
    g.adapter = std::move(adapter);
    auto id = e.submit(std::move(g));
    if (!id) qFatal("submit: %s", id.message().c_str());
    if (Status st = e.run_until_idle(); !st) qFatal("run_until_idle: %s", st.message().c_str());
    return e.output_tokens(*id);
}

std::vector<int32_t> alone(std::shared_ptr<const Model> m, const std::vector<int32_t>& prompt, int n,
                           DType kv_type = DType::F16) {
    RunnerOptions ro;
    ro.n_ctx = 256;
    ro.n_threads = 1;
    ro.backend = "cpu";
    ro.block_size = kBlock;
    ro.kv_type = kv_type;
    auto r = SequenceRunner::create(m, ro);
    if (!r) qFatal("SequenceRunner::create: %s", r.message().c_str());
    return test::greedy_alone(**r, m->config.n_vocab, prompt, n);
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int n_vocab) {
    std::uniform_int_distribution<int32_t> d(3, n_vocab - 1);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = d(rng);
    return v;
}

// The block files of a store folder (*.kvb), by name.
QStringList block_files(const QString& folder) {
    return QDir(folder).entryList({"*.kvb"}, QDir::Files, QDir::Name);
}
int64_t folder_kvb_bytes(const QString& folder) {
    int64_t sum = 0;
    for (const QString& f : block_files(folder)) sum += QFileInfo(folder + "/" + f).size();
    return sum;
}

QByteArray read_all(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}
void write_all(const QString& path, const QByteArray& b) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) qFatal("cannot write %s", qPrintable(path));
    f.write(b);
}

// The file (in `folder`) whose header's token ids (read at the documented offset 80, not
// through the store) are `tokens`; "" if none.
QString file_with_tokens(const QString& folder, const std::vector<int32_t>& tokens) {
    for (const QString& name : block_files(folder)) {
        const QByteArray b = read_all(folder + "/" + name);
        const size_t need = 80 + 4 * tokens.size();
        if (static_cast<size_t>(b.size()) < need) continue;
        if (std::memcmp(b.constData() + 80, tokens.data(), 4 * tokens.size()) == 0) return name;
    }
    return {};
}

void copy_folder(const QString& from, const QString& to) {
    QDir().mkpath(to);
    for (const QString& f : QDir(from).entryList(QDir::Files)) QFile::copy(from + "/" + f, to + "/" + f);
}

bool any_message_names(const KvTiers& t, const QString& what) {
    for (const auto& m : t.messages())
        if (QString::fromStdString(m).contains(what)) return true;
    return false;
}

}  // namespace

class TstKvTiers : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cpuTierBringsEvictedBlocksBack();
    void diskStoreAcrossRestart();
    void damagedFilesAreNeverLoaded_data();
    void damagedFilesAreNeverLoaded();
    void unwritableFolderIsAClearError();
    void boundsHoldUnderRandomWorkload();
    void keysIncludeModelAdapterAndKvType();
    void fingerprintHashesTheNf4DqTail();

private:
    // The pristine store of model A after one run of m_prompt and the filler (disk only).
    QString make_store(const QString& root);
    // Runs the prompt on the model, then a filler prompt that takes the whole pool (every
    // cached block of the prompt is evicted), returning the prompt's output.
    std::vector<int32_t> run_and_evict(Engine& e, const std::vector<int32_t>& prompt);

    QTemporaryDir m_dir;
    std::shared_ptr<const Model> m_a, m_b;
    std::vector<int32_t> m_prompt, m_filler;
    std::vector<int32_t> m_cold;  // m_prompt alone on model A
    int m_full_blocks = 0;        // prompt blocks a lookup may take: (len - 1) / block size
    int64_t m_block_bytes = 0;    // one block's KV bytes (F16, model A)
};

void TstKvTiers::initTestCase() {
    QVERIFY(m_dir.isValid());
    auto a = test::write_and_load_tiny_gguf((m_dir.path() + "/a.gguf").toStdString(), spec(1));
    auto b = test::write_and_load_tiny_gguf((m_dir.path() + "/b.gguf").toStdString(), spec(2));
    QVERIFY2(a && b, "tiny models");
    m_a = *a;
    m_b = *b;
    std::mt19937 rng(7);
    m_prompt = random_tokens(rng, 60, m_a->config.n_vocab);
    // prompt + output of the filler: exactly the pool (89 + 8 - 1 = 96 tokens with KV).
    m_filler = random_tokens(rng, kPoolBlocks * kBlock - 7, m_a->config.n_vocab);
    m_cold = alone(m_a, m_prompt, kGen);
    QCOMPARE(static_cast<int>(m_cold.size()), kGen);
    m_full_blocks = (static_cast<int>(m_prompt.size()) - 1) / kBlock;
    const ModelConfig& c = m_a->config;
    m_block_bytes = 2LL * c.n_layer * kBlock * c.n_kv_head * c.head_dim * 2;  // K and V, fp16, every layer
}

std::vector<int32_t> TstKvTiers::run_and_evict(Engine& e, const std::vector<int32_t>& prompt) {
    auto out = run_one(e, prompt, kGen);
    run_one(e, m_filler, 8);
    return out;
}

void TstKvTiers::cpuTierBringsEvictedBlocksBack() {
    QTemporaryDir root;
    auto e = make_engine(m_a, tier_options(root.path(), 64 * m_block_bytes, 0));
    QVERIFY(e->kv_tiers() && e->kv_tiers()->cpu() && !e->kv_tiers()->disk());
    QCOMPARE(run_and_evict(*e, m_prompt), m_cold);
    // Every full block of the prompt went to the CPU tier (the filler took the whole pool).
    QVERIFY(e->kv_tiers()->stats().spilled_blocks >= m_full_blocks);
    QCOMPARE(e->kv_cache().stats().cpu_hit_tokens, int64_t{0});
    const int64_t hits_before = e->kv_cache().stats().hit_tokens;

    QCOMPARE(run_one(*e, m_prompt, kGen), m_cold);
    const KVCacheStats s = e->kv_cache().stats();
    QCOMPARE(s.cpu_hit_tokens, int64_t{m_full_blocks} * kBlock);
    QCOMPARE(s.disk_hit_tokens, int64_t{0});
    QCOMPARE(s.hit_tokens - hits_before, int64_t{m_full_blocks} * kBlock);
    QCOMPARE(e->kv_tiers()->cpu()->bytes(), e->kv_tiers()->cpu()->n_blocks() * m_block_bytes);
    const EngineSnapshot snap = e->snapshot(StepRecord{});
    QVERIFY(snap.kv_tiers.enabled);
    QCOMPARE(snap.kv_tiers.cpu_hit_blocks, int64_t{m_full_blocks});

    // Without tiers the same sequence recomputes the prompt: no tier hits at all.
    auto plain = make_engine(m_a, tier_options(root.path(), 0, 0));
    QVERIFY(!plain->kv_tiers());
    QCOMPARE(run_and_evict(*plain, m_prompt), m_cold);
    QCOMPARE(run_one(*plain, m_prompt, kGen), m_cold);
    QCOMPARE(plain->kv_cache().stats().cpu_hit_tokens, int64_t{0});
    QCOMPARE(plain->kv_cache().stats().hit_tokens, int64_t{0});
}

QString TstKvTiers::make_store(const QString& root) {
    auto e = make_engine(m_a, tier_options(root, 0, 1 << 20));
    const QString folder = QString::fromStdString(e->kv_tiers()->disk()->folder());
    if (run_and_evict(*e, m_prompt) != m_cold) qFatal("make_store: the first run differs from the cold run");
    return folder;
}

void TstKvTiers::diskStoreAcrossRestart() {
    QTemporaryDir root;
    QString folder;
    {
        // A CPU tier of two blocks: the prompt's blocks pass through it to the disk.
        auto e = make_engine(m_a, tier_options(root.path(), 2 * m_block_bytes, 1 << 20));
        folder = QString::fromStdString(e->kv_tiers()->disk()->folder());
        QCOMPARE(run_and_evict(*e, m_prompt), m_cold);
        QVERIFY(e->kv_tiers()->cpu()->n_blocks() <= 2);
        QVERIFY(e->kv_tiers()->disk()->n_blocks() >= m_full_blocks - 2);
    }
    QVERIFY(folder.startsWith(root.path() + "/"));
    // Each block of the prompt is in a file whose header (read here at the documented
    // offsets) says magic, version, block size and the block's own tokens.
    for (int i = 0; i < m_full_blocks; ++i) {
        const std::vector<int32_t> toks(m_prompt.begin() + i * kBlock, m_prompt.begin() + (i + 1) * kBlock);
        const QString name = file_with_tokens(folder, toks);
        QVERIFY2(!name.isEmpty(), qPrintable(QString("no file for block %1").arg(i)));
        const QByteArray b = read_all(folder + "/" + name);
        QCOMPARE(b.left(8), QByteArray("KVSTIER\0", 8));
        uint32_t version = 0, block_size = 0, n_tok = 0;
        uint64_t payload = 0;
        std::memcpy(&version, b.constData() + 8, 4);
        std::memcpy(&block_size, b.constData() + 52, 4);
        std::memcpy(&n_tok, b.constData() + 60, 4);
        std::memcpy(&payload, b.constData() + 64, 8);
        QCOMPARE(version, 1u);
        QCOMPARE(block_size, uint32_t{kBlock});
        QCOMPARE(n_tok, uint32_t{kBlock});
        QCOMPARE(static_cast<int64_t>(payload), m_block_bytes);
        QCOMPARE(static_cast<int64_t>(b.size()), 80 + 4 * kBlock + 8 + m_block_bytes);
    }
    // "Restart": a new engine on the same folder finds them by scanning the headers.
    for (int64_t cpu : {int64_t{0}, 64 * m_block_bytes}) {
        auto e = make_engine(m_a, tier_options(root.path(), cpu, 1 << 20));
        QCOMPARE(e->kv_tiers()->disk()->n_blocks(), static_cast<int>(block_files(folder).size()));
        QCOMPARE(run_one(*e, m_prompt, kGen), m_cold);
        QCOMPARE(e->kv_cache().stats().disk_hit_tokens, int64_t{m_full_blocks} * kBlock);
        QCOMPARE(e->kv_cache().stats().cpu_hit_tokens, int64_t{0});
        QCOMPARE(e->kv_tiers()->stats().bad_files, int64_t{0});
    }
}

void TstKvTiers::damagedFilesAreNeverLoaded_data() {
    QTest::addColumn<QString>("damage");
    QTest::addColumn<int>("seed");
    for (const char* d : {"truncate", "payload-byte", "header-byte", "header-field", "tokens-field", "swap",
                          "garbage-named", "garbage-other", "empty", "folder-named", "grown"})
        for (int seed = 1; seed <= 4; ++seed)
            QTest::newRow(qPrintable(QString("%1/%2").arg(d).arg(seed))) << QString(d) << seed;
}

void TstKvTiers::damagedFilesAreNeverLoaded() {
    QFETCH(QString, damage);
    QTemporaryDir root;
    const QString folder = make_store(root.path());
    const int n_files = static_cast<int>(block_files(folder).size());
    QVERIFY(n_files >= m_full_blocks);
    QFETCH(int, seed);
    std::mt19937 rng(static_cast<uint32_t>(seed * 7919 + qHash(damage)));
    // The prompt's first block: every lookup of the prompt reaches its file.
    const QString first =
        file_with_tokens(folder, std::vector<int32_t>(m_prompt.begin(), m_prompt.begin() + kBlock));
    QVERIFY(!first.isEmpty());
    const QString path = folder + "/" + first;
    QByteArray b = read_all(path);
    const int header = 80 + 4 * kBlock + 8;
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi - 1)(rng); };
    bool names_first = true;  // the report names the damaged file
    if (damage == "truncate") {
        write_all(path, b.left(pick(0, b.size())));
    } else if (damage == "payload-byte") {
        b[pick(header, b.size())] ^= static_cast<char>(1 << pick(0, 8));
        write_all(path, b);
    } else if (damage == "header-byte") {
        b[pick(0, header)] ^= static_cast<char>(1 << pick(0, 8));
        write_all(path, b);
    } else if (damage == "header-field" || damage == "tokens-field") {
        // A consistent file (both checksums right) that says something else: another
        // model, KV type, block size, layer count, salt or key; or other tokens.
        auto h = decode_block_header(reinterpret_cast<const uint8_t*>(b.constData()), static_cast<size_t>(b.size()));
        QVERIFY(static_cast<bool>(h));
        BlockFileHeader x = *h;
        if (damage == "tokens-field") {
            x.tokens[static_cast<size_t>(pick(0, kBlock))] ^= 1;
        } else {
            switch (pick(0, 6)) {
                case 0: x.model_fingerprint ^= 1; break;
                case 1: x.kv_type = static_cast<uint32_t>(DType::Q8_0); break;
                case 2: x.block_size = 16; break;
                case 3: x.n_layer += 1; break;
                case 4: x.salt = 12345; break;
                default: x.chain_hash ^= 1; break;
            }
        }
        const std::vector<uint8_t> payload(b.begin() + header, b.end());
        const std::vector<uint8_t> file = encode_block_file(x, payload);
        write_all(path, QByteArray(reinterpret_cast<const char*>(file.data()), static_cast<qsizetype>(file.size())));
    } else if (damage == "swap") {
        // Another block's file under this one's name (and this one's under the other's).
        QStringList names = block_files(folder);
        names.removeAll(first);
        const QString other = names[pick(0, static_cast<int>(names.size()))];
        const QByteArray ob = read_all(folder + "/" + other);
        write_all(folder + "/" + other, b);
        write_all(path, ob);
    } else if (damage == "garbage-named" || damage == "empty") {
        // Random bytes (or nothing) under the first block's name, and a stray file too.
        QByteArray g(pick(0, 2 * b.size()), '\0');
        for (auto& c : g) c = static_cast<char>(pick(0, 256));
        if (damage == "empty") g.clear();
        if (pick(0, 2) == 0 && g.size() >= 8) std::memcpy(g.data(), "KVSTIER\0", 8);  // even with the magic
        write_all(path, g);
        write_all(folder + "/0000000000000000.kvb", g);
    } else if (damage == "garbage-other") {
        write_all(folder + "/notes.txt", "not a block");
        write_all(folder + "/" + first + ".tmp.999", b.left(10));
        names_first = false;  // the first block stays good: it must still be a hit
    } else if (damage == "folder-named") {
        QFile::remove(path);
        QVERIFY(QDir().mkpath(path));
    } else if (damage == "grown") {
        write_all(path, b + QByteArray(pick(1, 64), 'x'));
    }

    auto e = make_engine(m_a, tier_options(root.path(), 64 * m_block_bytes, 1 << 20));
    QCOMPARE(run_one(*e, m_prompt, kGen), m_cold);
    const KVCacheStats s = e->kv_cache().stats();
    const KvTiers& t = *e->kv_tiers();
    if (names_first) {
        // The first block's file was bad: nothing of the prompt came from the tiers, the file
        // was reported by name (at the scan or at the load), and it is gone.
        QCOMPARE(s.disk_hit_tokens + s.cpu_hit_tokens, int64_t{0});
        QVERIFY2(any_message_names(t, first), qPrintable(QString::fromStdString(
                                                  t.messages().empty() ? "no message" : t.messages().back())));
        if (damage != "folder-named") QVERIFY(t.stats().bad_files >= 1);
        if (damage != "folder-named") QVERIFY(!QFileInfo(path).isFile());  // deleted
    } else {
        QCOMPARE(s.disk_hit_tokens, int64_t{m_full_blocks} * kBlock);
        QVERIFY(any_message_names(t, "notes.txt"));
        QVERIFY(!QFileInfo::exists(folder + "/" + first + ".tmp.999"));
    }
    QVERIFY(folder_kvb_bytes(folder) <= t.disk()->limit_bytes());
}

void TstKvTiers::unwritableFolderIsAClearError() {
    QTemporaryDir root;
    const QString blocker = root.path() + "/file";
    write_all(blocker, "x");
    auto e = Engine::create(m_a, nullptr, tier_options(blocker, 0, 1 << 20));  // a file where the folder should be
    QVERIFY(!e);
    QVERIFY2(QString::fromStdString(e.message()).contains(blocker), e.message().c_str());
}

void TstKvTiers::boundsHoldUnderRandomWorkload() {
    QTemporaryDir root;
    const int64_t cpu_limit = 5 * m_block_bytes + m_block_bytes / 2;
    const int64_t file_bytes = 80 + 4 * kBlock + 8 + m_block_bytes;
    const int64_t disk_limit = 9 * file_bytes + 100;
    std::mt19937 rng(11);
    const int n_vocab = m_a->config.n_vocab;
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < 4; ++i) prefixes.push_back(random_tokens(rng, 16 + 8 * i, n_vocab));
    struct Sent {
        RequestId id;
        std::vector<int32_t> prompt;
        int n;
    };
    std::vector<Sent> sent;
    int64_t tier_hits = 0;
    for (int round = 0; round < 2; ++round) {  // two engines on one folder: the bounds hold across a restart
        auto e = make_engine(m_a, tier_options(root.path(), cpu_limit, disk_limit, 16));
        const KvTiers& t = *e->kv_tiers();
        const QString folder = QString::fromStdString(t.disk()->folder());
        for (int i = 0; i < 60; ++i) {
            std::vector<int32_t> p = prefixes[static_cast<size_t>(std::uniform_int_distribution<int>(0, 3)(rng))];
            const std::vector<int32_t> tail = random_tokens(rng, std::uniform_int_distribution<int>(1, 40)(rng), n_vocab);
            p.insert(p.end(), tail.begin(), tail.end());
            const int n = std::uniform_int_distribution<int>(1, 12)(rng);
            GenerationRequest g;
            g.prompt = p;
            g.params = test::greedy(n);
            auto id = e->submit(std::move(g));
            QVERIFY2(static_cast<bool>(id), id.message().c_str());
            if (round == 1) sent.push_back({*id, p, n});
            const int steps = std::uniform_int_distribution<int>(0, 6)(rng);
            for (int k = 0; k < steps || (i == 59 && e->has_work()); ++k) {
                auto r = e->step();
                QVERIFY2(static_cast<bool>(r), r.message().c_str());
                QVERIFY(t.cpu()->bytes() <= cpu_limit);
                QVERIFY(t.disk()->bytes() <= disk_limit);
                QVERIFY(folder_kvb_bytes(folder) <= disk_limit);
                QCOMPARE(static_cast<int>(block_files(folder).size()), t.disk()->n_blocks());
                const QString inv = test::kv_pool_invariants(e->kv_cache());
                QVERIFY2(inv.isEmpty(), qPrintable(inv));
            }
        }
        QVERIFY(t.stats().disk_writes > 9);           // the disk limit was reached and LRU files deleted
        QVERIFY(t.disk()->counters().lru_deletions > 0);
        tier_hits += e->kv_cache().stats().cpu_hit_tokens + e->kv_cache().stats().disk_hit_tokens;
        if (round == 1) {
            // Some outputs of the second engine, checked against the request alone.
            for (size_t k = 0; k < sent.size(); k += 15)
                QCOMPARE(e->output_tokens(sent[k].id), alone(m_a, sent[k].prompt, sent[k].n));
        }
    }
    QVERIFY(tier_hits > 0);  // the workload did use the tiers
}

void TstKvTiers::keysIncludeModelAdapterAndKvType() {
    QTemporaryDir root;
    const QString folder_a = make_store(root.path());
    const QStringList files_a = block_files(folder_a);
    const int n_a = static_cast<int>(files_a.size());

    // Another model (same shape, other weights): its own folder, no hit; and model A's
    // files copied into its folder are skipped (another model), never loaded.
    {
        auto e = make_engine(m_b, tier_options(root.path(), 64 * m_block_bytes, 1 << 20));
        const QString folder_b = QString::fromStdString(e->kv_tiers()->disk()->folder());
        QVERIFY(folder_b != folder_a);
        QCOMPARE(run_one(*e, m_prompt, kGen), alone(m_b, m_prompt, kGen));
        QCOMPARE(e->kv_cache().stats().disk_hit_tokens + e->kv_cache().stats().cpu_hit_tokens, int64_t{0});
    }
    {
        auto probe = make_engine(m_b, tier_options(root.path(), 0, 1 << 20));
        const QString folder_b = QString::fromStdString(probe->kv_tiers()->disk()->folder());
        probe.reset();
        for (const QString& f : block_files(folder_b)) QFile::remove(folder_b + "/" + f);
        copy_folder(folder_a, folder_b);
        auto e = make_engine(m_b, tier_options(root.path(), 0, 1 << 20));
        QCOMPARE(e->kv_tiers()->disk()->n_blocks(), 0);
        QCOMPARE(e->kv_tiers()->stats().bad_files, int64_t{n_a});
        QCOMPARE(run_one(*e, m_prompt, kGen), alone(m_b, m_prompt, kGen));
        QCOMPARE(e->kv_cache().stats().disk_hit_tokens, int64_t{0});
    }
    // An adapter (a salt of its own; its pairs are empty, so its output is the base model's):
    // the same tokens never hit the base model's blocks.
    {
        auto adapter = std::make_shared<LoraAdapter>();
        adapter->name = "salted";
        adapter->base = lora_base_shape(m_a->config);
        adapter->layers.resize(static_cast<size_t>(m_a->config.n_layer));
        adapter->cache_salt = 0x5eed;
        auto e = make_engine(m_a, tier_options(root.path(), 64 * m_block_bytes, 1 << 20));
        QCOMPARE(run_one(*e, m_prompt, kGen, adapter), m_cold);
        QCOMPARE(e->kv_cache().stats().disk_hit_tokens + e->kv_cache().stats().cpu_hit_tokens, int64_t{0});
        // The base model on the same engine does hit (the store was not emptied).
        QCOMPARE(run_one(*e, m_prompt, kGen), m_cold);
        QCOMPARE(e->kv_cache().stats().disk_hit_tokens, int64_t{m_full_blocks} * kBlock);
    }
    // An int8 KV cache: its own folder, no hit; f16 files copied into it are skipped.
    {
        const std::vector<int32_t> cold8 = alone(m_a, m_prompt, kGen, DType::Q8_0);
        auto e = make_engine(m_a, tier_options(root.path(), 64 * m_block_bytes, 1 << 20, kPoolBlocks, DType::Q8_0));
        const QString folder8 = QString::fromStdString(e->kv_tiers()->disk()->folder());
        QVERIFY(folder8 != folder_a);
        QCOMPARE(run_one(*e, m_prompt, kGen), cold8);
        QCOMPARE(e->kv_cache().stats().disk_hit_tokens + e->kv_cache().stats().cpu_hit_tokens, int64_t{0});
        e.reset();
        for (const QString& f : block_files(folder8)) QFile::remove(folder8 + "/" + f);
        copy_folder(folder_a, folder8);
        e = make_engine(m_a, tier_options(root.path(), 0, 1 << 20, kPoolBlocks, DType::Q8_0));
        QCOMPARE(e->kv_tiers()->disk()->n_blocks(), 0);
        QCOMPARE(run_one(*e, m_prompt, kGen), cold8);
        QCOMPARE(e->kv_cache().stats().disk_hit_tokens, int64_t{0});
    }
    // Model A's own store lost nothing (the adapter run added its own salted blocks).
    for (const QString& f : files_a) QVERIFY2(QFileInfo::exists(folder_a + "/" + f), qPrintable(f));
}

// NF4 with double quantization keeps a per-tensor tail after its rows (the absmax scales'
// scales and offset: kernels/dtype.h tensor_bytes) that every row decodes with: two models
// that differ only there are other models, and their KV blocks must not be shared.
void TstKvTiers::fingerprintHashesTheNf4DqTail() {
    auto q = quantize_model(m_a, QuantScheme::parse("nf4-dq").value());
    QVERIFY2(q, q.message().c_str());
    const Model& a = *q.value();
    const WeightView& w = a.layers[0].wq;
    QCOMPARE(w.dtype, DType::NF4_DQ);
    const size_t rows = row_bytes(w.dtype, w.n_in) * static_cast<size_t>(w.n_out);
    const size_t total = tensor_bytes(w.dtype, w.n_in, w.n_out);
    QVERIFY(total > rows);
    const auto* p = static_cast<const uint8_t*>(w.data);
    std::vector<uint8_t> same(p, p + total), other(p, p + total);  // [total] the tensor, rows then tail
    other[total - 1] ^= 0x40;  // the offset's top byte: every weight of the tensor moves
    Model b = a;               // the same views, one of them onto a copy
    b.layers[0].wq.data = same.data();
    QCOMPARE(model_fingerprint(b), model_fingerprint(a));
    b.layers[0].wq.data = other.data();
    QVERIFY(model_fingerprint(b) != model_fingerprint(a));
}

QTEST_GUILESS_MAIN(TstKvTiers)
#include "tst_kv_tiers.moc"
