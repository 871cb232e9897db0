#pragma once
// The chat transcript's document: turns are appended at its end and never re-rendered, so a
// token costs the same at turn 200 as at turn 1. A streaming reply is Markdown in two parts:
// the complete blocks before MarkdownStreamSplit's cut are rendered once, the unfinished
// tail after it again for each piece; the finished reply is rendered whole once more when
// it was streamed in parts (so lists and numbering come out exactly as Qt's importer makes
// them). Your messages and notices are plain text.
// A watermarked reply (pieces that come with their watermark list) is drawn as plain text,
// each piece on the colour of its list (green or red, watermarkColor), and stays so when it
// ends: the point of it is to see which tokens the green lists took.
// Qt paints a rich-text document by walking all of it, so the cost of a repaint grows with
// the transcript (tables most): when a reply begins, a transcript holding more than
// kShownTurns turns keeps only the newest, under a first line "N earlier turns are not shown
// — Show them" (its link: kEarlierScheme) that the chat answers by drawing them all again.
#include <QColor>
#include <QList>
#include <QString>
#include <QStringList>
#include <QTextCursor>

#include "ui/markdown_render.h"
#include "ui/markdown_stream.h"

class QTextBrowser;
class QTextDocument;
class QTextBlockFormat;
class QTextCharFormat;

namespace kvs::ui {

inline constexpr char kEarlierScheme[] = "kvs-earlier";

class ChatTranscript {
public:
    static constexpr int kShownTurns = 40;
    explicit ChatTranscript(QTextBrowser* browser);
    // 0: never hide earlier turns (the user asked to see them all); kShownTurns by default.
    void setTurnLimit(int turns) { m_limit = turns; }
    int hiddenTurns() const { return m_hidden; }

    void clear();
    void appendUser(const QString& text);
    void beginReply();
    // Begins a reply when none is open. green >= 0 (1 green list, 0 red list): a watermarked
    // reply's piece, drawn on its list's colour (the reply is then plain text, not Markdown).
    void appendReply(const QString& piece, int green = -1);
    void endReply(const QString& footer);                               // the stats line under it (may be empty)
    void appendReplyWhole(const QString& text, const QString& footer);  // a finished reply, rendered once
    void appendNotice(const QString& text);                             // closes an open reply first
    bool replyOpen() const { return m_open; }
    static QColor watermarkColor(bool green);  // a piece's background in a watermarked reply
    // The text of the transcript's i-th code block (its Copy link's number); empty when none.
    QString codeBlock(int i) const { return m_code.value(i); }
    int codeBlockCount() const { return int(m_code.size()); }

private:
    QTextCursor newBlock(const QTextBlockFormat& block, const QTextCharFormat& chars);
    void beginReply(bool streaming);
    void markTurn(int pos);  // a turn's first block starts at pos
    void trim();             // keeps the newest m_limit - 1 turns, before a reply begins
    void appendHeader(const QString& who);
    void appendFooter(const QString& footer);
    // Removes everything from `pos` to the end (and the code blocks listed from `firstCode`),
    // leaving an empty plain block at `pos`; the cursor stands there.
    QTextCursor truncate(int pos, int firstCode);
    MarkdownStyle style() const;
    // Keeps the view at the bottom when it was there before a change.
    template <class F>
    void edit(F&& change);

    QTextBrowser* m_browser;
    QTextDocument* m_doc;
    QStringList m_code;          // every code block's text, by its Copy link's number
    QString m_lastRole;          // "user", "assistant", "notice" or "" (empty transcript)
    QList<QTextCursor> m_turns;  // where each shown turn starts (moved by Qt as text changes)
    int m_limit = kShownTurns;
    int m_hidden = 0;  // turns removed from the top
    // The open reply.
    bool m_open = false;
    QString m_reply;
    MarkdownStreamSplit m_split;
    qsizetype m_rendered = 0;  // m_reply.left(m_rendered) is rendered for good (before m_tailPos)
    int m_replyPos = 0;        // where the reply's text starts in the document
    int m_tailPos = 0;         // where its unfinished tail starts
    int m_codeAtReply = 0;     // m_code's size when the reply began
    int m_codeAtTail = 0;      // … and when its tail began
    int m_parts = 0;           // stable parts rendered so far
    bool m_tokens = false;     // a watermarked reply: pieces on their lists' colours
};

}  // namespace kvs::ui
