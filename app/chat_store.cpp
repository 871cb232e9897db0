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
    return {{"temperature", s.temperature}, {"top_k", s.topK},       {"top_p", s.topP},
            {"min_p", s.minP},              {"repeat_penalty", s.repeatPenalty},
            {"max_tokens", s.maxTokens},    {"seed", s.seed},        {"system_prompt", s.systemPrompt},
            {"speculative", s.speculative}, {"spec_k", s.specK},     {"spec_adaptive", s.specAdaptive}};
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
    return s;
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
    for (const QJsonValue& v : doc.object().value("conversations").toArray()) {
        const QJsonObject o = v.toObject();
        Conversation c;
        c.id = o.value("id").toString();
        if (c.id.isEmpty()) c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
        c.title = o.value("title").toString();
        c.updated = QDateTime::fromString(o.value("updated").toString(), Qt::ISODate);
        for (const QJsonValue& t : o.value("turns").toArray())
            c.turns.append({t.toObject().value("role").toString(), t.toObject().value("content").toString()});
        c.settings = settings_from(o.value("settings").toObject());
        m_conversations.append(c);
    }
    return true;
}

bool ChatStore::save(QString* error) const {
    QDir().mkpath(QFileInfo(m_path).absolutePath());
    QJsonArray arr;
    for (const Conversation& c : m_conversations) {
        QJsonArray turns;
        for (const ChatTurn& t : c.turns) turns.append(QJsonObject{{"role", t.role}, {"content", t.content}});
        arr.append(QJsonObject{{"id", c.id},
                               {"title", c.title},
                               {"updated", c.updated.toString(Qt::ISODate)},
                               {"turns", turns},
                               {"settings", settings_json(c.settings)}});
    }
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
