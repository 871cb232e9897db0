// CpuBackend: the Backend interface on host memory. It owns the thread pool and the
// SIMD level; matmul goes to kernels/cpu/matmul.h, the other ops to the per-level
// kernel table of kernels/cpu/ops.h. Ops whose whole work is small run on the calling
// thread: a decode step issues hundreds of ops on one token, and a parallel region
// costs more than a 576-element RMSNorm.
#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/thread_pool.h"

namespace kvs {
namespace {

constexpr int64_t kMinParallelElems = 16384;   // below this an op runs on the caller
constexpr int64_t kElemChunk = 16384;          // elements per task of element-wise ops
constexpr int64_t kMinParallelAttn = 1 << 16;  // query x key x dim products
constexpr int64_t kTokensPerAttnTask = 4;      // most query tokens of one sequence per attention task

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class CpuBackend final : public Backend {
public:
    CpuBackend(int n_threads, cpu::SimdLevel level)
        : m_pool(n_threads), m_level(level), m_ops(cpu::op_kernels(level)) {}

    std::string name() const override { return std::string("cpu-") + cpu::simd_name(m_level); }
    int n_threads() const override { return m_pool.size(); }

    bool host_visible() const override { return true; }
    void* alloc(size_t bytes) override {
        const size_t rounded = std::max<size_t>(64, (bytes + 63) & ~size_t{63});
        return std::aligned_alloc(64, rounded);
    }
    void release(void* ptr) override { std::free(ptr); }
    // bytes may be 0 with null pointers (an empty std::vector's data()): memcpy must not see those.
    void copy_to_device(void* dst, const void* src, size_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    void copy_to_host(void* dst, const void* src, size_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }

    // every weight type, GGML's and KV Scope's own (I8_ROW, I4_G128, I4_G64): each has a scalar kernel
    bool supports(DType weight_type) const override { return dtype_info(weight_type).weight_type; }

    bool supports_input_permutation() const override { return true; }

    void matmul(const WeightView& w, const float* x, float* y, int n_tokens) override {
        cpu::matmul(m_pool, m_level, w, x, y, n_tokens);
    }

    // Q4_0 / Q4_1 get the AVX2 kernels' 8-row tiles (no per-call transpose).
    void* prepare_weight(WeightView& w) override {
        if (m_level < cpu::SimdLevel::Avx2 || (w.dtype != DType::Q4_0 && w.dtype != DType::Q4_1) || w.cpu_tiles ||
            w.n_in % 32 != 0)
            return nullptr;
        void* tiles = alloc(cpu::q4_tiles_bytes(w.n_in, w.n_out));
        cpu::pack_q4_tiles(w.dtype, w.data, w.n_in, w.n_out, tiles);
        w.cpu_tiles = tiles;
        return tiles;
    }

    void embedding(const WeightView& table, const int32_t* ids, int n_tokens, float* out) override {
        const size_t row = row_bytes(table.dtype, table.n_in);
        const auto* base = static_cast<const uint8_t*>(table.data);  // [n_out, row]
        rows(n_tokens, table.n_in, [&](int64_t t) {
            assert(ids[t] >= 0 && ids[t] < table.n_out);
            if (table.dtype == DType::NF4_DQ)  // a row's absmax codes decode with the tensor's tail
                cpu::dequantize_nf4_dq_rows(table.data, table.n_in, table.n_out, ids[t], ids[t] + 1,
                                            out + t * table.n_in);
            else
                cpu::dequantize_row(table.dtype, base + static_cast<size_t>(ids[t]) * row, out + t * table.n_in,
                                    table.n_in);
        });
    }

    void rms_norm(const float* x, const float* weight, float* y, int n_rows, int n, float eps) override {
        rows(n_rows, n, [&](int64_t r) { m_ops.rms_norm_row(x + r * n, weight, y + r * n, n, eps); });
    }

    void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, int n_rot, float freq_base,
              RopeStyle style) override {
        const int64_t token_elems = static_cast<int64_t>(n_head) * head_dim;
        rows(n_tokens, token_elems, [&](int64_t t) {
            float* cos_sin = cpu::thread_scratch(3, static_cast<size_t>(n_rot));  // [n_rot / 2, 2]
            cpu::rope_angles(pos[t], n_rot, freq_base, cos_sin);
            m_ops.rope_token(x + t * token_elems, cos_sin, n_head, head_dim, n_rot, style);
        });
    }

    void softmax(float* x, int n_rows, int n_cols) override {
        if (n_cols <= 0) return;
        rows(n_rows, n_cols, [&](int64_t r) { m_ops.softmax_row(x + r * n_cols, n_cols); });
    }

    void swiglu(const float* gate, const float* up, float* y, int64_t n) override {
        ranges(n, [&](int64_t i0, int64_t i1) { m_ops.swiglu_range(gate + i0, up + i0, y + i0, i1 - i0); });
    }

    bool supports_gemma_ops() const override { return true; }

    void scale(const float* x, float s, float* y, int64_t n) override {
        ranges(n, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) y[i] = x[i] * s;
        });
    }

