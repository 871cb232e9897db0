#pragma once
// The Chats dock: the saved conversations by title, most recent first, a search box that
// filters them by title and content, and New / Rename / Delete / Export / Import. Delete
// and Export act on the chat that is shown and selected in the list, never on one the
// search hides: with no visible row selected they are disabled. Export asks for a file
// (Markdown or JSON, by the name's suffix); Import asks for a JSON export; a failed import
// is shown under the buttons until the next one.
#include <QWidget>

#include "app/chat_store.h"

class QLabel;
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
    QString idAt(int row) const;                   // empty when out of range
    QString selectedId() const;                    // the selected visible row's chat; empty when none
    void askExport();                              // file dialog, then exportRequested
    void askImport();                              // file dialog, then importRequested
    void showImportError(const QString& message);  // empty: hides it

Q_SIGNALS:
    void chatSelected(const QString& id);
    void searchChanged();
    void newRequested();
    void renameRequested();
    void deleteRequested(const QString& id);  // the selected visible chat
    // format: "md" or "json" (from the file name's suffix; .json is JSON, anything else Markdown)
    void exportRequested(const QString& id, const QString& path, const QString& format);
    void importRequested(const QString& path);

private:
    QLineEdit* m_search;
    QListWidget* m_list;
    QPushButton* m_delete;
    QPushButton* m_export;
    QLabel* m_error;
};

}  // namespace kvs::app
