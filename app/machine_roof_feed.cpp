#include "app/machine_roof_feed.h"

#include <QMetaObject>
#include <QPointer>

#include "engine/runtime/machine_roof.h"
#include "ui/roofline_view.h"

namespace kvs::app {

namespace {
ui::MachineRoofInfo to_info(const MachineRoof& r) {
    ui::MachineRoofInfo i;
    i.peakGflops = r.peak_gflops;
    i.memGbps = r.mem_gbps;
    i.cpu = QString::fromStdString(r.cpu);
    i.kernel = QString::fromStdString(r.kernel);
    i.threads = r.n_threads;
    i.measuredAt = r.measured_at;
    return i;
}
}  // namespace

MachineRoofFeed::MachineRoofFeed(ui::RooflineView* view, int nThreads, QObject* parent)
    : QObject(parent), m_view(view), m_threads(nThreads) {
    connect(view, &ui::RooflineView::remeasureRequested, this, &MachineRoofFeed::measure);
    connect(view, &ui::RooflineView::roofWanted, this, &MachineRoofFeed::load);
}

MachineRoofFeed::~MachineRoofFeed() {
    if (m_worker.joinable()) m_worker.join();
}

void MachineRoofFeed::load() {
    if (m_busy) return;
    if (auto cached = load_machine_roof(machine_roof_cache_path(), m_threads)) return deliver(to_info(*cached));
    measure();
}

void MachineRoofFeed::measure() {
    if (m_busy.exchange(true)) return;
    if (m_worker.joinable()) m_worker.join();
    m_view->setMeasuring(tr("measuring this machine's roof…"));
    QPointer<MachineRoofFeed> self(this);
    const int threads = m_threads;
    m_worker = std::thread([self, threads, this] {
        auto r = machine_roof(threads, true);
        QMetaObject::invokeMethod(
            this,
            [self, ok = r.is_ok(), info = r.is_ok() ? to_info(r.value()) : ui::MachineRoofInfo{},
             why = r.is_ok() ? std::string() : r.message()] {
                if (!self) return;
                self->m_busy = false;
                if (ok) self->deliver(info);
                else {
                    self->m_view->setMeasuring(QString::fromStdString(why));
                    Q_EMIT self->failed(QString::fromStdString(why));
                }
            },
            Qt::QueuedConnection);
    });
}

void MachineRoofFeed::deliver(const ui::MachineRoofInfo& roof) {
    m_view->setRoof(roof);
    Q_EMIT roofReady(roof);
}

}  // namespace kvs::app
