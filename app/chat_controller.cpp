#include "app/chat_controller.h"

#include <QFile>
#include <QFileInfo>
#include <QLocale>
#include <QSaveFile>
#include <QStackedWidget>
#include <QUuid>

#include "app/chat_export.h"
#include "app/engine_bridge.h"
#include "app/remote/connection_store.h"
#include "app/remote/remote_chat_client.h"
#include "app/remote/secret_store.h"
#include "app/sampling_form.h"
#include "ui/chat_view.h"
#include "ui/context_gauge.h"

namespace kvs::app {

ChatController::ChatController(EngineBridge* bridge, const QString& chatsPath, QObject* parent)
    : QObject(parent), m_bridge(bridge), m_store(chatsPath), m_stack(new QStackedWidget) {
    // Queued from the bridge's threads, by request id.
    connect(bridge, &EngineBridge::tokenText, this, &ChatController::onToken);
    connect(bridge, &EngineBridge::requestFinished, this, &ChatController::onFinished);
    connect(bridge, &EngineBridge::requestFailed, this, &ChatController::onFailed);
    m_flushTimer.setSingleShot(true);
    m_flushTimer.setInterval(kFlushMs);
    connect(&m_flushTimer, &QTimer::timeout, this, &ChatController::flush);
    // Chats on remote connections: the client's ids, negated, share the request-id map.
    m_remote = new remote::RemoteChatClient(this);
    connect(m_remote, &remote::RemoteChatClient::token, this, [this](qint64 id, const QString& p) { onToken(-id, p); });
    connect(m_remote, &remote::RemoteChatClient::finished, this,
            [this](qint64 id, const QString& summary) { onFinished(-id, summary); });
    connect(m_remote, &remote::RemoteChatClient::failed, this,
            [this](qint64 id, const QString& message) { onRemoteFailed(-id, message); });
}

ChatController::~ChatController() {
    // The window calls interruptAll while the bridge still runs; without one (the bridge may
    // be gone by now), what streamed is still saved, marked interrupted.
    if (!m_live.isEmpty()) {
        m_bridge = nullptr;
        interruptAll();
    }
    if (m_stack && !m_stack->parent()) delete m_stack;  // never given to a window
}

bool ChatController::load(QString* error) {
    const bool ok = m_store.load(error);
    // A reply saved while it streamed: the program ended before it finished.
    bool found = false;
    for (Conversation& c : m_store.conversations())
        for (SavedTurn& t : c.turns)
            if (t.state == SavedTurn::State::Streaming) t.state = SavedTurn::State::Interrupted, found = true;
    if (m_store.conversations().isEmpty()) m_store.add(tr("New chat"));
    select(m_store.conversations().first().id);
    Q_EMIT listChanged();
    if (ok && found) save();
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
    QString why;
    v->setReady(readyFor(convId, &why), why);
    replay(convId, v);
    connect(v, &ui::ChatView::sendRequested, this, [this, convId](const QString& text) { send(convId, text); });
    connect(v, &ui::ChatView::stopRequested, this, [this, convId] { stop(convId); });
    connect(v, &ui::ChatView::regenerateRequested, this, [this, convId] { retry(convId, false); });
    connect(v, &ui::ChatView::editRequested, this, [this, convId] { retry(convId, true); });
    connect(v, &ui::ChatView::editCancelRequested, this, [this, convId] { cancelEdit(convId); });
    connect(v, &ui::ChatView::showEarlierRequested, this, [this, convId] {
        if (auto* view = m_views.value(convId)) replay(convId, view);
    });
    connect(v, &ui::ChatView::contextPolicyChanged, this,
            [this, convId](const QString& policy) { setContextPolicy(convId, policy); });
    v->setCanRetry(lastUserTurn(convId) >= 0);
    updateGauge(convId);
    return v;
}

void ChatController::setSettingsForm(SamplingForm* form) {
    m_form = form;
    loadForm();
}

void ChatController::setReady(bool ready, const QString& why) {
    m_ready = ready;
    m_notReadyWhy = why;
    for (auto it = m_views.cbegin(); it != m_views.cend(); ++it) {
        QString reason;
        it.value()->setReady(readyFor(it.key(), &reason), reason);
    }
    for (auto it = m_views.cbegin(); it != m_views.cend(); ++it) updateGauge(it.key());
}

void ChatController::select(const QString& convId) {
    if (m_store.indexOf(convId) < 0) return;
    if (convId == m_currentId && m_views.contains(convId)) return;
    if (!m_currentId.isEmpty()) storeForm();
    m_currentId = convId;
    m_stack->setCurrentWidget(viewFor(convId));
    loadForm();
    Q_EMIT targetChanged(convId, target(convId));
}

void ChatController::newChat() {
    storeForm();
    const int i = m_store.indexOf(m_currentId);
    Conversation& c = m_store.add(tr("New chat"));
    if (i >= 0) {  // keep the user's sampling choices and what the chat talks to
        c.settings = m_store.conversations()[i + 1].settings;
        c.target = m_store.conversations()[i + 1].target;
    }
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

void ChatController::deleteCurrent() { deleteChat(m_currentId); }

void ChatController::deleteChat(const QString& convId) {
    if (m_store.indexOf(convId) < 0) return;
    interrupt(convId);  // what it streamed stays in the copy that undo brings back
    const int i = m_store.indexOf(convId);
    if (convId == m_currentId) storeForm();
    m_deleted.append({m_store.conversations().takeAt(i), i});
    m_editing.remove(convId);
    if (auto* v = m_views.take(convId)) v->deleteLater();
    if (convId == m_currentId) {
        m_currentId.clear();
        if (m_store.conversations().isEmpty()) m_store.add(tr("New chat"));
        select(m_store.conversations()[std::min(i, int(m_store.conversations().size()) - 1)].id);
    }
    Q_EMIT listChanged();
    Q_EMIT deletedChanged();
    save();
}

QString ChatController::lastDeletedTitle() const {
    return m_deleted.isEmpty() ? QString() : m_deleted.last().conversation.title;
}

void ChatController::undoDelete() {
    if (m_deleted.isEmpty()) return;
    const Deleted d = m_deleted.takeLast();
    // An untouched "New chat" made only because the list went empty gives way to it.
    QList<Conversation>& list = m_store.conversations();
    if (list.size() == 1 && list[0].turns.isEmpty() && list[0].id == m_currentId && !m_live.contains(list[0].id)) {
        if (auto* v = m_views.take(list[0].id)) v->deleteLater();
        list.clear();
        m_currentId.clear();
    }
    list.insert(std::clamp(d.index, 0, int(list.size())), d.conversation);
    select(d.conversation.id);
    Q_EMIT listChanged();
    Q_EMIT deletedChanged();
    save();
}

int ChatController::lastUserTurn(const QString& convId) const {
    const int i = m_store.indexOf(convId);
    if (i < 0) return -1;
    const QList<SavedTurn>& turns = m_store.conversations()[i].turns;
    for (int t = int(turns.size()) - 1; t >= 0; --t)
        if (turns[t].role == "user") return t;
    return -1;
}

void ChatController::send(const QString& convId, const QString& text) {
    const int i = m_store.indexOf(convId);
    if (i < 0 || m_live.contains(convId)) return;
    const int keep = m_editing.contains(convId) ? lastUserTurn(convId) : -1;
    submit(convId, text, keep >= 0 ? keep : int(m_store.conversations()[i].turns.size()));
}

bool ChatController::submit(const QString& convId, const QString& text, int keep) {
    const int i = m_store.indexOf(convId);
    if (i < 0 || m_live.contains(convId)) return false;
    if (convId == m_currentId) storeForm();
    Conversation& c = m_store.conversations()[i];
    // A remote server counts its own context: the local tokenizer cannot fit turns for it.
    const int start = c.settings.contextPolicy == "drop-oldest" && !c.target.isRemote() ? fitStart(c, keep, text)
                                                                                       : c.contextStart;
    Conversation seen = c;
    seen.contextStart = start;
    QList<ChatTurn> turns = seen.messages(keep);
    turns.append({"user", text});
    auto* v = viewFor(convId);
    SubmitResult sub;
    if (c.target.isRemote()) {
        sub.id = submitRemote(c, turns, &sub.error);
        if (sub.id == 0 && sub.error.isEmpty()) sub.error = tr("the remote request could not start");
    } else {
        sub = m_bridge->submitChat(turns, c.settings);
    }
    if (sub.id == 0) {  // not queued: nothing is saved or removed, the text goes back to the user
        QString notice = tr("Not sent: %1. Your message is back in the prompt box.").arg(sub.error);
        if (sub.tooLong() && c.settings.contextPolicy != "drop-oldest")
            notice += tr(" To go on in this chat, choose “When full: drop the oldest turns” under the transcript.");
        v->appendNotice(notice);
        if (v->promptText().trimmed().isEmpty()) v->setPromptText(text);
        return false;
    }
    if (start > std::min(c.contextStart, keep)) {
        const int dropped = start - c.contextStart;
        const QString size = QLocale().toString(sub.contextTokens);
        v->appendNotice(dropped == 1 ? tr("The oldest turn no longer fits the context of %1 tokens: the model does "
                                          "not see it any more (it stays in this chat).")
                                           .arg(size)
                                     : tr("The %1 oldest turns no longer fit the context of %2 tokens: the model does "
                                          "not see them any more (they stay in this chat).")
                                           .arg(dropped)
                                           .arg(size));
    }
    c.contextStart = std::min(start, keep);
    if (keep == 0 && (c.title.isEmpty() || c.title == tr("New chat"))) {
        c.title = text.simplified().left(40);  // the first message names the chat
        Q_EMIT listChanged();
    }
    const bool replaced = keep < c.turns.size();
    c.turns = c.turns.mid(0, keep);
    SavedTurn user;
    user.role = "user";
    user.content = text;
    SavedTurn reply;  // saved as it streams, so a kill loses at most kFlushMs of it
    reply.role = "assistant";
    reply.state = SavedTurn::State::Streaming;
    c.turns << user << reply;
    c.updated = QDateTime::currentDateTimeUtc();
    save();
    if (m_editing.contains(convId)) {
        m_editing.remove(convId);
        v->setEditing(false);
    }
    // Live before the replay, which then draws the new reply as the one streaming (not as a
    // saved reply cut off).
    m_live.insert(convId, Live{sub.id, {}, false, sub.promptTokens, 0, sub.contextTokens});
    if (replaced) {
        replay(convId, v);  // an edit or a regenerate: the old exchange goes now
    } else {
        v->appendUserMessage(text);
        v->beginAssistantMessage();
    }
    v->setGenerating(true);
    updateGauge(convId);
    m_requestConv.insert(sub.id, convId);
    if (sub.id > 0) Q_EMIT requestSubmitted(sub.id, c.title.left(24), !c.settings.speculative.isEmpty());
    return true;
}

void ChatController::stop(const QString& convId) {
    const auto it = m_live.constFind(convId);
    if (it == m_live.constEnd()) return;
    if (it->requestId > 0) m_bridge->cancel(it->requestId);
    else if (it->requestId < 0)
        m_remote->cancel(-it->requestId);  // closes the stream; the server cancels; onRemoteFailed keeps the text
}

void ChatController::retry(const QString& convId, bool edit) {
    if (m_store.indexOf(convId) < 0 || m_live.contains(convId) || m_editing.contains(convId)) return;
    const int u = lastUserTurn(convId);
    if (u < 0) return;
    const QString text = m_store.conversations()[m_store.indexOf(convId)].turns[u].content;
    auto* v = viewFor(convId);
    if (!edit) {
        submit(convId, text, u);  // the old answer is replaced once the new one is queued
        return;
    }
    // Nothing is removed here: the exchange stays (in the view and on disk) until the
    // edited message is sent.
    m_editing.insert(convId, v->promptText());
    v->setEditing(true);
    v->setPromptText(text);
}

void ChatController::cancelEdit(const QString& convId) {
    if (!m_editing.contains(convId)) return;
    auto* v = viewFor(convId);
    v->setPromptText(m_editing.take(convId));
    v->setEditing(false);
}

SavedTurn* ChatController::liveTurn(const QString& convId) {
    const int i = m_store.indexOf(convId);
    if (i < 0 || m_store.conversations()[i].turns.isEmpty()) return nullptr;
    SavedTurn& t = m_store.conversations()[i].turns.last();
    return t.role == "assistant" ? &t : nullptr;
}

void ChatController::onToken(qint64 id, const QString& piece, int green) {
    const QString conv = m_requestConv.value(id);
    if (conv.isEmpty()) return;
    Live& live = m_live[conv];
    live.pending += piece;
    live.dirty = true;
    ++live.pieces;
    if (!m_flushTimer.isActive()) m_flushTimer.start();
    auto* v = viewFor(conv);
    v->appendAssistantText(piece, green);
    if (auto* g = v->contextGauge(); g->limit() > 0) g->setUsage(live.promptTokens + live.pieces, g->limit());
}

void ChatController::flush() {
    bool any = false;
    for (auto it = m_live.begin(); it != m_live.end(); ++it) {
        if (!it->dirty) continue;
        it->dirty = false;
        if (SavedTurn* t = liveTurn(it.key())) t->content = it->pending, any = true;
    }
    if (any) save();
}

void ChatController::onFinished(qint64 id, const QString& summary) {
    const QString conv = m_requestConv.take(id);
    if (conv.isEmpty()) return;
    const Live live = m_live.take(conv);
    SavedTurn* t = liveTurn(conv);
    if (!t) return;  // deleted while it generated
    t->content = live.pending;
    t->summary = summary;
    t->state = SavedTurn::State::Complete;
    m_store.conversations()[m_store.indexOf(conv)].updated = QDateTime::currentDateTimeUtc();
    save();
    auto* v = viewFor(conv);
    v->endAssistantMessage(summary);
    v->setGenerating(false);
    v->setCanRetry(true);
    updateGauge(conv);
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
    // The unanswered message stays visible, not in the context (nor on disk).
    QList<SavedTurn>& turns = m_store.conversations()[i].turns;
    if (liveTurn(conv)) turns.removeLast();
    if (!turns.isEmpty() && turns.last().role == "user") turns.removeLast();
    save();
    v->setGenerating(false);
    v->setCanRetry(!turns.isEmpty());
    updateGauge(conv);
}

void ChatController::onRemoteFailed(qint64 id, const QString& message) {
    const QString conv = m_requestConv.take(id);
    if (conv.isEmpty()) return;
    const Live live = m_live.take(conv);
    const int i = m_store.indexOf(conv);
    if (i < 0) return;
    auto* v = viewFor(conv);
    // The user's message stays, and so does what streamed (marked interrupted); Regenerate
    // sends the message again and replaces the partial reply once the new one is queued.
    QList<SavedTurn>& turns = m_store.conversations()[i].turns;
    if (SavedTurn* t = liveTurn(conv)) {
        if (live.pending.isEmpty()) {
            turns.removeLast();
        } else {
            t->content = live.pending;
            t->state = SavedTurn::State::Interrupted;
        }
    }
    save();
    v->endAssistantMessage(live.pending.isEmpty()
                               ? tr("no reply")
                               : tr("%1 characters arrived · interrupted before it finished").arg(live.pending.size()));
    v->appendNotice(message + tr(" Your message and the partial reply are kept; press Regenerate to retry."));
    v->setGenerating(false);
    v->setCanRetry(true);
}

qint64 ChatController::submitRemote(const Conversation& c, const QList<ChatTurn>& turns, QString* error) {
    const auto store = connections();
    const remote::RemoteConnection* rc = store ? store->find(c.target.connection) : nullptr;
    if (!rc) {
        *error = tr("the remote connection this chat uses is not among the saved connections any more; pick another "
                    "in the chat's header");
        return 0;
    }
    net::ClientOptions o;
    o.base_url = rc->baseUrl.toStdString();
    o.connect_timeout_s = 10;
    o.read_timeout_s = 120;
    if (rc->hasKey) {
        if (!m_secrets && m_makeSecrets) m_secrets = m_makeSecrets();
        QString why;
        const QString key = m_secrets ? m_secrets->read(rc->id, &why) : QString();
        if (!why.isEmpty()) {
            *error = tr("the API key of %1 could not be read: %2").arg(rc->name, why);
            return 0;
        }
        o.api_key = key.toStdString();
    }
    QVector<remote::RemoteTurn> rt;
    for (const ChatTurn& t : turns)
        if (t.role == "user" || t.role == "assistant") rt.push_back({t.role, t.content});
    const ChatSettings& s = c.settings;
    remote::RemoteSampling rs;
    rs.temperature = s.temperature;
    rs.topK = s.topK;
    rs.topP = s.topP;
    rs.minP = s.minP;
    rs.repeatPenalty = s.repeatPenalty;
    rs.maxTokens = s.maxTokens;
    rs.seed = s.seed;
    rs.systemPrompt = s.systemPrompt;
    m_remote->setOptions(o);
    return -m_remote->submit(c.target.model.isEmpty() ? rc->model : c.target.model, rt, rs);
}

void ChatController::setConnections(const QString& settingsPath,
                                    std::function<std::shared_ptr<remote::SecretStore>()> secrets) {
    m_connectionsPath = settingsPath;
    m_makeSecrets = std::move(secrets);
    m_secrets.reset();
    for (auto it = m_views.cbegin(); it != m_views.cend(); ++it) {
        QString why;
        it.value()->setReady(readyFor(it.key(), &why), why);
    }
}

std::unique_ptr<remote::ConnectionStore> ChatController::connections() const {
    if (m_connectionsPath.isEmpty()) return nullptr;
    // Listing needs no keys: the store's SecretStore is only used to read, save or remove one.
    return std::make_unique<remote::ConnectionStore>(m_connectionsPath, nullptr);
}

ChatTarget ChatController::target(const QString& convId) const {
    const int i = m_store.indexOf(convId);
    return i >= 0 ? m_store.conversations()[i].target : ChatTarget{};
}

void ChatController::setTarget(const QString& convId, const ChatTarget& t) {
    const int i = m_store.indexOf(convId);
    if (i < 0 || m_store.conversations()[i].target == t) return;
    m_store.conversations()[i].target = t;
    save();
    if (auto* v = m_views.value(convId)) {
        QString why;
        v->setReady(readyFor(convId, &why), why);
    }
    updateGauge(convId);
    if (convId == m_currentId) Q_EMIT targetChanged(convId, t);
}

bool ChatController::readyFor(const QString& convId, QString* why) const {
    const ChatTarget t = target(convId);
    if (!t.isRemote()) {
        *why = m_notReadyWhy;
        return m_ready;
    }
    const auto store = connections();
    if (store && store->find(t.connection)) return true;
    *why = tr("This chat's remote connection is not among the saved connections; pick another above.");
    return false;
}

void ChatController::interrupt(const QString& convId) {
    if (!m_live.contains(convId)) return;
    const Live live = m_live.take(convId);
    m_requestConv.remove(live.requestId);  // its last tokens and its end are ignored
    if (m_bridge && live.requestId > 0) m_bridge->cancel(live.requestId);
    if (live.requestId < 0) m_remote->cancel(-live.requestId);
    SavedTurn* t = liveTurn(convId);
    if (!t) return;
    t->content = live.pending;
    t->state = SavedTurn::State::Interrupted;
    if (auto* v = m_stack ? m_views.value(convId) : nullptr) {  // the window may have gone
        v->endAssistantMessage(footer(*t));
        v->setGenerating(false);
        v->setCanRetry(true);
    }
}

void ChatController::interruptAll() {
    if (m_live.isEmpty()) return;
    m_flushTimer.stop();
    for (const QString& conv : m_live.keys()) interrupt(conv);
    save();
}

// Shows the saved conversation in its view (after a load, a regenerate or an edit).
void ChatController::replay(const QString& convId, ui::ChatView* v) {
    v->clearTranscript();
    const int i = m_store.indexOf(convId);
    if (i < 0) return;
    const Conversation& c = m_store.conversations()[i];
    const QList<SavedTurn>& turns = c.turns;
    for (int t = 0; t < turns.size(); ++t) {
        if (t == c.contextStart && t > 0)
            v->appendNotice(tr("The turns above no longer fit the context: the model does not see them."));
        if (turns[t].role == "user") {
            v->appendUserMessage(turns[t].content);
        } else if (turns[t].role == "assistant") {
            const bool streaming = m_live.contains(convId) && t == turns.size() - 1;
            if (streaming) {
                v->beginAssistantMessage();
                v->appendAssistantText(m_live.value(convId).pending);
            } else {
                v->appendAssistantMessage(turns[t].content, footer(turns[t]));
            }
        }
    }
}

// The line under a reply: its stats, and whether it was cut off (the window closed, the
// program died or the chat was deleted while it streamed).
QString ChatController::footer(const SavedTurn& t) {
    const QString cut = tr("interrupted before it finished");
    if (t.state == SavedTurn::State::Complete) return t.summary;
    return t.summary.isEmpty() ? cut : t.summary + " · " + cut;
}

int ChatController::fitStart(const Conversation& c, int keep, const QString& text) const {
    const ContextUse all = m_bridge->countContext(c.messages(keep) << ChatTurn{"user", text}, c.settings);
    if (all.limit <= 0) return c.contextStart;
    const int reserve = std::min(c.settings.maxTokens, all.limit / 4);  // room for the reply
    auto fits = [&](int start) {
        Conversation seen = c;
        seen.contextStart = start;
        const ContextUse u = m_bridge->countContext(seen.messages(keep) << ChatTurn{"user", text}, c.settings);
        return u.used + reserve <= u.limit;
    };
    if (all.used + reserve <= all.limit) return c.contextStart;
    // Whole exchanges leave: candidates are the user turns after contextStart, then keep itself
    // (only the new message). Fewer turns never take more tokens: a binary search finds the first.
    QList<int> starts;
    for (int t = c.contextStart + 1; t < keep; ++t)
        if (c.turns[t].role == "user") starts << t;
    starts << keep;
    if (!fits(starts.last())) return c.contextStart;  // even the message alone does not fit: refused as is
    int lo = 0, hi = int(starts.size()) - 1;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (fits(starts[mid])) hi = mid;
        else
            lo = mid + 1;
    }
    return starts[lo];
}

ContextUse ChatController::contextUse(const QString& convId) const {
    const int i = m_store.indexOf(convId);
    if (i < 0 || !m_ready || m_store.conversations()[i].target.isRemote()) return {};
    const auto live = m_live.constFind(convId);
    if (live != m_live.constEnd()) return {live->promptTokens + live->pieces, live->contextTokens};
    return m_bridge->countContext(m_store.conversations()[i].messages(), m_store.conversations()[i].settings);
}

void ChatController::updateGauge(const QString& convId) {
    auto* v = m_views.value(convId);
    const int i = m_store.indexOf(convId);
    if (!v || i < 0) return;
    const ContextUse u = contextUse(convId);
    v->contextGauge()->setUsage(u.used, u.limit);
    v->contextGauge()->setVisible(!m_store.conversations()[i].target.isRemote());  // the server keeps its own
    v->contextGauge()->setPolicy(m_store.conversations()[i].settings.contextPolicy);
}

void ChatController::setContextPolicy(const QString& convId, const QString& policy) {
    const int i = m_store.indexOf(convId);
    if (i < 0) return;
    m_store.conversations()[i].settings.contextPolicy = policy == "drop-oldest" ? "drop-oldest" : "stop";
    save();
}

bool ChatController::exportChat(const QString& convId, const QString& path, const QString& format,
                                QString* error) const {
    const int i = m_store.indexOf(convId);
    if (i < 0) {
        *error = tr("no such chat");
        return false;
    }
    Conversation c = m_store.conversations()[i];
    if (const auto live = m_live.constFind(convId); live != m_live.constEnd() && !c.turns.isEmpty())
        c.turns.last().content = live->pending;  // what has streamed so far
    const QByteArray bytes = format == "md" ? chatToMarkdown(c).toUtf8() : chatToJson(c);
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        *error = tr("cannot write %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

bool ChatController::importChats(const QString& path, QString* error) {
    QFile f(path);
    QList<Conversation> imported;
    if (!f.open(QIODevice::ReadOnly)) {
        *error = tr("cannot read %1: %2").arg(path, f.errorString());
    } else if (f.size() > (qint64(256) << 20)) {
        *error = tr("%1 is %2 MiB; a chat export is at most 256 MiB").arg(path).arg(f.size() >> 20);
    } else if (parseChatImport(f.readAll(), QFileInfo(path).fileName(), &imported, error)) {
        // Each comes in as a new chat (a fresh id: importing twice gives two copies).
        for (int k = int(imported.size()) - 1; k >= 0; --k) {
            Conversation c = imported[k];
            c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
            if (c.title.isEmpty()) c.title = QFileInfo(path).completeBaseName();
            if (!c.updated.isValid()) c.updated = QDateTime::currentDateTimeUtc();
            m_store.conversations().prepend(c);
        }
        select(m_store.conversations().first().id);
        Q_EMIT listChanged();
        save();
        Q_EMIT statusMessage(
            tr("Imported %1 chat%2 from %3").arg(imported.size()).arg(imported.size() == 1 ? "" : "s").arg(path), 8000);
        return true;
    }
    Q_EMIT importFailed(*error);
    return false;
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
