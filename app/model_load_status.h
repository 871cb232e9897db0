#pragma once
// The status bar's model load: which stage a load is at (reading and checking the file, the
// memory check, the engine's start; EngineBridge::loadProgress), a bar of those stages, and
// Cancel. A cancelled or failed load leaves the previous model loaded and running; the
// window hears of the end through loadEnded.
#include <QString>
#include <QWidget>

class QLabel;
class QProgressBar;
class QToolButton;

namespace kvs::app {

class EngineBridge;

class ModelLoadStatus : public QWidget {
    Q_OBJECT
public:
    ModelLoadStatus(EngineBridge* bridge, QWidget* parent = nullptr);
    // Queues a load on the bridge's thread (context / batch: EngineBridge::loadModelAt).
    void start(const QString& nameOrPath, int context = 0, int batch = 0);
    void cancel();  // the load stops before its next stage
    bool loading() const { return m_ticket != 0; }
    QString path() const { return m_path; }
    QString stageText() const;

Q_SIGNALS:
    // loaded false: it failed (message says why) or was cancelled (cancelled true).
    void loadEnded(const QString& path, bool loaded, bool cancelled, const QString& message);
    // To the bridge's thread (a queued connection to EngineBridge::loadModelAt): Qt copies
    // the arguments into the event, so no functor's captures cross threads.
    void loadRequested(const QString& nameOrPath, int contextTokens, int batch, qint64 ticket);

private:
    void finish(bool loaded, bool cancelled, const QString& message);

    EngineBridge* m_bridge;
    QLabel* m_stage;
    QProgressBar* m_bar;
    QToolButton* m_cancel;
    qint64 m_ticket = 0;  // the load in flight (0: none)
    QString m_path;
};

}  // namespace kvs::app
