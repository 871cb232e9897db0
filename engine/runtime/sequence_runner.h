#pragma once
// One sequence on the engine: the model, a backend, a paged KV cache whose blocks are
// taken from a BlockPool as the sequence grows, and the forward pass. Used by
// `kvscope generate`, `kvscope bench` and the reference-logit tests; the batching
// engine (engine/runtime/engine.h) drives many sequences through the same parts.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/block_pool.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/llama_forward.h"
#include "engine/model/model.h"
#include "kernels/backend.h"

namespace kvs {

struct RunnerOptions {
    int n_ctx = 4096;              // longest sequence (prompt + generated) in tokens
    int n_batch = 512;             // most tokens per forward pass (prompt chunk size)
    int block_size = 16;           // tokens per KV block
    int n_threads = 0;             // 0: one per core
    std::string backend = "auto";  // "auto", "cpu", "cuda"
    std::string simd = "auto";     // CPU kernel level: "auto", "avx2", "scalar" (no AVX-512 kernels)
    DType kv_type = DType::F16;    // KV cache elements: F16, or Q8_0 (INT8 with per-32-value scales)
    // Models with sliding-window layers (gemma3): the local layers keep K/V in a pool of
    // their own, sized for the window plus one batch, and a block whose positions all fell
    // out of the window goes back to it (false: one pool and table for every layer).
    bool free_out_of_window = true;
};

class SequenceRunner {
public:
    static Result<std::unique_ptr<SequenceRunner>> create(std::shared_ptr<const Model> model, const RunnerOptions& opt);
    // Same, on a backend shared with other runners (one thread pool or one GPU context for
    // several models, e.g. a reference and its quantized variant). Runners that share a
    // backend must not run at the same time; opt.backend / n_threads / simd are ignored.
    static Result<std::unique_ptr<SequenceRunner>> create(std::shared_ptr<const Model> model, const RunnerOptions& opt,
                                                          std::shared_ptr<Backend> shared_backend);
    ~SequenceRunner();

    // Appends tokens to the sequence and runs them (in chunks of n_batch). With
    // all_logits, *logits gets [tokens.size(), n_vocab]; otherwise [1, n_vocab] for the
    // last token. Fails cleanly, leaving the sequence unchanged, when the tokens would
    // pass n_ctx or the KV pool has no room.
    Status eval(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits);
    // Forget the sequence and give its blocks back.
    void clear();

    int n_past() const { return m_n_past; }
    int n_ctx() const { return m_opt.n_ctx; }
    const Model& model() const { return *m_model; }
    Backend& backend() { return *m_backend; }
    const std::string& backend_note() const { return m_backend_note; }
    int64_t kv_bytes() const { return m_kv->bytes() + (m_kv_swa ? m_kv_swa->bytes() : 0); }
    DType kv_type() const { return m_kv->kv_type(); }
    int64_t scratch_bytes() const { return m_forward->scratch_bytes(); }
    const std::vector<int32_t>& block_table() const { return m_block_table; }
    // Sliding-window layers with their own pool (free_out_of_window): their table, one entry
    // per block of block_table(), -1 once the block fell out of the window and was freed;
    // empty otherwise. Blocks freed so far, and the local pool's size and blocks in use.
    const std::vector<int32_t>& swa_block_table() const { return m_swa_table; }
    int64_t n_swa_blocks_freed() const { return m_swa_freed; }
    int swa_pool_blocks() const { return m_swa_pool ? m_swa_pool->n_blocks() : 0; }
    int swa_blocks_in_use() const { return m_swa_pool ? m_swa_pool->n_blocks() - m_swa_pool->n_free() : 0; }

private:
    SequenceRunner() = default;
    Status ensure_blocks(int n_tokens_total);
    // Local layers: frees the blocks wholly before position lo, then gives blocks to every
    // position below n_tokens_total.
    Status slide_window(int lo, int n_tokens_total);

    RunnerOptions m_opt;
    std::shared_ptr<const Model> m_model;
    std::shared_ptr<Backend> m_backend;  // own, or shared with other runners
    std::string m_backend_note;
    std::unique_ptr<KvTensors> m_kv;
    std::unique_ptr<BlockPool> m_pool;
    std::unique_ptr<LlamaForward> m_forward;
    std::vector<int32_t> m_block_table;  // [n_blocks held] in position order
    std::unique_ptr<KvTensors> m_kv_swa;  // local layers (free_out_of_window), or null
    std::unique_ptr<BlockPool> m_swa_pool;
    std::vector<int32_t> m_swa_table;  // [m_block_table.size()] local-layer blocks, -1 = freed
    int64_t m_swa_freed = 0;
    int m_n_past = 0;
};

}  // namespace kvs
