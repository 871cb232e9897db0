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
    connect(m_bridge, &EngineBridge::textGenerated, this, [this](const QString& piece) {
        m_pendingReply += piece;
        m_chat->appendAssistantText(piece);
    });
    connect(m_bridge, &EngineBridge::generationFinished, this, [this](const QString& summary) {
        m_turns.append({"assistant", m_pendingReply});
        m_chat->endAssistantMessage(summary);
        m_chat->setGenerating(false);
        statusBar()->showMessage(summary, 8000);
    });
    connect(m_bridge, &EngineBridge::generationFailed, this, [this](const QString& msg) {
        m_chat->appendNotice(tr("Generation failed: %1").arg(msg));
        m_turns.removeLast();  // the user turn that could not be answered stays visible, not in context
        m_chat->setGenerating(false);
    });
    connect(m_chat, &ui::ChatView::sendRequested, this, &MainWindow::onSend);
    connect(m_chat, &ui::ChatView::stopRequested, this, [this] { m_bridge->requestStop(m_requestId); });

    QMetaObject::invokeMethod(m_bridge, "loadModel", Qt::QueuedConnection, Q_ARG(QString, modelNameOrPath));
}

MainWindow::~MainWindow() {
    m_bridge->requestStop(m_requestId);
    m_engineThread.quit();
    m_engineThread.wait();
}

void MainWindow::onSend(const QString& text) {
    m_turns.append({"user", text});
    m_pendingReply.clear();
    m_chat->appendUserMessage(text);
    m_chat->beginAssistantMessage();
    m_chat->setGenerating(true);
    ++m_requestId;
    QMetaObject::invokeMethod(m_bridge, "generateReply", Qt::QueuedConnection, Q_ARG(int, m_requestId),
                              Q_ARG(QList<kvs::app::ChatTurn>, m_turns),
                              Q_ARG(double, 0.7), Q_ARG(int, 512));
}

void MainWindow::openModel() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open model"), {}, tr("GGUF models (*.gguf);;All files (*)"));
    if (path.isEmpty()) return;
    m_chat->setReady(false, tr("Loading %1…").arg(path));
    QMetaObject::invokeMethod(m_bridge, "loadModel", Qt::QueuedConnection, Q_ARG(QString, path));
}

}  // namespace kvs::app
