#pragma once
// The GUI's one door to a long engine job's progress and Cancel button: it makes the
// engine's Progress (engine/core/progress.h) for a job, whose listener hands (stage,
// fraction) to the GUI and whose cancel flag the Cancel button raises, so docks and workers
// need not know the engine's progress type beyond passing it on.
#include <QString>
#include <functional>
#include <string>

#include "engine/core/progress.h"

namespace kvs::app {

class JobProgress {
public:
    // What the GUI hears: the stage in words and the fraction of the whole job (0..1).
    using Report = std::function<void(const QString& stage, double fraction)>;

    void reset() { m_cancel = false; }  // before a new job
    void cancel() { m_cancel = true; }  // thread-safe: the job stops at its next checkpoint
    bool cancelled() const { return m_cancel; }

    // The Progress a job runs with: `report` runs on the job's thread (emit a queued signal
    // from it); cancel() stops the job at its next checkpoint. This object must outlive it.
    Progress progress(Report report) const {
        Progress::Listener listener;
        if (report)
            listener = [report = std::move(report)](const std::string& stage, double fraction) {
                report(QString::fromStdString(stage), fraction);
            };
        return Progress(std::move(listener), &m_cancel);
    }

private:
    CancelFlag m_cancel{false};
};

}  // namespace kvs::app
