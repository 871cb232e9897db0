#pragma once
// The CPU element-wise, normalization and attention kernels behind CpuBackend, one
// table of functions per SIMD level. Each function does one unit of work (a row, a
// token, a range, a group of attention heads) so the backend decides what runs on the
// thread pool. ops_scalar.cpp is the reference; ops_avx2.cpp the AVX2/FMA/F16C level.
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"

namespace kvs::cpu {

struct OpKernels {
    // y [n] = x [n] / sqrt(mean(x^2) + eps) * weight [n]   (y may alias x)
    void (*rms_norm_row)(const float* x, const float* weight, float* y, int n, float eps);
    // rotates the first n_rot dims of each of n_head heads of one token in place;
    // cos_sin [n_rot / 2, 2] holds (cos, sin) of pos * freq_base^(-2i/n_rot)
    void (*rope_token)(float* x, const float* cos_sin, int n_head, int head_dim, int n_rot, RopeStyle style);
    // in place; x [n]
    void (*softmax_row)(float* x, int n);
    // y = silu(gate) * up over [0, n) (y may alias gate)
    void (*swiglu_range)(const float* gate, const float* up, float* y, int64_t n);
    // y = a + b over [0, n) (y may alias a or b)
    void (*add_range)(const float* a, const float* b, float* y, int64_t n);
    // fp16 bits of x; dst [n], x [n]
    void (*to_fp16_row)(const float* x, uint16_t* dst, int n);
    // x as n / 32 GGML Q8_0 blocks, rounded exactly as quantize_row(DType::Q8_0) does
    // (the KV cache's INT8 rows); x [n], dst [n / 32] blocks, n a multiple of 32
    void (*to_q8_0_row)(const float* x, void* dst, int n);
    // Query tokens [t0, t1), all of one sequence, query heads [h0, h1): writes
    // a.out[t, h, :]. Heads of one GQA group share each converted K/V row, and the tokens
    // of a call share each cache block while it is in L1; every token's result is the
    // same bits whichever tokens it is called with. The cache may be F16 or Q8_0.
    void (*attention)(const PagedAttentionArgs& a, int t0, int t1, int h0, int h1);
    // The same over cache positions [p0, p1) only (p1 <= token_pos[t] + 1; the AVX2
    // kernel wants them inside one kAttnChunk-aligned chunk), unnormalized:
    // for head h, part[(h - h0) * (head_dim + 2) + ...] = (sum_p e^(s_p - m) v_p [head_dim],
    // m = max_p s_p, l = sum_p e^(s_p - m)). merge_attention_partials combines ranges.
    void (*attention_partial)(const PagedAttentionArgs& a, int t, int h0, int h1, int p0, int p1, float* part);
    // probs [token_pos[t] + 1] = query token t's softmax probabilities summed over its heads
    // (PagedAttentionArgs::attn_mass; attention_mass_token below is the reference).
    void (*attention_mass)(const PagedAttentionArgs& a, int t, float* probs);
};

// probs [token_pos[t] + 1] = for each cache position p query token t attends to (inside
// a.window when set; 0 elsewhere), the sum over its n_head query heads of the softmax
// probability of p: the reference of PagedAttentionArgs::attn_mass (scores in double).
void attention_mass_token(const PagedAttentionArgs& a, int t, float* probs);

// out [head_dim] = the attention of one head from n_parts partial results of disjoint
// position ranges; parts [n_parts] point at (o [head_dim], m, l) records.
void merge_attention_partials(const float* const* parts, int n_parts, int head_dim, float* out);

// The AVX2 attention computes every token as partials over the position chunks
// [c kAttnChunk, (c + 1) kAttnChunk), merged in order by merge_attention_partials, whether
// one task runs the whole token or the backend splits its positions over threads
// (attention_partial per chunk): a token's output has the same bits either way.
constexpr int kAttnChunk = 256;

const OpKernels& scalar_op_kernels();
const OpKernels& avx2_op_kernels();  // only call when detect_simd() >= Avx2
// The table for `level`.
const OpKernels& op_kernels(SimdLevel level);

// Per-thread float scratch that only grows (defined in ops_scalar.cpp, so the AVX2 file
// instantiates no std templates whose AVX2 copy the linker could hand to scalar code).
// `slot` picks one of kScratchSlots independent buffers.
constexpr int kScratchSlots = 4;
float* thread_scratch(int slot, size_t n_floats);

// (cos, sin) pairs of pos * freq_base^(-2i/n_rot), i in [0, n_rot/2), computed in double.
// cos_sin [n_rot / 2, 2]
void rope_angles(int32_t pos, int n_rot, float freq_base, float* cos_sin);

// Key/value row of cache position `pos` of sequence `seq`, kv head `kvh`: head_dim values in
// a.cache_type (fp16 bits, or head_dim / 32 Q8_0 blocks). pos_bytes = row_bytes(a.cache_type,
// n_kv_head * head_dim), the bytes of one cache position.
inline const uint8_t* paged_row(const void* cache, const PagedAttentionArgs& a, size_t pos_bytes, int seq, int pos,
                                int kvh) {
    const int block = a.block_tables[static_cast<int64_t>(seq) * a.max_blocks_per_seq + pos / a.block_size];
    const int64_t slot = static_cast<int64_t>(block) * a.block_size + pos % a.block_size;
    return static_cast<const uint8_t*>(cache) + static_cast<size_t>(slot) * pos_bytes +
           pos_bytes / static_cast<size_t>(a.n_kv_head) * static_cast<size_t>(kvh);
}

}  // namespace kvs::cpu
