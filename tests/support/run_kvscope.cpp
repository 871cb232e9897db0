#include "tests/support/run_kvscope.h"

#include <QProcessEnvironment>

#include "tests/support/test_paths.h"

namespace kvs::test {

void start_kvscope(QProcess& p, const QStringList& args) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("DISPLAY");
    env.remove("WAYLAND_DISPLAY");
    env.remove("QT_QPA_PLATFORM");
    p.setProcessEnvironment(env);
    p.start(QString::fromStdString(kvscope_exe()), args);
}

KvscopeRun run_kvscope(const QStringList& args, int timeout_ms) {
    QProcess p;
    start_kvscope(p, args);
    KvscopeRun r;
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        r.err = "TIMEOUT";
        return r;
    }
    r.status = p.exitStatus();
    r.exit_code = r.status == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

}  // namespace kvs::test
