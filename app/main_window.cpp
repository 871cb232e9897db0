#include "app/main_window.h"

#include <QFileDialog>
#include <QKeySequence>
#include <QLabel>
#include <QMenuBar>
#include <QStatusBar>

#include "ui/chat_view.h"

namespace kvs::app {

MainWindow::MainWindow(const QString& modelNameOrPath, QWidget* parent) : QMainWindow(parent) {
    setWindowTitle("KV Scope");
    resize(1000, 720);
    m_chat = new ui::ChatView(this);
    setCentralWidget(m_chat);
    m_modelLabel = new QLabel(tr("loading %1…").arg(modelNameOrPath), this);
    statusBar()->addWidget(m_modelLabel, 1);

    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, &MainWindow::openModel);
    file->addAction(tr("&New chat"), QKeySequence::New, this, [this] {
        m_turns.clear();
        m_chat->appendNotice(tr("New conversation."));
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    m_bridge = new EngineBridge;
    m_bridge->moveToThread(&m_engineThread);
    connect(&m_engineThread, &QThread::finished, m_bridge, &QObject::deleteLater);
    m_engineThread.start();

    connect(m_bridge, &EngineBridge::modelLoaded, this, [this](const QString& d) {
        m_modelLabel->setText(d);
        m_chat->setReady(true);
    });
    connect(m_bridge, &EngineBridge::modelLoadFailed, this, [this](const QString& msg) {
        m_modelLabel->setText(tr("no model loaded"));
        m_chat->setReady(false, tr("Could not load the model: %1 — use File ▸ Open model…").arg(msg));
    });
    connect(m_bridge, &EngineBridge::modelWarning, this,
            [this](const QString& msg) { m_chat->appendNotice(tr("Warning: %1").arg(msg)); });
    connect(m_bridge, &EngineBridge::tokenText, this, [this](qint64 id, const QString& piece) {
        if (id != m_requestId) return;
        m_pendingReply += piece;
        m_chat->appendAssistantText(piece);
    });
    connect(m_bridge, &EngineBridge::requestFinished, this, [this](qint64 id, const QString& summary) {
        if (id != m_requestId) return;
        m_turns.append({"assistant", m_pendingReply});
        m_chat->endAssistantMessage(summary);
        m_chat->setGenerating(false);
        m_requestId = 0;
        statusBar()->showMessage(summary, 8000);
    });
    connect(m_bridge, &EngineBridge::requestFailed, this, [this](qint64 id, const QString& msg) {
        if (id != m_requestId && id != 0) return;
        m_chat->appendNotice(tr("Generation failed: %1").arg(msg));
        if (!m_turns.isEmpty()) m_turns.removeLast();  // the unanswered user turn stays visible, not in context
        m_chat->setGenerating(false);
        m_requestId = 0;
    });
    connect(m_chat, &ui::ChatView::sendRequested, this, &MainWindow::onSend);
    connect(m_chat, &ui::ChatView::stopRequested, this, [this] { m_bridge->cancel(m_requestId); });

    QMetaObject::invokeMethod(m_bridge, "loadModel", Qt::QueuedConnection, Q_ARG(QString, modelNameOrPath));
}

MainWindow::~MainWindow() {
    m_engineThread.quit();
    m_engineThread.wait();
}

void MainWindow::onSend(const QString& text) {
    m_turns.append({"user", text});
    m_pendingReply.clear();
    m_chat->appendUserMessage(text);
    m_chat->beginAssistantMessage();
    m_chat->setGenerating(true);
    m_requestId = -1;  // a failure to submit (no model) reports id 0
    m_requestId = m_bridge->submitChat(m_turns, ChatSettings{});
}

void MainWindow::openModel() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open model"), {}, tr("GGUF models (*.gguf);;All files (*)"));
    if (path.isEmpty()) return;
    m_chat->setReady(false, tr("Loading %1…").arg(path));
    QMetaObject::invokeMethod(m_bridge, "loadModel", Qt::QueuedConnection, Q_ARG(QString, path));
}

}  // namespace kvs::app
