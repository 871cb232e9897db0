#include "app/chat_controller.h"

#include <QStackedWidget>

#include "app/engine_bridge.h"
#include "app/sampling_form.h"
#include "ui/chat_view.h"

namespace kvs::app {

ChatController::ChatController(EngineBridge* bridge, const QString& chatsPath, QObject* parent)
    : QObject(parent), m_bridge(bridge), m_store(chatsPath), m_stack(new QStackedWidget) {
    // Queued from the bridge's threads, by request id.
    connect(bridge, &EngineBridge::tokenText, this, &ChatController::onToken);
    connect(bridge, &EngineBridge::requestFinished, this, &ChatController::onFinished);
    connect(bridge, &EngineBridge::requestFailed, this, &ChatController::onFailed);
}

ChatController::~ChatController() {
    if (m_stack && !m_stack->parent()) delete m_stack;  // never given to a window
}

bool ChatController::load(QString* error) {
    const bool ok = m_store.load(error);
    if (m_store.conversations().isEmpty()) m_store.add(tr("New chat"));
    select(m_store.conversations().first().id);
    Q_EMIT listChanged();
    return ok;
}

QString ChatController::currentTitle() const {
    const int i = m_store.indexOf(m_currentId);
    return i >= 0 ? m_store.conversations()[i].title : QString();
}

ui::ChatView* ChatController::viewFor(const QString& convId) {
    if (auto* v = m_views.value(convId)) return v;
    auto* v = new ui::ChatView(m_stack);
    m_views.insert(convId, v);
    m_stack->addWidget(v);
    v->setReady(m_ready, m_notReadyWhy);
    replay(convId, v);
    connect(v, &ui::ChatView::sendRequested, this, [this, convId](const QString& text) { send(convId, text); });
    connect(v, &ui::ChatView::stopRequested, this, [this, convId] { stop(convId); });
    connect(v, &ui::ChatView::regenerateRequested, this, [this, convId] { retry(convId, false); });
    connect(v, &ui::ChatView::editRequested, this, [this, convId] { retry(convId, true); });
    const int i = m_store.indexOf(convId);
    v->setCanRetry(i >= 0 && !m_store.conversations()[i].turns.isEmpty());
    return v;
}

void ChatController::setSettingsForm(SamplingForm* form) {
    m_form = form;
    loadForm();
}

void ChatController::setReady(bool ready, const QString& why) {
    m_ready = ready;
    m_notReadyWhy = why;
    for (auto* v : std::as_const(m_views)) v->setReady(ready, why);
}

void ChatController::select(const QString& convId) {
    if (m_store.indexOf(convId) < 0) return;
    if (convId == m_currentId && m_views.contains(convId)) return;
    if (!m_currentId.isEmpty()) storeForm();
    m_currentId = convId;
    m_stack->setCurrentWidget(viewFor(convId));
    loadForm();
}

void ChatController::newChat() {
    storeForm();
    const int i = m_store.indexOf(m_currentId);
    Conversation& c = m_store.add(tr("New chat"));
    if (i >= 0) c.settings = m_store.conversations()[i + 1].settings;  // keep the user's sampling choices
    select(c.id);
    Q_EMIT listChanged();
    save();
}

void ChatController::renameCurrent(const QString& title) {
    const int i = m_store.indexOf(m_currentId);
    if (i < 0) return;
    m_store.conversations()[i].title = title;
    Q_EMIT listChanged();
    save();
}

void ChatController::deleteCurrent() {
    const int i = m_store.indexOf(m_currentId);
    if (i < 0) return;
    stop(m_currentId);
    if (auto* v = m_views.take(m_currentId)) v->deleteLater();
    m_store.conversations().removeAt(i);
    m_currentId.clear();
    if (m_store.conversations().isEmpty()) m_store.add(tr("New chat"));
    select(m_store.conversations().first().id);
    Q_EMIT listChanged();
    save();
}

void ChatController::send(const QString& convId, const QString& text) {
    const int i = m_store.indexOf(convId);
    if (i < 0 || m_live.contains(convId)) return;
    if (convId == m_currentId) storeForm();
    Conversation& c = m_store.conversations()[i];
    QList<ChatTurn> turns = c.turns;
    turns.append({"user", text});
    auto* v = viewFor(convId);
    const SubmitResult sub = m_bridge->submitChat(turns, c.settings);
    if (!sub.ok()) {  // not queued: nothing is saved, the text goes back to the user
        v->appendNotice(tr("Not sent: %1. Your message is back in the prompt box.").arg(sub.error));
        if (v->promptText().trimmed().isEmpty()) v->setPromptText(text);
        return;
    }
    if (c.turns.isEmpty() && (c.title.isEmpty() || c.title == tr("New chat"))) {
        c.title = text.simplified().left(40);  // the first message names the chat
        Q_EMIT listChanged();
    }
    c.turns = turns;
    c.updated = QDateTime::currentDateTimeUtc();
    save();
    v->appendUserMessage(text);
    v->beginAssistantMessage();
    v->setGenerating(true);
    m_live.insert(convId, Live{sub.id, {}});
    m_requestConv.insert(sub.id, convId);
    Q_EMIT requestSubmitted(sub.id, c.title.left(24), !c.settings.speculative.isEmpty());
}

void ChatController::stop(const QString& convId) {
    const auto it = m_live.constFind(convId);
    if (it != m_live.constEnd() && it->requestId > 0) m_bridge->cancel(it->requestId);
}

void ChatController::retry(const QString& convId, bool edit) {
    const int i = m_store.indexOf(convId);
    if (i < 0 || m_live.contains(convId)) return;
    QList<ChatTurn>& turns = m_store.conversations()[i].turns;
    if (!turns.isEmpty() && turns.last().role == "assistant") turns.removeLast();
    if (turns.isEmpty() || turns.last().role != "user") return;
    const QString text = turns.last().content;
    turns.removeLast();
    auto* v = viewFor(convId);
    replay(convId, v);
    save();
    if (edit) {
        v->setPromptText(text);
        v->setCanRetry(!turns.isEmpty());
    } else {
        send(convId, text);
    }
}

void ChatController::onToken(qint64 id, const QString& piece) {
    const QString conv = m_requestConv.value(id);
    if (conv.isEmpty()) return;
    m_live[conv].pending += piece;
    viewFor(conv)->appendAssistantText(piece);
}

void ChatController::onFinished(qint64 id, const QString& summary) {
    const QString conv = m_requestConv.take(id);
    if (conv.isEmpty()) return;
    const Live live = m_live.take(conv);
    const int i = m_store.indexOf(conv);
    if (i < 0) return;  // deleted while it generated
    Conversation& c = m_store.conversations()[i];
    c.turns.append({"assistant", live.pending});
    c.updated = QDateTime::currentDateTimeUtc();
    save();
    auto* v = viewFor(conv);
    v->endAssistantMessage(summary);
    v->setGenerating(false);
    v->setCanRetry(true);
    Q_EMIT statusMessage(summary, 8000);
}

void ChatController::onFailed(qint64 id, const QString& message) {
    const QString conv = m_requestConv.take(id);
    if (conv.isEmpty()) return;
    m_live.remove(conv);
    const int i = m_store.indexOf(conv);
    if (i < 0) return;
    auto* v = viewFor(conv);
    v->appendNotice(tr("Generation failed: %1").arg(message));
    if (!m_store.conversations()[i].turns.isEmpty())
        m_store.conversations()[i].turns.removeLast();  // the unanswered turn stays visible, not in context
    v->setGenerating(false);
}

// Shows the saved conversation in its view (after a load, a regenerate or an edit).
void ChatController::replay(const QString& convId, ui::ChatView* v) {
    v->clearTranscript();
    const int i = m_store.indexOf(convId);
    if (i < 0) return;
    for (const ChatTurn& t : m_store.conversations()[i].turns) {
        if (t.role == "user") {
            v->appendUserMessage(t.content);
        } else if (t.role == "assistant") {
            v->beginAssistantMessage();
            v->appendAssistantText(t.content);
            v->endAssistantMessage({});
        }
    }
}

void ChatController::loadForm() {
    if (!m_form) return;
    const int i = m_store.indexOf(m_currentId);
    m_form->load(i >= 0 ? m_store.conversations()[i].settings : ChatSettings{});
}

void ChatController::storeForm() {
    const int i = m_store.indexOf(m_currentId);
    if (m_form && i >= 0) m_form->store(&m_store.conversations()[i].settings);
}

void ChatController::save() {
    QString err;
    if (!m_store.save(&err)) Q_EMIT statusMessage(tr("Chat history not saved: %1").arg(err), 15000);
}

}  // namespace kvs::app
