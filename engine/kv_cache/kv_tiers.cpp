#include "engine/kv_cache/kv_tiers.h"

#include <xxhash.h>

#include <cstdio>
#include <cstdlib>

#include "engine/model/model.h"
#include "kernels/dtype.h"

namespace kvs {

namespace {

struct Hasher {
    XXH3_state_t* st = XXH3_createState();
    Hasher() { XXH3_64bits_reset(st); }
    ~Hasher() { XXH3_freeState(st); }
    Hasher(const Hasher&) = delete;
    Hasher& operator=(const Hasher&) = delete;
    void add(const void* p, size_t n) {
        if (p && n) XXH3_64bits_update(st, p, n);
    }
    template <typename T>
    void add(const T& v) {
        add(&v, sizeof v);
    }
    void add_str(const std::string& s) {
        add(s.size());
        add(s.data(), s.size());
    }
    uint64_t digest() const { return XXH3_64bits_digest(st); }
};

void add_weight(Hasher& h, const WeightView& w) {
    h.add(static_cast<int>(w.dtype));
    h.add(w.n_in);
    h.add(w.n_out);
    if (w.in_perm && w.n_in > 0) h.add(w.in_perm, sizeof(int32_t) * static_cast<size_t>(w.n_in));  // GPTQ act-order
    if (!w.data || w.n_in <= 0 || w.n_out <= 0) return;
    const size_t total = tensor_bytes(w.dtype, w.n_in, w.n_out);  // NF4_DQ: its per-tensor tail too
    const auto* p = static_cast<const uint8_t*>(w.data);
    constexpr size_t kSample = 4096;
    if (total <= 3 * kSample) {
        h.add(p, total);
        return;
    }
    h.add(p, kSample);
    h.add(p + total / 2 - kSample / 2, kSample);
    h.add(p + total - kSample, kSample);
}

void add_floats(Hasher& h, const float* p, int n) {
    if (p && n > 0) h.add(p, sizeof(float) * static_cast<size_t>(n));
}

}  // namespace

std::string default_kv_disk_root() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kvscope/kv";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.cache/kvscope/kv";
}

uint64_t model_fingerprint(const Model& m) {
    Hasher h;
    const ModelConfig& c = m.config;
    h.add_str(c.arch);
    for (int v : {c.n_layer, c.n_embd, c.n_ff, c.n_head, c.n_kv_head, c.head_dim, c.n_rot, c.n_vocab})
        h.add(v);
    h.add(c.rms_eps);
    h.add(c.rope_freq_base);
    h.add(static_cast<int>(c.rope_style));
    h.add(c.tied_embeddings);
    h.add(c.attn_bias);
    add_weight(h, m.token_embd);
    add_weight(h, m.output);
    add_floats(h, m.output_norm, c.n_embd);
    for (const LayerWeights& l : m.layers) {
        add_floats(h, l.attn_norm, c.n_embd);
        add_floats(h, l.ffn_norm, c.n_embd);
        for (const WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) add_weight(h, *w);
        add_floats(h, l.bq, c.n_head * c.head_dim);
        add_floats(h, l.bk, c.n_kv_head * c.head_dim);
        add_floats(h, l.bv, c.n_kv_head * c.head_dim);
    }
    return h.digest();
}

