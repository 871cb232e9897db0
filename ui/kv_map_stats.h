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
    int free = 0;      // free and not cached
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

    static KvMapStats compute(const EngineFrame& frame);
};

}  // namespace kvs::ui
