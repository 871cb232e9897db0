#include "app/model_manager.h"

#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QMimeData>
#include <QPointer>
#include <QPushButton>
#include <QThread>
#include <QTreeWidget>
#include <QUrl>
#include <QVBoxLayout>
#include <functional>

#include "app/engine_bridge.h"
#include "app/remote/gui/remote_chat_window.h"
#include "engine/runtime/session.h"
#include "ui/memory_planner.h"
#include "ui/memory_sizing.h"

namespace kvs::app {

namespace {
enum Column { ColName, ColArch, ColParams, ColQuant, ColContext, ColSize, ColWhere, ColCount };

// Runs work on a worker thread and then done(result) on the GUI thread, if `guard` still lives.
template <class T>
void runOffThread(QObject* guard, std::function<T()> work, std::function<void(const T&)> done) {
    QPointer<QObject> g(guard);
    QThread* t = QThread::create([g, work, done] {
        T r = work();
        QMetaObject::invokeMethod(
            QCoreApplication::instance(), [g, r, done] { if (g) done(r); }, Qt::QueuedConnection);
    });
    QObject::connect(t, &QThread::finished, t, &QObject::deleteLater);
    t->start();
}

QString mib(qint64 b) { return ui::MemorySizing::formatBytes(b); }
}  // namespace

QStringList droppedPaths(const QMimeData* mime) {
    QStringList out;
    if (!mime || !mime->hasUrls()) return out;
    for (const QUrl& u : mime->urls())
        if (u.isLocalFile()) out << u.toLocalFile();
    return out;
}

ModelManagerDialog::ModelManagerDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Models"));
    setObjectName("modelManager");
    setAcceptDrops(true);
    m_list = new QTreeWidget(this);
    m_list->setObjectName("modelList");
    m_list->setColumnCount(ColCount);
    m_list->setHeaderLabels({tr("Model"), tr("Arch"), tr("Params"), tr("Quant"), tr("Context"), tr("Size"), tr("Where")});
    m_list->setRootIsDecorated(false);
    m_list->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
    auto* addFile = new QPushButton(tr("Add file…"), this);
    addFile->setObjectName("addModelFile");
    auto* addFolder = new QPushButton(tr("Add safetensors folder…"), this);
    auto* scan = new QPushButton(tr("Scan folder…"), this);
    scan->setObjectName("scanModels");
    m_remove = new QPushButton(tr("Remove…"), this);
    m_remove->setObjectName("removeModel");
    m_remove->setEnabled(false);
    m_details = new QLabel(tr("Pick a model, or drop a GGUF file or safetensors folder here."), this);
    m_details->setObjectName("modelDetails");
    m_details->setWordWrap(true);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error = new QLabel(this);
    m_error->setObjectName("modelError");
    m_error->setWordWrap(true);
    m_error->setStyleSheet("color:#c0392b");
    m_error->hide();
    m_memory = new QLabel(this);
    m_memory->setObjectName("modelMemory");
    m_memory->setWordWrap(true);
    m_planner = new ui::MemoryPlannerView(this);
    m_planner->setKvBytesPerTokenFn(&EngineBridge::kvBytesPerToken);
    if (const Session::ComputeMemory mem = Session::compute_memory(); mem.free_bytes > 0)
        m_planner->setAvailableMemory(mem.gpu ? mem.free_bytes : mem.total_bytes);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    m_load = buttons->addButton(tr("Load"), QDialogButtonBox::AcceptRole);
    m_load->setObjectName("loadModelButton");
    m_load->setEnabled(false);

