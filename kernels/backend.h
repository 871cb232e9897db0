#pragma once
// The op interface every compute backend implements (CPU in kernels/cpu/, CUDA in
// kernels/cuda/). The engine's forward pass calls only these ops, so a backend is
// swapped without touching the model code.
//
// Pointers passed to ops are "device" pointers of that backend: host memory for the
// CPU backend, cudaMalloc'd memory for CUDA. alloc()/copy_*() move data between them;
// a host_visible() backend may also be handed host pointers (for example weights that
// live in a memory-mapped model file) directly.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace kvs {

// A weight matrix exactly as a model file stores it: n_out rows of n_in elements,
// each row row_bytes(dtype, n_in) long, rows packed back to back.
struct WeightView {
    DType dtype = DType::F32;
    const void* data = nullptr;  // [n_out, n_in] in dtype's block layout
    int64_t n_in = 0;            // GGUF ne[0], contiguous
    int64_t n_out = 0;           // GGUF ne[1]
    // Optional, Q4_0 / Q4_1 on the CPU only: the same weights laid out as the AVX2 kernels
    // read them (8-row tiles, Backend::prepare_weight); data stays valid for everything else.
    const void* cpu_tiles = nullptr;
    // Optional [n_in], a permutation of 0..n_in-1: the stored rows hold the input columns in
    // this order, so column p multiplies x[t, in_perm[p]] (GPTQ act-order checkpoints: the
    // columns sorted by group make every group contiguous, as exllama does). Only backends
    // whose supports_input_permutation() is true run such a weight. Like data, a pointer of
    // the backend (device memory on CUDA).
    const int32_t* in_perm = nullptr;
};

enum class RopeStyle {
    Normal,  // rotate adjacent pairs (x[2i], x[2i+1]): GGUF "llama" (Q/K rows permuted by the converter)
    Neox,    // rotate halves (x[i], x[i + n_rot/2]): qwen2, and Hugging Face Llama checkpoints
};

// Element types of the paged K/V cache (Backend::supports_kv says which a backend runs):
//  - DType::F16: each cache position holds kv_dim fp16 values.
//  - DType::Q8_0: "INT8 with per-block scales": each cache position holds kv_dim / 32
//    GGML Q8_0 blocks (fp16 scale d + 32 int8 q, x = d * q, 34 bytes per 32 values), i.e.
//    every run of 32 consecutive values of one token's K (or V) row has its own scale,
//    d = max|x| / 127, q = round-half-even(x / d). head_dim must be a multiple of 32, so
//    a kv head's slice of the row is whole blocks.
// A position's row is row_bytes(cache_type, kv_dim) bytes; positions are packed back to
// back, so block moves (copy-on-write, swap) are plain byte copies.

// Write the keys and values of n_tokens new tokens into the paged cache (vLLM's
// reshape_and_cache). The cache of one layer is [n_blocks, block_size, kv_dim] in cache_type.
struct KvStoreArgs {
    const float* k = nullptr;               // [n_tokens, kv_dim]
    const float* v = nullptr;               // [n_tokens, kv_dim]
    void* k_cache = nullptr;                // [n_blocks, block_size, kv_dim] in cache_type
    void* v_cache = nullptr;                // [n_blocks, block_size, kv_dim] in cache_type
    const int32_t* slot_mapping = nullptr;  // [n_tokens] block_id * block_size + offset in block
    int n_tokens = 0;
    int kv_dim = 0;                 // n_kv_head * head_dim
    DType cache_type = DType::F16;  // F16 or Q8_0
};

// Causal attention of n_tokens query tokens, each belonging to one sequence, over
// that sequence's cached keys/values, found through its block table. Query token t
// attends to positions 0..token_pos[t] of sequence token_seq[t] (so prefill chunks
// and single decode tokens of many sequences mix in one call). Grouped-query
// attention: query head h reads kv head h / (n_head / n_kv_head).
struct PagedAttentionArgs {
    const float* q = nullptr;               // [n_tokens, n_head, head_dim]
    float* out = nullptr;                   // [n_tokens, n_head, head_dim]
    const void* k_cache = nullptr;          // [n_blocks, block_size, n_kv_head, head_dim] in cache_type
    const void* v_cache = nullptr;          // [n_blocks, block_size, n_kv_head, head_dim] in cache_type
    const int32_t* block_tables = nullptr;  // [n_seqs, max_blocks_per_seq]
    const int32_t* token_seq = nullptr;     // [n_tokens] row of block_tables
    const int32_t* token_pos = nullptr;     // [n_tokens] absolute position of the query token
    int n_tokens = 0;
    int n_seqs = 0;
    int max_blocks_per_seq = 0;
    int n_head = 0;
    int n_kv_head = 0;
    int head_dim = 0;
    int block_size = 16;
    float scale = 1.0f;             // usually 1/sqrt(head_dim)
    DType cache_type = DType::F16;  // F16 or Q8_0 (head_dim a multiple of 32)
    // Sliding-window attention (Gemma 3's local layers): > 0 limits query token t to the
    // positions token_pos[t] - window + 1 .. token_pos[t] (llama.cpp's LLAMA_SWA_TYPE_STANDARD
    // masks p0 when p1 - p0 >= window); blocks wholly before that are never read, so their
    // table entries may be -1. 0: full causal attention. Only backends whose
    // supports_gemma_ops() is true take a window.
    int window = 0;
    // Attention mass (KV eviction scores, engine/kv_cache/kv_eviction.h), on backends whose
    // supports_attention_mass() is true: when attn_mass is set, every query token t with
    // mass_row[t] >= 0 adds to attn_mass[mass_row[t] * mass_stride + p], for each cache
    // position p it attends to, the sum over its n_head query heads of the softmax
    // probability of p. Rows are summed in token order (the same bits however the attention
    // itself was split). Null: nothing is written.
    float* attn_mass = nullptr;         // [n_mass_rows, mass_stride], accumulated (+=)
    const int32_t* mass_row = nullptr;  // [n_tokens] row of attn_mass, -1: the token adds nothing
    int mass_stride = 0;                // more than every token_pos[t] of a token with a row
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;  // "cpu-avx2", "cuda:NVIDIA H100", ...
    virtual int n_threads() const { return 1; }