    void geglu(const float* gate, const float* up, float* y, int64_t n) override {
        ranges(n, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) y[i] = gelu_tanh(gate[i]) * up[i];
        });
    }

    void add(const float* a, const float* b, float* y, int64_t n) override {
        ranges(n, [&](int64_t i0, int64_t i1) { m_ops.add_range(a + i0, b + i0, y + i0, i1 - i0); });
    }

    void add_bias(const float* x, const float* bias, float* y, int n_rows, int n) override {
        rows(n_rows, n, [&](int64_t r) { m_ops.add_range(x + r * n, bias, y + r * n, n); });
    }

    bool supports_kv(DType cache_type) const override { return cache_type == DType::F16 || cache_type == DType::Q8_0; }

    void kv_store(const KvStoreArgs& a) override {
        assert(supports_kv(a.cache_type) && a.kv_dim % dtype_info(a.cache_type).block_size == 0);
        const size_t pos_bytes = row_bytes(a.cache_type, a.kv_dim);  // one cache position
        auto* kc = static_cast<uint8_t*>(a.k_cache);
        auto* vc = static_cast<uint8_t*>(a.v_cache);
        rows(a.n_tokens, 2 * static_cast<int64_t>(a.kv_dim), [&](int64_t t) {
            const int64_t slot = a.slot_mapping[t];
            if (slot < 0) return;  // padding token: nothing to store
            uint8_t* kd = kc + static_cast<size_t>(slot) * pos_bytes;
            uint8_t* vd = vc + static_cast<size_t>(slot) * pos_bytes;
            if (a.cache_type == DType::Q8_0) {
                m_ops.to_q8_0_row(a.k + t * a.kv_dim, kd, a.kv_dim);
                m_ops.to_q8_0_row(a.v + t * a.kv_dim, vd, a.kv_dim);
            } else {
                m_ops.to_fp16_row(a.k + t * a.kv_dim, reinterpret_cast<uint16_t*>(kd), a.kv_dim);
                m_ops.to_fp16_row(a.v + t * a.kv_dim, reinterpret_cast<uint16_t*>(vd), a.kv_dim);
            }
        });
    }

    void paged_attention(const PagedAttentionArgs& a) override {
        attend(a);
        if (a.attn_mass) add_attention_mass(a);
    }
    bool supports_attention_mass() const override { return true; }

