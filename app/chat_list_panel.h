#pragma once
// The Chats dock: the saved conversations by title, most recent first, a search box that
// filters them by title and content, and New / Rename / Delete. Delete acts on the chat
// that is shown and selected in the list, never on one the search hides: with no visible
// row selected it is disabled.
#include <QWidget>

#include "app/chat_store.h"

class QLineEdit;
class QListWidget;
class QPushButton;

namespace kvs::app {

class ChatListPanel : public QWidget {
    Q_OBJECT
public:
    explicit ChatListPanel(QWidget* parent = nullptr);
    // Lists the conversations that match the search, the current one selected.
    void showConversations(const QList<Conversation>& conversations, const QString& currentId);
    void clearSearch();
    QString idAt(int row) const;  // empty when out of range
    QString selectedId() const;   // the selected visible row's chat; empty when none

Q_SIGNALS:
    void chatSelected(const QString& id);
    void searchChanged();
    void newRequested();
    void renameRequested();
    void deleteRequested(const QString& id);  // the selected visible chat

private:
    QLineEdit* m_search;
    QListWidget* m_list;
    QPushButton* m_delete;
};

}  // namespace kvs::app
