#pragma once
// Saved conversations: a JSON file in the user's data dir
// (${XDG_DATA_HOME:-~/.local/share}/kvscope/chats.json), written atomically (QSaveFile:
// a temporary file renamed over the old one), so a crash or kill mid-write leaves the
// previous version intact. A reply is saved while it streams (app/chat_controller), so a
// turn also says whether it is whole, and a reply keeps its stats line.
#include <QDateTime>
#include <QJsonObject>
#include <QList>
#include <QString>

#include "app/engine_bridge.h"

namespace kvs::app {

// A turn as saved: the message, and for a reply its stats line and whether it is whole.
// Written as {"role", "content"} plus "summary" and "state" only when they are set, so
// files from before these fields load unchanged.
struct SavedTurn : ChatTurn {
    enum class State {
        Complete,     // finished (or stopped: its summary says "cancelled")
        Streaming,    // saved part-way while it streams; found on load: the program died mid-reply
        Interrupted,  // the window closed (or the program died) before it finished
    };
    QString summary;  // the reply's stats line ("8 tokens · 127 tok/s · TTFT … · seed N")
    State state = State::Complete;
};

// What a chat talks to. Empty kind: whatever model the window has loaded (chats saved before
// targets existed). "local": a model file or folder (model); "remote": a saved remote
// connection (connection, its id in app/remote's ConnectionStore) and the model to ask it for
// (model; empty: the connection's own). Saved as "target" only when kind is set.
struct ChatTarget {
    QString kind;  // "", "local", "remote"
    QString model;
    QString connection;
    bool isRemote() const { return kind == QLatin1String("remote"); }
    bool operator==(const ChatTarget& o) const {
        return kind == o.kind && model == o.model && connection == o.connection;
    }
};

struct Conversation {
    QString id;  // stable, unique (a UUID)
    QString title;
    QDateTime updated;
    QList<SavedTurn> turns;
    ChatSettings settings;
    // The first turn the model sees: turns before it were dropped from its context to fit
    // (settings.contextPolicy "drop-oldest"); they stay in the chat. Saved as "context_start".
    int contextStart = 0;
    ChatTarget target;
    // The messages the model sees: turns[contextStart, n) (n < 0: to the end), without stats.
    QList<ChatTurn> messages(int n = -1) const;
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
    int indexOf(const QString& id) const;     // -1 when absent
    // The JSON of one conversation and back (the file holds an array of them).
    static QJsonObject toJson(const Conversation& c);
    static Conversation fromJson(const QJsonObject& o);

private:
    QString m_path;
    QList<Conversation> m_conversations;  // most recent first
};

}  // namespace kvs::app
