#pragma once
// The main window: the chat view in the centre, the loaded model and speed in the
// status bar. The engine runs on the bridge's thread.
#include <QList>
#include <QMainWindow>
#include <QThread>

#include "app/engine_bridge.h"

class QLabel;
namespace kvs::ui {
class ChatView;
}

namespace kvs::app {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(const QString& modelNameOrPath, QWidget* parent = nullptr);
    ~MainWindow() override;
    ui::ChatView* chatView() const { return m_chat; }

private:
    void onSend(const QString& text);
    void openModel();

    ui::ChatView* m_chat;
    QLabel* m_modelLabel;
    QThread m_engineThread;
    EngineBridge* m_bridge;  // lives on m_engineThread
    QList<ChatTurn> m_turns;
    QString m_pendingReply;
    qint64 m_requestId = 0;  // the reply being generated (0: none)
};

}  // namespace kvs::app
