#pragma once
// File ▸ Models… (and a model file dropped on the window): the models the window knows
// (app/model_catalog: installed in the models folder, or added from elsewhere) with the
// `kvscope inspect` facts of each (architecture, parameters, quant types, trained context,
// size), added by file dialog, by drag-and-drop (a GGUF file or a safetensors folder) or by
// scanning a folder, and removed (an added model leaves the list, its file stays; an
// installed one is deleted from the models folder, after a confirmation that says which).
// For the selected model, what it will need before it is loaded: weights + KV cache at the
// context and batch chosen in the memory planner, against this machine's RAM, with a
// warning (and Load disabled) when it will not fit. Models are inspected on a worker thread
// so the dialog never freezes; a file that is not a model, or one the engine cannot load,
// gets a message here and is neither added nor loaded. Load asks the window to load the
// model at that context and batch (loadRequested); the window shows its progress and Cancel.
// "Remote connections…" opens the remote chat window (app/remote/gui) and its Connections.
#include <QDialog>
#include <QHash>
#include <QString>

#include "app/model_catalog.h"

class QLabel;
class QMimeData;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;
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
    bool selectedFits() const { return m_fits; }
    // Inspects a model (on a worker thread); the details and planner update when done.
    void inspect(const QString& path);
    // Adds models (files or folders) after checking them on a worker thread: one that is not
    // a model or cannot be loaded is named in the error line and not added; the last added is
    // selected. What a drop and the Add buttons do.
    void addModels(const QStringList& paths);
    // Adds every model found under a folder (Scan folder…).
    void scanFolder(const QString& folder);
    // Remove: with confirm, asks first (saying whether the file is deleted or only unlisted).
    bool removeModel(const QString& path, bool confirm);
    void refreshList();
    QString errorText() const;  // the error line ("" when none)
    // "needs X of Y RAM" for the selected model at the planner's context and batch.
    QString memoryText() const;
    int chosenContext() const;
    int chosenBatch() const;

Q_SIGNALS:
    void inspected(const QString& path, bool ok);
    void modelsAdded(const QStringList& paths);   // after addModels / scanFolder (those that were models)
    void addFailed(const QString& message);
    void loadRequested(const QString& path, int context, int batch);

protected:
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void showFacts(const ModelFacts& f);
    void fillRow(QTreeWidgetItem* item, const ModelFacts& f);
    void inspectAll();
    void updateMemory();
    void showError(const QString& message);

    ModelCatalog m_catalog;
    QTreeWidget* m_list;
    QLabel* m_details;
    QLabel* m_error;
    QLabel* m_memory;
    ui::MemoryPlannerView* m_planner;
    QPushButton* m_load;
    QPushButton* m_remove;
    QHash<QString, ModelFacts> m_facts;  // by path, once inspected
    QString m_path;
    bool m_ok = false;
    bool m_fits = false;
    int m_generation = 0;  // newest inspect; older results are dropped
};

// The paths of local files and folders among a drop's URLs.
QStringList droppedPaths(const QMimeData* mime);

}  // namespace kvs::app
