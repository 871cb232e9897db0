#pragma once
// The chats: saved conversations (app/chat_store), one ChatView per conversation, and the
// replies in flight. Send, Stop, Regenerate and Edit of every view come here; the replies
// stream back from app/engine_bridge by request id, each into its own conversation, so
// several chats can generate at once. A submit the bridge refuses (no model, a draft the
// model lacks) is reported in that chat and its text goes back into the prompt box.
// A reply is saved while it streams (at most kFlushMs apart, so a kill loses at most that
// much of it); a reply the window closes on, or one a restart finds half-written, stays in
// the chat marked interrupted. Each reply keeps its stats line. Edit removes nothing until
// the edited message is sent; a deleted chat can be brought back (undoDelete).
// A QObject the window owns; it needs no window (the views live in views(), a stack the
// window makes its central widget).
#include <QHash>
#include <QObject>
#include <QPointer>
#include <QStackedWidget>
#include <QString>
#include <QTimer>
#include <functional>
#include <memory>

#include "app/chat_store.h"

namespace kvs::ui {
class ChatView;
}
namespace kvs::remote {
class ConnectionStore;
class RemoteChatClient;
class SecretStore;
}  // namespace kvs::remote

namespace kvs::app {

class EngineBridge;
class SamplingForm;

class ChatController : public QObject {
    Q_OBJECT
public:
    // chatsPath: where conversations are saved.
    ChatController(EngineBridge* bridge, const QString& chatsPath, QObject* parent = nullptr);
    ~ChatController() override;

    // Reads the saved conversations and shows the most recent one (a new empty chat when there
    // are none). False with *error when the file is corrupt: it is left alone, and the list
    // starts empty.
    bool load(QString* error);
    const ChatStore& store() const { return m_store; }
    QString currentId() const { return m_currentId; }
    QString currentTitle() const;
    ui::ChatView* currentView() const { return m_views.value(m_currentId); }
    ui::ChatView* viewFor(const QString& convId);  // made on first use
    // One ChatView per conversation, the current one on top.
    QStackedWidget* views() const { return m_stack; }
    // The current conversation's sampling settings are shown in this form, and read back
    // from it before a send or a switch to another chat.
    void setSettingsForm(SamplingForm* form);
    // Views enable Send only while a model is loaded; `why` is shown when not.
    void setReady(bool ready, const QString& why = {});

    void select(const QString& convId);
    void newChat();  // keeps the current chat's sampling settings
    void renameCurrent(const QString& title);
    void deleteCurrent();
    // Deletes a conversation (its reply, if one streams, ends as interrupted first); it can
    // be brought back with undoDelete.
    void deleteChat(const QString& convId);
    bool canUndoDelete() const { return !m_deleted.isEmpty(); }
    QString lastDeletedTitle() const;
    void undoDelete();  // the most recently deleted chat, at its place, with its history
    // Sends a message. While the chat is being edited it replaces the last exchange; that is
    // removed only once the engine has queued the new message.
    void send(const QString& convId, const QString& text);
    void stop(const QString& convId);
    // Regenerate (edit false): answer the last message again (the old answer is replaced once
    // the new request is queued). Edit: put the last message back into the prompt box; the
    // exchange stays until the edited message is sent (cancelEdit keeps it).
    void retry(const QString& convId, bool edit);
    void cancelEdit(const QString& convId);
    // Export a chat as Markdown (format "md") or JSON ("json"); import JSON back (one exported
    // chat or a whole chats.json), each as a new chat first in the list, the first one shown.
    // A damaged file adds nothing (importFailed says what was wrong, naming the field).
    bool exportChat(const QString& convId, const QString& path, const QString& format, QString* error) const;
    bool importChats(const QString& path, QString* error);
    // The chat's context use as its gauge shows it (0 of 0 without a model).
    ContextUse contextUse(const QString& convId) const;

