#include "app/chat_store.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QUuid>
#include <algorithm>

namespace kvs::app {

namespace {
QJsonObject settings_json(const ChatSettings& s) {
    QJsonObject o{{"temperature", s.temperature},
                  {"top_k", s.topK},
                  {"top_p", s.topP},
                  {"min_p", s.minP},
                  {"repeat_penalty", s.repeatPenalty},
                  {"max_tokens", s.maxTokens},
                  {"seed", s.seed},
                  {"system_prompt", s.systemPrompt},
                  {"speculative", s.speculative},
                  {"spec_k", s.specK},
                  {"spec_adaptive", s.specAdaptive},
                  {"context_policy", s.contextPolicy}};
    if (s.watermark) o.insert("watermark", true);
    if (s.beams > 1) {
        o.insert("beams", s.beams);
        o.insert("length_penalty", s.lengthPenalty);
    }
    if (s.minNewTokens > 0) o.insert("min_new_tokens", s.minNewTokens);
    if (!s.kvEviction.isEmpty()) o.insert("kv_eviction", s.kvEviction);
    if (!s.adapter.isEmpty()) {  // the LoRA adapter the chat runs with, and where to load it from
        o.insert("adapter", s.adapter);
        o.insert("adapter_path", s.adapterPath);
    }
    return o;
}

ChatSettings settings_from(const QJsonObject& o) {
    ChatSettings s;
    s.temperature = o.value("temperature").toDouble(s.temperature);
    s.topK = o.value("top_k").toInt(s.topK);
    s.topP = o.value("top_p").toDouble(s.topP);
    s.minP = o.value("min_p").toDouble(s.minP);
    s.repeatPenalty = o.value("repeat_penalty").toDouble(s.repeatPenalty);
    s.maxTokens = o.value("max_tokens").toInt(s.maxTokens);
    s.seed = static_cast<qint64>(o.value("seed").toDouble(static_cast<double>(s.seed)));
    s.systemPrompt = o.value("system_prompt").toString();
    s.speculative = o.value("speculative").toString();
    s.specK = std::clamp(o.value("spec_k").toInt(s.specK), 1, 8);
    s.specAdaptive = o.value("spec_adaptive").toBool(false);
    s.contextPolicy = o.value("context_policy").toString() == "drop-oldest" ? "drop-oldest" : "stop";
    s.watermark = o.value("watermark").toBool(false);
    s.beams = std::clamp(o.value("beams").toInt(1), 1, 8);
    s.lengthPenalty = std::clamp(o.value("length_penalty").toDouble(1.0), -5.0, 5.0);
    s.minNewTokens = std::clamp(o.value("min_new_tokens").toInt(0), 0, 4096);
    s.kvEviction = o.value("kv_eviction").toString();
    s.adapter = o.value("adapter").toString();
    s.adapterPath = s.adapter.isEmpty() ? QString() : o.value("adapter_path").toString();
    return s;
}

QString state_name(SavedTurn::State s) {
    switch (s) {
        case SavedTurn::State::Streaming: return "streaming";
        case SavedTurn::State::Interrupted: return "interrupted";
        case SavedTurn::State::Complete: break;
    }
    return {};
}

SavedTurn::State state_from(const QString& name) {
    if (name == "streaming") return SavedTurn::State::Streaming;
    if (name == "interrupted") return SavedTurn::State::Interrupted;
    return SavedTurn::State::Complete;  // absent (older files) or unknown
}
}  // namespace

ChatStore::ChatStore(QString path) : m_path(std::move(path)) {}

QString ChatStore::defaultPath() {
    QString base = qEnvironmentVariable("XDG_DATA_HOME");
    if (base.isEmpty()) base = QDir::homePath() + "/.local/share";
    return base + "/kvscope/chats.json";
}

bool ChatStore::load(QString* error) {
    m_conversations.clear();
    QFile f(m_path);
    if (!f.exists()) return true;
    if (!f.open(QIODevice::ReadOnly)) {
        *error = QString("cannot read %1: %2").arg(m_path, f.errorString());
        return false;
    }
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &pe);
    if (pe.error != QJsonParseError::NoError || !doc.isObject()) {
        *error = QString("%1 is not a chat history file (%2 at byte %3)").arg(m_path, pe.errorString()).arg(pe.offset);
        return false;
    }
    for (const QJsonValue& v : doc.object().value("conversations").toArray())
        m_conversations.append(fromJson(v.toObject()));
    return true;
}

