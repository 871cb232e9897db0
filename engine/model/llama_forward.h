#pragma once
// The Llama-family forward pass (llama, qwen2): one call runs every token of a batch —
// prefill chunks and decode tokens of any number of sequences — through all layers,
// reading and writing K/V through each sequence's block table.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/lora/lora_apply.h"
#include "engine/model/model.h"
#include "engine/telemetry/op_roofline.h"
#include "kernels/backend.h"

namespace kvs {

// One forward step's inputs, host side.
struct ForwardBatch {
    std::vector<int32_t> tokens;        // [n_tokens]
    std::vector<int32_t> positions;     // [n_tokens] absolute position in its sequence
    std::vector<int32_t> token_seq;     // [n_tokens] row of block_tables
    std::vector<int32_t> block_tables;  // [n_seqs, max_blocks_per_seq], padded with -1
    int n_seqs = 0;
    int max_blocks_per_seq = 0;
    std::vector<int32_t> logit_rows;  // token rows whose next-token logits are wanted
    // LoRA (engine/lora/lora_apply.h): the adapters of this batch and, per token, an index
    // into them or -1 (base only). token_adapter empty: no token uses an adapter.
    std::vector<const LoraAdapter*> adapters;
    std::vector<int32_t> token_adapter;  // [n_tokens] or empty
    // Sliding-window layers with their own cache (create()'s kv_swa): their block tables,
    // [n_seqs, max_blocks_per_seq] like block_tables, -1 where a block fell out of the
    // window and was freed. Empty when the forward has no separate local-layer cache.
    std::vector<int32_t> swa_block_tables;
    // KV eviction (engine/kv_cache/kv_eviction.h): each token's index in its sequence's cache
    // when that differs from its RoPE position (entries were dropped and the rest compacted),
    // [n_tokens] or empty (= positions). Token t's K/V goes to that cache index, and it
    // attends to its sequence's cache entries 0 .. kv_positions[t]; RoPE still uses positions.
    std::vector<int32_t> kv_positions;
    // Attention mass wanted (PagedAttentionArgs::attn_mass): per token a row or -1, [n_tokens]
    // or empty (none); LlamaForward::attn_mass() then holds [n_mass_rows, mass_stride], the
    // probabilities summed over every layer and query head.
    std::vector<int32_t> mass_rows;
    int n_mass_rows = 0;
    int mass_stride = 0;

    int n_tokens() const { return static_cast<int>(tokens.size()); }
};

// Where an activation observer sees a layer's activations (the inputs of its linears).
enum class ActivationSite {
    AttnInput,   // attn-norm output, the input of q/k/v  [n_tokens, n_embd]
    AttnOutput,  // attention output, the input of o      [n_tokens, n_head * head_dim]
    FfnInput,    // ffn-norm output, the input of gate/up [n_tokens, n_embd]
    DownInput,   // SwiGLU output, the input of down      [n_tokens, n_ff]
};
// x: [n_tokens, n] host memory, valid only during the call.
using ActivationObserver = std::function<void(int layer, ActivationSite site, const float* x, int n_tokens, int n)>;

class LlamaForward {
public:
    // max_tokens: the most tokens one forward() may carry (the batch / chunk size). Every
    // backend allocation (weight copies, packed projections, activation scratch) is
    // checked: an error names what could not be allocated and how many bytes.
    // kv_swa (models with sliding-window layers, gemma3): when given, the local layers keep
    // K/V there, addressed through ForwardBatch::swa_block_tables, so blocks that fell out of
    // the window can be given back; kv then holds only the global layers. Null: kv holds
    // every layer and one table serves all (nothing is freed).
    static Result<std::unique_ptr<LlamaForward>> create(std::shared_ptr<const Model> model, Backend& backend,
                                                        KvTensors& kv, int max_tokens, KvTensors* kv_swa = nullptr);
    ~LlamaForward();
    LlamaForward(const LlamaForward&) = delete;
    LlamaForward& operator=(const LlamaForward&) = delete;

