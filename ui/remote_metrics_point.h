#pragma once
// One reading of a remote server's /metrics as the remote engine view draws it (plain data;
// app/remote/gui fills it from the parsed page). NaN: the server did not say.
#include <QString>
#include <QVector>
#include <limits>

namespace kvs::ui {

// One llama-server slot (its /slots): context size, tokens its task holds, busy or idle.
struct RemoteSlot {
    int id = 0;
    int nCtx = 0;
    int used = 0;
    bool processing = false;
};

struct RemoteMetricsPoint {
    static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    double tS = 0;                                          // seconds since polling started
    double kvUsage = kNaN;                                  // 0..1
    double blocksUsed = kNaN, blocksTotal = kNaN;           // usage x num_gpu_blocks
    double running = kNaN, waiting = kNaN;                  // requests
    double ttftP50 = kNaN, ttftP90 = kNaN, ttftP99 = kNaN;  // seconds, of requests finished since the last reading
    double tpotP50 = kNaN, tpotP99 = kNaN;
    double e2eP50 = kNaN, e2eP99 = kNaN;
    double ttftP50All = kNaN, tpotP50All = kNaN;  // of every request since the server started
    double prefixHitRate = kNaN;                  // since the last reading (hits / queries)
    double prefixHitRateTotal = kNaN;             // since the server started
    double preemptions = kNaN;                    // total
    double tokensPerIteration = kNaN;             // mean since the last reading
    double generationTokPerS = kNaN;              // since the last reading
    double specAcceptance = kNaN;                 // total accepted / drafted
    double specMeanLength = kNaN;
    QVector<double> specPerPosition;  // acceptance rate per draft position
    bool hasSlots = false;            // llama-server's /slots was read
    QVector<RemoteSlot> slots;
};

}  // namespace kvs::ui
