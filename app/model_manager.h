#pragma once
// File ▸ Models…: pick an installed model (the data dir) or any GGUF file / safetensors
// folder, see what it is and what it needs before loading it (weights + KV for a chosen
// context and batch, from the memory planner, against this machine's RAM), then load it.
// The model is inspected on a worker thread so the dialog never freezes; a bad file shows
// its error here and nothing is loaded. "Remote connections…" opens the remote chat window
// (app/remote/gui) and its Connections dialog: servers elsewhere instead of a local model.
#include <QDialog>
#include <QString>

class QLabel;
class QListWidget;
class QPushButton;
namespace kvs::ui {
class MemoryPlannerView;
}

namespace kvs::app {

class ModelManagerDialog : public QDialog {
    Q_OBJECT
public:
    explicit ModelManagerDialog(QWidget* parent = nullptr);
    QString selectedPath() const { return m_path; }  // what Load loads
    bool selectedIsLoadable() const { return m_ok; }
    // Inspects a model (on a worker thread); the details and planner update when done.
    void inspect(const QString& path);

Q_SIGNALS:
    void inspected(const QString& path, bool ok);

private:
    void showResult(const QString& path, bool ok, const QString& details, const QString& name, int layers, int kvHeads,
                    int headDim, qint64 weightBytes);

    QListWidget* m_list;
    QLabel* m_details;
    ui::MemoryPlannerView* m_planner;
    QPushButton* m_load;
    QString m_path;
    bool m_ok = false;
    int m_generation = 0;  // newest inspect; older results are dropped
};

}  // namespace kvs::app
