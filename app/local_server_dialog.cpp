#include "app/local_server_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>

namespace kvs::app {

LocalServerDialog::LocalServerDialog(const LocalServerSettings& s, QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Local server settings"));
    setObjectName("localServerDialog");
    setMinimumWidth(fontMetrics().averageCharWidth() * 64);
    auto* l = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    m_host = new QComboBox(this);
    m_host->setObjectName("serverHost");
    m_host->setEditable(true);
    m_host->addItem(QStringLiteral("127.0.0.1"));
    m_host->setItemData(0, tr("this computer only"), Qt::ToolTipRole);
    m_host->addItem(QStringLiteral("0.0.0.0"));
    m_host->setItemData(1, tr("every network interface: other machines can connect"), Qt::ToolTipRole);
    m_host->setCurrentText(s.host);
    m_port = new QSpinBox(this);
    m_port->setObjectName("serverPort");
    m_port->setRange(1, 65535);
    m_port->setValue(s.port > 0 ? s.port : 8000);
    m_key = new QLineEdit(s.apiKey, this);
    m_key->setObjectName("serverApiKey");
    m_key->setEchoMode(QLineEdit::PasswordEchoOnEdit);
    m_key->setPlaceholderText(tr("none: any client may call it"));
    m_key->setToolTip(tr("clients send it as “Authorization: Bearer <key>”; kept in the desktop keyring "
                         "(or a file only you can read), never in the settings file"));
    form->addRow(tr("&Address:"), m_host);
    form->addRow(tr("&Port:"), m_port);
    form->addRow(tr("API &key:"), m_key);
    l->addLayout(form);
    m_warning = new QLabel(this);
    m_warning->setObjectName("serverExposureWarning");
    m_warning->setWordWrap(true);
    m_warning->setMinimumHeight(fontMetrics().lineSpacing() * 3);  // its longest text fits without a resize
    l->addWidget(m_warning);
    m_error = new QLabel(this);
    m_error->setObjectName("serverSettingsError");
    m_error->setWordWrap(true);
    m_error->setVisible(false);
    l->addWidget(m_error);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    l->addWidget(buttons);
    connect(m_host, &QComboBox::currentTextChanged, this, &LocalServerDialog::updateWarning);
    connect(m_key, &QLineEdit::textChanged, this, &LocalServerDialog::updateWarning);
    updateWarning();
}

LocalServerSettings LocalServerDialog::settings() const {
    LocalServerSettings s;
    s.host = m_host->currentText().trimmed();
    s.port = m_port->value();
    s.apiKey = m_key->text();
    return s;
}

void LocalServerDialog::updateWarning() {
    const QString host = m_host->currentText().trimmed();
    if (host.isEmpty() || isLoopbackHost(host)) {
        m_warning->setText(tr("Only programs on this computer can connect."));
        return;
    }
    QString text = tr("<b>%1 can be reached from other machines</b>: anyone who reaches it can run the model.")
                       .arg(host.toHtmlEscaped());
    if (m_key->text().isEmpty()) text += tr(" Set an API key to keep them out.");
    m_warning->setText(text);
}

void LocalServerDialog::accept() {
    const QString err = settings().check();
    m_error->setText(err);
    m_error->setVisible(!err.isEmpty());
    if (err.isEmpty()) QDialog::accept();
}

}  // namespace kvs::app
