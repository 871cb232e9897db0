#include "engine/runtime/sequence_runner.h"

#include <algorithm>

#include "engine/runtime/weight_support.h"

namespace kvs {

Result<std::unique_ptr<SequenceRunner>> SequenceRunner::create(std::shared_ptr<const Model> model,
                                                               const RunnerOptions& opt) {
    return create(std::move(model), opt, nullptr);
}

Result<std::unique_ptr<SequenceRunner>> SequenceRunner::create(std::shared_ptr<const Model> model,
                                                               const RunnerOptions& opt,
                                                               std::shared_ptr<Backend> shared_backend) {
    using R = Result<std::unique_ptr<SequenceRunner>>;
    if (opt.n_ctx < 1) return R::error("context size must be at least 1 token, got " + std::to_string(opt.n_ctx));
    if (opt.n_batch < 1) return R::error("batch size must be at least 1 token, got " + std::to_string(opt.n_batch));
    if (opt.block_size != 8 && opt.block_size != 16 && opt.block_size != 32)
        return R::error("KV block size must be 8, 16 or 32 tokens, got " + std::to_string(opt.block_size));
    std::unique_ptr<SequenceRunner> r(new SequenceRunner);
    r->m_opt = opt;
    r->m_model = std::move(model);
    if (shared_backend) {
        r->m_backend = std::move(shared_backend);
        r->m_backend_note = "shared backend " + r->m_backend->name();
    } else {
        r->m_backend = make_backend(opt.backend, opt.n_threads, &r->m_backend_note, opt.simd);
    }
    if (!r->m_backend) return R::error(r->m_backend_note);
    if (Status st = check_weight_support(*r->m_model, *r->m_backend); !st) return st;
    if (auto s = check_kv_type(*r->m_backend, r->m_model->config, opt.kv_type); !s) return R::error(s.message());
    const int n_blocks = static_cast<int>((static_cast<int64_t>(opt.n_ctx) + opt.block_size - 1) / opt.block_size);
    if (Status st = check_kv_cache_fits(r->m_model->config, opt.kv_type, n_blocks, opt.block_size); !st)
        return R::error(st.message() + " (lower the context size)");
    const ModelConfig& c = r->m_model->config;
    const int max_tokens = std::min(opt.n_batch, opt.n_ctx);
    int n_swa = 0;
    for (int il = 0; il < c.n_layer; ++il) n_swa += c.is_swa(il) ? 1 : 0;
    ModelConfig global = c;  // the layers of the main cache
    if (opt.free_out_of_window && n_swa > 0 && c.sliding_window > 0 && r->m_backend->supports_gemma_ops()) {
        // A chunk starting at position p reads from p - window + 1 and writes up to p + max_tokens - 1.
        const int64_t span = int64_t(c.sliding_window) - 1 + max_tokens;
        const int swa_blocks =
            static_cast<int>(std::min<int64_t>(n_blocks, (span + opt.block_size - 1) / opt.block_size + 2));
        ModelConfig local = c;
        local.n_layer = n_swa;
        global.n_layer = c.n_layer - n_swa;
        auto kv_swa = KvTensors::create(*r->m_backend, local, swa_blocks, opt.block_size, opt.kv_type);
        if (!kv_swa) return kv_swa.status();
        r->m_kv_swa = std::move(kv_swa).value();
        r->m_swa_pool = std::make_unique<BlockPool>(swa_blocks);
    }
    auto kv = KvTensors::create(*r->m_backend, global, n_blocks, opt.block_size, opt.kv_type);
    if (!kv) return kv.status();
    r->m_kv = std::move(kv).value();
    r->m_pool = std::make_unique<BlockPool>(n_blocks);
    auto forward = LlamaForward::create(r->m_model, *r->m_backend, *r->m_kv, max_tokens, r->m_kv_swa.get());
    if (!forward) return forward.status();
    r->m_forward = std::move(forward).value();
    return r;
}

SequenceRunner::~SequenceRunner() = default;

void SequenceRunner::clear() {
    m_pool->release(m_block_table);
    m_block_table.clear();
    if (m_swa_pool) {
        std::vector<int32_t> held;
        for (int32_t id : m_swa_table)
            if (id >= 0) held.push_back(id);
        m_swa_pool->release(held);
    }
    m_swa_table.clear();
    m_n_past = 0;
}

Status SequenceRunner::ensure_blocks(int n_tokens_total) {
    const int bs = m_opt.block_size;
    const int need = (n_tokens_total + bs - 1) / bs - static_cast<int>(m_block_table.size());
    if (need <= 0) return Status::ok();
    auto got = m_pool->allocate(need);
    if (!got) return got.status();
    m_block_table.insert(m_block_table.end(), got->begin(), got->end());
    return Status::ok();
}

Status SequenceRunner::slide_window(int lo, int n_tokens_total) {
    const int bs = m_opt.block_size;
    for (size_t b = 0; b < m_swa_table.size() && static_cast<int>(b + 1) * bs <= lo; ++b)
        if (m_swa_table[b] >= 0) {
            m_swa_pool->release({m_swa_table[b]});
            m_swa_table[b] = -1;
            ++m_swa_freed;
        }
    const int need = (n_tokens_total + bs - 1) / bs - static_cast<int>(m_swa_table.size());
    if (need <= 0) return Status::ok();
    auto got = m_swa_pool->allocate(need);
    if (!got) return Status::error("local layers' KV pool: " + got.message());
    m_swa_table.insert(m_swa_table.end(), got->begin(), got->end());
    return Status::ok();
}

Status SequenceRunner::eval(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits) {
    const int n = static_cast<int>(tokens.size());
    if (n == 0) return Status::error("eval: no tokens");
    if (m_n_past + n > m_opt.n_ctx)
        return Status::error("the sequence would be " + std::to_string(m_n_past + n) +
                             " tokens long, over the context of " + std::to_string(m_opt.n_ctx) +
                             " tokens (prompt too long: shorten it or raise --ctx)");
    KVS_RETURN_IF_ERROR(ensure_blocks(m_n_past + n));
    logits->clear();
    std::vector<float> chunk_logits;
    for (int start = 0; start < n; start += m_forward->max_tokens()) {
        const int len = std::min(m_forward->max_tokens(), n - start);
        ForwardBatch b;
        b.tokens.assign(tokens.begin() + start, tokens.begin() + start + len);
        for (int i = 0; i < len; ++i) {
            b.positions.push_back(m_n_past + start + i);
            b.token_seq.push_back(0);
        }
        b.n_seqs = 1;
        b.max_blocks_per_seq = static_cast<int>(m_block_table.size());
        b.block_tables = m_block_table;
        if (m_swa_pool) {  // the chunk's first token reads from n_past + start - window + 1
            const int pos0 = m_n_past + start;
            KVS_RETURN_IF_ERROR(slide_window(pos0 - m_model->config.sliding_window + 1, pos0 + len));
            b.swa_block_tables = m_swa_table;
            b.swa_block_tables.resize(m_block_table.size(), -1);
        }
        const bool last_chunk = start + len == n;
        if (all_logits)
            for (int i = 0; i < len; ++i) b.logit_rows.push_back(i);
        else if (last_chunk)
            b.logit_rows.push_back(len - 1);
        KVS_RETURN_IF_ERROR(m_forward->forward(b, &chunk_logits));
        if (!b.logit_rows.empty()) logits->insert(logits->end(), chunk_logits.begin(), chunk_logits.end());
    }
    m_n_past += n;
    return Status::ok();
}

}  // namespace kvs
