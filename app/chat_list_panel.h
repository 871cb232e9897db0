#pragma once
// The Chats dock: the saved conversations by title, most recent first, a search box that
// filters them by title and content, and New / Rename / Delete.
#include <QWidget>

#include "app/chat_store.h"

class QLineEdit;
class QListWidget;

namespace kvs::app {

class ChatListPanel : public QWidget {
    Q_OBJECT
public:
    explicit ChatListPanel(QWidget* parent = nullptr);
    // Lists the conversations that match the search, the current one selected.
    void showConversations(const QList<Conversation>& conversations, const QString& currentId);
    void clearSearch();
    QString idAt(int row) const;  // empty when out of range

Q_SIGNALS:
    void chatSelected(const QString& id);
    void searchChanged();
    void newRequested();
    void renameRequested();
    void deleteRequested();

private:
    QLineEdit* m_search;
    QListWidget* m_list;
};

}  // namespace kvs::app
