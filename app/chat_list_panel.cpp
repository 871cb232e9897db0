#include "app/chat_list_panel.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QRegularExpression>
#include <QVBoxLayout>

namespace kvs::app {

ChatListPanel::ChatListPanel(QWidget* parent) : QWidget(parent) {
    auto* cl = new QVBoxLayout(this);
    m_search = new QLineEdit(this);
    m_search->setObjectName("chatSearch");
    m_search->setPlaceholderText(tr("Search chats"));
    m_search->setClearButtonEnabled(true);
    m_list = new QListWidget(this);
    m_list->setObjectName("chatList");
    auto* buttons = new QHBoxLayout;
    auto* newButton = new QPushButton(tr("New"), this);
    newButton->setObjectName("newChatButton");
    auto* renameButton = new QPushButton(tr("Rename"), this);
    m_delete = new QPushButton(tr("Delete"), this);
    m_delete->setObjectName("deleteChatButton");
    m_delete->setEnabled(false);
    buttons->addWidget(newButton);
    buttons->addWidget(renameButton);
    buttons->addWidget(m_delete);
    auto* files = new QHBoxLayout;
    m_export = new QPushButton(tr("Export…"), this);
    m_export->setObjectName("exportChatButton");
    m_export->setToolTip(tr("Save the selected chat as Markdown (to read) or JSON (to import again)"));
    m_export->setEnabled(false);
    auto* importButton = new QPushButton(tr("Import…"), this);
    importButton->setObjectName("importChatButton");
    importButton->setToolTip(tr("Add a chat exported as JSON"));
    files->addWidget(m_export);
    files->addWidget(importButton);
    m_error = new QLabel(this);
    m_error->setObjectName("chatImportError");
    m_error->setWordWrap(true);
    m_error->setStyleSheet("color: #c03030");
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->hide();
    cl->addWidget(m_search);
    cl->addWidget(m_list, 1);
    cl->addLayout(buttons);
    cl->addLayout(files);
    cl->addWidget(m_error);
    connect(m_export, &QPushButton::clicked, this, &ChatListPanel::askExport);
    connect(importButton, &QPushButton::clicked, this, &ChatListPanel::askImport);
    connect(newButton, &QPushButton::clicked, this, &ChatListPanel::newRequested);
    connect(renameButton, &QPushButton::clicked, this, &ChatListPanel::renameRequested);
    connect(m_delete, &QPushButton::clicked, this, [this] {
        const QString id = selectedId();
        if (!id.isEmpty()) Q_EMIT deleteRequested(id);
    });
    connect(m_list, &QListWidget::itemSelectionChanged, this, [this] {
        m_delete->setEnabled(!selectedId().isEmpty());
        m_export->setEnabled(!selectedId().isEmpty());
    });
    connect(m_search, &QLineEdit::textChanged, this, &ChatListPanel::searchChanged);
    connect(m_list, &QListWidget::currentRowChanged, this, [this](int row) {
        const QString id = idAt(row);
        if (!id.isEmpty()) Q_EMIT chatSelected(id);
    });
}

void ChatListPanel::showConversations(const QList<Conversation>& conversations, const QString& currentId) {
    const QString filter = m_search->text().trimmed();
    QSignalBlocker block(m_list);
    m_list->clear();
    for (const Conversation& c : conversations) {
        bool match = filter.isEmpty() || c.title.contains(filter, Qt::CaseInsensitive);
        for (int t = 0; !match && t < c.turns.size(); ++t)
            match = c.turns[t].content.contains(filter, Qt::CaseInsensitive);
        if (!match) continue;
        auto* item = new QListWidgetItem(c.title.isEmpty() ? tr("(untitled)") : c.title, m_list);
        item->setData(Qt::UserRole, c.id);
        item->setToolTip(tr("%1 messages").arg(c.turns.size()));
        if (c.id == currentId) m_list->setCurrentItem(item);
    }
    m_delete->setEnabled(!selectedId().isEmpty());
    m_export->setEnabled(!selectedId().isEmpty());
}

void ChatListPanel::askExport() {
    const QString id = selectedId();
    if (id.isEmpty()) return;
    QString title = m_list->selectedItems().value(0)->text().simplified();
    title.replace(QRegularExpression("[^\\w\\- ]"), "_");
    QString filter;
    const QString path = QFileDialog::getSaveFileName(this, tr("Export chat"), title + ".md",
                                                      tr("Markdown (*.md);;JSON, to import again (*.json)"), &filter);
    if (path.isEmpty()) return;
    const bool json = path.endsWith(".json", Qt::CaseInsensitive) || (filter.contains("json") && !path.endsWith(".md"));
    Q_EMIT exportRequested(id, path, json ? "json" : "md");
}

void ChatListPanel::askImport() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Import chat"), {}, tr("KV Scope chat (*.json)"));
    if (!path.isEmpty()) Q_EMIT importRequested(path);
}

void ChatListPanel::showImportError(const QString& message) {
    m_error->setText(message.isEmpty() ? QString() : tr("Import failed: %1").arg(message));
    m_error->setVisible(!message.isEmpty());
}

QString ChatListPanel::selectedId() const {
    const QList<QListWidgetItem*> sel = m_list->selectedItems();
    return sel.size() == 1 && !sel[0]->isHidden() ? sel[0]->data(Qt::UserRole).toString() : QString();
}

void ChatListPanel::clearSearch() { m_search->clear(); }

QString ChatListPanel::idAt(int row) const {
    if (row < 0 || row >= m_list->count()) return {};
    return m_list->item(row)->data(Qt::UserRole).toString();
}

}  // namespace kvs::app