bool ChatStore::save(QString* error) const {
    QDir().mkpath(QFileInfo(m_path).absolutePath());
    QJsonArray arr;
    for (const Conversation& c : m_conversations) arr.append(toJson(c));
    QSaveFile f(m_path);
    if (!f.open(QIODevice::WriteOnly)) {
        if (error) *error = QString("cannot write %1: %2").arg(m_path, f.errorString());
        return false;
    }
    f.write(QJsonDocument(QJsonObject{{"format", "kvscope-chats"}, {"version", 1}, {"conversations", arr}}).toJson());
    if (!f.commit()) {
        if (error) *error = QString("cannot write %1: %2").arg(m_path, f.errorString());
        return false;
    }
    return true;
}

QJsonObject ChatStore::toJson(const Conversation& c) {
    QJsonArray turns;
    for (const SavedTurn& t : c.turns) {
        QJsonObject o{{"role", t.role}, {"content", t.content}};
        if (!t.summary.isEmpty()) o.insert("summary", t.summary);
        if (t.state != SavedTurn::State::Complete) o.insert("state", state_name(t.state));
        turns.append(o);
    }
    QJsonObject o{{"id", c.id},
                  {"title", c.title},
                  {"updated", c.updated.toString(Qt::ISODate)},
                  {"turns", turns},
                  {"settings", settings_json(c.settings)}};
    if (c.contextStart > 0) o.insert("context_start", c.contextStart);
    if (!c.target.kind.isEmpty()) {
        QJsonObject t{{"kind", c.target.kind}, {"model", c.target.model}};
        if (c.target.isRemote()) t.insert("connection", c.target.connection);
        o.insert("target", t);
    }
    return o;
}

Conversation ChatStore::fromJson(const QJsonObject& o) {
    Conversation c;
    c.id = o.value("id").toString();
    if (c.id.isEmpty()) c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
    c.title = o.value("title").toString();
    c.updated = QDateTime::fromString(o.value("updated").toString(), Qt::ISODate);
    for (const QJsonValue& v : o.value("turns").toArray()) {
        const QJsonObject t = v.toObject();
        SavedTurn turn;
        turn.role = t.value("role").toString();
        turn.content = t.value("content").toString();
        turn.summary = t.value("summary").toString();
        turn.state = state_from(t.value("state").toString());
        c.turns.append(turn);
    }
    c.settings = settings_from(o.value("settings").toObject());
    c.contextStart = std::clamp(o.value("context_start").toInt(0), 0, int(c.turns.size()));
    const QJsonObject t = o.value("target").toObject();  // absent in older files: the loaded model
    const QString kind = t.value("kind").toString();
    if (kind == "local" || kind == "remote") {
        c.target.kind = kind;
        c.target.model = t.value("model").toString();
        c.target.connection = t.value("connection").toString();
        if (c.target.isRemote() ? c.target.connection.isEmpty() : c.target.model.isEmpty()) c.target = {};
    }
    return c;
}

QList<ChatTurn> Conversation::messages(int n) const {
    QList<ChatTurn> out;
    const int end = n < 0 ? int(turns.size()) : std::min(n, int(turns.size()));
    for (int i = std::clamp(contextStart, 0, end); i < end; ++i) out.append({turns[i].role, turns[i].content});
    return out;
}

Conversation& ChatStore::add(const QString& title) {
    Conversation c;
    c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
    c.title = title;
    c.updated = QDateTime::currentDateTimeUtc();
    m_conversations.prepend(c);
    return m_conversations.first();
}

int ChatStore::indexOf(const QString& id) const {
    for (int i = 0; i < m_conversations.size(); ++i)
        if (m_conversations[i].id == id) return i;
    return -1;
}

}  // namespace kvs::app
