#pragma once
// The Quantization table dock's wiring: the view (ui/quant_table_view.h) on the GUI thread,
// its worker (app/quant_table_worker.h) on a thread of its own, the loaded model taken from
// the engine bridge when a run starts; Load JSON and the CSV / JSON exports through the
// table's reader and writers (engine/quant/quant_table.h), errors in the view's status line.
#include <QObject>
#include <QThread>

namespace kvs::ui {
class QuantTableView;
}

namespace kvs::app {

class EngineBridge;
class QuantTableWorker;

class QuantTableDock : public QObject {
    Q_OBJECT
public:
    QuantTableDock(EngineBridge* bridge, ui::QuantTableView* view, QObject* parent = nullptr);
    ~QuantTableDock() override;  // cancels the run in flight and joins the worker's thread

    QuantTableWorker* worker() const { return m_worker; }

    // What the view's buttons do after their file dialogs (tests call them directly).
    void loadJson(const QString& path);
    void exportJson(const QString& path);
    void exportCsv(const QString& path);

private:
    void start();

    EngineBridge* m_bridge;
    ui::QuantTableView* m_view;
    QThread m_thread;
    QuantTableWorker* m_worker;  // lives on m_thread
};

}  // namespace kvs::app
