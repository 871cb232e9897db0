#pragma once
// The chats: saved conversations (app/chat_store), one ChatView per conversation, and the
// replies in flight. Send, Stop, Regenerate and Edit of every view come here; the replies
// stream back from app/engine_bridge by request id, each into its own conversation, so
// several chats can generate at once. A submit the bridge refuses (no model, a draft the
// model lacks) is reported in that chat and its text goes back into the prompt box.
// A QObject the window owns; it needs no window (the views live in views(), a stack the
// window makes its central widget).
#include <QHash>
#include <QObject>
#include <QPointer>
#include <QStackedWidget>
#include <QString>

#include "app/chat_store.h"

namespace kvs::ui {
class ChatView;
}

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
    void deleteCurrent();  // stops its reply first
    void send(const QString& convId, const QString& text);
    void stop(const QString& convId);
    // Regenerate (edit false): answer the last message again. Edit: drop the last exchange
    // and put the message back into the prompt box.
    void retry(const QString& convId, bool edit);

Q_SIGNALS:
    void listChanged();  // conversations added, removed, renamed or switched
    // A chat reply was queued: its request id, a label for the engine views, and whether it
    // decodes speculatively.
    void requestSubmitted(qint64 id, const QString& label, bool speculative);
    void statusMessage(const QString& text, int timeoutMs);

private:
    struct Live {  // a conversation's reply in flight
        qint64 requestId = 0;
        QString pending;
    };
    void onToken(qint64 id, const QString& piece);
    void onFinished(qint64 id, const QString& summary);
    void onFailed(qint64 id, const QString& message);
    void replay(const QString& convId, ui::ChatView* v);
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
};

}  // namespace kvs::app
