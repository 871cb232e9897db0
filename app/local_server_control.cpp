#include "app/local_server_control.h"

#include <QAction>
#include <QLabel>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPointer>
#include <QSettings>
#include <QSignalBlocker>
#include <QStatusBar>

#include "app/engine_bridge.h"
#include "app/local_server_dialog.h"

namespace kvs::app {

namespace {
const char kEnabledKey[] = "server/enabled";
void remember(bool on) { QSettings().setValue(kEnabledKey, on); }
}  // namespace

bool LocalServerControl::rememberedOn() { return QSettings().value(kEnabledKey, false).toBool(); }

LocalServerControl::LocalServerControl(EngineBridge* bridge, QMainWindow* window)
    : QObject(window), m_bridge(bridge), m_window(window) {
    m_indicator = new QLabel(window);
    m_indicator->setObjectName("serverIndicator");
    m_indicator->hide();
    m_timer.setInterval(250);
    connect(&m_timer, &QTimer::timeout, this, &LocalServerControl::refresh);
    // A new engine (another model, a lesson) restarts the server on it; this is when it could not.
    connect(m_bridge, &EngineBridge::serverStopped, this, [this](const QString& why) {
        if (m_switch && m_switch->isChecked()) fail(why);
    });
    // On at the last quit: on again with the first model this launch loads.
    m_resume = rememberedOn();
    connect(m_bridge, &EngineBridge::modelLoaded, this, [this] {
        if (!m_resume) return;
        m_resume = false;
        if (!m_switch || !m_switch->isChecked()) setServing(true);
    });
}

void LocalServerControl::addMenu(QMenuBar* bar) {
    auto* menu = bar->addMenu(tr("&Server"));
    menu->setObjectName("serverMenu");
    m_switch = menu->addAction(tr("&Local server"));
    m_switch->setObjectName("localServerAction");
    m_switch->setCheckable(true);
    m_switch->setToolTip(tr("serve the loaded model over HTTP (OpenAI-compatible API) on the engine the chats "
                            "use: its requests show in the KV block map, the slot timeline and the metrics"));
    connect(m_switch, &QAction::toggled, this, &LocalServerControl::setServing);
    auto* settings = menu->addAction(tr("Server &settings…"), this, &LocalServerControl::editSettings);
    settings->setObjectName("localServerSettingsAction");
}

void LocalServerControl::setServing(bool on) {
    remember(on);
    if (!on) m_resume = false;  // switched off before the model came: stays off
    if (m_switch && m_switch->isChecked() != on) {
        const QSignalBlocker block(m_switch);
        m_switch->setChecked(on);
    }
    EngineBridge* b = m_bridge;
    QPointer<LocalServerControl> self(this);
    m_busy = true;
    if (on) {
        QString keyError;
        const LocalServerSettings s = LocalServerSettings::load(&keyError);
        if (!keyError.isEmpty()) return fail(keyError);
        m_indicator->setText(tr("Local server starting on %1:%2…").arg(s.host).arg(s.port));
        m_indicator->show();
        m_timer.start();
        QMetaObject::invokeMethod(b, [b, s, self] {
            const QString err = b->startServer(s);
            QMetaObject::invokeMethod(
                self.data(), [self, err] {
                    if (self) self->onStarted(err);
                },
                Qt::QueuedConnection);
        });
    } else {
        m_indicator->setText(tr("Local server stopping…"));
        QMetaObject::invokeMethod(b, [b, self] {
            b->stopServer();  // its replies in flight end with "abort"
            QMetaObject::invokeMethod(
                self.data(), [self] {
                    if (self) self->onStopped();
                },
                Qt::QueuedConnection);
        });
    }
}

void LocalServerControl::onStarted(const QString& error) {
    m_busy = false;
    if (!error.isEmpty()) return fail(tr("The Local server could not start: %1").arg(error));
    m_lastError.clear();
    const LocalServerState s = m_bridge->serverState();
    m_window->statusBar()->showMessage(tr("Local server on %1 (model “%2”)").arg(s.url, s.model), 8000);
    refresh();
    Q_EMIT started(s.url);
    // Switched off while it was starting: the stop queued behind the start already ran.
}

void LocalServerControl::onStopped() {
    m_busy = false;
    if (m_switch && m_switch->isChecked()) return;  // switched on again meanwhile
    m_timer.stop();
    m_indicator->hide();
    Q_EMIT stopped();
}

void LocalServerControl::fail(const QString& message) {
    m_busy = false;
    remember(false);  // what the switch shows now
    m_lastError = message;
    if (m_switch) {
        const QSignalBlocker block(m_switch);
        m_switch->setChecked(false);
    }
    m_timer.stop();
    m_indicator->hide();
    // A server that was restarting with a new engine may be half there: make sure it is off.
    QMetaObject::invokeMethod(m_bridge, [b = m_bridge] { b->stopServer(); });
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Local server"), message, QMessageBox::Ok, m_window);
    box->setObjectName("localServerError");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // window-modal, returns at once
    Q_EMIT failed(message);
}

LocalServerState LocalServerControl::state() const { return m_bridge->serverState(); }

void LocalServerControl::refresh() {
    const LocalServerState s = m_bridge->serverState();
    if (!s.running) {
        if (!m_busy && m_switch && m_switch->isChecked()) m_indicator->setText(tr("Local server: waiting for the engine…"));
        return;
    }
    m_indicator->setText(serverIndicatorText(s));
    m_indicator->setToolTip(tr("model “%1” · %2 · %3 engine requests queued or running")
                                .arg(s.model, s.apiKey ? tr("API key required") : tr("no API key"))
                                .arg(s.inFlight));
    m_indicator->show();
}

void LocalServerControl::editSettings() {
    QString keyError;
    LocalServerDialog d(LocalServerSettings::load(&keyError), m_window);
    if (d.exec() != QDialog::Accepted) return;
    QString err;
    if (!d.settings().save(&err)) m_window->statusBar()->showMessage(err, 15000);
    else if (!keyError.isEmpty())
        m_window->statusBar()->showMessage(keyError, 15000);
    if (m_switch && m_switch->isChecked()) {  // restart with the new address
        setServing(false);
        setServing(true);
    }
}

}  // namespace kvs::app
