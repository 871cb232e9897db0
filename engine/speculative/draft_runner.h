#pragma once
// A draft model beside the target: its own paged KV cache (same block size, its own pool),
// the target's backend and thread pool. For each request it remembers how many of the
// request's tokens its cache holds, catches up on the ones it has not seen (the prompt the
// first time, the tokens the target accepted since), then drafts k tokens one forward pass
// at a time, batched over every request drafting this step. Rejected drafts are rolled
// back with rollback().
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv_cache/kv_cache_manager.h"
#include "engine/kv_cache/kv_tensors.h"
#include "engine/model/llama_forward.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/speculative/verify.h"

namespace kvs {

class DraftRunner {
public:
    // n_blocks: the draft's KV pool (blocks of block_size tokens); max_tokens: the most
    // tokens one draft forward pass carries.
    static Result<std::unique_ptr<DraftRunner>> create(std::string name, std::shared_ptr<const Model> draft,
                                                       Backend& backend, int n_blocks, int block_size, int max_tokens);
    ~DraftRunner();

    struct Job {
        RequestId id = 0;
        std::span<const int32_t> context;        // the request's prompt + output
        int k = 0;                               // drafts wanted
        const SamplingParams* params = nullptr;  // the request's sampling (greedy -> greedy drafts)
    };
    // out[i]: up to jobs[i].k drafts (fewer, or none, when the draft's pool is full).
    Status propose(const std::vector<Job>& jobs, std::vector<std::vector<DraftToken>>* out);
    // The draft's cache keeps at most the request's first n_tokens tokens.
    void rollback(RequestId id, int n_tokens);
    void release(RequestId id);

    const std::string& name() const { return m_name; }
    const Model& model() const { return *m_model; }
    int64_t kv_bytes() const { return m_kv->bytes(); }

private:
    DraftRunner() = default;
    struct State {
        Sampler sampler;
        explicit State(const SamplingParams& p) : sampler(p) {}
    };
    struct Live;
    std::vector<Live> admit(const std::vector<Job>& jobs);
    Status catch_up(const std::vector<Job>& jobs, std::vector<Live>& live, std::vector<float>& last_logits);
    Status draft(const std::vector<Job>& jobs, std::vector<Live>& live, std::vector<float>& last_logits,
                 std::vector<std::vector<DraftToken>>* out);
    void add_row(ForwardBatch& b, RequestId id, int seq_row);

    std::string m_name;
    std::shared_ptr<const Model> m_model;
    Backend* m_backend = nullptr;
    std::unique_ptr<KvTensors> m_kv;
    std::unique_ptr<KVCacheManager> m_mgr;
    std::unique_ptr<LlamaForward> m_forward;
    std::unordered_map<RequestId, std::unique_ptr<State>> m_states;
    std::vector<float> m_logits;
};

// Draft models a user can ask for by name, made from the target:
//   "layer-skip:N"  the target's first N layers, its final norm and output head (shares
//                   the target's weights)
//   "int4"          the target's linears re-quantized to Q4_0 (engine/quant)
//   a file path     another model; its vocabulary must equal the target's
//   any of these + "@V"  the output head cut to the first V token ids (BPE ids roughly
//                   follow merge order, i.e. frequency): a much cheaper head; the draft
//                   never proposes a later id, which verification handles exactly
Result<std::shared_ptr<const Model>> make_draft_model(const std::string& spec, std::shared_ptr<const Model> target);

}  // namespace kvs
