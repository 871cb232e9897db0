// ctest-labels: ui
// Replies render as Markdown (ui/markdown_render, ui/chat_transcript): headings, lists,
// tables, emphasis, fenced code blocks in a monospace font on a shade with a Copy link that
// puts exactly the code on the clipboard; raw HTML stays text. A streamed reply ends exactly
// as the same reply rendered at once, and streaming changes only the reply's own unfinished
// tail: never the turns before it, and per piece never more than its current paragraph.
#include <QApplication>
#include <QClipboard>
#include <QFontInfo>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextDocument>
#include <QTextList>
#include <QTextTable>
#include <QtTest>

#include "tests/support/test_paths.h"
#include "ui/chat_transcript.h"
#include "ui/chat_view.h"
#include "ui/markdown_stream.h"

namespace {

const QString kReply = QStringLiteral(
    "## Sorting in Python\n"
    "\n"
    "Use **sorted** for a new list, or `list.sort()` in place:\n"
    "\n"
    "- stable\n"
    "- takes a *key*\n"
    "- `reverse=True` flips it\n"
    "\n"
    "```python\n"
    "words = [\"pear\", \"fig\", \"apple\"]\n"
    "print(sorted(words, key=len))\n"
    "```\n"
    "\n"
    "| call | returns |\n"
    "| --- | --- |\n"
    "| sorted(x) | a new list |\n"
    "| x.sort() | None |\n"
    "\n"
    "1. first\n"
    "2. second\n"
    "\n"
    "Raw <b>html</b> and <img src=\"file:///etc/passwd\"> stay text.\n");

// What a document holds, in order: headings, list items, table cells, code lines, the rest.
QStringList structure(QTextDocument* doc) {
    QStringList out;
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next()) {
        const QTextBlockFormat f = b.blockFormat();
        QTextCursor c(b);
        if (f.headingLevel() > 0) out << QString("h%1:%2").arg(f.headingLevel()).arg(b.text());
        else if (b.textList())
            out << QString("li:%1").arg(b.text());
        else if (c.currentTable())
            out << QString("td:%1").arg(b.text());
        else if (f.hasProperty(QTextFormat::BlockCodeLanguage))
            out << QString("code:%1").arg(b.text());
        else if (!b.text().isEmpty())
            out << QString("p:%1").arg(b.text());
    }
    return out;
}

// The n-th anchor of the document whose href starts with `prefix`: its position, or -1.
int anchorPosition(QTextDocument* doc, const QString& prefix) {
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it)
            if (it.fragment().charFormat().isAnchor() && it.fragment().charFormat().anchorHref().startsWith(prefix))
                return it.fragment().position();
    return -1;
}

QTextBrowser* transcript(kvs::ui::ChatView& v) { return v.findChild<QTextBrowser*>("chatTranscript"); }

}  // namespace

