#include "ui/markdown_render.h"

#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextDocumentFragment>
#include <QTextFrame>
#include <QTextTable>

namespace kvs::ui {

namespace {

// GitHub's dialect (tables, strikethrough, task lists, autolinks) with raw HTML shown as the
// text it is: a model's "<img src=file:…>" must not make the transcript load a file.
constexpr auto kFeatures =
    QTextDocument::MarkdownFeatures(QTextDocument::MarkdownDialectGitHub | QTextDocument::MarkdownNoHTML);

// Qt's importer marks every code block line (fenced or indented) with its language, maybe "".
bool isCode(const QTextBlock& b) { return b.blockFormat().hasProperty(QTextFormat::BlockCodeLanguage); }

void styleTables(QTextDocument& doc, const MarkdownStyle& style) {
    const QList<QTextFrame*> frames = doc.rootFrame()->childFrames();
    for (QTextFrame* f : frames) {
        auto* table = qobject_cast<QTextTable*>(f);
        if (!table) continue;
        QTextTableFormat fmt = table->format();
        fmt.setBorder(1);
        fmt.setBorderBrush(style.tableBorder);
        fmt.setBorderStyle(QTextFrameFormat::BorderStyle_Solid);
        fmt.setBorderCollapse(true);
        fmt.setCellPadding(4);
        fmt.setCellSpacing(0);
        fmt.setTopMargin(4);
        fmt.setBottomMargin(4);
        table->setFormat(fmt);
        // Qt 6.4's importer starts the first cell of a table that follows a code block with an
        // empty line: removed, so the header row lines up.
        for (int r = 0; r < table->rows(); ++r)
            for (int c = 0; c < table->columns(); ++c) {
                const QTextTableCell cell = table->cellAt(r, c);
                QTextCursor first = cell.firstCursorPosition();
                while (first.block().length() == 1 && first.position() < cell.lastCursorPosition().position())
                    first.deleteChar();
            }
        // The header row in bold (the importer marks it only by position).
        for (int c = 0; c < table->columns(); ++c) {
            QTextTableCell cell = table->cellAt(0, c);
            QTextCursor cur = cell.firstCursorPosition();
            cur.setPosition(cell.lastCursorPosition().position(), QTextCursor::KeepAnchor);
            QTextCharFormat bold;
            bold.setFontWeight(QFont::Bold);
            cur.mergeCharFormat(bold);
        }
    }
}

// Before each run of code lines, a line "<language> · Copy" whose link copies the run's text.
void addCodeLabels(QTextDocument& doc, const MarkdownStyle& style, QStringList* codeBlocks) {
    QTextBlock b = doc.firstBlock();
    while (b.isValid()) {
        if (!isCode(b)) {
            b = b.next();
            continue;
        }
        const QTextBlockFormat codeFormat = b.blockFormat();
        const QTextCharFormat codeCharFormat = b.charFormat();
        const QString language = codeFormat.property(QTextFormat::BlockCodeLanguage).toString();
        QStringList lines;
        for (QTextBlock r = b; r.isValid() && isCode(r); r = r.next()) {
            QTextBlockFormat shaded = r.blockFormat();
            shaded.setBackground(style.codeBackground);
            QTextCursor(r).setBlockFormat(shaded);
            lines << r.text();
        }
        const int index = int(codeBlocks->size());
        codeBlocks->append(lines.join('\n'));
        // Split the first code line off at its start: the empty block before it becomes the label.
        QTextCursor cur(b);
        QTextBlockFormat shaded = codeFormat;
        shaded.setBackground(style.codeBackground);
        cur.insertBlock(shaded, codeCharFormat);
        cur.movePosition(QTextCursor::PreviousBlock);
        QTextBlockFormat labelFormat;
        labelFormat.setIndent(codeFormat.indent());
        labelFormat.setTopMargin(6);
        cur.setBlockFormat(labelFormat);
        QTextCharFormat small;
        small.setFontPointSize(8);
        small.setForeground(style.linkColor);
        cur.setBlockCharFormat(small);
        if (!language.isEmpty()) cur.insertText(language + "  ·  ", small);
        QTextCharFormat link = small;
        link.setAnchor(true);
        link.setAnchorHref(QString("%1:%2").arg(QLatin1String(kCopyScheme)).arg(index));
        link.setFontUnderline(true);
        link.setToolTip(QObject::tr("Copy this code to the clipboard"));
        cur.insertText(QObject::tr("Copy"), link);
        b = cur.block().next();
        while (b.isValid() && isCode(b)) b = b.next();
    }
}

}  // namespace

void insertMarkdown(QTextCursor& cursor, const QString& markdown, const MarkdownStyle& style, QStringList* codeBlocks) {
    QTextDocument tmp;
    tmp.setUndoRedoEnabled(false);
    tmp.setMarkdown(markdown, kFeatures);
    styleTables(tmp, style);
    addCodeLabels(tmp, style, codeBlocks);
    // The fragment's first block merges into the cursor's and takes no format from it: copied
    // by hand (a heading, a code label), unless it belongs to a list or table (kept by Qt).
    const QTextBlock first = tmp.firstBlock();
    const bool plainFirst = !first.textList() && !QTextCursor(first).currentTable();
    const QTextBlockFormat firstFormat = first.blockFormat();
    const int start = cursor.position();
    cursor.insertFragment(QTextDocumentFragment(&tmp));
    if (plainFirst) {
        QTextCursor c(cursor.document());
        c.setPosition(start);
        c.setBlockFormat(firstFormat);
    }
}

}  // namespace kvs::ui
