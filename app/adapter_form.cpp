#include "app/adapter_form.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QRegularExpression>
#include <QVBoxLayout>

namespace kvs::app {

namespace {
constexpr int kPathRole = Qt::UserRole + 1;
}

AdapterForm::AdapterForm(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);  // no taller than its row (the form stretches)
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    m_choice = new QComboBox(this);
    m_choice->setObjectName("adapterChoice");
    m_choice->setToolTip(tr("The LoRA adapter this chat's replies run with, on top of the loaded model"));
    m_load = new QPushButton(tr("Load…"), this);
    m_load->setObjectName("adapterLoad");
    auto* menu = new QMenu(m_load);
    menu->addAction(tr("PEFT folder…"), this, [this] { onLoadClicked(false); });
    menu->addAction(tr("GGUF adapter file…"), this, [this] { onLoadClicked(true); });
    m_load->setMenu(menu);
    m_unload = new QPushButton(tr("Unload"), this);
    m_unload->setObjectName("adapterUnload");
    m_unload->setToolTip(tr("Remove the chosen adapter from the model (replies running with it finish)"));
    row->addWidget(m_choice, 1);
    row->addWidget(m_load);
    row->addWidget(m_unload);
    v->addLayout(row);
    m_error = new QLabel(this);
    m_error->setObjectName("adapterError");
    m_error->setWordWrap(true);
    m_error->setStyleSheet("color: #c0392b");
    m_error->hide();
    v->addWidget(m_error);
    connect(m_choice, &QComboBox::currentIndexChanged, this, [this] { updateButtons(); });
    connect(m_unload, &QPushButton::clicked, this, &AdapterForm::onUnloadClicked);
    fill({}, {});
}

void AdapterForm::setBridge(EngineBridge* bridge) {
    m_bridge = bridge;
    refresh();
}

void AdapterForm::fill(const QString& chosen, const QString& chosenPath) {
    QSignalBlocker block(m_choice);
    m_choice->clear();
    m_choice->addItem(tr("none (base model)"), QString());
    bool found = chosen.isEmpty();
    if (m_bridge)
        for (const AdapterEntry& a : m_bridge->adapters()) {
            m_choice->addItem(a.name, a.name);  // the name alone: the dock is narrow
            m_choice->setItemData(m_choice->count() - 1, a.path, kPathRole);
            m_choice->setItemData(m_choice->count() - 1, tr("%1, rank %2 · %3").arg(a.format).arg(a.rank).arg(a.path),
                                  Qt::ToolTipRole);
            if (a.name == chosen) {
                m_choice->setCurrentIndex(m_choice->count() - 1);
                found = true;
            }
        }
    if (!found) {  // a saved chat's adapter the session does not have now: it loads on send
        m_choice->addItem(tr("%1  (loads on send)").arg(chosen), chosen);
        m_choice->setItemData(m_choice->count() - 1, chosenPath, kPathRole);
        m_choice->setItemData(m_choice->count() - 1, chosenPath, Qt::ToolTipRole);
        m_choice->setCurrentIndex(m_choice->count() - 1);
    }
    updateButtons();
}

void AdapterForm::load(const ChatSettings& s) {
    m_error->hide();
    fill(s.adapter, s.adapterPath);
}

void AdapterForm::store(ChatSettings* s) const {
    s->adapter = m_choice->currentData().toString();
    s->adapterPath = s->adapter.isEmpty() ? QString() : m_choice->currentData(kPathRole).toString();
}

void AdapterForm::refresh() {
    fill(m_choice->currentData().toString(), m_choice->currentData(kPathRole).toString());
}

QString AdapterForm::nameFor(const QString& path) {
    QString base = QFileInfo(path).fileName();
    if (base.isEmpty()) base = QFileInfo(QFileInfo(path).path()).fileName();  // "dir/" ends in a slash
    if (base.endsWith(".gguf", Qt::CaseInsensitive)) base.chop(5);
    static const QRegularExpression bad("[^A-Za-z0-9._:/-]");
    base.replace(bad, "-");
    base.truncate(128);
    return base.isEmpty() ? QStringLiteral("adapter") : base;
}

QString AdapterForm::loadAdapter(const QString& name, const QString& path) {
    const QString err = m_bridge ? m_bridge->loadAdapter(name, path) : tr("no model is loaded");
    if (!err.isEmpty()) {
        m_error->setText(err);
        m_error->show();
        return err;
    }
    m_error->hide();
    fill(name, path);
    return {};
}

QString AdapterForm::errorText() const { return m_error->isVisible() ? m_error->text() : QString(); }

void AdapterForm::onLoadClicked(bool gguf) {
    const QString path =
        gguf ? QFileDialog::getOpenFileName(this, tr("Load a LoRA adapter (GGUF)"), {}, tr("GGUF adapters (*.gguf)"))
             : QFileDialog::getExistingDirectory(this, tr("Load a LoRA adapter (PEFT folder with adapter_config.json)"));
    if (path.isEmpty()) return;
    QString name = nameFor(path);
    QStringList taken;
    if (m_bridge)
        for (const AdapterEntry& a : m_bridge->adapters()) taken << a.name;
    for (int i = 2; taken.contains(name); ++i) name = nameFor(path) + "-" + QString::number(i);
    loadAdapter(name, path);
}

void AdapterForm::onUnloadClicked() {
    const QString name = m_choice->currentData().toString();
    if (name.isEmpty() || !m_bridge) return;
    m_bridge->unloadAdapter(name);
    m_error->hide();
    fill({}, {});
}

void AdapterForm::updateButtons() {
    const QString name = m_choice->currentData().toString();
    bool loaded = false;
    if (m_bridge && !name.isEmpty())
        for (const AdapterEntry& a : m_bridge->adapters()) loaded |= a.name == name;
    m_unload->setEnabled(loaded);
}

}  // namespace kvs::app