    // What each chat talks to (app/chat_store's ChatTarget, saved with it). A chat on a remote
    // connection streams through app/remote's RemoteChatClient (worker threads, never the GUI
    // thread); a failure there (server down, slow, 401/429/5xx, a cut stream, Stop) keeps the
    // user's message and the partial reply, says why inline and leaves Regenerate to retry.
    // The connections are read from settingsPath (remote.ini) each time the list is asked
    // for; the keys come from the SecretStore made by `secrets` on first need.
    void setConnections(const QString& settingsPath, std::function<std::shared_ptr<remote::SecretStore>()> secrets);
    std::unique_ptr<remote::ConnectionStore> connections() const;  // a fresh read; null before setConnections
    remote::RemoteChatClient* remoteClient() const { return m_remote; }
    ChatTarget target(const QString& convId) const;
    // Saves the chat's target; for the current chat, emits targetChanged (the window then loads
    // a local model that is not the one running; a remote target is used at once).
    void setTarget(const QString& convId, const ChatTarget& t);
    // Cancels every reply in flight and saves what each has streamed, marked interrupted
    // (the window is closing). Safe to call more than once.
    void interruptAll();
    static constexpr int kFlushMs = 500;  // a streaming reply is saved at most this far apart

Q_SIGNALS:
    void listChanged();  // conversations added, removed, renamed or switched
    // A chat reply was queued: its request id, a label for the engine views, and whether it
    // decodes speculatively.
    void requestSubmitted(qint64 id, const QString& label, bool speculative);
    void statusMessage(const QString& text, int timeoutMs);
    void deletedChanged();  // a chat was deleted or brought back (canUndoDelete may change)
    void importFailed(const QString& message);
    // The chat shown changed, or the shown chat's target did.
    void targetChanged(const QString& convId, const kvs::app::ChatTarget& target);

private:
    struct Live {  // a conversation's reply in flight
        qint64 requestId = 0;
        QString pending;       // all it streamed so far
        bool dirty = false;    // pending has text the store's turn lacks
        int promptTokens = 0;  // the request's prompt; the gauge adds the pieces streamed
        int pieces = 0;
        int contextTokens = 0;  // the engine's context
    };
    struct Deleted {  // a deleted conversation, for undoDelete
        Conversation conversation;
        int index = 0;
    };
    // Submits text after the conversation's first `keep` turns; on success those after are
    // replaced by the message and its (streaming) reply. False when the bridge refused it.
    bool submit(const QString& convId, const QString& text, int keep);
    int lastUserTurn(const QString& convId) const;  // -1 when none
    // "drop-oldest": the first turn (a user turn at or after contextStart, at most keep) from
    // which the conversation up to keep plus `text` fits with room for a reply; contextStart
    // when it fits as it is or nothing would make it fit.
    int fitStart(const Conversation& c, int keep, const QString& text) const;
    void updateGauge(const QString& convId);
    void setContextPolicy(const QString& convId, const QString& policy);
    void onToken(qint64 id, const QString& piece, int green = -1);  // green: EngineBridge::tokenText
    void onFinished(qint64 id, const QString& summary);
    void onFailed(qint64 id, const QString& message);
    void onRemoteFailed(qint64 id, const QString& message);  // id: the client's, negated
    // Starts a remote reply for c's target: its id negated (engine ids are positive), or 0
    // with *error naming what is missing.
    qint64 submitRemote(const Conversation& c, const QList<ChatTurn>& turns, QString* error);
    bool readyFor(const QString& convId, QString* why) const;
    // Ends a conversation's live reply as interrupted (kept, cancelled in the engine).
    void interrupt(const QString& convId);
    SavedTurn* liveTurn(const QString& convId);  // the store's turn of the reply in flight
    void flush();  // writes the streamed text of every live reply into the store and saves
    void replay(const QString& convId, ui::ChatView* v);
    static QString footer(const SavedTurn& t);
    void loadForm();
    void storeForm();
    void save();

    EngineBridge* m_bridge;
    ChatStore m_store;
    QString m_currentId;
    QPointer<QStackedWidget> m_stack;
    SamplingForm* m_form = nullptr;
    bool m_ready = false;
    QString m_notReadyWhy;
    QHash<QString, ui::ChatView*> m_views;  // conversation id -> its view
    QHash<QString, Live> m_live;            // conversation id -> reply in flight
    QHash<qint64, QString> m_requestConv;   // request id -> conversation id (while in flight)
    QHash<QString, QString> m_editing;      // conversation id -> the prompt box's text before Edit
    QList<Deleted> m_deleted;               // most recent last
    QTimer m_flushTimer;                    // single shot: kFlushMs after the first unsaved token
    remote::RemoteChatClient* m_remote = nullptr;  // replies of chats on remote connections
    QString m_connectionsPath;
    std::function<std::shared_ptr<remote::SecretStore>()> m_makeSecrets;
    mutable std::shared_ptr<remote::SecretStore> m_secrets;
};

}  // namespace kvs::app
