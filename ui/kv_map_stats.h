#pragma once
// The numbers the KV block map shows, computed from one frame: how full the paged pool is,
// how much of its used slots are wasted, and the same requests under contiguous
// max-length reservation (the baseline PagedAttention is measured against). The formulas
// follow `kvscope bench --workload`: paged waste counts physical slots (a shared block
// once), the contiguous baseline compares each holder's own tokens with its reservation.
#include <QVector>

#include "ui/view_types.h"

namespace kvs::ui {

inline constexpr qint64 kNoRequest = -1;  // "no request" in every view's selection

struct KvMapStats {
    int nBlocks = 0;
    int blockSize = 0;
    int maxModelLen = 0;
    int used = 0;      // device blocks held by some request
    int cached = 0;    // free, but still findable by prefix hash
    int shared = 0;    // used with refCount > 1
    int free = 0;      // free and not cached (freed ones included)
    int freed = 0;     // of those, given back by a request that goes on (KV eviction, the sliding window)
    int hostUsed = 0;  // occupied host (swap tier) blocks
    int nHostBlocks = 0;
    qint64 tokensInKv = 0;  // written slots of used blocks; a shared block counts once
    qint64 usedSlots = 0;   // used * blockSize
    double pagedWaste = 0;  // 1 - tokensInKv / usedSlots (0 when nothing is used)
    // The contiguous baseline: every request that holds device blocks (a "holder") reserves
    // maxModelLen token slots as one contiguous range of the same memory, in id order.
    QVector<qint64> holders;    // request ids, in id (arrival) order
    QVector<int> holderTokens;  // [holders] tokens each holds (its own; a shared prefix for each)
    qint64 totalHolderTokens = 0;
    qint64 contiguousReserved = 0;  // holders * maxModelLen
    double contiguousWaste = 0;     // 1 - totalHolderTokens / contiguousReserved
    int contiguousFit = 0;          // holders that fit in nBlocks * blockSize slots contiguously
    // The sliding-window layers' own pool (EngineFrame::localBlocks; all 0 without one).
    int nLocalBlocks = 0;
    int localUsed = 0;
    int localFreed = 0;     // free blocks a request gave back as its window moved on
    int freedEntries = 0;   // entries of the requests' local tables that were freed (-1)
    qint64 freedTotal = 0;  // local blocks freed out of the window since the engine started

    static KvMapStats compute(const EngineFrame& frame);
};

}  // namespace kvs::ui
