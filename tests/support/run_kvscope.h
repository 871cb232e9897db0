#pragma once
// Runs the kvscope program (test::kvscope_exe()) with arguments and waits for it: its exit
// code, stdout and stderr. DISPLAY, WAYLAND_DISPLAY and QT_QPA_PLATFORM are removed from
// its environment, so a subcommand that would open a window shows it cannot. Tests that
// call these wait for the program to be built (tests/CMakeLists.txt looks for the calls).
#include <QProcess>
#include <QString>
#include <QStringList>

namespace kvs::test {

struct KvscopeRun {
    int exit_code = -1;  // -1 when it crashed or timed out
    QProcess::ExitStatus status = QProcess::CrashExit;
    QString out, err;  // err is "TIMEOUT" when it was killed after timeout_ms
};

KvscopeRun run_kvscope(const QStringList& args, int timeout_ms = 120000);

// Starts the program in `p` with the same environment and returns at once, for tests that
// talk to it or signal it while it runs (e.g. a SIGINT mid-run).
void start_kvscope(QProcess& p, const QStringList& args);

}  // namespace kvs::test
