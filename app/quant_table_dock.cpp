#include "app/quant_table_dock.h"

#include "app/engine_bridge.h"
#include "app/quant_table_convert.h"
#include "app/quant_table_worker.h"
#include "ui/quant_table_view.h"

namespace kvs::app {

QuantTableDock::QuantTableDock(EngineBridge* bridge, ui::QuantTableView* view, QObject* parent)
    : QObject(parent), m_bridge(bridge), m_view(view), m_worker(new QuantTableWorker(2)) {
    m_thread.setObjectName("quant table");
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread.start(QThread::LowPriority);  // the chat engine keeps the upper hand

    if (bridge) {
        if (bridge->model()) m_view->setReady(true);
        connect(bridge, &EngineBridge::modelLoaded, this, [this] { m_view->setReady(true); });
        connect(bridge, &EngineBridge::modelLoadFailed, this, [this](const QString& msg) {
            if (!m_bridge->model()) m_view->setReady(false, tr("No model is loaded: %1").arg(msg));
        });
    }
    connect(m_view, &ui::QuantTableView::runRequested, this, [this] { start(); });
    connect(m_view, &ui::QuantTableView::cancelRequested, this, [this] { m_worker->cancel(); });
    connect(m_view, &ui::QuantTableView::loadJsonRequested, this, &QuantTableDock::loadJson);
    connect(m_view, &ui::QuantTableView::exportJsonRequested, this, &QuantTableDock::exportJson);
    connect(m_view, &ui::QuantTableView::exportCsvRequested, this, &QuantTableDock::exportCsv);
    // Queued from the worker's thread.
    connect(m_worker, &QuantTableWorker::progress, m_view, &ui::QuantTableView::setProgress);
    connect(m_worker, &QuantTableWorker::finished, this, [this](const ui::QuantTableInfo& t, const QString& msg) {
        m_view->setTable(t);
        m_view->finish(msg);
    });
    connect(m_worker, &QuantTableWorker::failed, m_view, &ui::QuantTableView::showError);
}

QuantTableDock::~QuantTableDock() {
    m_worker->cancel();
    m_thread.quit();
    m_thread.wait();
}

void QuantTableDock::start() {
    auto model = m_bridge ? m_bridge->model() : nullptr;
    if (!model) {
        m_view->showError(tr("No model is loaded."));
        return;
    }
    m_worker->setModel(std::move(model));
    m_view->setProgress(tr("Waiting for the worker…"), 0.0);
    m_worker->requestRun(m_view->request());
}

void QuantTableDock::loadJson(const QString& path) {
    auto t = read_quant_table(path.toStdString());
    if (!t) {
        m_view->showStatus(tr("Could not load the table: %1").arg(QString::fromStdString(t.message())));
        return;
    }
    m_view->setTable(toView(t.value()));
    m_view->showStatus(tr("Loaded %1").arg(path));
}

void QuantTableDock::exportJson(const QString& path) {
    if (m_view->table().rows.isEmpty()) return m_view->showStatus(tr("There is no table to export yet."));
    const Status s = write_quant_table_json(fromView(m_view->table()), path.toStdString());
    m_view->showStatus(s ? tr("Saved %1").arg(path) : QString::fromStdString(s.message()));
}

void QuantTableDock::exportCsv(const QString& path) {
    if (m_view->table().rows.isEmpty()) return m_view->showStatus(tr("There is no table to export yet."));
    const Status s = write_quant_table_csv(fromView(m_view->table()), path.toStdString());
    m_view->showStatus(s ? tr("Saved %1").arg(path) : QString::fromStdString(s.message()));
}

}  // namespace kvs::app
