#pragma once
// Long CLI work (kvscope quantize, kvscope eval) on a terminal: a progress line and Ctrl+C.
//
// ProgressLine turns engine progress (engine/core/progress.h) into text on stderr. When the
// stream is a terminal, one line is rewritten in place ("\r", erase to the end of the line)
// at most 10 times a second:  "int4-gptq  [#######.............]  35%  GPTQ: layer 11 / 30  (42 s)".
// Otherwise (a file, a pipe, CI logs) it writes plain lines, no carriage returns: one when
// the stage's words change, at most one a second, and always the one that reaches 100%.
//
// SigintCancel: while it lives, the first Ctrl+C (SIGINT) sets its CancelFlag instead of
// ending the process, so the work stops at its next checkpoint and removes what it had
// started writing; a second Ctrl+C ends the process as usual (the default action is back).
// The previous handler is restored when it goes.
#include <chrono>
#include <cstdio>
#include <string>

#include "engine/core/progress.h"

namespace kvs::app {

class ProgressLine {
public:
    // out: where the text goes; tty: whether out is a terminal (isatty), given for tests.
    ProgressLine(std::string title, std::FILE* out, bool tty);
    explicit ProgressLine(std::string title, std::FILE* out = stderr);
    ~ProgressLine();  // finish()
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;

    // A Progress reporting here, stopped by `cancel` (may be null).
    Progress progress(const CancelFlag* cancel = nullptr);
    // Ends an in-place line with a newline (once); later reports start a new one.
    void finish();

    // The text of one report: title, bar (TTY only), percent, stage, seconds since start.
    std::string render(const std::string& stage, double fraction, bool bar) const;

private:
    void on_report(const std::string& stage, double fraction);

    std::string m_title;
    std::FILE* m_out;
    bool m_tty;
    std::chrono::steady_clock::time_point m_start, m_last_write;
    std::string m_last_stage;
    bool m_open = false;  // an in-place line is on screen without its newline
    bool m_wrote_any = false;
    bool m_done = false;  // 100% was written
};

class SigintCancel {
public:
    SigintCancel();
    ~SigintCancel();
    SigintCancel(const SigintCancel&) = delete;
    SigintCancel& operator=(const SigintCancel&) = delete;

    const CancelFlag* flag() const;
    bool cancelled() const;
};

// The exit code of a command cancelled by Ctrl+C (128 + SIGINT, as a shell reports it).
constexpr int kExitCancelled = 130;

}  // namespace kvs::app