    // ---- memory
    virtual bool host_visible() const = 0;
    virtual void* alloc(size_t bytes) = 0;
    virtual void release(void* ptr) = 0;
    virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
    virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
    virtual void synchronize() {}

    // ---- ops
    virtual bool supports(DType weight_type) const = 0;
    // Whether matmul honours WeightView::in_perm (the CPU gathers the activations first).
    virtual bool supports_input_permutation() const { return false; }
    // y[t, o] = sum_i x[t, i] * W[o, i]; x [n_tokens, n_in], y [n_tokens, n_out]
    virtual void matmul(const WeightView& w, const float* x, float* y, int n_tokens) = 0;
    // May give w a faster layout for this backend's matmul (w.cpu_tiles); returns the new
    // buffer (the caller releases it with release()) or nullptr when there is none.
    virtual void* prepare_weight(WeightView& /*w*/) { return nullptr; }
    // out[t, :] = dequantized row ids[t] of table; out [n_tokens, n_in]
    virtual void embedding(const WeightView& table, const int32_t* ids, int n_tokens, float* out) = 0;
    // y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight; x, y [n_rows, n]; weight [n] (y may alias x)
    virtual void rms_norm(const float* x, const float* weight, float* y, int n_rows, int n, float eps) = 0;
    // in place; x [n_tokens, n_head, head_dim]; rotates the first n_rot dims of each head
    // by angle pos * freq_base^(-2i/n_rot)
    virtual void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, int n_rot, float freq_base,
                      RopeStyle style) = 0;
    // Gemma's ops, for backends whose supports_gemma_ops() is true (the CPU): y = x * s, and
    // y = gelu_tanh(gate) * up (GeGLU, the tanh approximation of GELU); all [n] (y may alias
    // x / gate). The defaults are host loops: a backend that is not host-visible must
    // override them before it says it supports them.
    virtual bool supports_gemma_ops() const { return false; }
    virtual void scale(const float* x, float s, float* y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
    }
    virtual void geglu(const float* gate, const float* up, float* y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(gate[i]) * up[i];
    }
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in double
    static float gelu_tanh(float x) {
        const double d = x;
        return static_cast<float>(0.5 * d * (1.0 + std::tanh(0.7978845608028654 * (d + 0.044715 * d * d * d))));
    }
    // in place, row-wise; x [n_rows, n_cols]
    virtual void softmax(float* x, int n_rows, int n_cols) = 0;
    // y = silu(gate) * up; all [n] (y may alias gate)
    virtual void swiglu(const float* gate, const float* up, float* y, int64_t n) = 0;
    // y = a + b; all [n] (y may alias a)
    virtual void add(const float* a, const float* b, float* y, int64_t n) = 0;
    // y[r, :] = x[r, :] + bias; x, y [n_rows, n], bias [n] (y may alias x)
    virtual void add_bias(const float* x, const float* bias, float* y, int n_rows, int n) = 0;
    // K/V cache element types kv_store / paged_attention take (see KvStoreArgs); F16 everywhere.
    virtual bool supports_kv(DType cache_type) const { return cache_type == DType::F16; }
    virtual void kv_store(const KvStoreArgs& a) = 0;
    virtual void paged_attention(const PagedAttentionArgs& a) = 0;
    // Whether paged_attention fills PagedAttentionArgs::attn_mass (the CPU backend does).
    virtual bool supports_attention_mass() const { return false; }
};

// The CPU backend with n_threads workers (0: one per core). `simd` picks the kernel
// level: "auto" (best the CPU supports), "avx2" or "scalar" (the reference); see
// cpu::parse_simd in kernels/cpu/cpu_features.h. Any other name (there are no AVX-512
// kernels) gives nullptr and sets *error when given.
std::unique_ptr<Backend> make_cpu_backend(int n_threads = 0, const std::string& simd = "auto",
                                          std::string* error = nullptr);

// Loads libkvscope_cuda.so at run time. Returns nullptr and sets *why when the library,
// the driver or a GPU is missing, so the program starts on machines without NVIDIA drivers.
std::unique_ptr<Backend> make_cuda_backend(std::string* why);

// The memory of the GPU the CUDA backend runs on (device 0), asked through
// libkvscope_cuda.so (cudaMemGetInfo) without creating a backend: its name, free and total
// bytes. ok false and `why` when the library, the driver or a GPU is missing.
struct DeviceMemory {
    bool ok = false;
    std::string device;
    int64_t free_bytes = 0;
    int64_t total_bytes = 0;
    std::string why;
};
DeviceMemory cuda_device_memory();

// "cuda" when it loads, else the CPU backend; *note says which was picked and why. An
// unknown backend or SIMD level gives nullptr, and *note says what was expected.
std::unique_ptr<Backend> make_backend(const std::string& requested, int n_threads, std::string* note,
                                      const std::string& simd = "auto");

}  // namespace kvs
