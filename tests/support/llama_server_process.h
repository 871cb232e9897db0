#pragma once
// llama.cpp's llama-server for the tests that talk to a real one (label llamacpp): where
// tests/tools/bench_llamacpp.sh builds it (LLAMACPP_EXTRA_TARGETS=llama-server, into
// $LLAMACPP_BUILD, default /tmp/llamacpp-build), started on a model with two slots, 2048
// tokens of context, 2 threads and /metrics on, and waited for until /health answers 200.
// Header-only: only tests that link cpp-httplib include it.
#include <httplib.h>

#include <QFileInfo>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTest>

#include <string>

namespace kvs::test {

// The llama-server executable, or an empty string when it is not built.
inline QString llama_server_exe() {
    const QString build = qEnvironmentVariableIsEmpty("LLAMACPP_BUILD") ? QStringLiteral("/tmp/llamacpp-build")
                                                                        : qEnvironmentVariable("LLAMACPP_BUILD");
    const QString exe = build + QStringLiteral("/bin/llama-server");
    return QFileInfo(exe).isExecutable() ? exe : QString();
}

inline const char* llama_server_missing() {
    return "llama-server not built (LLAMACPP_EXTRA_TARGETS=llama-server tests/tools/bench_llamacpp.sh; "
           "LLAMACPP_BUILD names its build folder)";
}

// Starts `exe -m model` on 127.0.0.1:port and waits (at most 60 s) for /health. false: it
// did not start or never came up; the process's last output is in *log.
inline bool start_llama_server(QProcess& p, const QString& exe, const std::string& model, int port, QString* log) {
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(exe, {QStringLiteral("-m"), QString::fromStdString(model), QStringLiteral("--host"),
                  QStringLiteral("127.0.0.1"), QStringLiteral("--port"), QString::number(port), QStringLiteral("-np"),
                  QStringLiteral("2"), QStringLiteral("-c"), QStringLiteral("2048"), QStringLiteral("-t"),
                  QStringLiteral("2"), QStringLiteral("--metrics")});
    if (!p.waitForStarted(10000)) {
        *log = p.errorString();
        return false;
    }
    bool up = false;
    for (int i = 0; i < 600 && !up && p.state() == QProcess::Running; ++i) {  // at most 60 s
        httplib::Client c("127.0.0.1", port);
        c.set_connection_timeout(1, 0);
        auto r = c.Get("/health");
        up = r && r->status == 200;
        if (!up) QTest::qWait(100);
    }
    if (!up) *log = QString::fromUtf8(p.readAll().right(2000));
    return up;
}

}  // namespace kvs::test
