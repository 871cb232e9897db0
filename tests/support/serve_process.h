#pragma once
// A running `kvscope serve --port 0 --threads 2 ...` (the program, as a user starts it) and
// the port it printed; killed when it goes out of scope. Header-only: only the net tests
// that start the program include it (they link cpp-httplib).
#include <httplib.h>

#include <QProcess>
#include <QString>
#include <QStringList>

#include <memory>

#include "tests/support/test_paths.h"

namespace kvs::test {

struct ServeProcess {
    QProcess p;
    int port = 0;
    QString out;

    bool start(const QStringList& extra) {
        QStringList args = {"serve", "--port", "0", "--threads", "2"};
        args += extra;
        p.start(QString::fromStdString(kvscope_exe()), args);
        if (!p.waitForStarted(10000)) return false;
        for (int i = 0; i < 600 && port == 0; ++i) {  // at most 60 s for the model to load
            p.waitForReadyRead(100);
            out += QString::fromUtf8(p.readAllStandardOutput());
            const int at = out.indexOf("http://127.0.0.1:");
            if (at >= 0) {
                const int colon = out.indexOf(':', at + 7);
                port = out.mid(colon + 1, out.indexOf(' ', colon) - colon - 1).toInt();
            }
            if (p.state() == QProcess::NotRunning) break;
        }
        return port > 0;
    }
    ~ServeProcess() {
        if (p.state() != QProcess::NotRunning) {
            p.kill();
            p.waitForFinished(5000);
        }
    }
    std::unique_ptr<httplib::Client> client() const {
        auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
        c->set_read_timeout(120, 0);
        return c;
    }
};

}  // namespace kvs::test