private:
    void attend(const PagedAttentionArgs& a);
    // PagedAttentionArgs::attn_mass: each token's probabilities (OpKernels::attention_mass) on
    // the pool, then added to its row in token order.
    void add_attention_mass(const PagedAttentionArgs& a);
    std::vector<float> m_mass_tmp;  // [tokens with a row, mass_stride]
    struct SplitTask {
        int t, p0, p1;  // query token, cache positions [p0, p1)
    };
    // Each token's positions [first, token_pos + 1) cut at multiples of chunk (first: 0, or
    // the window's start), partials on the pool, merged in order.
    void attention_split_positions(const PagedAttentionArgs& a, int chunk);

    // fn(r) for r in [0, n_rows); rows of row_elems elements, grouped into tasks of about kElemChunk.
    template <class Fn>
    void rows(int64_t n_rows, int64_t row_elems, Fn&& fn) {
        if (n_rows * row_elems < kMinParallelElems || m_pool.size() == 1) {
            for (int64_t r = 0; r < n_rows; ++r) fn(r);
            return;
        }
        const int64_t per_task = std::max<int64_t>(1, kElemChunk / std::max<int64_t>(1, row_elems));
        m_pool.parallel_for(ceil_div(n_rows, per_task), [&](int64_t task, int) {
            const int64_t r1 = std::min(n_rows, (task + 1) * per_task);
            for (int64_t r = task * per_task; r < r1; ++r) fn(r);
        });
    }

    // fn(i0, i1) over [0, n) in chunks of kElemChunk.
    template <class Fn>
    void ranges(int64_t n, Fn&& fn) {
        if (n < kMinParallelElems || m_pool.size() == 1) {
            fn(0, n);
            return;
        }
        m_pool.parallel_for(ceil_div(n, kElemChunk),
                            [&](int64_t task, int) { fn(task * kElemChunk, std::min(n, (task + 1) * kElemChunk)); });
    }

    cpu::ThreadPool m_pool;
    cpu::SimdLevel m_level;
    const cpu::OpKernels& m_ops;
    std::vector<SplitTask> m_tasks;                 // [n_tasks] of a position-split attention call
    std::vector<std::pair<int, int>> m_token_runs;  // [n_tasks] token ranges [t0, t1) of an attention call
    std::vector<int64_t> m_first_task;              // [n_tokens + 1]
    std::vector<float> m_parts;                     // [n_tasks, n_head, head_dim + 2] partial results
};

// Tasks are whole query tokens (every head: the kernel then reads each cached position's
// K and V once, all kv heads side by side). With fewer tokens than about 4 tasks per
// thread and long contexts, each token's positions are split into the kernels' own
// chunks of cpu::kAttnChunk, whose partial softmaxes are merged (flash-decoding) exactly
// as the kernel merges them itself; with short contexts, its heads are split instead.
void CpuBackend::add_attention_mass(const PagedAttentionArgs& a) {
    std::vector<int> toks;  // tokens with a row, in order
    for (int t = 0; t < a.n_tokens; ++t)
        if (a.mass_row[t] >= 0) toks.push_back(t);
    if (toks.empty()) return;
    const size_t stride = static_cast<size_t>(a.mass_stride);
    m_mass_tmp.assign(toks.size() * stride, 0.0f);
    auto one = [&](int64_t i) { m_ops.attention_mass(a, toks[static_cast<size_t>(i)], &m_mass_tmp[i * stride]); };
    if (toks.size() == 1 || m_pool.size() == 1) {
        for (size_t i = 0; i < toks.size(); ++i) one(static_cast<int64_t>(i));
    } else {
        m_pool.parallel_for(static_cast<int64_t>(toks.size()), [&](int64_t i, int) { one(i); });
    }
    for (size_t i = 0; i < toks.size(); ++i) {
        const int t = toks[i];
        float* dst = a.attn_mass + static_cast<size_t>(a.mass_row[t]) * stride;
        const float* src = &m_mass_tmp[i * stride];
        for (int p = 0; p <= a.token_pos[t]; ++p) dst[p] += src[p];
    }
}

