#pragma once
// The window's Local server switch: the Server menu (Local server on / off, Server
// settings…), the status-bar indicator ("Serving http://127.0.0.1:8000 · 2 clients", live),
// and the errors (a port in use: the switch goes back off and the message names the
// address). The server runs in app/engine_bridge on the engine the chats use; starting and
// stopping happen on the bridge's thread, so the window never waits for replies to end.
// The switch is remembered (QSettings "server/enabled"): on at the last quit, the next launch
// turns it on again once its first model is loaded, at the saved address (host and port in the
// settings file, the API key in the key store: LocalServerSettings). A start that fails leaves
// it off, and remembered off.
#include <QObject>
#include <QString>
#include <QTimer>

#include "app/local_server.h"

class QAction;
class QLabel;
class QMainWindow;
class QMenuBar;

namespace kvs::app {

class EngineBridge;

class LocalServerControl : public QObject {
    Q_OBJECT
public:
    LocalServerControl(EngineBridge* bridge, QMainWindow* window);

    void addMenu(QMenuBar* bar);  // Server ▸ Local server, Server settings…
    QAction* switchAction() const { return m_switch; }
    QLabel* indicator() const { return m_indicator; }  // for the status bar
    // Turns the server on (with the saved settings) or off, as the menu's switch does. The
    // outcome comes later: started / failed / stopped.
    void setServing(bool on);
    // The switch as the settings remember it (what the next launch starts with).
    static bool rememberedOn();
    bool busy() const { return m_busy; }  // a start or stop is under way on the bridge's thread
    LocalServerState state() const;
    QString lastError() const { return m_lastError; }
    // Server ▸ Server settings…; settings saved while the server runs restart it with them.
    void editSettings();

Q_SIGNALS:
    void started(const QString& url);
    void failed(const QString& message);
    void stopped();

private:
    void onStarted(const QString& error);
    void onStopped();
    void fail(const QString& message);
    void refresh();  // the indicator, from the bridge's live state

    EngineBridge* m_bridge;
    QMainWindow* m_window;
    QAction* m_switch = nullptr;
    QLabel* m_indicator;
    QTimer m_timer;  // refreshes the indicator while the switch is on
    bool m_busy = false;
    bool m_resume = false;  // turn the server on once a model is loaded (remembered on)
    QString m_lastError;
};

}  // namespace kvs::app
