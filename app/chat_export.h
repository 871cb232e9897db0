#pragma once
// A chat to a file and back: Markdown to read or share (not read back), JSON to move a chat
// to another machine (read back by importChats). The JSON is one conversation as chats.json
// keeps it, under {"format": "kvscope-chat", "version": 1, "conversation": {…}}; a whole
// chats.json ("kvscope-chats") is read too. An import is checked whole before anything is
// added: a damaged file gives one message naming the file, the field and what was expected.
#include <QByteArray>
#include <QList>
#include <QString>

#include "app/chat_store.h"

namespace kvs::app {

QString chatToMarkdown(const Conversation& c);
QByteArray chatToJson(const Conversation& c);
// Parses an export (or a chats.json) read from `source` (a file name, for the messages).
// False with *error set, *out untouched, when anything in it is not as expected.
bool parseChatImport(const QByteArray& bytes, const QString& source, QList<Conversation>* out, QString* error);

}  // namespace kvs::app
