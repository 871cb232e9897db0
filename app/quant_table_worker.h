#pragma once
// The quantization table's worker: a QObject on its own QThread (never the GUI thread, never
// the chat engine's) that measures the comparison table of the loaded model
// (engine/quant/quant_table_run.h) on a CPU backend of its own: the evaluation text is the
// first request.evalTokens tokens of GPL-3, calibration the first request.calibTokens of
// Apache-2.0, the prompts the fixed divergence set. Progress and Cancel go through one
// JobProgress (app/job_progress.h). It shares only the loaded Model with the chat engine.
#include <QObject>
#include <QString>
#include <memory>
#include <mutex>

#include "app/job_progress.h"
#include "ui/quant_table_types.h"

namespace kvs {
struct Model;
}

namespace kvs::app {

class QuantTableWorker : public QObject {
    Q_OBJECT
public:
    explicit QuantTableWorker(int nThreads = 2);

    // Thread-safe: the model the next run measures.
    void setModel(std::shared_ptr<const Model> model);
    // Thread-safe: queues a run on the worker's thread (the progress is reset first).
    void requestRun(const kvs::ui::QuantTableRequest& request);
    // Thread-safe: the run in flight stops at its next step (and fails with "cancelled").
    void cancel() { m_progress.cancel(); }

Q_SIGNALS:
    void progress(const QString& stage, double fraction);
    void finished(const kvs::ui::QuantTableInfo& table, const QString& message);
    void failed(const QString& message);

private:
    void run(const kvs::ui::QuantTableRequest& request);

    const int m_nThreads;
    JobProgress m_progress;
    std::mutex m_mu;  // guards m_model
    std::shared_ptr<const Model> m_model;
};

}  // namespace kvs::app
