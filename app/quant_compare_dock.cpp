#include "app/quant_compare_dock.h"

#include <QSettings>

#include "app/engine_bridge.h"
#include "app/quant_compare_worker.h"
#include "ui/quant_compare_view.h"

namespace kvs::app {

QuantCompareDock::QuantCompareDock(EngineBridge* bridge, ui::QuantCompareView* view, QObject* parent)
    : QObject(parent), m_bridge(bridge), m_view(view), m_worker(new QuantCompareWorker(2)) {
    m_thread.setObjectName("quant compare");
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread.start(QThread::LowPriority);  // the chat engine keeps the upper hand

    const QSettings st;
    m_view->setSchemes(QuantCompareWorker::schemeChoices(), st.value("quantCompare/scheme", kDefaultScheme).toString());
    m_view->setPrompt(st.value("quantCompare/prompt", tr("Explain in two sentences why the sky is blue.")).toString());

    connect(bridge, &EngineBridge::modelLoaded, this, [this] { m_view->setReady(true); });
    connect(bridge, &EngineBridge::modelLoadFailed, this, [this](const QString& msg) {
        if (!m_bridge->model()) m_view->setReady(false, tr("No model is loaded: %1").arg(msg));
    });
    connect(m_view, &ui::QuantCompareView::compareRequested, this, [this] { start(); });
    connect(m_view, &ui::QuantCompareView::stopRequested, this, [this] {
        m_worker->cancel();
        m_run = 0;
    });
    // Queued from the worker's thread; only the current run reaches the view.
    connect(m_worker, &QuantCompareWorker::building, this, [this](qint64 id, const QString& what) {
        if (id == m_run) m_view->setBusy(what);
    });
    connect(m_worker, &QuantCompareWorker::buildProgress, this, [this](qint64 id, const QString& what, double f) {
        if (id == m_run) m_view->setBuildProgress(what, f);
    });
    connect(m_worker, &QuantCompareWorker::started, this,
            [this](qint64 id, const ui::QuantSideInfo& ref, const ui::QuantSideInfo& var) {
                if (id == m_run) m_view->begin(ref, var);
            });
    connect(m_worker, &QuantCompareWorker::token, this, [this](qint64 id, const ui::QuantTokenEvent& ev) {
        if (id == m_run) m_view->appendEvent(ev);
    });
    connect(m_worker, &QuantCompareWorker::finished, this, [this](qint64 id, const QString& summary) {
        if (id != m_run) return;
        m_run = 0;
        m_view->finish(summary);
    });
    connect(m_worker, &QuantCompareWorker::failed, this, [this](qint64 id, const QString& message) {
        if (id != m_run) return;
        m_run = 0;
        m_view->showError(message);
    });
}

QuantCompareDock::~QuantCompareDock() {
    m_worker->cancel();
    m_thread.quit();
    m_thread.wait();
}

void QuantCompareDock::start() {
    const ui::QuantCompareRequest req = m_view->request();
    QSettings st;
    st.setValue("quantCompare/scheme", req.scheme);
    st.setValue("quantCompare/prompt", req.prompt);
    auto model = m_bridge->model();
    if (!model) {
        m_view->showError(tr("No model is loaded."));
        return;
    }
    m_worker->setModel(std::move(model));
    m_worker->cancel();     // a run still going (e.g. a build the user stopped) ends first
    m_view->clearResult();  // the old result is not this run's
    m_view->setBusy(tr("Waiting for the worker…"));
    m_run = m_worker->requestCompare(req);
}

}  // namespace kvs::app