    auto* left = new QVBoxLayout;
    auto* where = new QLabel(tr("Installed in %1, and models added from elsewhere. Drop a GGUF file or a safetensors "
                                "folder here to add it.")
                                 .arg(QString::fromStdString(Session::models_dir())),
                             this);
    where->setWordWrap(true);
    left->addWidget(where);
    left->addWidget(m_list, 1);
    auto* row = new QHBoxLayout;
    row->addWidget(addFile);
    row->addWidget(addFolder);
    row->addWidget(scan);
    row->addWidget(m_remove);
    left->addLayout(row);
    left->addWidget(m_error);
    auto* remote = new QPushButton(tr("Remote connections…"), this);
    remote->setObjectName(QStringLiteral("remoteConnections"));
    left->addWidget(remote);
    connect(remote, &QPushButton::clicked, this,
            [this] { remote::showRemoteChatWindow(parentWidget())->openConnectionsDialog(); });
    auto* right = new QVBoxLayout;
    right->addWidget(m_details);
    right->addWidget(m_memory);
    right->addWidget(m_planner, 1);
    auto* top = new QHBoxLayout;
    top->addLayout(left, 1);
    top->addLayout(right, 1);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top, 1);
    lay->addWidget(buttons);
    resize(1500, 780);

    connect(m_list, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
        m_remove->setEnabled(item != nullptr);
        if (item) inspect(item->data(0, Qt::UserRole).toString());
    });
    connect(addFile, &QPushButton::clicked, this, [this] {
        const QStringList p = QFileDialog::getOpenFileNames(this, tr("Add models"), {},
                                                            tr("GGUF models (*.gguf);;All files (*)"));
        if (!p.isEmpty()) addModels(p);
    });
    connect(addFolder, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getExistingDirectory(this, tr("Add a safetensors folder"));
        if (!p.isEmpty()) addModels({p});
    });
    connect(scan, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getExistingDirectory(this, tr("Scan a folder for models"));
        if (!p.isEmpty()) scanFolder(p);
    });
    connect(m_remove, &QPushButton::clicked, this, [this] {
        if (auto* item = m_list->currentItem()) removeModel(item->data(0, Qt::UserRole).toString(), true);
    });
    connect(m_planner, &ui::MemoryPlannerView::planChanged, this, [this] { updateMemory(); });
    connect(m_load, &QPushButton::clicked, this, [this] {
        if (!m_ok || !m_fits) return;
        Q_EMIT loadRequested(m_path, chosenContext(), chosenBatch());
        accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    refreshList();
}

void ModelManagerDialog::refreshList() {
    const QString keep = m_list->currentItem() ? m_list->currentItem()->data(0, Qt::UserRole).toString() : QString();
    const QSignalBlocker block(m_list);
    m_list->clear();
    for (const ModelCatalog::Entry& e : m_catalog.entries()) {
        auto* item = new QTreeWidgetItem(m_list);
        item->setText(ColName, e.name);
        item->setText(ColWhere, e.installed ? tr("models folder") : tr("added"));
        item->setData(0, Qt::UserRole, e.path);
        item->setData(0, Qt::UserRole + 1, e.installed);
        item->setToolTip(ColName, e.path);
        if (m_facts.contains(e.path)) fillRow(item, m_facts.value(e.path));
        if (e.path == keep) m_list->setCurrentItem(item);
    }
    m_remove->setEnabled(m_list->currentItem() != nullptr);
    inspectAll();
}

void ModelManagerDialog::fillRow(QTreeWidgetItem* item, const ModelFacts& f) {
    if (!f.ok) {
        item->setText(ColArch, tr("cannot load"));
        item->setToolTip(ColArch, f.error);
        return;
    }
    item->setText(ColArch, f.arch);
    item->setText(ColParams, tr("%1 M").arg(f.params / 1e6, 0, 'f', 1));
    item->setText(ColQuant, f.fileType);
    item->setToolTip(ColQuant, f.tensorTypes);
    item->setText(ColContext, QString::number(f.ctxTrain));
    item->setText(ColSize, mib(f.diskBytes));
}

// Facts for every listed model not yet inspected, one after the other on a worker thread.
void ModelManagerDialog::inspectAll() {
    QStringList todo;
    for (int i = 0; i < m_list->topLevelItemCount(); ++i) {
        const QString p = m_list->topLevelItem(i)->data(0, Qt::UserRole).toString();
        if (!m_facts.contains(p)) todo << p;
    }
    if (todo.isEmpty()) return;
    runOffThread<QVector<ModelFacts>>(
        this,
        [todo] {
            QVector<ModelFacts> out;
            for (const QString& p : todo) out << inspectModel(p);
            return out;
        },
        [this](const QVector<ModelFacts>& all) {
            for (const ModelFacts& f : all) {
                m_facts.insert(f.path, f);
                for (int i = 0; i < m_list->topLevelItemCount(); ++i)
                    if (m_list->topLevelItem(i)->data(0, Qt::UserRole).toString() == f.path)
                        fillRow(m_list->topLevelItem(i), f);
            }
        });
}

void ModelManagerDialog::inspect(const QString& path) {
    const int gen = ++m_generation;
    m_path = path;
    m_ok = false;
    m_load->setEnabled(false);
    m_details->setText(tr("Reading %1…").arg(path));
    m_memory->clear();
    runOffThread<ModelFacts>(
        this, [path] { return inspectModel(path); },
        [this, gen](const ModelFacts& f) {
            m_facts.insert(f.path, f);
            if (gen == m_generation) showFacts(f);
        });
}

void ModelManagerDialog::showFacts(const ModelFacts& f) {
    m_ok = f.ok;
    if (f.ok) {
        QString d = QString("<b>%1</b> — %2<br>%3 · %4 · %5 M parameters · weights %6 (%7 on disk)<br>%8 layers · %9 "
                            "heads (%10 for K/V) · head dim %11 · trained context %12 tokens<br>tensor types: %13")
                        .arg(f.name.toHtmlEscaped(), f.path.toHtmlEscaped(), f.arch, f.format)
                        .arg(f.params / 1e6, 0, 'f', 1)
                        .arg(mib(f.weightBytes), mib(f.diskBytes))
                        .arg(f.layers)
                        .arg(f.heads)
                        .arg(f.kvHeads)
                        .arg(f.headDim)
                        .arg(f.ctxTrain)
                        .arg(f.tensorTypes.toHtmlEscaped());
        for (const QString& w : f.warnings) d += "<br><i>" + w.toHtmlEscaped() + "</i>";
        m_details->setText(d);
        m_planner->setLoadedModel(f.name, f.layers, f.kvHeads, f.headDim, f.weightBytes, f.heads);
        ui::MemoryInputs in = m_planner->inputs();
        if (f.ctxTrain > 0) in.context = std::min<qint64>(in.context, f.ctxTrain);
        m_planner->setInputs(in);
    } else {
        m_details->setText("<span style='color:#c0392b'><b>Cannot load this model:</b> " + f.error.toHtmlEscaped() +
                           "</span>");
    }
    updateMemory();
    Q_EMIT inspected(f.path, f.ok);
}

int ModelManagerDialog::chosenContext() const { return int(m_planner->inputs().context); }
int ModelManagerDialog::chosenBatch() const { return int(m_planner->inputs().batch); }

QString ModelManagerDialog::memoryText() const { return m_memory->text(); }

void ModelManagerDialog::updateMemory() {
    if (!m_ok) {
        m_fits = false;
        m_memory->clear();
        m_load->setEnabled(false);
        return;
    }
    const ui::MemoryPlan p = m_planner->currentPlan();
    const ui::MemoryInputs in = m_planner->inputs();
    const ModelFacts f = m_facts.value(m_path);
    // CUDA when the default backend finds it (weights and KV then go to the GPU's memory), else RAM.
    const Session::ComputeMemory mem = Session::compute_memory();
    const qint64 avail = mem.gpu ? mem.free_bytes : mem.total_bytes;
    const QString where = ui::MemorySizing::memoryTargetText(mem.gpu, QString::fromStdString(mem.device),
                                                             mem.free_bytes, mem.total_bytes);
    // The weights as the file has them (the planner's box rounds to 0.1 MiB), the KV as the
    // engine will allocate it: whole blocks of the engine's bytes per token.
    const qint64 weights = f.weightBytes;
    const qint64 need = ui::MemorySizing::addSaturated(weights, p.kvBytes);
    QString why;
    if (!p.valid) why = p.error;
    else if (f.ctxTrain > 0 && in.context > f.ctxTrain)
        why = tr("a context of %1 tokens is more than the %2 this model was trained on").arg(in.context).arg(f.ctxTrain);
    else if (avail > 0 && need > avail)
        why = mem.gpu ? tr("it will not fit: %1 is more than the %2 free on the GPU").arg(mib(need), mib(avail))
                      : tr("it will not fit: %1 is more than this machine's %2 of RAM").arg(mib(need), mib(avail));
    m_fits = p.valid && why.isEmpty();
    const QString line = tr("Needs %1: weights %2 + KV cache %3 (context %4 × batch %5 × %6 bytes per token, in "
                            "whole blocks of %7), in %8.")
                             .arg(mib(need), mib(weights), mib(p.kvBytes))
                             .arg(in.context)
                             .arg(in.batch)
                             .arg(p.bytesPerToken)
                             .arg(in.blockSize)
                             .arg(where.toHtmlEscaped());
    m_memory->setText(why.isEmpty() ? line
                                    : line + "<br><span style='color:#c0392b'><b>Warning:</b> " + why.toHtmlEscaped() +
                                          tr(" — choose a smaller context or batch below.") + "</span>");
    m_load->setEnabled(m_fits);
}

void ModelManagerDialog::showError(const QString& message) {
    m_error->setText(message);
    m_error->setVisible(!message.isEmpty());
    if (!message.isEmpty()) Q_EMIT addFailed(message);
}

QString ModelManagerDialog::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

void ModelManagerDialog::addModels(const QStringList& paths) {
    showError({});
    // The quick look first (no worker needed), then a full inspection of what looks right.
    QStringList errors, candidates;
    for (const QString& p : paths) {
        QString why;
        if (looksLikeModel(p, &why)) candidates << p;
        else
            errors << why;
    }
    if (candidates.isEmpty()) {
        showError(errors.join("\n"));
        return;
    }
    runOffThread<QVector<ModelFacts>>(
        this,
        [candidates] {
            QVector<ModelFacts> out;
            for (const QString& p : candidates) out << inspectModel(p);
            return out;
        },
        [this, errors](const QVector<ModelFacts>& all) {
            QStringList errs = errors, added;
            for (const ModelFacts& f : all) {
                QString why;
                if (!f.ok) errs << tr("%1 was not added: %2").arg(QFileInfo(f.path).fileName(), f.error);
                else if (!m_catalog.add(f.path, &why))
                    errs << why;
                else {
                    m_facts.insert(f.path, f);
                    added << f.path;
                }
            }
            if (!added.isEmpty()) {
                refreshList();
                const QString k = ModelCatalog::key(added.last());
                for (int i = 0; i < m_list->topLevelItemCount(); ++i)
                    if (ModelCatalog::key(m_list->topLevelItem(i)->data(0, Qt::UserRole).toString()) == k)
                        m_list->setCurrentItem(m_list->topLevelItem(i));
            }
            showError(errs.join("\n"));
            Q_EMIT modelsAdded(added);
        });
}

void ModelManagerDialog::scanFolder(const QString& folder) {
    const QStringList found = ModelCatalog::scan(folder);
    if (found.isEmpty()) {
        showError(tr("No models in %1: looked for .gguf files and safetensors folders, 3 levels down").arg(folder));
        return;
    }
    addModels(found);
}

bool ModelManagerDialog::removeModel(const QString& path, bool confirm) {
    bool installed = false;
    for (const auto& e : m_catalog.entries())
        if (ModelCatalog::key(e.path) == ModelCatalog::key(path)) installed = e.installed;
    if (confirm) {
        const QString q = installed ? tr("Delete %1 from the models folder %2? The file is deleted from disk.")
                                          .arg(QFileInfo(path).fileName(), QString::fromStdString(Session::models_dir()))
                                    : tr("Remove %1 from the list? The file stays at %2.")
                                          .arg(QFileInfo(path).fileName(), path);
        QMessageBox box(QMessageBox::Question, tr("Remove model"), q, QMessageBox::Yes | QMessageBox::Cancel, this);
        box.setObjectName("confirmRemoveModel");
        if (box.exec() != QMessageBox::Yes) return false;
    }
    QString err;
    if (!m_catalog.remove(path, &err)) {
        showError(err);
        return false;
    }
    m_facts.remove(path);
    if (m_path == path) {
        m_path.clear();
        m_ok = false;
        m_details->setText(tr("Pick a model."));
        updateMemory();
    }
    refreshList();
    return true;
}

void ModelManagerDialog::dragEnterEvent(QDragEnterEvent* e) {
    if (!droppedPaths(e->mimeData()).isEmpty()) e->acceptProposedAction();
}

void ModelManagerDialog::dropEvent(QDropEvent* e) {
    const QStringList paths = droppedPaths(e->mimeData());
    if (paths.isEmpty()) return;
    e->acceptProposedAction();
    addModels(paths);
}

}  // namespace kvs::app
