#include "engine/model/llama_forward.h"

#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvs {

// Activation scratch on the backend, sized for max_tokens tokens.
struct LlamaForward::Buffers {
    float* x = nullptr;        // [T, n_embd] residual stream
    float* h = nullptr;        // [T, n_embd] normed input / projection output
    float* q = nullptr;        // [T, n_head * head_dim]
    float* k = nullptr;        // [T, n_kv_head * head_dim]
    float* v = nullptr;        // [T, n_kv_head * head_dim]
    float* attn = nullptr;     // [T, n_head * head_dim]
    float* gate = nullptr;     // [T, n_ff]
    float* up = nullptr;       // [T, n_ff]
    float* qkv = nullptr;      // [T, q_dim + 2 kv_dim] fused projection output (fused only)
    float* gate_up = nullptr;  // [T, 2 n_ff] fused projection output (fused only)
    float* out_x = nullptr;    // [T, n_embd] rows picked for logits
    float* logits = nullptr;   // [logits_capacity, n_vocab], grown on demand
    int logits_capacity = 0;
    int32_t* ids = nullptr;     // [T]
    int32_t* pos = nullptr;     // [T]
    int32_t* seq = nullptr;     // [T]
    int32_t* slots = nullptr;   // [T]
    int32_t* rows = nullptr;    // [T]
    int32_t* tables = nullptr;  // [table_capacity]
    int32_t* kv_pos = nullptr;      // [T] cache index of each token (ForwardBatch::kv_positions)
    int32_t* mass_rows = nullptr;   // [T] attention-mass row of each token, -1: none
    int32_t* swa_slots = nullptr;   // [T] KV slots in the local layers' cache (kv_swa only)
    int32_t* swa_tables = nullptr;  // [table_capacity] (kv_swa only)
    size_t table_capacity = 0;
};

namespace {
// The whole tensor (NF4_DQ: with its per-tensor tail, which its rows decode with).
size_t weight_bytes(const WeightView& w) { return tensor_bytes(w.dtype, w.n_in, w.n_out); }

// Hands the pages of [p, p + n) back to the kernel: MADV_PAGEOUT only drops clean file
// pages (never data: anonymous memory would be swapped, not zeroed), so it is safe
// whatever memory the weights live in.
void page_out(const void* p, size_t n) {
    const long page = sysconf(_SC_PAGESIZE);
    const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
}
}  // namespace

LlamaForward::LlamaForward(std::shared_ptr<const Model> model, Backend& backend, KvTensors& kv, int max_tokens,
                           KvTensors* kv_swa)
    : m_model(std::move(model)), m_backend(backend), m_kv(kv), m_max_tokens(max_tokens), m_buf(new Buffers) {
    m_kv_swa = kv_swa;
    int n_global = 0, n_swa = 0;
    for (int il = 0; il < m_model->config.n_layer; ++il)
        m_cache_layer.push_back(kv_swa && m_model->config.is_swa(il) ? n_swa++ : n_global++);
}

Result<std::unique_ptr<LlamaForward>> LlamaForward::create(std::shared_ptr<const Model> model, Backend& backend,
                                                           KvTensors& kv, int max_tokens, KvTensors* kv_swa) {
    using R = Result<std::unique_ptr<LlamaForward>>;
    if (!model) return R::error("forward pass: no model");
    if (max_tokens < 1)
        return R::error("forward pass: a batch must hold at least 1 token, got " + std::to_string(max_tokens));
    if (!kv.allocated()) return R::error("forward pass: the KV cache was not allocated");
    if (model->config.gemma && !backend.supports_gemma_ops())
        return R::error("forward pass: model " + model->config.name + " (" + model->config.arch +
                        ") needs sliding-window attention, GeGLU and scaling, which backend " + backend.name() +
                        " does not run; use the CPU backend");
    int n_swa = 0;
    for (int il = 0; kv_swa && il < model->config.n_layer; ++il) n_swa += model->config.is_swa(il) ? 1 : 0;
    if (kv_swa && (n_swa == 0 || !kv_swa->allocated() || kv_swa->n_layer() != n_swa ||
                   kv_swa->block_size() != kv.block_size() || kv_swa->kv_type() != kv.kv_type()))
        return R::error("forward pass: the local layers' KV cache has " + std::to_string(kv_swa->n_layer()) +
                        " layers of blocks of " + std::to_string(kv_swa->block_size()) + ", model " +
                        model->config.name + " has " + std::to_string(n_swa) +
                        " sliding-window layers (blocks of " + std::to_string(kv.block_size()) + ", same KV type)");
    if (kv.n_layer() != model->config.n_layer - n_swa)
        return R::error("forward pass: the KV cache has " + std::to_string(kv.n_layer()) + " layers, model " +
                        model->config.name + " " + std::to_string(model->config.n_layer - n_swa));
    std::unique_ptr<LlamaForward> f(new LlamaForward(std::move(model), backend, kv, max_tokens, kv_swa));
    KVS_RETURN_IF_ERROR(f->init());
    return f;
}

