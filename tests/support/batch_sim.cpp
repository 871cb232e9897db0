#include "tests/support/batch_sim.h"

#include <algorithm>

namespace kvs::test {

using ui::RequestRow;
using ui::SlotState;
using ui::StepPoint;

BatchSim::BatchSim(BatchSimConfig c) : cfg(c), rng(c.seed) {
    for (int i = 0; i < cfg.nRequests; ++i) {
        BatchSimRequest r;
        r.id = 100 + i;
        r.arrival = cfg.arrivalSpread > 0 ? int(i * qint64(cfg.arrivalSpread) / cfg.nRequests) : 0;
        r.prompt = cfg.minPrompt + int(next() % quint32(cfg.maxPrompt - cfg.minPrompt + 1));
        r.maxOut = cfg.minOut + int(next() % quint32(cfg.maxOut - cfg.minOut + 1));
        reqs.push_back(r);
    }
    freeBlocks = cfg.nBlocks;
}

bool BatchSim::done() const {
    return std::all_of(reqs.begin(), reqs.end(), [](const BatchSimRequest& r) { return r.finished; });
}

quint32 BatchSim::next() {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

RequestRow BatchSim::rowOf(const BatchSimRequest& r, const Events& ev, const Ran& ran) const {
    RequestRow row;
    row.id = r.id;
    row.label = QStringLiteral("req %1").arg(r.id);
    row.promptTokens = r.prompt;
    row.outputTokens = r.out;
    row.maxTokens = r.maxOut;
    row.computedTokens = r.computed;
    row.preemptions = r.preemptions;
    row.hostBlocks = r.hostBlocks;
    row.scheduledTokens = ran.value(r.id, 0);
    if (ev.contains(r.id)) row.slot = ev.value(r.id);
    else if (r.finished)
        row.slot = SlotState::Finished;
    else if (r.swapped)
        row.slot = SlotState::Swapped;
    else
        row.slot = SlotState::Waiting;
    row.status = r.finished ? "finished" : r.running ? "running" : r.swapped ? "swapped" : "waiting";
    return row;
}

std::pair<StepPoint, QVector<RequestRow>> BatchSim::step() {
    StepPoint sp;
    sp.step = stepNo;
    sp.tokenBudget = cfg.tokenBudget;
    sp.maxSeqs = cfg.maxSeqs;
    sp.nBlocks = cfg.nBlocks;
    Events ev;
    Ran ran;
    int budget = cfg.tokenBudget;
    cfg.staticBatching ? stepStatic(sp, ev, ran, budget) : stepContinuous(sp, ev, ran, budget);
    QVector<RequestRow> rows;
    for (const BatchSimRequest& r : reqs) {
        if (r.arrival > stepNo) continue;
        rows.push_back(rowOf(r, ev, ran));
        sp.running += r.running;
        sp.swapped += r.swapped;
        sp.waiting += !r.running && !r.swapped && !r.finished;
    }
    sp.durationMs = 2.5 + 0.018 * sp.prefillTokens + 0.22 * sp.decodeTokens + 0.05 * sp.paddingTokens +
                    0.3 * double(next() % 10) / 10.0;
    sp.tStartMs = t;
    t += sp.durationMs + 0.4;
    sp.blocksUsed = cfg.nBlocks - freeBlocks;
    sp.kvUsage = double(sp.blocksUsed) / cfg.nBlocks;
    // What the request states will say when the step is shown (finish after sampling).
    for (BatchSimRequest& r : reqs)
        if (r.running && r.out >= r.maxOut) finish(r);
    ++stepNo;
    truth[sp.step] = rows;
    return {sp, rows};
}

void BatchSim::finish(BatchSimRequest& r) {
    r.running = false;
    r.finished = true;
    freeBlocks += r.blocks;
    r.blocks = 0;
}

bool BatchSim::run(BatchSimRequest& r, StepPoint& sp, Events& ev, Ran& ran, int& budget, bool pad) {
    if (pad) {
        ev[r.id] = SlotState::Padding;
        ++sp.paddingTokens;
        return true;
    }
    const int remaining = r.prompt + r.out - r.computed;
    const int chunk = remaining > 1 ? std::min(remaining, budget) : 1;
    if (chunk <= 0) return true;
    const int need = blocksFor(r.computed + chunk) - r.blocks;
    if (need > freeBlocks) return false;
    freeBlocks -= need;
    r.blocks += need;
    budget -= chunk;
    r.computed += chunk;
    ran[r.id] = chunk;
    if (remaining > 1) {
        ev[r.id] = SlotState::Prefill;
        sp.prefillTokens += chunk;
    } else {
        ev[r.id] = SlotState::Decode;
        sp.decodeTokens += chunk;
    }
    if (r.computed == r.prompt + r.out) ++r.out;  // sampled a token
    ++sp.nSeqs;
    return true;
}

void BatchSim::preempt(BatchSimRequest& v, StepPoint& sp, Events& ev) {
    v.running = false;
    ++v.preemptions;
    ++preemptionsTotal;
    ++sp.preemptions;
    ev[v.id] = SlotState::Preempted;
    freeBlocks += v.blocks;
    if (v.id % 2) {  // swap: its KV goes to the host tier
        v.swapped = true;
        v.hostBlocks = v.blocks;
        sp.swapOutBlocks += v.blocks;
    } else {  // recompute from scratch (generated tokens become prompt)
        v.computed = 0;
    }
    v.blocks = 0;
}

void BatchSim::stepContinuous(StepPoint& sp, Events& ev, Ran& ran, int& budget) {
    bool preempted = false;
    for (int i = 0; i < reqs.size(); ++i) {
        BatchSimRequest& r = reqs[i];
        if (!r.running || budget <= 0) continue;
        while (!run(r, sp, ev, ran, budget)) {
            // No block: preempt the newest running request (maybe r itself).
            int victim = -1;
            for (int j = reqs.size() - 1; j >= 0; --j)
                if (reqs[j].running && !ran.contains(reqs[j].id)) {
                    victim = j;
                    break;
                }
            if (victim < 0 || victim == i) {
                preempt(r, sp, ev);
                break;
            }
            preempt(reqs[victim], sp, ev);
            preempted = true;
        }
        preempted |= !r.running;
    }
    if (preempted) return;
    // Admit: swapped ones first, then waiting in arrival order, while seats and budget last.
    for (int pass = 0; pass < 2; ++pass) {
        for (BatchSimRequest& r : reqs) {
            if (r.running || r.finished || r.arrival > stepNo || r.swapped != (pass == 0)) continue;
            if (sp.nSeqs >= cfg.maxSeqs || budget <= 0) return;
            if (r.swapped) {
                if (r.hostBlocks > freeBlocks) return;
                freeBlocks -= r.hostBlocks;
                r.blocks = r.hostBlocks;
                sp.swapInBlocks += r.hostBlocks;
                r.hostBlocks = 0;
                r.swapped = false;
            }
            r.running = true;
            if (!run(r, sp, ev, ran, budget)) {
                r.running = false;
                return;
            }
        }
    }
}

void BatchSim::stepStatic(StepPoint& sp, Events& ev, Ran& ran, int& budget) {
    bool live = false;
    for (qint64 id : batch) live |= !byId(id).finished;
    if (!live) {  // the batch drained: seat the next one
        batch.clear();
        for (BatchSimRequest& r : reqs)
            if (!r.finished && r.arrival <= stepNo && batch.size() < cfg.maxSeqs) {
                batch.push_back(r.id);
                r.running = true;
            }
    }
    for (qint64 id : batch) {
        BatchSimRequest& r = byId(id);
        if (r.finished) run(r, sp, ev, ran, budget, true);
        else if (budget > 0)
            run(r, sp, ev, ran, budget);
    }
}

}  // namespace kvs::test
