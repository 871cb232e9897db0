#include "engine/speculative/draft_runner.h"

#include <algorithm>

#include "engine/quant/quantize.h"

namespace kvs {

Result<std::unique_ptr<DraftRunner>> DraftRunner::create(std::string name, std::shared_ptr<const Model> draft,
                                                         Backend& backend, int n_blocks, int block_size,
                                                         int max_tokens) {
    using R = Result<std::unique_ptr<DraftRunner>>;
    std::unique_ptr<DraftRunner> d(new DraftRunner);
    d->m_name = std::move(name);
    d->m_model = std::move(draft);
    d->m_backend = &backend;
    for (const LayerWeights& L : d->m_model->layers)
        for (const WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
            if (!backend.supports(w->dtype))
                return R::error("draft '" + d->m_name + "': backend " + backend.name() +
                                " cannot run weights of type " + std::string(dtype_name(w->dtype)));
    auto kv = KvTensors::create(backend, d->m_model->config, n_blocks, block_size);
    if (!kv) return R::error("draft '" + d->m_name + "': " + kv.message());
    d->m_kv = std::move(kv).value();
    d->m_mgr = std::make_unique<KVCacheManager>(n_blocks, block_size, false);
    auto forward = LlamaForward::create(d->m_model, backend, *d->m_kv, max_tokens);
    if (!forward) return R::error("draft '" + d->m_name + "': " + forward.message());
    d->m_forward = std::move(forward).value();
    return d;
}

DraftRunner::~DraftRunner() = default;

void DraftRunner::rollback(RequestId id, int n_tokens) {
    // The draft's pool caches no prefixes, so a known request always rolls back; if it ever
    // did not, forgetting it is safe: the next propose() catches up from its prompt.
    if (m_mgr->has_request(id) && !m_mgr->truncate(id, std::max(0, n_tokens)).is_ok()) release(id);
}

void DraftRunner::release(RequestId id) {
    m_mgr->free(id);
    m_states.erase(id);
}

// A job that drafts this call.
struct DraftRunner::Live {
    size_t job;
    std::vector<int32_t> tokens;  // context + drafts so far
    int done = 0;                 // tokens of `tokens` in the draft's cache
};

Status DraftRunner::propose(const std::vector<Job>& jobs, std::vector<std::vector<DraftToken>>* out) {
    out->assign(jobs.size(), {});
    std::vector<Live> live = admit(jobs);
    if (live.empty()) return Status::ok();
    // [n_live, n_logits]: the logits after each live job's newest token
    std::vector<float> last_logits(live.size() * static_cast<size_t>(m_forward->n_logits()));
    KVS_RETURN_IF_ERROR(catch_up(jobs, live, last_logits));
    return draft(jobs, live, last_logits, out);
}

// The jobs that draft: KV slots for their unseen tokens and k - 1 drafts (a job the
// draft's pool has no room for gets no drafts), their samplers.
std::vector<DraftRunner::Live> DraftRunner::admit(const std::vector<Job>& jobs) {
    std::vector<Live> live;
    for (size_t i = 0; i < jobs.size(); ++i) {
        const Job& j = jobs[i];
        const int n = static_cast<int>(j.context.size());
        if (j.k <= 0 || n == 0) continue;
        if (m_mgr->num_tokens(j.id) >= n && !m_mgr->truncate(j.id, n - 1).is_ok()) m_mgr->free(j.id);  // see rollback()
        const int have = m_mgr->num_tokens(j.id);
        std::vector<int32_t> toks(j.context.begin(), j.context.end());
        auto alloc = m_mgr->allocate_slots(j.id, toks, n - have, j.k - 1);
        if (!alloc || alloc->no_room) continue;  // the draft's pool is full: no drafts for it
        auto& st = m_states[j.id];
        if (!st) {
            SamplingParams p = *j.params;
            p.seed ^= 0x9E3779B97F4A7C15ull;  // the draft's own random stream
            st = std::make_unique<State>(p);
        }
        live.push_back({i, std::move(toks), have});
    }
    return live;
}

// Catch up: each job's unseen tokens [have, n) (at least its last token, whose logits give
// the first draft), in passes of at most max_tokens() tokens.
Status DraftRunner::catch_up(const std::vector<Job>& jobs, std::vector<Live>& live, std::vector<float>& last_logits) {
    const int n_vocab = m_forward->n_logits();  // the draft may score only the first token ids
    std::vector<size_t> pending(live.size());
    for (size_t i = 0; i < live.size(); ++i) pending[i] = i;
    while (!pending.empty()) {
        ForwardBatch b;
        std::vector<size_t> rows_for;  // logit row -> live index
        std::vector<size_t> next;
        int room = m_forward->max_tokens();
        for (size_t li : pending) {
            Live& L = live[li];
            const int n = static_cast<int>(jobs[L.job].context.size());
            const int take = std::min(n - L.done, room);
            if (take <= 0) {
                next.push_back(li);
                continue;
            }
            const int row = b.n_seqs++;
            add_row(b, jobs[L.job].id, row);
            for (int p = L.done; p < L.done + take; ++p) {
                b.tokens.push_back(L.tokens[static_cast<size_t>(p)]);
                b.positions.push_back(p);
                b.token_seq.push_back(row);
            }
            L.done += take;
            room -= take;
            if (L.done == n) {
                b.logit_rows.push_back(b.n_tokens() - 1);
                rows_for.push_back(li);
            } else {
                next.push_back(li);
            }
        }
        KVS_RETURN_IF_ERROR(m_forward->forward(b, &m_logits));
        for (size_t r = 0; r < rows_for.size(); ++r)
            std::copy_n(m_logits.begin() + static_cast<ptrdiff_t>(r * n_vocab), n_vocab,
                        last_logits.begin() + static_cast<ptrdiff_t>(rows_for[r] * n_vocab));
        pending = std::move(next);
    }
    return Status::ok();
}

// Draft token j from the logits after token j-1; then feed it for the next one, every live
// job in one pass.
Status DraftRunner::draft(const std::vector<Job>& jobs, std::vector<Live>& live, std::vector<float>& last_logits,
                          std::vector<std::vector<DraftToken>>* out) {
    const int n_vocab = m_forward->n_logits();
    for (int j = 0;; ++j) {
        ForwardBatch b;
        std::vector<size_t> fed;
        for (size_t li = 0; li < live.size(); ++li) {
            Live& L = live[li];
            const Job& job = jobs[L.job];
            if (static_cast<int>((*out)[L.job].size()) != j || j >= job.k) continue;  // done or stopped
            float* row = last_logits.data() + li * static_cast<size_t>(n_vocab);
            Sampler& s = m_states.at(job.id)->sampler;
            DraftToken d;
            if (s.params().temperature <= 0.0f) {
                d.token = s.sample(row, n_vocab, L.tokens);
            } else {
                d.q = s.probabilities(row, n_vocab, L.tokens);
                d.token = s.draw_from(d.q);
            }
            (*out)[L.job].push_back(d);
            L.tokens.push_back(d.token);
            if (j + 1 >= job.k) continue;  // the last draft is never fed to the draft model
            const int row_i = b.n_seqs++;
            add_row(b, job.id, row_i);
            b.tokens.push_back(d.token);
            b.positions.push_back(L.done);
            b.token_seq.push_back(row_i);
            b.logit_rows.push_back(b.n_tokens() - 1);
            ++L.done;
            fed.push_back(li);
        }
        if (fed.empty()) break;
        KVS_RETURN_IF_ERROR(m_forward->forward(b, &m_logits));
        for (size_t r = 0; r < fed.size(); ++r)
            std::copy_n(m_logits.begin() + static_cast<ptrdiff_t>(r * n_vocab), n_vocab,
                        last_logits.begin() + static_cast<ptrdiff_t>(fed[r] * n_vocab));
    }
    return Status::ok();
}

void DraftRunner::add_row(ForwardBatch& b, RequestId id, int seq_row) {
    // Block tables are padded to the widest row seen so far in this batch.
    const auto& table = m_mgr->block_table(id);
    const int width = std::max<int>(b.max_blocks_per_seq, static_cast<int>(table.size()));
    if (width != b.max_blocks_per_seq && seq_row > 0) {
        std::vector<int32_t> wide(static_cast<size_t>(seq_row) * width, -1);
        for (int s = 0; s < seq_row; ++s)
            std::copy_n(b.block_tables.begin() + static_cast<ptrdiff_t>(s) * b.max_blocks_per_seq, b.max_blocks_per_seq,
                        wide.begin() + static_cast<ptrdiff_t>(s) * width);
        b.block_tables = std::move(wide);
    }
    b.max_blocks_per_seq = std::max(1, width);
    b.block_tables.resize(static_cast<size_t>(seq_row + 1) * b.max_blocks_per_seq, -1);
    std::copy(table.begin(), table.end(),
              b.block_tables.begin() + static_cast<ptrdiff_t>(seq_row) * b.max_blocks_per_seq);
}

namespace {
Result<std::shared_ptr<const Model>> make_base_draft(const std::string& spec, std::shared_ptr<const Model> target);
}

Result<std::shared_ptr<const Model>> make_draft_model(const std::string& spec, std::shared_ptr<const Model> target) {
    using R = Result<std::shared_ptr<const Model>>;
    const size_t at = spec.rfind('@');
    if (at == std::string::npos || spec.find('/') != std::string::npos) return make_base_draft(spec, target);
    int v = 0;
    try {
        v = std::stoi(spec.substr(at + 1));
    } catch (...) {
        v = 0;
    }
    if (v < 256 || v > target->config.n_vocab)
        return R::error("draft '" + spec + "': the head size after '@' must be 256 to " +
                        std::to_string(target->config.n_vocab) + " token ids");
    auto base = make_base_draft(spec.substr(0, at), target);
    if (!base) return base;
    auto m = std::make_shared<Model>(*base.value());
    m->output.n_out = v;  // the first v rows: the draft only ever proposes token ids below v
    m->config.name += " (head: first " + std::to_string(v) + " tokens)";
    return std::shared_ptr<const Model>(m);
}

namespace {
Result<std::shared_ptr<const Model>> make_base_draft(const std::string& spec, std::shared_ptr<const Model> target) {
    using R = Result<std::shared_ptr<const Model>>;
    const ModelConfig& tc = target->config;
    if (spec.rfind("layer-skip:", 0) == 0) {
        int n = 0;
        try {
            n = std::stoi(spec.substr(11));
        } catch (...) {
            n = 0;
        }
        if (n < 1 || n >= tc.n_layer)
            return R::error("draft '" + spec + "': the layer count must be 1 to " + std::to_string(tc.n_layer - 1) +
                            " (the target has " + std::to_string(tc.n_layer) + " layers)");
        auto m = std::make_shared<Model>(*target);  // shares the weights and their storage
        m->layers.resize(static_cast<size_t>(n));
        m->config.n_layer = n;
        m->config.name = tc.name + " (first " + std::to_string(n) + " layers)";
        return std::shared_ptr<const Model>(m);
    }
    if (spec == "int4") {
        auto scheme = QuantScheme::parse("q4_0");
        if (!scheme) return R::error(scheme.message());
        auto q = quantize_model(target, *scheme);
        if (!q) return R::error("draft 'int4': " + q.message());
        return std::shared_ptr<const Model>(q.value());
    }
    auto loaded = load_model(spec);
    if (!loaded) return R::error("draft model: " + loaded.message());
    const Model& d = *loaded.value();
    if (d.config.n_vocab != tc.n_vocab || d.vocab.tokens != target->vocab.tokens)
        return R::error("draft model " + spec + " has a different vocabulary from the target (" +
                        std::to_string(d.config.n_vocab) + " vs " + std::to_string(tc.n_vocab) + " tokens" +
                        (d.config.n_vocab == tc.n_vocab ? ", different token texts" : "") +
                        "): its drafts would name other tokens");
    return std::shared_ptr<const Model>(loaded.value());
}
}  // namespace

}  // namespace kvs
