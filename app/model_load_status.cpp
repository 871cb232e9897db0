#include "app/model_load_status.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QToolButton>

#include "app/engine_bridge.h"

namespace kvs::app {

ModelLoadStatus::ModelLoadStatus(EngineBridge* bridge, QWidget* parent) : QWidget(parent), m_bridge(bridge) {
    setObjectName("modelLoadStatus");
    m_stage = new QLabel(this);
    m_stage->setObjectName("loadStage");
    m_bar = new QProgressBar(this);
    m_bar->setObjectName("loadProgress");
    m_bar->setMaximumWidth(fontMetrics().averageCharWidth() * 16);
    m_bar->setTextVisible(false);
    m_cancel = new QToolButton(this);
    m_cancel->setObjectName("cancelLoadButton");
    m_cancel->setText(tr("Cancel"));
    m_cancel->setToolTip(tr("Stop loading; the model loaded before keeps running"));
    auto* lay = new QHBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_stage);
    lay->addWidget(m_bar);
    lay->addWidget(m_cancel);
    hide();
    connect(m_cancel, &QToolButton::clicked, this, &ModelLoadStatus::cancel);
    connect(this, &ModelLoadStatus::loadRequested, bridge, &EngineBridge::loadModelAt, Qt::QueuedConnection);
    connect(bridge, &EngineBridge::loadProgress, this, [this](qint64 ticket, int stage, int stages, const QString& what) {
        if (ticket != m_ticket) return;
        m_bar->setRange(0, stages);
        m_bar->setValue(stage - 1);
        m_stage->setText(tr("Loading %1 — step %2 of %3: %4").arg(QFileInfo(m_path).fileName()).arg(stage).arg(stages).arg(what));
        m_stage->setToolTip(what);
    });
    connect(bridge, &EngineBridge::modelLoadCancelled, this, [this](qint64 ticket) {
        if (ticket == m_ticket) finish(false, true, tr("Loading %1 was cancelled").arg(m_path));
    });
    // A ticketed load ends with one of these (queued in order after its progress).
    connect(bridge, &EngineBridge::modelLoaded, this, [this](const QString& d) {
        if (loading()) finish(true, false, d);
    });
    connect(bridge, &EngineBridge::modelLoadFailed, this, [this](const QString& msg) {
        if (loading()) finish(false, false, msg);
    });
}

void ModelLoadStatus::start(const QString& nameOrPath, int context, int batch) {
    if (loading()) m_bridge->cancelLoad(m_ticket);  // the newer choice wins
    m_ticket = EngineBridge::newLoadTicket();
    m_path = nameOrPath;
    m_bar->setRange(0, 0);
    m_stage->setText(tr("Loading %1…").arg(QFileInfo(nameOrPath).fileName()));
    m_cancel->setEnabled(true);
    show();
    Q_EMIT loadRequested(nameOrPath, context, batch, m_ticket);
}

void ModelLoadStatus::cancel() {
    if (!loading()) return;
    m_bridge->cancelLoad(m_ticket);
    m_cancel->setEnabled(false);
    m_stage->setText(tr("Cancelling the load of %1…").arg(QFileInfo(m_path).fileName()));
}

QString ModelLoadStatus::stageText() const { return m_stage->text(); }

void ModelLoadStatus::finish(bool loaded, bool cancelled, const QString& message) {
    m_ticket = 0;
    hide();
    Q_EMIT loadEnded(m_path, loaded, cancelled, message);
}

}  // namespace kvs::app
