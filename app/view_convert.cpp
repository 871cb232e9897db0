#include "app/view_convert.h"

#include <algorithm>

namespace kvs::app {

ui::StepPoint to_step_point(const StepRecord& r) {
    ui::StepPoint p;
    p.step = r.step;
    p.tStartMs = r.t_start_ms;
    p.durationMs = r.duration_ms;
    p.prefillTokens = r.prefill_tokens;
    p.decodeTokens = r.decode_tokens;
    p.paddingTokens = r.padding_tokens;
    p.tokenBudget = r.token_budget;
    p.nSeqs = r.n_seqs;
    p.maxSeqs = r.max_seqs;
    p.preemptions = r.preemptions;
    p.swapOutBlocks = r.swap_out_blocks;
    p.swapInBlocks = r.swap_in_blocks;
    p.cowCopies = r.cow_copies;
    p.prefixHitTokens = r.prefix_hit_tokens;
    p.running = r.n_running;
    p.waiting = r.n_waiting;
    p.swapped = r.n_swapped;
    p.blocksUsed = r.blocks_used;
    p.blocksCached = r.blocks_cached;
    p.nBlocks = r.n_blocks;
    p.kvUsage = r.kv_usage;
    p.internalWaste = r.internal_waste;
    return p;
}

ui::SlotState slot_state(const RequestView& r, const EngineSnapshot& s) {
    // Chunks first: under static batching a finished member's seat still runs a padding
    // chunk every step, and that padding is what the batching lesson is about.
    for (const ChunkView& c : s.chunks)
        if (c.id == r.id)
            return c.padding ? ui::SlotState::Padding : c.prefill ? ui::SlotState::Prefill : ui::SlotState::Decode;
    if (r.status == RequestStatus::finished) return ui::SlotState::Finished;
    if (r.status == RequestStatus::swapped) return ui::SlotState::Swapped;
    if (r.status == RequestStatus::waiting && r.num_preemptions > 0) return ui::SlotState::Preempted;
    return ui::SlotState::Waiting;
}

QVector<ui::RequestRow> to_request_rows(const EngineSnapshot& s, const std::function<QString(RequestId)>& label) {
    QVector<ui::RequestRow> rows;
    rows.reserve(static_cast<int>(s.requests.size()));
    for (const RequestView& r : s.requests) {
        ui::RequestRow row;
        row.id = r.id;
        row.label = label ? label(r.id) : QString();
        if (row.label.isEmpty())  // not the window's own: named by its client when it has one
            row.label = r.client.empty() ? QStringLiteral("req %1").arg(r.id)
                                         : QStringLiteral("%1 #%2").arg(QString::fromStdString(r.client)).arg(r.id);
        row.status = QString::fromLatin1(status_name(r.status));
        row.slot = slot_state(r, s);
        row.priority = r.priority;
        row.promptTokens = r.n_prompt;
        row.outputTokens = r.n_output;
        row.maxTokens = r.max_tokens;
        row.computedTokens = r.num_computed_tokens;
        row.cachedTokens = r.num_cached_tokens;
        for (int32_t b : r.block_ids) row.blockIds.push_back(b);
        for (int32_t b : r.local_block_ids) row.localBlockIds.push_back(b);
        row.hostBlocks = r.n_host_blocks;
        row.preemptions = r.num_preemptions;
        row.greenTokens = r.n_green < 0 ? -1 : std::min(r.n_green, std::max(0, r.n_output));
        row.adapter = QString::fromStdString(r.adapter);
        if (!row.adapter.isEmpty()) row.label += QStringLiteral(" · ") + row.adapter;  // every view names it
        for (const ChunkView& c : s.chunks)
            if (c.id == r.id) row.scheduledTokens += c.num_tokens;
        row.kvEviction = QString::fromStdString(r.kv_evict_policy);
        row.kvBudget = r.kv_budget;
        row.kvEntries = static_cast<int>(r.kv_entry_pos.size());
        row.kvEvicted = r.kv_evicted_tokens;
        row.kvFreedBlocks = r.kv_freed_blocks;
        for (int32_t p : r.kv_entry_pos) row.kvEntryPos.push_back(p);
        if (!row.kvEviction.isEmpty()) row.label += QStringLiteral(" · evict ") + row.kvEviction;
        rows.push_back(std::move(row));
    }
    return rows;
}

ui::EngineFrame to_frame(const EngineSnapshot& s, const std::function<QString(RequestId)>& label) {
    ui::EngineFrame f;
    f.step = to_step_point(s.step);
    f.blockSize = s.block_size;
    f.maxModelLen = s.max_model_len;
    f.nHostBlocks = s.n_host_blocks;
    f.prefixHitRate = s.prefix_hit_rate;
    f.totalPreemptions = s.total_preemptions;
    f.totalGeneratedTokens = s.total_generated_tokens;
    const KvTierStats& t = s.kv_tiers;
    f.tiers.enabled = t.enabled;
    f.tiers.cpuBytes = t.cpu_bytes;
    f.tiers.cpuLimitBytes = t.cpu_limit_bytes;
    f.tiers.cpuBlocks = t.cpu_blocks;
    f.tiers.diskBytes = t.disk_bytes;
    f.tiers.diskLimitBytes = t.disk_limit_bytes;
    f.tiers.diskBlocks = t.disk_blocks;
    f.tiers.cpuHitTokens = s.kv_stats.cpu_hit_tokens;
    f.tiers.diskHitTokens = s.kv_stats.disk_hit_tokens;
    f.tiers.deviceHitTokens = s.kv_stats.hit_tokens - s.kv_stats.cpu_hit_tokens - s.kv_stats.disk_hit_tokens;
    f.tiers.spilledBlocks = t.spilled_blocks;
    f.tiers.badFiles = t.bad_files;
    f.tiers.diskFolder = QString::fromStdString(t.disk_folder);
    f.blocks.reserve(static_cast<int>(s.blocks.size()));
    for (const BlockView& b : s.blocks) {
        ui::BlockCell c;
        c.id = b.block_id;
        c.state = b.state == BlockSlotState::used      ? ui::BlockState::Used
                  : b.state == BlockSlotState::cached  ? ui::BlockState::Cached
                  : b.state == BlockSlotState::swapped ? ui::BlockState::Swapped
                  : b.state == BlockSlotState::freed   ? ui::BlockState::Freed
                                                       : ui::BlockState::Free;
        c.refCount = b.ref_cnt;
        for (RequestId o : b.owners) c.owners.push_back(o);
        c.filled = b.n_filled;
        c.hashed = b.hashed;
        f.blocks.push_back(std::move(c));
    }
    for (const HostBlockView& h : s.host_blocks) f.hostBlocks.push_back({h.host_block, h.owner});
    f.localBlocks.reserve(static_cast<int>(s.local_blocks.size()));
    for (const BlockView& b : s.local_blocks) {  // the sliding-window layers' pool: used, cached, freed or free
        ui::BlockCell c;
        c.id = b.block_id;
        c.state = b.state == BlockSlotState::used     ? ui::BlockState::Used
                  : b.state == BlockSlotState::cached ? ui::BlockState::Cached
                  : b.state == BlockSlotState::freed  ? ui::BlockState::Freed
                                                      : ui::BlockState::Free;
        c.refCount = b.ref_cnt;
        for (RequestId o : b.owners) c.owners.push_back(o);
        c.filled = b.n_filled;
        c.hashed = b.hashed;
        f.localBlocks.push_back(std::move(c));
    }
    f.slidingWindow = s.sliding_window;
    f.nLocalLayers = s.n_local_layers;
    f.nLayers = s.n_layers;
    f.freedBlocksTotal = s.total_freed_blocks;
    f.requests = to_request_rows(s, label);
    for (const OpStepRecord& r : s.op_steps) {
        ui::RooflineStep st{r.step, r.prefill, r.n_tokens, r.n_seqs, r.decode_tokens, {}};
        for (int k = 0; k < n_op_kinds; ++k) {
            const OpCost& c = r.ops[static_cast<size_t>(k)];
            st.ops.push_back({QString::fromLatin1(op_kind_name(static_cast<OpKind>(k))), c.flops, c.bytes, c.ms});
        }
        f.roofline.steps.push_back(std::move(st));
    }
    return f;
}

ui::TokenFate to_fate(TokenFate f) {
    switch (f) {
        case TokenFate::plain: return ui::TokenFate::Plain;
        case TokenFate::accepted: return ui::TokenFate::Accepted;
        case TokenFate::corrected: return ui::TokenFate::Corrected;
        case TokenFate::bonus: return ui::TokenFate::Bonus;
        case TokenFate::rejected: return ui::TokenFate::Rejected;
        case TokenFate::discarded: return ui::TokenFate::Discarded;
    }
    return ui::TokenFate::Plain;
}

QString proposer_label(const std::string& proposer) {
    return proposer == "ngram" ? QStringLiteral("prompt lookup") : QString::fromStdString(proposer);
}

ui::SpecFrame to_spec_frame(const SpecSnapshot& s, const std::function<QString(RequestId)>& label,
                            const std::function<QStringList(const std::vector<int32_t>&)>& pieces, int maxTokens) {
    auto vec = [](const std::vector<int64_t>& v) { return QVector<qint64>(v.begin(), v.end()); };
    ui::SpecFrame f;
    f.step = s.step;
    for (const auto& rp : s.requests) {
        const SpecRequestView& r = *rp;
        ui::SpecRequestFrame q;
        q.id = r.id;
        q.label = label ? label(r.id) : QString();
        if (q.label.isEmpty()) q.label = QStringLiteral("req %1").arg(r.id);
        q.proposer = proposer_label(r.proposer);
        q.k = r.k;
        q.adaptive = r.adaptive;
        q.finished = r.finished;
        const SpecStats& st = r.stats;
        q.verifySteps = st.verify_steps;
        q.drafted = st.drafted;
        q.evaluated = st.evaluated;
        q.accepted = st.accepted;
        q.discarded = st.discarded;
        q.bonus = st.bonus;
        q.emitted = st.emitted;
        q.sumK = st.sum_k;
        q.posEvaluated = vec(st.pos_evaluated);
        q.posAccepted = vec(st.pos_accepted);
        q.acceptedLenHist = vec(st.accepted_len_hist);
        q.draftMs = st.draft_ms;
        q.verifyMs = st.verify_ms;
        q.decodeTokPerS = r.rate.tok_per_s;
        q.decodeSolo = r.rate.solo;
        const size_t from =
            r.fates.size() > static_cast<size_t>(maxTokens) ? r.fates.size() - static_cast<size_t>(maxTokens) : 0;
        std::vector<int32_t> ids;
        for (size_t i = from; i < r.fates.size(); ++i) ids.push_back(r.fates[i].token);
        const QStringList texts = pieces ? pieces(ids) : QStringList();
        q.tokens.reserve(static_cast<int>(ids.size()));
        for (size_t i = from; i < r.fates.size(); ++i) {
            const SpecTokenEvent& e = r.fates[i];
            const int j = static_cast<int>(i - from);
            q.tokens.push_back({j < texts.size() ? texts[j] : QString(), to_fate(e.fate), e.draft_pos, e.step});
        }
        f.requests.push_back(std::move(q));
    }
    if (s.plain_baseline.id != 0) {
        f.baselineTokPerS = s.plain_baseline.tok_per_s;
        f.baselineLabel = label ? label(s.plain_baseline.id) : QString();
        if (f.baselineLabel.isEmpty()) f.baselineLabel = QStringLiteral("req %1").arg(s.plain_baseline.id);
    }
    return f;
}

}  // namespace kvs::app
