#include "ui/kv_map_stats.h"

#include <algorithm>

namespace kvs::ui {

KvMapStats KvMapStats::compute(const EngineFrame& f) {
    KvMapStats s;
    s.nBlocks = static_cast<int>(f.blocks.size());
    s.blockSize = f.blockSize;
    s.maxModelLen = f.maxModelLen;
    s.nHostBlocks = f.nHostBlocks;
    s.hostUsed = static_cast<int>(f.hostBlocks.size());
    const int bs = std::max(1, f.blockSize);
    for (const BlockCell& b : f.blocks) {
        switch (b.state) {
            case BlockState::Used:
                ++s.used;
                if (b.refCount > 1) ++s.shared;
                s.tokensInKv += std::clamp(b.filled, 0, bs);
                break;
            case BlockState::Cached: ++s.cached; break;
            case BlockState::Free:
            case BlockState::Freed: ++s.free; break;
            case BlockState::Swapped: break;  // host-tier state; not a device block's
        }
    }
    s.usedSlots = static_cast<qint64>(s.used) * bs;
    s.pagedWaste = s.usedSlots > 0 ? 1.0 - double(s.tokensInKv) / double(s.usedSlots) : 0.0;
    for (const RequestRow& r : f.requests) {
        if (r.blockIds.isEmpty()) continue;
        int tokens = 0;
        for (int id : r.blockIds)
            if (id >= 0 && id < s.nBlocks) tokens += std::clamp(f.blocks[id].filled, 0, bs);
        s.holders.push_back(r.id);
        s.holderTokens.push_back(tokens);
        s.totalHolderTokens += tokens;
    }
    s.contiguousReserved = static_cast<qint64>(s.holders.size()) * std::max(0, f.maxModelLen);
    s.contiguousWaste =
        s.contiguousReserved > 0 ? 1.0 - double(s.totalHolderTokens) / double(s.contiguousReserved) : 0.0;
    const qint64 capacity = static_cast<qint64>(s.nBlocks) * bs;
    const qint64 holders = s.holders.size();
    s.contiguousFit = f.maxModelLen > 0 ? static_cast<int>(std::min(holders, capacity / f.maxModelLen)) : int(holders);
    for (const BlockCell& b : f.blocks) s.freed += b.state == BlockState::Freed ? 1 : 0;
    s.nLocalBlocks = static_cast<int>(f.localBlocks.size());
    for (const BlockCell& b : f.localBlocks) {
        s.localUsed += b.state == BlockState::Used ? 1 : 0;
        s.localFreed += b.state == BlockState::Freed ? 1 : 0;
    }
    for (const RequestRow& r : f.requests) s.freedEntries += static_cast<int>(r.localBlockIds.count(-1));
    s.freedTotal = f.freedBlocksTotal;
    return s;
}
}  // namespace kvs::ui
