#include "tests/support/run_python.h"

#include <QProcess>

#include "tests/support/test_paths.h"

namespace kvs::test {

PythonRun run_python(const QStringList& args, int timeout_ms) {
    QProcess p;
    p.start(QString::fromStdString(find_python()), args);
    PythonRun r;
    if (!p.waitForFinished(timeout_ms)) {
        r.error = "python did not finish: " + p.errorString();
        p.kill();
        p.waitForFinished();
        return r;
    }
    r.out = QString::fromLocal8Bit(p.readAllStandardOutput());
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        r.error = QStringLiteral("python failed (exit %1): ").arg(p.exitCode()) +
                  QString::fromLocal8Bit(p.readAllStandardError());
        return r;
    }
    r.ok = true;
    return r;
}

}  // namespace kvs::test
