#pragma once
// Gives the Roofline view this machine's roof (engine/runtime/machine_roof.h): the cached
// measurement of this CPU, kernel level and thread count when there is one, else (and on the
// view's "Measure again") the micro-benchmark on a worker thread (about a second), whose
// result is cached for next time. Nothing runs until the view first asks (roofWanted).
#include <QObject>
#include <atomic>
#include <thread>

#include "ui/roofline_types.h"

namespace kvs::ui {
class RooflineView;
}

namespace kvs::app {

class MachineRoofFeed : public QObject {
    Q_OBJECT
public:
    explicit MachineRoofFeed(ui::RooflineView* view, int nThreads = 0, QObject* parent = nullptr);
    ~MachineRoofFeed() override;

    void load();              // cached, else measured
    void measure();           // measured again (ignored while a measurement runs)
    bool busy() const { return m_busy; }

Q_SIGNALS:
    void roofReady(const kvs::ui::MachineRoofInfo& roof);
    void failed(const QString& why);

private:
    void deliver(const ui::MachineRoofInfo& roof);

    ui::RooflineView* m_view;
    int m_threads;
    std::thread m_worker;
    std::atomic<bool> m_busy{false};
};

}  // namespace kvs::app