    // logits: [logit_rows.size(), n_logits()] on the host.
    Status forward(const ForwardBatch& batch, std::vector<float>* logits);
    int max_tokens() const { return m_max_tokens; }
    // Width of a logits row: the output head's rows (n_vocab, or fewer for a draft model
    // whose head keeps only the first token ids).
    int n_logits() const { return static_cast<int>(m_output.n_out); }
    const ModelConfig& config() const { return m_model->config; }
    // Bytes of activation scratch the pass allocated on the backend.
    int64_t scratch_bytes() const { return m_scratch_bytes; }
    // Calibration hook (AWQ): called with each layer's linear inputs. Null by default;
    // only called on host-visible backends (elsewhere the activations are device memory).
    void set_activation_observer(ActivationObserver observer) { m_observer = std::move(observer); }
    // Op timer (the roofline): when on, forward() measures each op group's time (OpKind,
    // summed over layers); a backend that is not host-visible is synchronized at each
    // boundary. op_ms(): the last forward()'s, zeros when it was not timed.
    void set_op_timing(bool on) { m_time_ops = on; }
    const std::array<double, n_op_kinds>& op_ms() const { return m_op_ms; }
    // The last forward()'s attention mass ([n_mass_rows, mass_stride] of its batch; empty
    // when it asked for none).
    const std::vector<float>& attn_mass() const { return m_mass_host; }

private:
    struct Buffers;
    LlamaForward(std::shared_ptr<const Model> model, Backend& backend, KvTensors& kv, int max_tokens,
                 KvTensors* kv_swa);
    Status init();
    // Backend memory this pass owns (released with it). nullptr when the backend refuses;
    // the first refusal is kept in m_alloc_error, naming `what` and the bytes.
    void* alloc(size_t bytes, const std::string& what);
    Status alloc_status() const;
    void upload_weights_if_needed();
    void fuse_projections();
    WeightView pack_rows(std::initializer_list<const WeightView*> parts, const std::string& what);
    void prepare_weights();
    float* scratch(size_t n_floats, const char* what);
    // slots / swa_slots get each token's KV slot in the cache / the local layers' cache.
    Status check_batch(const ForwardBatch& batch, std::vector<int32_t>* slots, std::vector<int32_t>* swa_slots) const;
    Status reserve_batch(size_t table_n, int n_rows);
    void run_layer(int il, const ForwardBatch& b, int n_tokens);
    // y += the LoRA deltas of this batch's adapters for one projection (nothing without any).
    void lora(int il, LoraTarget t, const float* x, int n_in, float* y, int n_out) {
        if (!m_lora.empty()) apply_lora(m_lora, il, t, x, n_in, y, n_out, m_lora_scratch);
    }
    void op_tick(OpKind k) {  // the time since the last tick goes to k
        if (!m_time_ops) return;
        if (!m_backend.host_visible()) m_backend.synchronize();
        const auto now = std::chrono::steady_clock::now();
        m_op_ms[static_cast<size_t>(k)] += std::chrono::duration<double, std::milli>(now - m_op_t).count();
        m_op_t = now;
    }
    void observe(int il, ActivationSite site, const float* x, int n_tokens, int n) const {
        if (m_observer && m_backend.host_visible()) m_observer(il, site, x, n_tokens, n);
    }

    std::shared_ptr<const Model> m_model;
    Backend& m_backend;
    KvTensors& m_kv;
    KvTensors* m_kv_swa = nullptr;     // local layers' cache (create()'s kv_swa), or null
    std::vector<int> m_cache_layer;    // [n_layer] the layer's index in its cache (m_kv or m_kv_swa)
    int m_max_tokens;
    std::vector<LayerWeights> m_layers;  // weight views as the backend sees them
    // On host-visible backends the Q/K/V and gate/up matrices of a layer are packed into
    // one matrix each, so a decode step streams them in one parallel region:
    // qkv [q_dim + 2 kv_dim, n_embd], gate_up [2 n_ff, n_embd]. Empty when not fused.
    struct FusedLayer {
        WeightView qkv;
        WeightView gate_up;
    };
    std::vector<FusedLayer> m_fused;
    WeightView m_token_embd, m_output;
    const float* m_output_norm = nullptr;
    std::vector<void*> m_owned;  // backend allocations to release
    std::unique_ptr<Buffers> m_buf;
    int64_t m_scratch_bytes = 0;
    std::string m_alloc_error;  // the first allocation the backend refused
    ActivationObserver m_observer;
    LoraBatch m_lora;                   // this forward's adapters, grouped
    std::vector<float> m_lora_scratch;  // [group rows, rank] shrink output
    bool m_time_ops = false;
    std::array<double, n_op_kinds> m_op_ms{};  // [OpKind] ms of the last forward()
    std::chrono::steady_clock::time_point m_op_t;
    float* m_mass = nullptr;          // [m_mass_capacity] attention mass on the backend
    size_t m_mass_capacity = 0;       // floats
    std::vector<float> m_mass_host;   // attn_mass()
};

}  // namespace kvs
