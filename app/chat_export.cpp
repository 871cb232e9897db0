#include "app/chat_export.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QUuid>

namespace kvs::app {

namespace {

constexpr int kVersion = 1;

QString typeName(const QJsonValue& v) {
    switch (v.type()) {
        case QJsonValue::Null: return "null";
        case QJsonValue::Bool: return "a boolean";
        case QJsonValue::Double: return "a number";
        case QJsonValue::String: return "a string";
        case QJsonValue::Array: return "an array";
        case QJsonValue::Object: return "an object";
        case QJsonValue::Undefined: break;
    }
    return "nothing";
}

// One conversation object, checked field by field; `where` names it in messages.
bool checkConversation(const QJsonObject& o, const QString& where, QString* error) {
    auto fail = [&](const QString& field, const QString& expected, const QJsonValue& found) {
        *error = QString("%1.%2: expected %3, found %4").arg(where, field, expected, typeName(found));
        return false;
    };
    for (const char* key : {"id", "title", "updated"})
        if (o.contains(key) && !o.value(key).isString()) return fail(key, "a string", o.value(key));
    if (o.contains("settings") && !o.value("settings").isObject())
        return fail("settings", "an object", o.value("settings"));
    const QJsonValue turns = o.value("turns");
    if (!turns.isArray()) return fail("turns", "an array of {role, content}", turns);
    const QJsonArray arr = turns.toArray();
    for (int i = 0; i < arr.size(); ++i) {
        const QString at = QString("turns[%1]").arg(i);
        if (!arr[i].isObject()) return fail(at, "an object {role, content}", arr[i]);
        const QJsonObject t = arr[i].toObject();
        const QJsonValue role = t.value("role");
        const QString r = role.toString();
        if (!role.isString() || (r != "user" && r != "assistant" && r != "system")) {
            *error = QString("%1.%2.role: expected \"user\", \"assistant\" or \"system\", found %3")
                         .arg(where, at, role.isString() ? QString("\"%1\"").arg(r.left(40)) : typeName(role));
            return false;
        }
        if (!t.value("content").isString()) return fail(at + ".content", "a string", t.value("content"));
        for (const char* key : {"summary", "state"})
            if (t.contains(key) && !t.value(key).isString()) return fail(at + "." + key, "a string", t.value(key));
    }
    return true;
}

QString roleHeading(const QString& role) {
    if (role == "user") return "You";
    if (role == "assistant") return "Assistant";
    return "System";
}

}  // namespace

QString chatToMarkdown(const Conversation& c) {
    QString md = "# " + (c.title.isEmpty() ? QString("Chat") : c.title) + "\n\n";
    if (c.updated.isValid()) md += "*Saved from KV Scope, " + c.updated.toString(Qt::ISODate) + "*\n\n";
    if (!c.settings.systemPrompt.isEmpty()) md += "## System\n\n" + c.settings.systemPrompt + "\n\n";
    for (const SavedTurn& t : c.turns) {
        md += "## " + roleHeading(t.role) + "\n\n" + t.content;
        if (!md.endsWith('\n')) md += '\n';
        if (t.state == SavedTurn::State::Interrupted) md += "\n*(interrupted before it finished)*\n";
        if (!t.summary.isEmpty()) md += "\n*" + t.summary + "*\n";
        md += '\n';
    }
    return md;
}

QByteArray chatToJson(const Conversation& c) {
    return QJsonDocument(
               QJsonObject{{"format", "kvscope-chat"}, {"version", kVersion}, {"conversation", ChatStore::toJson(c)}})
        .toJson();
}

bool parseChatImport(const QByteArray& bytes, const QString& source, QList<Conversation>* out, QString* error) {
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(bytes, &pe);
    if (pe.error != QJsonParseError::NoError) {
        *error = QString("%1 is not valid JSON (%2 at byte %3)").arg(source, pe.errorString()).arg(pe.offset);
        return false;
    }
    if (!doc.isObject()) {
        *error = QString("%1: expected a JSON object with \"format\": \"kvscope-chat\"").arg(source);
        return false;
    }
    const QJsonObject root = doc.object();
    const QString format = root.value("format").toString();
    QJsonArray convs;
    if (format == "kvscope-chat") {
        if (!root.value("conversation").isObject()) {
            *error = QString("%1: conversation: expected an object, found %2")
                         .arg(source, typeName(root.value("conversation")));
            return false;
        }
        convs.append(root.value("conversation"));
    } else if (format == "kvscope-chats") {
        if (!root.value("conversations").isArray()) {
            *error = QString("%1: conversations: expected an array, found %2")
                         .arg(source, typeName(root.value("conversations")));
            return false;
        }
        convs = root.value("conversations").toArray();
    } else {
        *error = QString("%1: format: expected \"kvscope-chat\" (a chat exported by KV Scope), found %2")
                     .arg(source, root.contains("format") ? QString("\"%1\"").arg(format.left(40))
                                                          : QString("no format field"));
        return false;
    }
    if (root.value("version").toInt(0) > kVersion) {
        *error = QString("%1: version %2 is newer than this KV Scope reads (%3)")
                     .arg(source)
                     .arg(root.value("version").toInt())
                     .arg(kVersion);
        return false;
    }
    if (convs.isEmpty()) {
        *error = QString("%1 holds no conversation").arg(source);
        return false;
    }
    QList<Conversation> parsed;
    for (int i = 0; i < convs.size(); ++i) {
        const QString where = format == "kvscope-chat" ? QString("conversation") : QString("conversations[%1]").arg(i);
        if (!convs[i].isObject()) {
            *error = QString("%1: %2: expected an object, found %3").arg(source, where, typeName(convs[i]));
            return false;
        }
        QString why;
        if (!checkConversation(convs[i].toObject(), where, &why)) {
            *error = source + ": " + why;
            return false;
        }
        Conversation c = ChatStore::fromJson(convs[i].toObject());
        // A reply that was streaming when the file was written did not finish.
        for (SavedTurn& t : c.turns)
            if (t.state == SavedTurn::State::Streaming) t.state = SavedTurn::State::Interrupted;
        parsed.append(c);
    }
    out->append(parsed);
    return true;
}

}  // namespace kvs::app
