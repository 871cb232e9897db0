#include "app/remote/gui/connections_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPointer>
#include <QPushButton>
#include <QVBoxLayout>
#include <thread>

#include "app/remote/server_probe.h"

namespace kvs::remote {

ConnectionsDialog::ConnectionsDialog(ConnectionStore* store, QWidget* parent) : QDialog(parent), m_store(store) {
    setWindowTitle(tr("Remote connections"));
    m_list = new QListWidget(this);
    m_name = new QLineEdit(this);
    m_url = new QLineEdit(this);
    m_url->setPlaceholderText(QStringLiteral("http://gpu-server:8000/v1"));
    m_key = new QLineEdit(this);
    m_key->setEchoMode(QLineEdit::Password);
    m_key->setPlaceholderText(tr("optional"));
    m_model = new QComboBox(this);
    m_model->setEditable(true);
    m_result = new QLabel(this);
    m_result->setWordWrap(true);
    m_result->setObjectName(QStringLiteral("connectionTestResult"));
    m_storage = new QLabel(this);
    m_storage->setWordWrap(true);
    m_storage->setText(storageText());
    m_test = new QPushButton(tr("Test"), this);
    auto* add = new QPushButton(tr("New"), this);
    auto* save = new QPushButton(tr("Save"), this);
    auto* remove = new QPushButton(tr("Remove"), this);

    auto* form = new QFormLayout;
    form->addRow(tr("Name"), m_name);
    form->addRow(tr("Base URL"), m_url);
    form->addRow(tr("API key"), m_key);
    form->addRow(tr("Model"), m_model);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_test);
    buttons->addWidget(save);
    buttons->addWidget(remove);
    buttons->addStretch(1);
    auto* right = new QVBoxLayout;
    right->addLayout(form);
    right->addLayout(buttons);
    right->addWidget(m_result);
    right->addStretch(1);
    right->addWidget(m_storage);
    auto* left = new QVBoxLayout;
    left->addWidget(m_list, 1);
    left->addWidget(add);
    auto* top = new QHBoxLayout;
    top->addLayout(left, 1);
    top->addLayout(right, 2);
    auto* close = new QDialogButtonBox(QDialogButtonBox::Close, this);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top, 1);
    lay->addWidget(close);
    connect(close, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_test, &QPushButton::clicked, this, &ConnectionsDialog::test);
    connect(save, &QPushButton::clicked, this, &ConnectionsDialog::saveForm);
    connect(add, &QPushButton::clicked, this, [this] {
        m_list->clearSelection();
        showConnection(-1);
    });
    connect(remove, &QPushButton::clicked, this, [this] {
        if (m_editingId.isEmpty()) return;
        QString error;
        if (!m_store->remove(m_editingId, &error)) {
            m_result->setText(tr("Not removed: %1").arg(error));
            return;
        }
        reload();
        showConnection(-1);
        Q_EMIT connectionsChanged();
    });
    connect(m_list, &QListWidget::currentRowChanged, this, &ConnectionsDialog::showConnection);
    reload();
    showConnection(m_store->connections().isEmpty() ? -1 : 0);
    resize(760, 420);
}

QString ConnectionsDialog::storageText() const {
    return tr("API keys are kept in %1; never in the settings file.").arg(m_store->secrets().describe());
}

QString ConnectionsDialog::resultText() const { return m_result->text(); }

void ConnectionsDialog::reload() {
    const QSignalBlocker block(m_list);
    m_list->clear();
    for (const RemoteConnection& c : m_store->connections())
        m_list->addItem(c.kind.isEmpty() ? c.name : QStringLiteral("%1 (%2)").arg(c.name, c.kind));
    for (const QString& e : m_store->loadErrors()) m_result->setText(m_result->text() + e + QLatin1Char('\n'));
}

void ConnectionsDialog::showConnection(int row) {
    const auto& list = m_store->connections();
    if (row < 0 || row >= list.size()) {
        m_editingId.clear();
        m_name->clear();
        m_url->clear();
        m_key->clear();
        m_model->clear();
        m_kind.clear();
        return;
    }
    const RemoteConnection& c = list[row];
    m_editingId = c.id;
    m_name->setText(c.name);
    m_url->setText(c.baseUrl);
    QString error;
    m_key->setText(m_store->apiKey(c.id, &error));
    if (!error.isEmpty()) m_result->setText(tr("The API key could not be read: %1").arg(error));
    m_model->clear();
    m_model->addItem(c.model);
    m_kind = c.kind;
}

void ConnectionsDialog::test() {
    if (m_testing) return;
    m_testing = true;
    m_test->setEnabled(false);
    m_result->setText(tr("Testing %1 …").arg(m_url->text()));
    net::ClientOptions o;
    o.base_url = m_url->text().trimmed().toStdString();
    o.api_key = m_key->text().trimmed().toStdString();
    o.connect_timeout_s = 5;
    o.read_timeout_s = 10;
    o.total_timeout_s = 20;
    // The probe blocks for up to its timeouts: it runs on its own thread and reports through
    // `relay`, a GUI-thread object that outlives it, so closing the dialog meanwhile is safe.
    auto* relay = new QObject;
    QPointer<ConnectionsDialog> self(this);
    std::thread([o, relay, self]() {
        ProbeResult r = probe_server(o);
        QMetaObject::invokeMethod(
            relay,
            [r, relay, self]() {
                relay->deleteLater();
                if (!self) return;
                self->m_testing = false;
                self->m_test->setEnabled(true);
                self->m_result->setText(QString::fromStdString(r.message));
                if (r.ok()) {
                    const QString keep = self->m_model->currentText();
                    self->m_model->clear();
                    for (const std::string& m : r.models) self->m_model->addItem(QString::fromStdString(m));
                    const int i = self->m_model->findText(keep);
                    if (i >= 0) self->m_model->setCurrentIndex(i);
                    self->m_kind = QString::fromLatin1(server_kind_name(r.kind));
                }
                Q_EMIT self->testFinished(r.ok());
            },
            Qt::QueuedConnection);
    }).detach();
}

bool ConnectionsDialog::saveForm() {
    RemoteConnection c;
    c.id = m_editingId;
    c.name = m_name->text().trimmed();
    c.baseUrl = m_url->text().trimmed();
    c.model = m_model->currentText().trimmed();
    c.kind = m_kind;
    QString error, id;
    if (!m_store->save(c, m_key->text().trimmed(), &error, &id)) {
        m_result->setText(tr("Not saved: %1").arg(error));
        return false;
    }
    reload();
    for (int i = 0; i < m_store->connections().size(); ++i)
        if (m_store->connections()[i].id == id) {
            const QSignalBlocker block(m_list);
            m_list->setCurrentRow(i);
        }
    m_editingId = id;
    m_result->setText(tr("Saved. %1").arg(storageText()));
    Q_EMIT connectionsChanged();
    return true;
}

}  // namespace kvs::remote
