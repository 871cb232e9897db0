#pragma once
// A small scheduler simulation for the slot timeline tests: it produces, step by step, what
// app/view_convert feeds the views (a StepPoint and one RequestRow per arrived request).
// Continuous batching with chunked prefill, a token budget, max_num_seqs seats and a block
// pool that runs out and preempts (odd ids by swap, even ids by recompute); or static
// batching that pads the seats of finished members until the whole batch is done.
// Deterministic per seed. No engine: ui/view_types.h data only.
#include <QHash>
#include <QVector>
#include <map>
#include <utility>

#include "ui/view_types.h"

namespace kvs::test {

struct BatchSimConfig {
    int nRequests = 64;
    int maxSeqs = 24;
    int tokenBudget = 256;
    int nBlocks = 200;
    int blockSize = 16;
    bool staticBatching = false;
    int arrivalSpread = 120;  // requests arrive over this many steps (0: all at once)
    int minOut = 8, maxOut = 120;
    int minPrompt = 16, maxPrompt = 300;
    quint32 seed = 7;
};

struct BatchSimRequest {
    qint64 id = 0;  // 100, 101, ... in arrival order
    int arrival = 0, prompt = 0, maxOut = 0;
    int computed = 0, out = 0, blocks = 0, hostBlocks = 0, preemptions = 0;
    bool running = false, swapped = false, finished = false;
};

class BatchSim {
public:
    explicit BatchSim(BatchSimConfig c);
    bool done() const;  // every request finished
    // One engine step: the StepPoint and every arrived request's row.
    std::pair<ui::StepPoint, QVector<ui::RequestRow>> step();

    BatchSimConfig cfg;
    QVector<BatchSimRequest> reqs;
    std::map<qint64, QVector<ui::RequestRow>> truth;  // step -> rows fed
    int preemptionsTotal = 0;

private:
    using Events = QHash<qint64, ui::SlotState>;
    using Ran = QHash<qint64, int>;
    quint32 next();
    int blocksFor(int tokens) const { return (tokens + cfg.blockSize - 1) / cfg.blockSize; }
    void finish(BatchSimRequest& r);
    // Runs one chunk of r within the budget (or a padding seat); false when the pool has no room.
    bool run(BatchSimRequest& r, ui::StepPoint& sp, Events& ev, Ran& ran, int& budget, bool pad = false);
    void preempt(BatchSimRequest& v, ui::StepPoint& sp, Events& ev);
    void stepContinuous(ui::StepPoint& sp, Events& ev, Ran& ran, int& budget);
    void stepStatic(ui::StepPoint& sp, Events& ev, Ran& ran, int& budget);
    ui::RequestRow rowOf(const BatchSimRequest& r, const Events& ev, const Ran& ran) const;
    BatchSimRequest& byId(qint64 id) { return reqs[int(id - 100)]; }

    quint32 rng;
    int stepNo = 0;
    int freeBlocks = 0;
    double t = 0;
    QVector<qint64> batch;
};

}  // namespace kvs::test
