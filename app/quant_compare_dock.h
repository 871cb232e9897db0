#pragma once
// The Quantization compare dock's wiring: the view (ui/quant_compare_view.h) on the GUI
// thread, its worker (app/quant_compare_worker.h) on a thread of its own, the loaded model
// taken from the engine bridge when a comparison starts, and the scheme and last prompt
// remembered in QSettings ("quantCompare/scheme", "quantCompare/prompt").
#include <QObject>
#include <QThread>

namespace kvs::ui {
class QuantCompareView;
}

namespace kvs::app {

class EngineBridge;
class QuantCompareWorker;

class QuantCompareDock : public QObject {
    Q_OBJECT
public:
    QuantCompareDock(EngineBridge* bridge, ui::QuantCompareView* view, QObject* parent = nullptr);
    ~QuantCompareDock() override;  // stops the run in flight and joins the worker's thread

    QuantCompareWorker* worker() const { return m_worker; }
    qint64 currentRun() const { return m_run; }  // 0: none in flight

    static constexpr const char* kDefaultScheme = "q4_0";

private:
    void start();

    EngineBridge* m_bridge;
    ui::QuantCompareView* m_view;
    QThread m_thread;
    QuantCompareWorker* m_worker;  // lives on m_thread
    qint64 m_run = 0;              // the run the view shows; signals of others are ignored
};

}  // namespace kvs::app
