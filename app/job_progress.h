#pragma once
// The GUI's one door to a long engine job's progress and Cancel button. The engine's
// quantization table run takes a (stage, fraction) -> keep-going callback today; when the
// engine's long jobs share one progress type (engine/core/progress.h: a listener and a
// cancel flag), only this adapter changes, not the docks and workers that use it.
#include <QString>
#include <atomic>
#include <functional>
#include <string>

namespace kvs::app {

class JobProgress {
public:
    // What the GUI hears: the stage in words and the fraction of the whole job (0..1).
    using Report = std::function<void(const QString& stage, double fraction)>;

    void reset() { m_cancel = false; }  // before a new job
    void cancel() { m_cancel = true; }  // thread-safe: the job stops at its next step
    bool cancelled() const { return m_cancel; }

    // The engine callback: reports, then says whether to go on. `report` runs on the job's
    // thread (emit a queued signal from it).
    std::function<bool(const std::string&, double)> callback(Report report) const {
        return [this, report = std::move(report)](const std::string& stage, double fraction) {
            if (report) report(QString::fromStdString(stage), fraction);
            return !m_cancel.load();
        };
    }

private:
    std::atomic<bool> m_cancel{false};
};

}  // namespace kvs::app