// Weight copies (off the host), packed projections, then the activation scratch; the
// first allocation the backend refuses ends it.
Status LlamaForward::init() {
    m_layers = m_model->layers;
    m_token_embd = m_model->token_embd;
    m_output = m_model->output;
    m_output_norm = m_model->output_norm;
    upload_weights_if_needed();
    KVS_RETURN_IF_ERROR(alloc_status());
    fuse_projections();
    KVS_RETURN_IF_ERROR(alloc_status());
    prepare_weights();

    const auto& c = m_model->config;
    const size_t T = static_cast<size_t>(m_max_tokens);
    const size_t q_dim = static_cast<size_t>(c.n_head) * c.head_dim;
    const size_t kv_dim = static_cast<size_t>(c.n_kv_head) * c.head_dim;
    auto& b = *m_buf;
    b.x = scratch(T * c.n_embd, "the residual stream");
    b.h = scratch(T * c.n_embd, "the normed input");
    b.q = scratch(T * q_dim, "the queries");
    b.k = scratch(T * kv_dim, "the keys");
    b.v = scratch(T * kv_dim, "the values");
    b.attn = scratch(T * q_dim, "the attention output");
    b.gate = scratch(T * c.n_ff, "the MLP gate");
    b.up = scratch(T * c.n_ff, "the MLP up projection");
    b.out_x = scratch(T * c.n_embd, "the rows for logits");
    if (!m_fused.empty()) {
        b.qkv = scratch(T * (q_dim + 2 * kv_dim), "the fused Q/K/V output");
        b.gate_up = scratch(T * 2 * c.n_ff, "the fused gate/up output");
    }
    b.ids = reinterpret_cast<int32_t*>(scratch(T, "the token ids"));
    b.pos = reinterpret_cast<int32_t*>(scratch(T, "the positions"));
    b.seq = reinterpret_cast<int32_t*>(scratch(T, "the sequence rows"));
    b.slots = reinterpret_cast<int32_t*>(scratch(T, "the KV slots"));
    b.kv_pos = reinterpret_cast<int32_t*>(scratch(T, "the cache indices"));
    b.mass_rows = reinterpret_cast<int32_t*>(scratch(T, "the attention-mass rows"));
    b.rows = reinterpret_cast<int32_t*>(scratch(T, "the logit rows"));
    if (m_kv_swa) b.swa_slots = reinterpret_cast<int32_t*>(scratch(T, "the local layers' KV slots"));
    return alloc_status();
}

LlamaForward::~LlamaForward() {
    for (void* p : m_owned) m_backend.release(p);
}

void* LlamaForward::alloc(size_t bytes, const std::string& what) {
    void* p = m_backend.alloc(bytes);
    if (!p) {
        if (m_alloc_error.empty())
            m_alloc_error = "out of memory: the backend " + m_backend.name() + " could not allocate " +
                            std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB) for " + what +
                            " of model " + m_model->config.name;
        return nullptr;
    }
    m_owned.push_back(p);
    return p;
}

Status LlamaForward::alloc_status() const {
    return m_alloc_error.empty() ? Status::ok() : Status::error(m_alloc_error);
}

float* LlamaForward::scratch(size_t n_floats, const char* what) {
    const size_t bytes = n_floats * sizeof(float);
    void* p =
        alloc(bytes, std::string("activation scratch (") + what + ", " + std::to_string(m_max_tokens) + " tokens)");
    if (p) m_scratch_bytes += static_cast<int64_t>(bytes);
    return static_cast<float*>(p);
}