class TestChatMarkdown : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void replyRendersAsMarkdown() {
        kvs::ui::ChatView v;
        v.resize(800, 900);
        v.show();
        v.appendUserMessage("How do I sort a list? <b>not bold</b>");
        v.appendAssistantMessage(kReply, "42 tokens · 30 tok/s");
        QTextDocument* doc = transcript(v)->document();
        const QStringList s = structure(doc);
        QVERIFY2(s.contains("h2:Sorting in Python"), qPrintable(s.join('\n')));
        for (const char* item : {"li:stable", "li:takes a key", "li:reverse=True flips it", "li:first", "li:second"})
            QVERIFY2(s.contains(item), item);
        for (const char* cell : {"td:call", "td:returns", "td:sorted(x)", "td:a new list", "td:x.sort()", "td:None"})
            QVERIFY2(s.contains(cell), cell);
        QVERIFY(s.contains("code:words = [\"pear\", \"fig\", \"apple\"]"));
        QVERIFY(s.contains("code:print(sorted(words, key=len))"));
        // Raw HTML (in the reply and in your message) is shown as the text it is.
        QVERIFY2(v.transcriptText().contains("Raw <b>html</b> and <img src=\"file:///etc/passwd\"> stay text."),
                 qPrintable(v.transcriptText()));
        QVERIFY(v.transcriptText().contains("<b>not bold</b>"));
        QVERIFY(!doc->toHtml().contains("<img"));
        // Emphasis and inline code.
        QTextCursor bold = doc->find("sorted", 0, QTextDocument::FindCaseSensitively);
        QVERIFY(!bold.isNull());
        QCOMPARE(bold.charFormat().fontWeight(), int(QFont::Bold));
        // The table: 3 rows of 2, the header row bold.
        QTextTable* table = nullptr;
        for (QTextFrame* f : doc->rootFrame()->childFrames()) table = table ? table : qobject_cast<QTextTable*>(f);
        QVERIFY(table);
        QCOMPARE(table->rows(), 3);
        QCOMPARE(table->columns(), 2);
        QCOMPARE(table->cellAt(0, 0).firstCursorPosition().block().text(), QString("call"));
        QTextCursor head = table->cellAt(0, 1).firstCursorPosition();
        head.movePosition(QTextCursor::NextCharacter);
        QCOMPARE(head.charFormat().fontWeight(), int(QFont::Bold));
        // Code lines: a monospace font (as laid out), on a shade that differs from the page.
        const QTextCursor code = doc->find("print(sorted(words", 0, QTextDocument::FindCaseSensitively);
        QVERIFY(!code.isNull());
        QVERIFY2(QFontInfo(code.charFormat().font()).fixedPitch(),
                 qPrintable(QFontInfo(code.charFormat().font()).family()));
        const QColor shade = code.block().blockFormat().background().color();
        QVERIFY(code.block().blockFormat().background().style() != Qt::NoBrush);
        QVERIFY(shade != transcript(v)->palette().color(QPalette::Base));
        // The prose is not monospace.
        QVERIFY(!QFontInfo(doc->find("Use", 0, QTextDocument::FindCaseSensitively).charFormat().font()).fixedPitch() ||
                QFontInfo(transcript(v)->font()).fixedPitch());
        // The stats line is under the reply.
        QVERIFY(v.transcriptText().trimmed().endsWith("42 tokens · 30 tok/s"));
        QVERIFY(transcript(v)->grab().save(QString::fromStdString(kvs::test::output_path("chat_markdown.png"))));
    }

    void copyLinkCopiesTheCode() {
        kvs::ui::ChatView v;
        v.resize(800, 900);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.appendAssistantMessage(kReply, {});
        QCOMPARE(v.codeBlockCount(), 1);
        QTextBrowser* t = transcript(v);
        const int at = anchorPosition(t->document(), "kvs-copy:");
        QVERIFY(at >= 0);
        // The label names the language; the link is clicked where the view draws it.
        QTextCursor c(t->document());
        c.setPosition(at);
        QVERIFY2(c.block().text().contains("python"), qPrintable(c.block().text()));
        t->setTextCursor(c);
        t->ensureCursorVisible();
        c.setPosition(at + 1);
        const QRect r = t->cursorRect(c);
        QApplication::clipboard()->clear();
        QTest::mouseClick(t->viewport(), Qt::LeftButton, {}, QPoint(r.left() - 2, r.center().y()));
        QTRY_COMPARE(QApplication::clipboard()->text(),
                     QString("words = [\"pear\", \"fig\", \"apple\"]\nprint(sorted(words, key=len))"));
        QVERIFY(t->toPlainText().contains("Sorting in Python"));  // the click navigated nowhere
    }

    void streamedReplyEndsAsRenderedWhole() {
        kvs::ui::ChatView whole, streamed;
        whole.appendUserMessage("q");
        whole.appendAssistantMessage(kReply, "done");
        streamed.appendUserMessage("q");
        streamed.beginAssistantMessage();
        int n = 0;
        for (qsizetype i = 0; i < kReply.size(); i += 1 + (n++ % 7)) {
            const QString piece = kReply.mid(i, 1 + (n % 7));
            streamed.appendAssistantText(piece);
        }
        streamed.endAssistantMessage("done");
        QCOMPARE(structure(transcript(streamed)->document()), structure(transcript(whole)->document()));
        QCOMPARE(streamed.transcriptText(), whole.transcriptText());
        QCOMPARE(streamed.codeBlockCount(), 1);
    }

    // Streaming appends: the earlier turns are never touched, and a piece re-renders only the
    // reply's unfinished tail (here paragraphs of at most ~120 characters) however long the
    // reply and the chat are.
    void streamingChangesOnlyTheTail() {
        kvs::ui::ChatView v;
        for (int t = 0; t < 40; ++t) {
            v.appendUserMessage(QString("Question %1").arg(t));
            v.appendAssistantMessage(kReply, "stats");
        }
        QTextDocument* doc = transcript(v)->document();
        v.beginAssistantMessage();
        const int replyStart = doc->characterCount() - 1;
        int minFrom = INT_MAX, maxRemoved = 0;
        connect(doc, &QTextDocument::contentsChange, this, [&](int from, int removed, int) {
            minFrom = std::min(minFrom, from);
            maxRemoved = std::max(maxRemoved, removed);
        });
        QString reply;
        for (int p = 0; p < 60; ++p) {
            const QString para = QString("Paragraph %1 says a few words about paging the KV cache in blocks.").arg(p);
            reply += para + "\n\n";
            for (qsizetype i = 0; i < para.size(); i += 4) v.appendAssistantText(para.mid(i, 4));
            v.appendAssistantText("\n\n");
        }
        QVERIFY(reply.size() > 3500);
        QVERIFY2(minFrom >= replyStart - 1,
                 qPrintable(QString("changed at %1, reply starts at %2").arg(minFrom).arg(replyStart)));
        QVERIFY2(maxRemoved <= 300, qPrintable(QString("a piece re-rendered %1 characters").arg(maxRemoved)));
        v.endAssistantMessage("end");
        QVERIFY(v.transcriptText().contains("Paragraph 59 says"));
        QVERIFY(v.transcriptText().contains("Question 39"));
    }

    // A long transcript keeps the newest kShownTurns turns once a reply streams, under a line
    // whose link brings the rest back (the chat redraws them; the view then hides none).
    void longTranscriptShowsTheNewestTurns() {
        kvs::ui::ChatView v;
        auto redraw = [&] {
            v.clearTranscript();
            for (int t = 0; t < 30; ++t) {
                v.appendUserMessage(QString("Question %1").arg(t));
                v.appendAssistantMessage(kReply, "stats");
            }
        };
        connect(&v, &kvs::ui::ChatView::showEarlierRequested, this, redraw);
        redraw();
        QVERIFY(v.transcriptText().contains("Question 0\n"));  // a replayed chat is shown whole
        v.appendUserMessage("Question 30");
        v.beginAssistantMessage();
        v.appendAssistantText("Streaming now.");
        QCOMPARE(v.hiddenTurns(), 61 - (kvs::ui::ChatTranscript::kShownTurns - 1));  // 61 turns before the reply
        QVERIFY(!v.transcriptText().contains("Question 0\n"));
        QVERIFY(v.transcriptText().startsWith(QString("%1 earlier turns not shown").arg(v.hiddenTurns())));
        QVERIFY(v.transcriptText().contains("Question 30"));
        QTextDocument* doc = transcript(v)->document();
        const int at = anchorPosition(doc, "kvs-earlier:");
        QVERIFY(at >= 0);
        Q_EMIT transcript(v)->anchorClicked(QUrl("kvs-earlier:all"));
        QVERIFY(v.transcriptText().contains("Question 0\n"));
        v.beginAssistantMessage();
        QCOMPARE(v.hiddenTurns(), 0);
    }

    // The cut between a streaming reply's finished blocks and its tail.
    void streamCutsOnlyBetweenBlocks_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("stable");
        QTest::newRow("paragraph then text") << "One.\n\nTwo\n" << 6;
        QTest::newRow("next line begun") << "One.\n\nTwo" << 6;
        QTest::newRow("maybe a list item") << "One.\n\n1" << 0;
        QTest::newRow("no confirmation yet") << "One.\n\n" << 0;
        QTest::newRow("inside a fence") << "```\na\n\nb\n" << 0;
        QTest::newRow("after a closed fence") << "```\na\n\nb\n```\nNext\n" << 13;
        QTest::newRow("loose list goes on") << "1. a\n\n2. b\n" << 0;
        QTest::newRow("indented continuation") << "- a\n\n  more\n" << 0;
        QTest::newRow("list then paragraph") << "- a\n- b\n\nAfter\n" << 9;
        QTest::newRow("table") << "| a |\n|---|\n| 1 |\n\nNext\n" << 19;
    }
    void streamCutsOnlyBetweenBlocks() {
        QFETCH(QString, text);
        QFETCH(int, stable);
        kvs::ui::MarkdownStreamSplit split;
        QCOMPARE(int(split.update(text)), stable);
        // Fed a character at a time, the cut is the same.
        kvs::ui::MarkdownStreamSplit bytes;
        for (qsizetype i = 1; i <= text.size(); ++i) bytes.update(text.left(i));
        QCOMPARE(int(bytes.stable()), stable);
    }
};

QTEST_MAIN(TestChatMarkdown)
#include "tst_chat_markdown.moc"
