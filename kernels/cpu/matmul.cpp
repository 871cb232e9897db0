// CPU matmul: quantize the activations once per call into scratch owned by the calling
// thread, then split the output over the pool. Decode (one token) splits rows only and
// streams the weights; prompt processing splits (row chunk, token chunk) tasks whose
// register tiles reuse each decoded weight block for 4 tokens.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cassert>
#include <vector>

#include "kernels/cpu/quant_formats.h"
#include "kernels/cpu/vec_dot.h"

namespace kvs::cpu {
namespace {

constexpr int kTokenChunk = 64;             // tokens per GEMM task: their activations stay in L2
constexpr int64_t kRowChunk = 32;           // weight rows per GEMM task: their blocks stay in L1
constexpr int64_t kMinQuantPerTask = 8192;  // activation elements per parallel quantize task

// Grows, never shrinks: steady-state calls do not allocate.
uint8_t* scratch(size_t bytes) {
    thread_local std::vector<uint8_t> buf;
    if (buf.size() < bytes) buf.resize(bytes);
    return buf.data();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Runs fn(t0, t1) over token ranges, in parallel when the work is worth a region.
template <class Fn>
void for_token_ranges(ThreadPool& pool, int n_tokens, int64_t n_in, Fn&& fn) {
    const int64_t per_task = std::max<int64_t>(1, kMinQuantPerTask / std::max<int64_t>(1, n_in));
    const int64_t n_tasks = ceil_div(n_tokens, per_task);
    if (n_tasks <= 1) {
        fn(0, n_tokens);
        return;
    }
    pool.parallel_for(n_tasks, [&](int64_t task, int) {
        const int t0 = static_cast<int>(task * per_task);
        fn(t0, static_cast<int>(std::min<int64_t>(n_tokens, t0 + per_task)));
    });
}

// Row chunk for a one-token GEMV: about 8 tasks per thread (dynamic balance against
// other programs on the same cores), a multiple of 8 rows (the Q4 tiles' height).
int64_t gemv_row_chunk(int64_t n_out, int n_threads) {
    const int64_t c = ceil_div(n_out, 8 * static_cast<int64_t>(n_threads));
    return std::max<int64_t>(16, (c + 7) & ~int64_t{7});
}

void matmul_avx2(ThreadPool& pool, const WeightView& w, const float* x, float* y, int n_tokens) {
    const int64_t n_in = w.n_in, n_out = w.n_out;
    uint8_t* buf = scratch(avx2_act_bytes(w.dtype, n_tokens, n_in));
    ActPanel panel = avx2_act_layout(w.dtype, buf, x, n_tokens, n_in);
    if (w.dtype == DType::I8_LLM) panel.threshold = llm_int8_threshold(w.data);
    for_token_ranges(pool, n_tokens, n_in, [&](int t0, int t1) { avx2_quantize_act(w.dtype, panel, x, t0, t1); });

    if (n_tokens == 1) {
        const int64_t chunk = gemv_row_chunk(n_out, pool.size());
        pool.parallel_for(ceil_div(n_out, chunk), [&](int64_t task, int) {
            const int64_t r0 = task * chunk;
            avx2_gemm(w, panel, r0, std::min(n_out, r0 + chunk), 0, 1, y, n_out);
        });
        return;
    }
    const int64_t n_rchunks = ceil_div(n_out, kRowChunk);
    const int64_t n_tchunks = ceil_div(n_tokens, kTokenChunk);
    // consecutive tasks share a token chunk, so the threads read the same activations
    pool.parallel_for(n_rchunks * n_tchunks, [&](int64_t task, int) {
        const int64_t r0 = (task % n_rchunks) * kRowChunk;
        const int t0 = static_cast<int>((task / n_rchunks) * kTokenChunk);
        const int t1 = std::min(n_tokens, t0 + kTokenChunk);
        avx2_gemm(w, panel, r0, std::min(n_out, r0 + kRowChunk), t0, t1, y, n_out);
    });
}

void matmul_scalar(ThreadPool& pool, const WeightView& w, const float* x, float* y, int n_tokens) {
    const int64_t n_in = w.n_in, n_out = w.n_out;
    const DType at = activation_type(w.dtype);
    const size_t w_row = row_bytes(w.dtype, n_in);
    const void* act = x;  // [n_tokens, n_in] in activation type at
    size_t a_row = static_cast<size_t>(n_in) * sizeof(float);
    if (at != DType::F32) {
        a_row = row_bytes(at, n_in);
        uint8_t* buf = scratch(a_row * static_cast<size_t>(n_tokens));
        for_token_ranges(pool, n_tokens, n_in, [&](int t0, int t1) {
            for (int t = t0; t < t1; ++t) quantize_row(at, x + t * n_in, buf + t * a_row, n_in);
        });
        act = buf;
    }
    const auto* wp = static_cast<const uint8_t*>(w.data);
    const auto* ap = static_cast<const uint8_t*>(act);
    const int64_t chunk = 16;
    if (w.dtype == DType::NF4_DQ) {  // each row's absmax decodes from the tensor's tail first
        const int64_t nb = n_in / kQKBnb;
        pool.parallel_for(ceil_div(n_out, chunk), [&](int64_t task, int) {
            const int64_t r0 = task * chunk, r1 = std::min(n_out, r0 + chunk);
            std::vector<float> am(static_cast<size_t>((r1 - r0) * nb));  // [r1 - r0, nb]
            nf4_dq_absmax(w.data, n_in, n_out, r0 * nb, r1 * nb, am.data());
            for (int t = 0; t < n_tokens; ++t)
                for (int64_t r = r0; r < r1; ++r)
                    y[t * n_out + r] = dot_nf4_dq_f32(wp + r * w_row, am.data() + (r - r0) * nb, x + t * n_in, n_in);
        });
        return;
    }
    pool.parallel_for(ceil_div(n_out, chunk), [&](int64_t task, int) {
        const int64_t r1 = std::min(n_out, (task + 1) * chunk);
        for (int t = 0; t < n_tokens; ++t)
            for (int64_t r = task * chunk; r < r1; ++r)
                y[t * n_out + r] = vec_dot_scalar(w.dtype, wp + r * w_row, ap + t * a_row, n_in);
    });
}

// x [n_tokens, n_in] with its columns in the weight's stored order: xp[t, p] = x[t, perm[p]]
// (WeightView::in_perm), in scratch of the calling thread (not the activation scratch above).
const float* permute_columns(ThreadPool& pool, const int32_t* perm, const float* x, int n_tokens, int64_t n_in) {
    thread_local std::vector<float> buf;  // [n_tokens, n_in]
    const size_t need = static_cast<size_t>(n_tokens) * static_cast<size_t>(n_in);
    if (buf.size() < need) buf.resize(need);
    float* xp = buf.data();
    for_token_ranges(pool, n_tokens, n_in, [&](int t0, int t1) {
        for (int t = t0; t < t1; ++t) {
            const float* src = x + int64_t(t) * n_in;
            float* dst = xp + int64_t(t) * n_in;
            for (int64_t p = 0; p < n_in; ++p) dst[p] = src[perm[p]];
        }
    });
    return xp;
}

}  // namespace

void matmul(ThreadPool& pool, SimdLevel level, const WeightView& w, const float* x, float* y, int n_tokens) {
    if (n_tokens <= 0 || w.n_out <= 0) return;
    assert(w.n_in % dtype_info(w.dtype).block_size == 0);
    if (w.in_perm) x = permute_columns(pool, w.in_perm, x, n_tokens, w.n_in);
    if (level >= SimdLevel::Avx2 && avx2_supports(w.dtype)) matmul_avx2(pool, w, x, y, n_tokens);
    else
        matmul_scalar(pool, w, x, y, n_tokens);
}

float vec_dot(SimdLevel level, DType t, const void* w_row, const void* act_row, int64_t n) {
    if (level >= SimdLevel::Avx2 && avx2_supports(t)) return vec_dot_avx2(t, w_row, act_row, n);
    return vec_dot_scalar(t, w_row, act_row, n);
}

}  // namespace kvs::cpu
