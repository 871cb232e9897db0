#pragma once
// Runs the project's Python (test::find_python(): the venv installer/setup.sh makes, else
// python3) for tests that make or read fixtures with numpy, safetensors or gguf-py, and
// skip when those are not installed.
#include <QString>
#include <QStringList>

namespace kvs::test {

struct PythonRun {
    bool ok = false;  // finished in time with exit code 0
    QString out;      // stdout
    QString error;    // when not ok: why (did not start or finish, or the exit code and stderr)
};

PythonRun run_python(const QStringList& args, int timeout_ms = 120000);

}  // namespace kvs::test
