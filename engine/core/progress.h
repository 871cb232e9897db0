#pragma once
// Progress and cancel for long work (calibration, AWQ / GPTQ search, quantize, eval, the
// quant lab's variants, the side-by-side run): one small type every long engine function
// takes, so a terminal line, a GUI bar and a Cancel button all talk to the same thing.
//
//   Progress p(listener, &cancel_flag);     // the front end: what it hears, what stops it
//   Progress calib = p.part(0.0, 0.1);      // the job cut into parts of [0, 1]
//   calib.report("calibrating", 3, 8);      // stage in words + done / total of that part
//   if (calib.cancelled()) return Progress::cancelled_status("calibration");
//
// The listener hears (stage, fraction of the whole job): the fraction is clamped to [0, 1]
// and never goes down (a report below the last one is raised to it), so parts reported
// from several threads (AWQ searches layers in parallel) still give a monotone bar. Calls
// to the listener are serialized (one at a time) and happen on the reporting thread; a
// listener must not call back into the same Progress. A default Progress hears nothing
// and is never cancelled. Copies share the listener, the flag and the last fraction.
//
// Cancellation is cooperative: the flag is read at the work's own checkpoints (per layer,
// per chunk, per step), and the work then returns cancelled_status(): an error Status
// whose message ends in ": cancelled", which is_cancelled() recognizes through any
// "context: " prefixes callers add.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "engine/core/status.h"

namespace kvs {

// Set from any thread (a Cancel button, a SIGINT handler: std::atomic<bool> is lock-free)
// to stop the work at its next checkpoint.
using CancelFlag = std::atomic<bool>;

class Progress {
public:
    // stage: what is being done now, in words; fraction: of the whole job, 0..1, monotone.
    using Listener = std::function<void(const std::string& stage, double fraction)>;

    Progress() = default;  // hears nothing, never cancelled
    explicit Progress(Listener listener, const CancelFlag* cancel = nullptr);

    // `fraction` (0..1) of this part is done, in `stage`. Thread-safe.
    void report(const std::string& stage, double fraction) const;
    // done of total steps of this part (total <= 0 reports 0).
    void report(const std::string& stage, int64_t done, int64_t total) const;
    // Whether the flag asks the work to stop. Thread-safe, cheap.
    bool cancelled() const;
    // The part [from, to] (each 0..1, from <= to) of this part: its reports are mapped into
    // that range of this one. Shares listener, flag and the monotone fraction.
    Progress part(double from, double to) const;
    // The part of step i of n equal steps: part(i / n, (i + 1) / n).
    Progress step(int64_t i, int64_t n) const;

    // The error a cancelled job returns: "<what>: cancelled".
    static Status cancelled_status(const std::string& what);
    // Whether s (or an error wrapping it with a prefix) is a cancellation.
    static bool is_cancelled(const Status& s);
    // cancelled_status(what) when cancelled(), else ok.
    Status check(const std::string& what) const;

    // The last fraction reported to the listener (0 before any report).
    double last_fraction() const;

private:
    struct Shared {
        Listener listener;
        const CancelFlag* cancel = nullptr;
        std::mutex mu;
        double last = 0.0;
    };
    std::shared_ptr<Shared> m_shared;
    double m_lo = 0.0, m_hi = 1.0;
};

}  // namespace kvs
