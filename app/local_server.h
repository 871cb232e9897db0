#pragma once
// The desktop program's Local server: where it listens and with which key (the settings the
// Server menu edits), and what the status bar says about it. The server itself is
// app/server's OpenAiServer, hosted by app/engine_bridge on the engine the chats use.
#include <QString>

namespace kvs::app {

struct LocalServerSettings {
    QString host = QStringLiteral("127.0.0.1");  // loopback unless the user picks another address
    int port = 8000;                             // 0: any free port (tests)
    QString apiKey;                              // empty: no key

    // Host and port from the settings file (QSettings "server/host", "server/port"); the API
    // key from the key store (the desktop keyring or a file only the user reads, as the remote
    // connections' keys), never from the settings file. *error: why the key could not be read.
    static LocalServerSettings load(QString* error = nullptr);
    // False with *error set when the key could not be stored (host and port are saved anyway).
    bool save(QString* error) const;
    // The first problem of these settings in words ("" when none): an empty host, a port
    // outside 0..65535.
    QString check() const;
};

// True for addresses only this machine can reach: 127.0.0.0/8, ::1, "localhost".
bool isLoopbackHost(const QString& host);

// What the status bar shows while the server runs.
struct LocalServerState {
    bool running = false;
    QString url;        // http://127.0.0.1:8000
    QString model;      // the model name clients send and see
    int clients = 0;    // HTTP requests being served now
    int inFlight = 0;   // engine requests of those, queued or running
    bool apiKey = false;
};

// "Serving http://127.0.0.1:8000 · 2 clients"
QString serverIndicatorText(const LocalServerState& s);

}  // namespace kvs::app
