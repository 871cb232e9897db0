#include "app/model_manager.h"

#include <QCoreApplication>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPointer>
#include <QPushButton>
#include <QThread>
#include <QVBoxLayout>

#include "app/engine_bridge.h"
#include "app/remote/gui/remote_chat_window.h"
#include "engine/runtime/session.h"
#include "ui/memory_planner.h"

namespace kvs::app {

ModelManagerDialog::ModelManagerDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Models"));
    setObjectName("modelManager");
    m_list = new QListWidget(this);
    m_list->setObjectName("modelList");
    for (const InstalledModel& e : Session::installed_models()) {
        auto* item = new QListWidgetItem(QString::fromStdString(e.name), m_list);
        item->setData(Qt::UserRole, QString::fromStdString(e.path));
        item->setToolTip(QString::fromStdString(e.path));
    }
    auto* browse = new QPushButton(tr("Browse…"), this);
    m_details = new QLabel(tr("Pick a model."), this);
    m_details->setObjectName("modelDetails");
    m_details->setWordWrap(true);
    m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_planner = new ui::MemoryPlannerView(this);
    m_planner->setKvBytesPerTokenFn(&EngineBridge::kvBytesPerToken);
    if (const int64_t ram = Session::machine_ram_bytes(); ram > 0) m_planner->setAvailableMemory(ram);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, this);
    m_load = buttons->addButton(tr("Load"), QDialogButtonBox::AcceptRole);
    m_load->setObjectName("loadModelButton");
    m_load->setEnabled(false);

    auto* left = new QVBoxLayout;
    left->addWidget(new QLabel(tr("Installed in %1").arg(QString::fromStdString(Session::models_dir())), this));
    left->addWidget(m_list, 1);
    left->addWidget(browse);
    // Remote servers (vLLM, llama-server, kvscope serve): their own chat window and connections.
    auto* remote = new QPushButton(tr("Remote connections…"), this);
    remote->setObjectName(QStringLiteral("remoteConnections"));
    left->addWidget(remote);
    connect(remote, &QPushButton::clicked, this, [this] {
        remote::showRemoteChatWindow(parentWidget())->openConnectionsDialog();
    });
    auto* right = new QVBoxLayout;
    right->addWidget(m_details);
    right->addWidget(m_planner, 1);
    auto* top = new QHBoxLayout;
    top->addLayout(left, 1);
    top->addLayout(right, 3);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top, 1);
    lay->addWidget(buttons);
    resize(1100, 700);

    connect(m_list, &QListWidget::currentItemChanged, this, [this](QListWidgetItem* item) {
        if (item) inspect(item->data(Qt::UserRole).toString());
    });
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString p =
            QFileDialog::getOpenFileName(this, tr("Open model"), {}, tr("GGUF models (*.gguf);;All files (*)"));
        if (!p.isEmpty()) inspect(p);
    });
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

void ModelManagerDialog::inspect(const QString& path) {
    const int gen = ++m_generation;
    m_path = path;
    m_ok = false;
    m_load->setEnabled(false);
    m_details->setText(tr("Reading %1…").arg(path));
    QPointer<ModelManagerDialog> self(this);
    // Reading a model maps it and checks every tensor: a worker thread does it.
    QThread* t = QThread::create([self, path, gen] {
        auto m = Session::open(path.toStdString());
        QString details, name;
        int layers = 0, kvh = 0, hd = 0;
        qint64 wb = 0;
        const bool ok = m.is_ok();
        if (ok) {
            const Model& model = (*m)->model();
            const ModelConfig& c = model.config;
            name = QString::fromStdString(c.name);
            layers = c.n_layer;
            kvh = c.n_kv_head;
            hd = c.head_dim;
            wb = model.weight_bytes;
            details =
                QString(
                    "<b>%1</b><br>%2 · %3 · %4 M parameters · weights %5 MiB<br>%6 layers · %7 heads (%8 for K/V) · "
                    "head dim %9 · trained context %10")
                    .arg(name.toHtmlEscaped(), QString::fromStdString(c.arch), QString::fromStdString(model.file_type))
                    .arg(model.n_params / 1e6, 0, 'f', 1)
                    .arg(model.weight_bytes / 1048576.0, 0, 'f', 1)
                    .arg(c.n_layer)
                    .arg(c.n_head)
                    .arg(c.n_kv_head)
                    .arg(c.head_dim)
                    .arg(c.n_ctx_train);
            for (const auto& w : model.warnings)
                details += "<br><i>" + QString::fromStdString(w).toHtmlEscaped() + "</i>";
        } else {
            details = "<span style='color:#c0392b'><b>Cannot load this model:</b> " +
                      QString::fromStdString(m.message()).toHtmlEscaped() + "</span>";
        }
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, path, gen, ok, details, name, layers, kvh, hd, wb] {
                if (self && gen == self->m_generation) self->showResult(path, ok, details, name, layers, kvh, hd, wb);
            },
            Qt::QueuedConnection);
    });
    connect(t, &QThread::finished, t, &QObject::deleteLater);
    t->start();
}

void ModelManagerDialog::showResult(const QString& path, bool ok, const QString& details, const QString& name,
                                    int layers, int kvHeads, int headDim, qint64 weightBytes) {
    m_ok = ok;
    m_details->setText(details);
    if (ok) m_planner->setLoadedModel(name, layers, kvHeads, headDim, weightBytes);
    m_load->setEnabled(ok);
    Q_EMIT inspected(path, ok);
}

}  // namespace kvs::app
