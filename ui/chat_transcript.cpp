#include "ui/chat_transcript.h"

#include <QPalette>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextList>
#include <QTextTable>

namespace kvs::ui {

namespace {

QTextBlockFormat spaced(int top) {
    QTextBlockFormat f;
    f.setTopMargin(top);
    return f;
}

}  // namespace

ChatTranscript::ChatTranscript(QTextBrowser* browser) : m_browser(browser), m_doc(browser->document()) {
    m_doc->setUndoRedoEnabled(false);  // a long chat would keep every streamed piece twice
}

template <class F>
void ChatTranscript::edit(F&& change) {
    QScrollBar* sb = m_browser->verticalScrollBar();
    const bool atEnd = sb->value() >= sb->maximum() - 4;
    // One edit block: the layout hears of the whole change once, not of each of its steps.
    QTextCursor block(m_doc);
    block.beginEditBlock();
    change();
    block.endEditBlock();
    if (atEnd) sb->setValue(sb->maximum());
}

MarkdownStyle ChatTranscript::style() const {
    const QPalette pal = m_browser->palette();
    const QColor base = pal.color(QPalette::Base);
    const bool dark = base.lightness() < 128;
    MarkdownStyle s;
    s.codeBackground = dark ? base.lighter(135) : base.darker(106);
    s.tableBorder = pal.color(QPalette::Mid);
    s.linkColor = pal.color(QPalette::Link);
    return s;
}

QTextCursor ChatTranscript::newBlock(const QTextBlockFormat& block, const QTextCharFormat& chars) {
    QTextCursor c(m_doc);
    c.movePosition(QTextCursor::End);
    // An empty plain last block (a new document, the line Qt keeps after a table) is used as is.
    if (c.block().length() == 1 && !c.currentTable() && !c.currentList()) {
        c.setBlockFormat(block);
        c.setBlockCharFormat(chars);
    } else {
        c.insertBlock(block, chars);
    }
    c.setCharFormat(chars);
    return c;
}

void ChatTranscript::clear() {
    if (m_open) m_open = false;
    m_turns.clear();
    m_hidden = 0;
    m_doc->clear();
    m_code.clear();
    m_lastRole.clear();
}

void ChatTranscript::markTurn(int pos) {
    QTextCursor c(m_doc);
    c.setPosition(pos);
    c.setKeepPositionOnInsert(true);  // the turn's own text goes after it
    m_turns.append(c);
}

void ChatTranscript::trim() {
    if (m_limit <= 0 || m_turns.size() < m_limit) return;
    const int drop = int(m_turns.size()) - (m_limit - 1);
    QTextCursor c(m_doc);
    const int from = m_hidden > 0 ? m_doc->firstBlock().next().position() : 0;
    c.setPosition(from);
    c.setPosition(m_turns[drop].position(), QTextCursor::KeepAnchor);
    c.removeSelectedText();
    m_turns.erase(m_turns.begin(), m_turns.begin() + drop);
    QTextCharFormat f;
    f.setForeground(m_browser->palette().color(QPalette::PlaceholderText));
    QTextCharFormat link = f;
    link.setAnchor(true);
    link.setAnchorHref(QString("%1:all").arg(QLatin1String(kEarlierScheme)));
    link.setForeground(m_browser->palette().color(QPalette::Link));
    link.setFontUnderline(true);
    c.setPosition(0);
    if (m_hidden == 0) {  // a first line of its own (the first turn's marker moves on past it)
        c.insertBlock();
        c.setPosition(0);
        c.setBlockFormat(QTextBlockFormat());
    } else {
        c.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
        c.removeSelectedText();
    }
    m_hidden += drop;
    c.insertText(m_hidden == 1 ? QObject::tr("1 earlier turn not shown (the chat keeps it) — ")
                               : QObject::tr("%1 earlier turns not shown (the chat keeps them) — ").arg(m_hidden),
                 f);
    c.insertText(QObject::tr("Show them"), link);
    m_turns.first().setPosition(m_doc->firstBlock().next().position());
}

void ChatTranscript::appendHeader(const QString& who) {
    QTextCharFormat bold;
    bold.setFontWeight(QFont::Bold);
    QTextCursor c = newBlock(spaced(m_lastRole.isEmpty() ? 0 : 12), bold);
    markTurn(c.position());
    c.insertText(who, bold);
}

void ChatTranscript::appendUser(const QString& text) {
    edit([&] {
        if (m_open) endReply({});
        appendHeader(QObject::tr("You"));
        newBlock(QTextBlockFormat(), QTextCharFormat()).insertText(text);  // '\n' starts a new block
        m_lastRole = "user";
    });
}

void ChatTranscript::beginReply() { beginReply(true); }

void ChatTranscript::beginReply(bool streaming) {
    edit([&] {
        if (m_open) endReply({});
        if (streaming) trim();  // a replayed chat is drawn whole; a streaming reply paints a bounded one
        appendHeader(QObject::tr("Assistant"));
        QTextCursor c = newBlock(QTextBlockFormat(), QTextCharFormat());
        m_open = true;
        m_reply.clear();
        m_split.reset();
        m_rendered = 0;
        m_parts = 0;
        m_tokens = false;
        m_replyPos = m_tailPos = c.position();
        m_codeAtReply = m_codeAtTail = int(m_code.size());
        m_lastRole = "assistant";
    });
}

QTextCursor ChatTranscript::truncate(int pos, int firstCode) {
    QTextCursor c(m_doc);
    c.setPosition(pos);
    c.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    c.removeSelectedText();
    c.setBlockFormat(QTextBlockFormat());
    c.setBlockCharFormat(QTextCharFormat());
    c.setCharFormat(QTextCharFormat());
    m_code.resize(firstCode);
    return c;
}

QColor ChatTranscript::watermarkColor(bool green) {
    return green ? QColor(0x2E, 0xB8, 0x4E, 0x70) : QColor(0xB0, 0x2A, 0x6F, 0x50);
}

void ChatTranscript::appendReply(const QString& piece, int green) {
    if (!m_open) beginReply();
    if (piece.isEmpty()) return;
    if (green >= 0 && m_reply.isEmpty()) m_tokens = true;  // a watermarked reply, from its first piece
    if (m_tokens) {
        edit([&] {
            m_reply += piece;
            QTextCursor c(m_doc);
            c.movePosition(QTextCursor::End);
            QTextCharFormat f;
            if (green >= 0) f.setBackground(watermarkColor(green == 1));
            f.setProperty(QTextFormat::UserProperty, green);  // the list, for tests and copy-outs
            c.insertText(piece, f);
        });
        return;
    }
    edit([&] {
        m_reply += piece;
        const qsizetype stable = m_split.update(m_reply);
        QTextCursor c = truncate(m_tailPos, m_codeAtTail);
        const MarkdownStyle st = style();
        if (stable > m_rendered) {  // complete blocks: rendered for good, the tail starts after them
            insertMarkdown(c, m_reply.mid(m_rendered, stable - m_rendered), st, &m_code);
            m_rendered = stable;
            ++m_parts;
            c = newBlock(QTextBlockFormat(), QTextCharFormat());
            m_tailPos = c.position();
            m_codeAtTail = int(m_code.size());
        }
        insertMarkdown(c, m_reply.mid(m_rendered), st, &m_code);
    });
}

void ChatTranscript::appendFooter(const QString& footer) {
    if (footer.isEmpty()) return;
    QTextCharFormat small;
    small.setForeground(m_browser->palette().color(QPalette::PlaceholderText));
    small.setFontPointSize(std::max(6.0, m_browser->font().pointSizeF() - 1.5));
    newBlock(spaced(4), small).insertText(footer, small);
}

void ChatTranscript::endReply(const QString& footer) {
    edit([&] {
        if (m_open) {
            m_open = false;
            if (m_parts > 0 && !m_tokens) {  // streamed in parts: once whole, as the importer makes it
                QTextCursor c = truncate(m_replyPos, m_codeAtReply);
                insertMarkdown(c, m_reply, style(), &m_code);
            }
            appendFooter(footer);
        } else if (m_lastRole == "assistant") {
            appendFooter(footer);
        }
    });
}

void ChatTranscript::appendReplyWhole(const QString& text, const QString& footer) {
    edit([&] {
        beginReply(false);
        m_open = false;
        m_reply = text;
        QTextCursor c = truncate(m_replyPos, m_codeAtReply);
        insertMarkdown(c, text, style(), &m_code);
        appendFooter(footer);
    });
}

void ChatTranscript::appendNotice(const QString& text) {
    edit([&] {
        if (m_open) endReply({});
        QTextCharFormat f;
        f.setFontItalic(true);
        f.setForeground(QColor(0xb0, 0x50, 0x00));
        QTextCursor c = newBlock(spaced(8), f);
        markTurn(c.position());
        c.insertText(text, f);
        m_lastRole = "notice";
    });
}

}  // namespace kvs::ui