void CpuBackend::attend(const PagedAttentionArgs& a) {
    if (a.n_tokens <= 0) return;
    assert(a.n_kv_head > 0 && a.n_head % a.n_kv_head == 0 && a.block_size > 0);
    assert(supports_kv(a.cache_type) && (a.cache_type == DType::F16 || a.head_dim % 32 == 0));
    if (a.window > 0) {  // sliding window: every token as partials over its window's chunks
        attention_split_positions(a, cpu::kAttnChunk);
        return;
    }
    int64_t work = 0;  // query x key x dim products
    int max_ctx = 0;
    for (int t = 0; t < a.n_tokens; ++t) {
        work += static_cast<int64_t>(a.token_pos[t] + 1) * a.n_head * a.head_dim;
        max_ctx = std::max(max_ctx, a.token_pos[t] + 1);
    }
    if (work < kMinParallelAttn || m_pool.size() == 1) {
        for (int t = 0; t < a.n_tokens; ++t) m_ops.attention(a, t, t + 1, 0, a.n_head);
        return;
    }
    const int64_t want = 4 * static_cast<int64_t>(m_pool.size());
    if (a.n_tokens < want) {
        if (max_ctx > cpu::kAttnChunk) {  // long contexts: the kernels' own position chunks as tasks
            attention_split_positions(a, cpu::kAttnChunk);
            return;
        }
        // short contexts: about `want` tasks per call, each a range of heads (whole GQA
        // groups when a task gets more than one); the kernel's bits do not depend on the cut
        const int group = a.n_head / a.n_kv_head;
        int run = static_cast<int>(std::max<int64_t>(1, a.n_head / ceil_div(want, a.n_tokens)));  // heads per task
        if (run >= group) run -= run % group;
        const int64_t runs = ceil_div(a.n_head, run);
        m_pool.parallel_for(a.n_tokens * runs, [&](int64_t task, int) {
            const int t = static_cast<int>(task / runs), h0 = static_cast<int>(task % runs) * run;
            m_ops.attention(a, t, t + 1, h0, std::min(a.n_head, h0 + run));
        });
        return;
    }
    // consecutive tokens of one sequence (a prompt chunk) share a task, so each cache
    // block is fetched once for all of them, while every thread keeps about 4 tasks
    const int per_task = static_cast<int>(std::clamp<int64_t>(a.n_tokens / want, 1, kTokensPerAttnTask));
    m_token_runs.clear();
    for (int t = 0; t < a.n_tokens;) {
        int t1 = t + 1;
        while (t1 < a.n_tokens && t1 - t < per_task && a.token_seq[t1] == a.token_seq[t]) ++t1;
        m_token_runs.push_back({t, t1});
        t = t1;
    }
    m_pool.parallel_for(static_cast<int64_t>(m_token_runs.size()), [&](int64_t i, int) {
        m_ops.attention(a, m_token_runs[i].first, m_token_runs[i].second, 0, a.n_head);
    });
}

void CpuBackend::attention_split_positions(const PagedAttentionArgs& a, int chunk) {
    const int64_t rec = a.head_dim + 2;  // floats per partial record (o, m, l)
    // tasks ordered (token, chunk); first_task[t] is token t's first
    m_tasks.clear();
    m_first_task.assign(static_cast<size_t>(a.n_tokens) + 1, 0);
    for (int t = 0; t < a.n_tokens; ++t) {
        m_first_task[t] = static_cast<int64_t>(m_tasks.size());
        const int n_ctx = a.token_pos[t] + 1;
        const int first = a.window > 0 ? std::max(0, n_ctx - a.window) : 0;
        for (int p0 = first; p0 < n_ctx; p0 = (p0 / chunk + 1) * chunk)
            m_tasks.push_back({t, p0, std::min(n_ctx, (p0 / chunk + 1) * chunk)});
    }
    m_first_task[a.n_tokens] = static_cast<int64_t>(m_tasks.size());
    m_parts.resize(m_tasks.size() * static_cast<size_t>(a.n_head * rec));  // [n_tasks, n_head, head_dim + 2]
    auto run = [&](int64_t i, int) {
        const SplitTask& k = m_tasks[i];
        m_ops.attention_partial(a, k.t, 0, a.n_head, k.p0, k.p1, &m_parts[i * a.n_head * rec]);
    };
    if (m_pool.size() == 1 || m_tasks.size() == 1)
        for (int64_t i = 0; i < static_cast<int64_t>(m_tasks.size()); ++i) run(i, 0);
    else
        m_pool.parallel_for(static_cast<int64_t>(m_tasks.size()), run);
    std::vector<const float*> parts;
    for (int t = 0; t < a.n_tokens; ++t) {
        for (int h = 0; h < a.n_head; ++h) {
            parts.clear();
            for (int64_t i = m_first_task[t]; i < m_first_task[t + 1]; ++i)
                parts.push_back(&m_parts[(i * a.n_head + h) * rec]);
            cpu::merge_attention_partials(parts.data(), static_cast<int>(parts.size()), a.head_dim,
                                          a.out + (static_cast<int64_t>(t) * a.n_head + h) * a.head_dim);
        }
    }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads, const std::string& simd, std::string* error) {
    const std::optional<cpu::SimdLevel> level = cpu::parse_simd(simd, error);
    if (!level) return nullptr;
    return std::make_unique<CpuBackend>(n_threads, *level);
}

}  // namespace kvs
