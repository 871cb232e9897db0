#pragma once
// Saved conversations: a JSON file in the user's data dir
// (${XDG_DATA_HOME:-~/.local/share}/kvscope/chats.json), written atomically (QSaveFile:
// a temporary file renamed over the old one), so a crash or kill mid-write leaves the
// previous version intact.
#include <QDateTime>
#include <QList>
#include <QString>

#include "app/engine_bridge.h"

namespace kvs::app {

struct Conversation {
    QString id;          // stable, unique (a UUID)
    QString title;
    QDateTime updated;
    QList<ChatTurn> turns;
    ChatSettings settings;
};

class ChatStore {
public:
    explicit ChatStore(QString path = defaultPath());
    static QString defaultPath();

    // A missing file is an empty store; a corrupt one is an error (and is left alone).
    bool load(QString* error);
    bool save(QString* error) const;

    const QString& path() const { return m_path; }
    QList<Conversation>& conversations() { return m_conversations; }
    const QList<Conversation>& conversations() const { return m_conversations; }
    Conversation& add(const QString& title);  // a new empty conversation, first in the list
    int indexOf(const QString& id) const;      // -1 when absent

private:
    QString m_path;
    QList<Conversation> m_conversations;  // most recent first
};

}  // namespace kvs::app