Result<std::unique_ptr<KvTiers>> KvTiers::create(const KvTierOptions& opt, TierLog log) {
    using R = Result<std::unique_ptr<KvTiers>>;
    if (opt.cpu_bytes <= 0 && opt.disk_bytes <= 0) return R::error("KV tiers: neither a CPU tier nor a disk store");
    if (opt.block_bytes <= 0 || opt.block_size <= 0 || opt.n_layer <= 0)
        return R::error("KV tiers: the block shape is not set");
    std::unique_ptr<KvTiers> t(new KvTiers);
    t->m_opt = opt;
    t->m_log = log ? std::move(log) : [](const std::string& line) { std::fprintf(stderr, "kvscope: %s\n", line.c_str()); };
    if (opt.cpu_bytes > 0) t->m_cpu = std::make_unique<KvCpuTier>(opt.cpu_bytes);
    if (opt.disk_bytes > 0) {
        char fp[17];
        std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(opt.model_fingerprint));
        DiskStoreParams p;
        p.folder = (opt.disk_root.empty() ? default_kv_disk_root() : opt.disk_root) + "/" + fp + "-" +
                   opt.kv_type_name + "-b" + std::to_string(opt.block_size);
        p.limit_bytes = opt.disk_bytes;
        p.model_fingerprint = opt.model_fingerprint;
        p.kv_type = opt.kv_type;
        p.block_size = opt.block_size;
        p.n_layer = opt.n_layer;
        p.block_bytes = opt.block_bytes;
        KvTiers* self = t.get();
        auto disk = KvDiskStore::open(p, [self](const std::string& line) { self->note(line); });
        if (!disk) return disk.status();
        t->m_disk = std::move(disk).value();
    }
    return t;
}

KvTiers::~KvTiers() {
    if (!m_cpu || !m_disk) return;
    for (uint64_t key : m_cpu->lru_keys())
        if (auto e = m_cpu->get(key); e && e->bytes) m_disk->put(key, e->key, *e->bytes);
}

void KvTiers::note(const std::string& line) {
    m_messages.push_back(line);
    while (m_messages.size() > 64) m_messages.pop_front();
    m_log(line);
}

uint64_t KvTiers::tier_key(uint64_t chain_hash) const {
    struct {
        uint64_t chain, model;
        uint32_t kv_type, block_size;
    } k{chain_hash, m_opt.model_fingerprint, m_opt.kv_type, static_cast<uint32_t>(m_opt.block_size)};
    return XXH3_64bits(&k, sizeof k);
}

std::optional<TierHit> KvTiers::find(const TierBlockKey& key) {
    const uint64_t sk = tier_key(key.chain_hash);
    if (m_cpu) {
        if (auto e = m_cpu->get(sk); e && e->key.salt == key.salt && e->key.tokens == key.tokens &&
                                     e->key.chain_hash == key.chain_hash) {
            ++m_cpu_hits;
            return TierHit{e->bytes, KvTier::cpu};
        }
    }
    if (!m_disk) return std::nullopt;
    auto bytes = m_disk->get(sk, key);
    if (!bytes) return std::nullopt;
    ++m_disk_hits;
    if (m_cpu)  // promoted: the next lookup is a memory hit; what it pushes out goes to disk
        for (auto& out : m_cpu->put({sk, key, *bytes}))
            if (out.bytes) m_disk->put(out.store_key, out.key, *out.bytes);
    return TierHit{*bytes, KvTier::disk};
}

void KvTiers::spill(const TierBlockKey& key, TierBytes bytes) {
    if (!bytes || static_cast<int64_t>(bytes->size()) != m_opt.block_bytes) return;
    ++m_spilled;
    const uint64_t sk = tier_key(key.chain_hash);
    if (!m_cpu) {
        m_disk->put(sk, key, *bytes);
        return;
    }
    for (auto& out : m_cpu->put({sk, key, std::move(bytes)}))
        if (m_disk && out.bytes) m_disk->put(out.store_key, out.key, *out.bytes);
}

KvTierStats KvTiers::stats() const {
    KvTierStats s;
    s.enabled = true;
    if (m_cpu) {
        s.cpu_limit_bytes = m_cpu->limit_bytes();
        s.cpu_bytes = m_cpu->bytes();
        s.cpu_blocks = m_cpu->n_blocks();
    }
    if (m_disk) {
        s.disk_limit_bytes = m_disk->limit_bytes();
        s.disk_bytes = m_disk->bytes();
        s.disk_blocks = m_disk->n_blocks();
        s.disk_folder = m_disk->folder();
        const DiskStoreCounters& c = m_disk->counters();
        s.disk_writes = c.writes;
        s.disk_write_failures = c.write_failures;
        s.bad_files = c.bad_files;
    }
    s.spilled_blocks = m_spilled;
    s.cpu_hit_blocks = m_cpu_hits;
    s.disk_hit_blocks = m_disk_hits;
    return s;
}

}  // namespace kvs