// A host-visible backend (CPU) reads the weights straight from the mapped file; any
// other gets its own copy once.
void LlamaForward::upload_weights_if_needed() {
    if (m_backend.host_visible()) return;
    auto up_w = [&](WeightView& w, const std::string& what) {
        if (!w.data) return;
        const size_t n = weight_bytes(w);
        void* d = alloc(n, what);
        if (!d) return;
        m_backend.copy_to_device(d, w.data, n);
        w.data = d;
        if (!w.in_perm) return;  // GPTQ act-order: the backend gathers the activations by it on its side
        const size_t np = sizeof(int32_t) * static_cast<size_t>(w.n_in);
        void* dp = alloc(np, "the input permutation of " + what);
        if (!dp) return;
        m_backend.copy_to_device(dp, w.in_perm, np);
        w.in_perm = static_cast<const int32_t*>(dp);
    };
    auto up_v = [&](const float*& p, int n, const std::string& what) {
        if (!p) return;
        void* d = alloc(sizeof(float) * static_cast<size_t>(n), what);
        if (!d) return;
        m_backend.copy_to_device(d, p, sizeof(float) * static_cast<size_t>(n));
        p = static_cast<const float*>(d);
    };
    const auto& c = m_model->config;
    const bool tied = m_output.data == m_token_embd.data;
    up_w(m_token_embd, "the token embedding");
    if (tied) m_output.data = m_token_embd.data;
    else
        up_w(m_output, "the output head");
    up_v(m_output_norm, c.n_embd, "the output norm");
    for (size_t il = 0; il < m_layers.size() && m_alloc_error.empty(); ++il) {
        auto& l = m_layers[il];
        const std::string layer = "layer " + std::to_string(il);
        up_v(l.attn_norm, c.n_embd, "the attention norm of " + layer);
        up_v(l.ffn_norm, c.n_embd, "the MLP norm of " + layer);
        up_v(l.bq, c.n_head * c.head_dim, "the Q bias of " + layer);
        up_v(l.bk, c.n_kv_head * c.head_dim, "the K bias of " + layer);
        up_v(l.bv, c.n_kv_head * c.head_dim, "the V bias of " + layer);
        up_v(l.attn_q_norm, c.head_dim, "the Q norm of " + layer);
        up_v(l.attn_k_norm, c.head_dim, "the K norm of " + layer);
        up_v(l.attn_post_norm, c.n_embd, "the attention post-norm of " + layer);
        up_v(l.ffn_post_norm, c.n_embd, "the MLP post-norm of " + layer);
        for (WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
            up_w(*w, "a weight matrix of " + layer);
    }
}

// Packs matrices with the same type and n_in into one [sum n_out, n_in] matrix on the
// backend; the source pages of a mapped file are then handed back to the kernel. When the
// backend refuses the memory the result has no data (alloc_status() says why).
WeightView LlamaForward::pack_rows(std::initializer_list<const WeightView*> parts, const std::string& what) {
    WeightView out = **parts.begin();
    out.n_out = 0;
    for (const WeightView* p : parts) out.n_out += p->n_out;
    const size_t rb = row_bytes(out.dtype, out.n_in);
    auto* dst = static_cast<uint8_t*>(alloc(rb * static_cast<size_t>(out.n_out), what));
    out.data = dst;
    if (!dst) return out;
    size_t off = 0;
    for (const WeightView* p : parts) {
        const size_t n = rb * static_cast<size_t>(p->n_out);
        m_backend.copy_to_device(dst + off, p->data, n);
        off += n;
        page_out(p->data, n);
    }
    return out;
}

// Two matrices read their input the same way: neither permutes it, or both by the same
// permutation (GPTQ act-order: q/k/v and gate/up share their input's Hessian, so their g_idx).
static bool same_input_order(const WeightView& a, const WeightView& b) {
    if (!a.in_perm || !b.in_perm) return !a.in_perm && !b.in_perm;
    return a.n_in == b.n_in && std::equal(a.in_perm, a.in_perm + a.n_in, b.in_perm);
}

void LlamaForward::fuse_projections() {
    if (!m_backend.host_visible()) return;
    // NF4_DQ rows decode with their own tensor's tail (tensor_bytes): never row-packed
    for (const auto& l : m_layers)
        if (l.wq.dtype == DType::NF4_DQ || l.w_gate.dtype == DType::NF4_DQ) return;
    for (const auto& l : m_layers)
        if (l.wq.dtype != l.wk.dtype || l.wq.dtype != l.wv.dtype || l.w_gate.dtype != l.w_up.dtype ||
            !same_input_order(l.wq, l.wk) || !same_input_order(l.wq, l.wv) || !same_input_order(l.w_gate, l.w_up))
            return;
    for (size_t il = 0; il < m_layers.size() && m_alloc_error.empty(); ++il) {
        const auto& l = m_layers[il];
        const std::string layer = "layer " + std::to_string(il);
        m_fused.push_back({pack_rows({&l.wq, &l.wk, &l.wv}, "the packed Q/K/V weights of " + layer),
                           pack_rows({&l.w_gate, &l.w_up}, "the packed gate/up weights of " + layer)});
    }
}

// Lets the backend lay out the matrices its matmul reads (the CPU: Q4 tiles). A fused copy
// is ours alone and only ever multiplied: once tiled, its row-major bytes are released
// (data = nullptr); a matrix of the model keeps its bytes (other readers) and their pages
// go back to the kernel.
void LlamaForward::prepare_weights() {
    auto prep = [&](WeightView& w, bool ours) {
        if (!w.data) return;
        void* tiles = m_backend.prepare_weight(w);
        if (!tiles) return;
        m_owned.push_back(tiles);
        if (ours) {
            std::erase(m_owned, const_cast<void*>(w.data));
            m_backend.release(const_cast<void*>(w.data));
            w.data = nullptr;
        } else {
            page_out(w.data, weight_bytes(w));
        }
    };
    for (auto& f : m_fused) prep(f.qkv, true), prep(f.gate_up, true);
    for (auto& l : m_layers)
        for (WeightView* w : {&l.wo, &l.w_down}) prep(*w, false);
    if (m_output.data != m_token_embd.data) prep(m_output, false);  // a tied head is also the embedding table
}

// Splits rows of a fused output [n_tokens, sum(widths)] into separate [n_tokens, width] buffers.
static void split_columns(const float* in, int n_tokens, std::initializer_list<std::pair<float*, int>> outs) {
    int total = 0;
    for (const auto& o : outs) total += o.second;
    for (int t = 0; t < n_tokens; ++t) {
        const float* row = in + static_cast<int64_t>(t) * total;
        for (const auto& [dst, width] : outs) {
            std::memcpy(dst + static_cast<int64_t>(t) * width, row, sizeof(float) * static_cast<size_t>(width));
            row += width;
        }
    }
}

void LlamaForward::run_layer(int il, const ForwardBatch& batch, int n_tokens) {
    const auto& c = m_model->config;
    const auto& w = m_layers[static_cast<size_t>(il)];
    auto& b = *m_buf;
    const int q_dim = c.n_head * c.head_dim;
    const int kv_dim = c.n_kv_head * c.head_dim;

    // ---- attention block: h = norm(x); q,k,v = h W; rope; cache; attend; x += attn Wo
    m_backend.rms_norm(b.x, w.attn_norm, b.h, n_tokens, c.n_embd, c.rms_eps);
    op_tick(OpKind::elementwise);
    observe(il, ActivationSite::AttnInput, b.h, n_tokens, c.n_embd);
    const FusedLayer* f = m_fused.empty() ? nullptr : &m_fused[static_cast<size_t>(il)];
    if (f) {
        m_backend.matmul(f->qkv, b.h, b.qkv, n_tokens);
        split_columns(b.qkv, n_tokens, {{b.q, q_dim}, {b.k, kv_dim}, {b.v, kv_dim}});
    } else {
        m_backend.matmul(w.wq, b.h, b.q, n_tokens);
        m_backend.matmul(w.wk, b.h, b.k, n_tokens);
        m_backend.matmul(w.wv, b.h, b.v, n_tokens);
    }
    lora(il, LoraTarget::q, b.h, c.n_embd, b.q, q_dim);
    lora(il, LoraTarget::k, b.h, c.n_embd, b.k, kv_dim);
    lora(il, LoraTarget::v, b.h, c.n_embd, b.v, kv_dim);
    if (w.bq) m_backend.add_bias(b.q, w.bq, b.q, n_tokens, q_dim);
    if (w.bk) m_backend.add_bias(b.k, w.bk, b.k, n_tokens, kv_dim);
    if (w.bv) m_backend.add_bias(b.v, w.bv, b.v, n_tokens, kv_dim);
    op_tick(OpKind::qkv);
    if (w.attn_q_norm) m_backend.rms_norm(b.q, w.attn_q_norm, b.q, n_tokens * c.n_head, c.head_dim, c.rms_eps);
    if (w.attn_k_norm) m_backend.rms_norm(b.k, w.attn_k_norm, b.k, n_tokens * c.n_kv_head, c.head_dim, c.rms_eps);
    const float rope_base = c.rope_base(il);  // gemma3's local layers have their own
    m_backend.rope(b.q, b.pos, n_tokens, c.n_head, c.head_dim, c.n_rot, rope_base, c.rope_style);
    m_backend.rope(b.k, b.pos, n_tokens, c.n_kv_head, c.head_dim, c.n_rot, rope_base, c.rope_style);

    const bool own_swa = m_kv_swa && c.is_swa(il);  // a local layer with its own cache and tables
    KvTensors& cache = own_swa ? *m_kv_swa : m_kv;
    const int cl = m_cache_layer[static_cast<size_t>(il)];
    KvStoreArgs st;
    st.k = b.k;
    st.v = b.v;
    st.k_cache = cache.k(cl);
    st.v_cache = cache.v(cl);
    st.slot_mapping = own_swa ? b.swa_slots : b.slots;
    st.n_tokens = n_tokens;
    st.kv_dim = kv_dim;
    st.cache_type = m_kv.kv_type();
    m_backend.kv_store(st);
    op_tick(OpKind::elementwise);

    PagedAttentionArgs pa;
    pa.q = b.q;
    pa.out = b.attn;
    pa.k_cache = cache.k(cl);
    pa.v_cache = cache.v(cl);
    pa.block_tables = own_swa ? b.swa_tables : b.tables;
    pa.token_seq = b.seq;
    pa.token_pos = b.kv_pos;
    pa.n_tokens = n_tokens;
    pa.n_seqs = batch.n_seqs;
    pa.max_blocks_per_seq = batch.max_blocks_per_seq;
    pa.n_head = c.n_head;
    pa.n_kv_head = c.n_kv_head;
    pa.head_dim = c.head_dim;
    pa.block_size = m_kv.block_size();
    pa.scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    pa.cache_type = m_kv.kv_type();
    pa.window = c.is_swa(il) ? c.sliding_window : 0;
    if (!batch.mass_rows.empty()) {
        pa.attn_mass = m_mass;
        pa.mass_row = b.mass_rows;
        pa.mass_stride = batch.mass_stride;
    }
    m_backend.paged_attention(pa);
    op_tick(OpKind::attention);
    observe(il, ActivationSite::AttnOutput, b.attn, n_tokens, q_dim);
    m_backend.matmul(w.wo, b.attn, b.h, n_tokens);
    lora(il, LoraTarget::o, b.attn, q_dim, b.h, c.n_embd);
    op_tick(OpKind::attn_out);
    if (w.attn_post_norm) m_backend.rms_norm(b.h, w.attn_post_norm, b.h, n_tokens, c.n_embd, c.rms_eps);
    m_backend.add(b.x, b.h, b.x, static_cast<int64_t>(n_tokens) * c.n_embd);

    // ---- MLP block: x += down(silu(gate(norm(x))) * up(norm(x)))  (gemma: gelu_tanh, then post-norm)
    m_backend.rms_norm(b.x, w.ffn_norm, b.h, n_tokens, c.n_embd, c.rms_eps);
    op_tick(OpKind::elementwise);
    observe(il, ActivationSite::FfnInput, b.h, n_tokens, c.n_embd);
    if (f) {
        m_backend.matmul(f->gate_up, b.h, b.gate_up, n_tokens);
        split_columns(b.gate_up, n_tokens, {{b.gate, c.n_ff}, {b.up, c.n_ff}});
    } else {
        m_backend.matmul(w.w_gate, b.h, b.gate, n_tokens);
        m_backend.matmul(w.w_up, b.h, b.up, n_tokens);
    }
    lora(il, LoraTarget::gate, b.h, c.n_embd, b.gate, c.n_ff);
    lora(il, LoraTarget::up, b.h, c.n_embd, b.up, c.n_ff);
    op_tick(OpKind::ffn_gate_up);
    if (c.gemma) m_backend.geglu(b.gate, b.up, b.gate, static_cast<int64_t>(n_tokens) * c.n_ff);
    else
        m_backend.swiglu(b.gate, b.up, b.gate, static_cast<int64_t>(n_tokens) * c.n_ff);
    observe(il, ActivationSite::DownInput, b.gate, n_tokens, c.n_ff);
    op_tick(OpKind::elementwise);
    m_backend.matmul(w.w_down, b.gate, b.h, n_tokens);
    lora(il, LoraTarget::down, b.gate, c.n_ff, b.h, c.n_embd);
    op_tick(OpKind::ffn_down);
    if (w.ffn_post_norm) m_backend.rms_norm(b.h, w.ffn_post_norm, b.h, n_tokens, c.n_embd, c.rms_eps);
    m_backend.add(b.x, b.h, b.x, static_cast<int64_t>(n_tokens) * c.n_embd);
    op_tick(OpKind::elementwise);
}

// The batch's shape and every id it carries, checked before any of it reaches a kernel;
// slots gets each token's KV slot (block_id * block_size + offset).
Status LlamaForward::check_batch(const ForwardBatch& batch, std::vector<int32_t>* slots,
                                 std::vector<int32_t>* swa_slots) const {
    const auto& c = m_model->config;
    const int n_tokens = batch.n_tokens();
    const int n_rows = static_cast<int>(batch.logit_rows.size());
    if (n_tokens == 0) return Status::error("forward: empty batch");
    if (n_tokens > m_max_tokens)
        return Status::error("forward: batch of " + std::to_string(n_tokens) + " tokens exceeds the maximum of " +
                             std::to_string(m_max_tokens));
    if (batch.positions.size() != batch.tokens.size() || batch.token_seq.size() != batch.tokens.size())
        return Status::error("forward: " + std::to_string(n_tokens) + " tokens with " +
                             std::to_string(batch.positions.size()) + " positions and " +
                             std::to_string(batch.token_seq.size()) + " sequence rows");
    if (batch.n_seqs < 1 || batch.max_blocks_per_seq < 1 ||
        batch.block_tables.size() < static_cast<size_t>(batch.n_seqs) * static_cast<size_t>(batch.max_blocks_per_seq))
        return Status::error("forward: block tables of " + std::to_string(batch.block_tables.size()) + " entries for " +
                             std::to_string(batch.n_seqs) + " sequences of " +
                             std::to_string(batch.max_blocks_per_seq) + " blocks");
    if (n_rows > m_max_tokens)
        return Status::error("forward: " + std::to_string(n_rows) + " logit rows exceed the maximum of " +
                             std::to_string(m_max_tokens));
    for (int32_t row : batch.logit_rows)
        if (row < 0 || row >= n_tokens)
            return Status::error("forward: logit row " + std::to_string(row) + " is not a token of the batch of " +
                                 std::to_string(n_tokens));
    if (!batch.token_adapter.empty()) {
        if (batch.token_adapter.size() != batch.tokens.size())
            return Status::error("forward: " + std::to_string(n_tokens) + " tokens with " +
                                 std::to_string(batch.token_adapter.size()) + " LoRA adapter entries");
        for (int32_t i : batch.token_adapter)
            if (i >= static_cast<int32_t>(batch.adapters.size()) || (i >= 0 && !batch.adapters[static_cast<size_t>(i)]))
                return Status::error("forward: LoRA adapter index " + std::to_string(i) + " of " +
                                     std::to_string(batch.adapters.size()) + " adapters");
        for (const LoraAdapter* a : batch.adapters)
            if (a) KVS_RETURN_IF_ERROR(check_lora_fits(*a, c));
        if (!m_backend.host_visible())
            for (int32_t i : batch.token_adapter)
                if (i >= 0)
                    return Status::error("forward: LoRA adapters run on the CPU backend only, not on " +
                                         m_backend.name());
    }
    const int bs = m_kv.block_size();
    if (m_kv_swa && batch.swa_block_tables.size() != batch.block_tables.size())
        return Status::error("forward: " + std::to_string(batch.swa_block_tables.size()) +
                             " local-layer block table entries for " + std::to_string(batch.block_tables.size()) +
                             " block table entries (the model's local layers have their own cache)");
    const bool kv_pos = !batch.kv_positions.empty();
    if (kv_pos && batch.kv_positions.size() != batch.tokens.size())
        return Status::error("forward: " + std::to_string(n_tokens) + " tokens with " +
                             std::to_string(batch.kv_positions.size()) + " cache indices");
    if (kv_pos && m_kv_swa)
        return Status::error("forward: cache indices apart from positions (KV eviction) do not go with the local "
                             "layers' own cache of model " + c.name);
    if (!batch.mass_rows.empty()) {
        if (batch.mass_rows.size() != batch.tokens.size() || batch.n_mass_rows < 1 || batch.mass_stride < 1)
            return Status::error("forward: " + std::to_string(batch.mass_rows.size()) +
                                 " attention-mass rows for " + std::to_string(n_tokens) + " tokens (" +
                                 std::to_string(batch.n_mass_rows) + " rows of " +
                                 std::to_string(batch.mass_stride) + ")");
        if (!m_backend.supports_attention_mass() || !m_backend.host_visible())
            return Status::error("forward: backend " + m_backend.name() +
                                 " does not report attention mass (KV eviction scores); use the CPU backend");
        for (int t = 0; t < n_tokens; ++t) {
            const int32_t row = batch.mass_rows[static_cast<size_t>(t)];
            const int32_t p = kv_pos ? batch.kv_positions[static_cast<size_t>(t)] : batch.positions[static_cast<size_t>(t)];
            if (row >= batch.n_mass_rows || (row >= 0 && p >= batch.mass_stride))
                return Status::error("forward: token " + std::to_string(t) + " has attention-mass row " +
                                     std::to_string(row) + " of " + std::to_string(batch.n_mass_rows) +
                                     " at cache index " + std::to_string(p) + " (rows of " +
                                     std::to_string(batch.mass_stride) + ")");
        }
    }
    slots->resize(static_cast<size_t>(n_tokens));
    swa_slots->resize(m_kv_swa ? static_cast<size_t>(n_tokens) : 0);
    for (int t = 0; t < n_tokens; ++t) {
        const int32_t tok = batch.tokens[static_cast<size_t>(t)];
        if (tok < 0 || tok >= c.n_vocab)
            return Status::error("forward: token id " + std::to_string(tok) + " outside the vocabulary of " +
                                 std::to_string(c.n_vocab));
        const int32_t p = kv_pos ? batch.kv_positions[static_cast<size_t>(t)] : batch.positions[static_cast<size_t>(t)];
        const int32_t s = batch.token_seq[static_cast<size_t>(t)];
        const int blk = p / bs;
        if (p < 0 || s < 0 || s >= batch.n_seqs || blk >= batch.max_blocks_per_seq)
            return Status::error("forward: token " + std::to_string(t) + " has no KV block for position " +
                                 std::to_string(p));
        const int32_t id = batch.block_tables[static_cast<size_t>(s) * batch.max_blocks_per_seq + blk];
        if (id < 0 || id >= m_kv.n_blocks())
            return Status::error("forward: block table entry " + std::to_string(id) + " is not a block of the pool");
        (*slots)[static_cast<size_t>(t)] = id * bs + p % bs;
        if (!m_kv_swa) continue;
        const int32_t sid = batch.swa_block_tables[static_cast<size_t>(s) * batch.max_blocks_per_seq + blk];
        if (sid < 0 || sid >= m_kv_swa->n_blocks())
            return Status::error("forward: local-layer block table entry " + std::to_string(sid) +
                                 " is not a block of the local layers' pool");
        (*swa_slots)[static_cast<size_t>(t)] = sid * bs + p % bs;
    }
    return Status::ok();
}

// Grows the block-table and logits buffers when this batch needs more (never shrinks).
Status LlamaForward::reserve_batch(size_t table_n, int n_rows) {
    auto& b = *m_buf;
    m_alloc_error.clear();
    if (table_n > b.table_capacity) {
        for (int32_t** p : {&b.tables, &b.swa_tables})
            if (*p) {
                m_backend.release(*p);
                std::erase(m_owned, static_cast<void*>(*p));
                *p = nullptr;
            }
        b.table_capacity = 0;
        const size_t want = std::max<size_t>(table_n, 256);
        b.tables = static_cast<int32_t*>(alloc(want * sizeof(int32_t), "the block tables"));
        if (!b.tables) return alloc_status();
        if (m_kv_swa) {
            b.swa_tables = static_cast<int32_t*>(alloc(want * sizeof(int32_t), "the local layers' block tables"));
            if (!b.swa_tables) return alloc_status();
        }
        b.table_capacity = want;
    }
    if (n_rows > b.logits_capacity) {
        if (b.logits) {
            m_backend.release(b.logits);
            std::erase(m_owned, static_cast<void*>(b.logits));
            m_scratch_bytes -= static_cast<int64_t>(b.logits_capacity) * m_output.n_out * 4;
            b.logits = nullptr;
            b.logits_capacity = 0;
        }
        const int want = std::max(n_rows, 8);
        b.logits = scratch(static_cast<size_t>(want) * m_output.n_out, "the logits");
        if (!b.logits) return alloc_status();
        b.logits_capacity = want;
    }
    return Status::ok();
}

Status LlamaForward::forward(const ForwardBatch& batch, std::vector<float>* logits) {
    const auto& c = m_model->config;
    const int n_tokens = batch.n_tokens();
    const int n_rows = static_cast<int>(batch.logit_rows.size());
    std::vector<int32_t> slots, swa_slots;  // [n_tokens]
    KVS_RETURN_IF_ERROR(check_batch(batch, &slots, &swa_slots));
    const size_t table_n = static_cast<size_t>(batch.n_seqs) * batch.max_blocks_per_seq;
    KVS_RETURN_IF_ERROR(reserve_batch(table_n, n_rows));
    auto& b = *m_buf;
    const size_t tb = sizeof(int32_t) * static_cast<size_t>(n_tokens);
    m_backend.copy_to_device(b.ids, batch.tokens.data(), tb);
    m_backend.copy_to_device(b.pos, batch.positions.data(), tb);
    m_backend.copy_to_device(b.seq, batch.token_seq.data(), tb);
    m_backend.copy_to_device(b.slots, slots.data(), tb);
    const std::vector<int32_t>& kv_pos = batch.kv_positions.empty() ? batch.positions : batch.kv_positions;
    m_backend.copy_to_device(b.kv_pos, kv_pos.data(), tb);
    m_mass_host.clear();
    if (!batch.mass_rows.empty()) {
        const size_t n_mass = static_cast<size_t>(batch.n_mass_rows) * static_cast<size_t>(batch.mass_stride);
        if (n_mass > m_mass_capacity) {
            if (m_mass) {
                m_backend.release(m_mass);
                std::erase(m_owned, static_cast<void*>(m_mass));
                m_mass = nullptr;
                m_mass_capacity = 0;
            }
            m_mass = static_cast<float*>(alloc(n_mass * sizeof(float), "the attention mass"));
            if (!m_mass) return alloc_status();
            m_mass_capacity = n_mass;
        }
        m_mass_host.assign(n_mass, 0.0f);
        m_backend.copy_to_device(m_mass, m_mass_host.data(), n_mass * sizeof(float));
        m_backend.copy_to_device(b.mass_rows, batch.mass_rows.data(), tb);
    }
    m_backend.copy_to_device(b.tables, batch.block_tables.data(), table_n * sizeof(int32_t));
    if (m_kv_swa) {
        m_backend.copy_to_device(b.swa_slots, swa_slots.data(), tb);
        m_backend.copy_to_device(b.swa_tables, batch.swa_block_tables.data(), table_n * sizeof(int32_t));
    }
    m_backend.copy_to_device(b.rows, batch.logit_rows.data(), sizeof(int32_t) * static_cast<size_t>(n_rows));

    m_lora = LoraBatch::group(batch.adapters, batch.token_adapter);
    m_op_ms.fill(0.0);
    m_op_t = std::chrono::steady_clock::now();
    m_backend.embedding(m_token_embd, b.ids, n_tokens, b.x);
    if (c.embd_scale != 1.0f) m_backend.scale(b.x, c.embd_scale, b.x, static_cast<int64_t>(n_tokens) * c.n_embd);
    op_tick(OpKind::elementwise);
    for (int il = 0; il < c.n_layer; ++il) run_layer(il, batch, n_tokens);
    if (!m_mass_host.empty()) m_backend.copy_to_host(m_mass_host.data(), m_mass, m_mass_host.size() * sizeof(float));
    if (n_rows == 0) return Status::ok();

    // Only the rows that need logits go through the final norm and the output head:
    // gather them (an embedding lookup over the residual stream), then project.
    const WeightView x_rows{DType::F32, b.x, c.n_embd, n_tokens};
    m_backend.embedding(x_rows, b.rows, n_rows, b.out_x);
    m_backend.rms_norm(b.out_x, m_output_norm, b.out_x, n_rows, c.n_embd, c.rms_eps);
    op_tick(OpKind::elementwise);
    m_backend.matmul(m_output, b.out_x, b.logits, n_rows);
    op_tick(OpKind::lm_head);
    logits->resize(static_cast<size_t>(n_rows) * m_output.n_out);  // a draft's head may cover fewer tokens
    m_backend.copy_to_host(logits->data(), b.logits, logits->size() * sizeof(float));
    m_backend.synchronize();
    return Status::ok();
}

}  // namespace kvs
