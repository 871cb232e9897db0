#pragma once
// Where a Markdown text that is still streaming can be cut, so the chat renders the part
// before the cut once and re-renders only the rest as tokens arrive. A cut goes before an
// unindented line that follows a blank line (or a closing fence) outside any code block and
// does not continue a list: what comes before it renders the same whatever follows. The cut
// is found incrementally (each character is scanned once), so its cost does not grow with
// the reply.
#include <QString>

namespace kvs::ui {

class MarkdownStreamSplit {
public:
    // text: the whole reply so far; it only grows between calls (reset() before another).
    // Returns the stable length: text.left(n) is complete Markdown blocks.
    qsizetype update(const QString& text);
    qsizetype stable() const { return m_stable; }
    void reset() { *this = MarkdownStreamSplit(); }

private:
    void line(QStringView line, qsizetype end);  // one complete line, `end` just after its '\n'

    qsizetype m_scanned = 0;     // where the first incomplete line starts
    qsizetype m_stable = 0;      // the last confirmed cut
    qsizetype m_candidate = -1;  // a cut after a blank line or fence, confirmed by the next line
    bool m_inFence = false;
    QChar m_fenceChar;
    qsizetype m_fenceLen = 0;
};

}  // namespace kvs::ui
