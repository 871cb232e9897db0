#pragma once
// Markdown of a reply → rich text in the chat transcript, through Qt's own importer
// (QTextDocument::setMarkdown, GitHub dialect, raw HTML shown as text, never interpreted):
// headings, lists, tables, emphasis, links, and fenced code blocks in a monospace font on a
// shaded background, each with a "Copy" link above it (href kCopyScheme:<n>, n the index of
// its text in the caller's list of code blocks).
#include <QColor>
#include <QString>
#include <QStringList>

class QTextCursor;

namespace kvs::ui {

inline constexpr char kCopyScheme[] = "kvs-copy";

struct MarkdownStyle {
    QColor codeBackground;  // shade behind code blocks
    QColor tableBorder;
    QColor linkColor;  // the Copy links
};

// Inserts `markdown` rendered at the cursor, which must stand at the start of an empty block;
// the cursor ends after the inserted text. Each code block's text is appended to *codeBlocks
// (its Copy link names its index there).
void insertMarkdown(QTextCursor& cursor, const QString& markdown, const MarkdownStyle& style, QStringList* codeBlocks);

}  // namespace kvs::ui
