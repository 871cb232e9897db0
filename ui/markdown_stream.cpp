#include "ui/markdown_stream.h"

namespace kvs::ui {

namespace {

qsizetype indentOf(QStringView s) {
    qsizetype i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return i;
}

bool isBlank(QStringView s) { return indentOf(s) == s.size(); }

// "- ", "* ", "+ ", "12. ", "3) " (or the marker alone): a list item.
bool isListMarker(QStringView s) {
    if (s.isEmpty()) return false;
    auto spaceOrEnd = [&](qsizetype i) { return i >= s.size() || s[i] == ' ' || s[i] == '\t'; };
    if (s[0] == '-' || s[0] == '*' || s[0] == '+') return spaceOrEnd(1);
    qsizetype i = 0;
    while (i < s.size() && i < 9 && s[i].isDigit()) ++i;
    return i > 0 && i < s.size() && (s[i] == '.' || s[i] == ')') && spaceOrEnd(i + 1);
}

// A fence line: at least three ` or ~ after the indent; its character and length.
bool fenceOf(QStringView s, QChar* ch, qsizetype* len) {
    const qsizetype at = indentOf(s);
    if (at >= s.size() || (s[at] != '`' && s[at] != '~')) return false;
    qsizetype n = 0;
    while (at + n < s.size() && s[at + n] == s[at]) ++n;
    if (n < 3) return false;
    *ch = s[at];
    *len = n;
    return true;
}

}  // namespace

qsizetype MarkdownStreamSplit::update(const QString& text) {
    qsizetype nl;
    while ((nl = text.indexOf('\n', m_scanned)) >= 0) {
        line(QStringView(text).mid(m_scanned, nl - m_scanned), nl + 1);
        m_scanned = nl + 1;
    }
    // The next line has begun: a character no list item or indented continuation starts with
    // confirms the cut already (a reply's paragraphs are single long lines).
    if (m_candidate >= 0 && m_scanned < text.size()) {
        const QChar c = text[m_scanned];
        if (!(c == ' ' || c == '\t' || c.isDigit() || c == '-' || c == '*' || c == '+')) m_stable = m_candidate;
    }
    return m_stable;
}

void MarkdownStreamSplit::line(QStringView s, qsizetype end) {
    QChar ch;
    qsizetype len = 0;
    const bool fence = fenceOf(s, &ch, &len);
    if (m_inFence) {
        if (fence && ch == m_fenceChar && len >= m_fenceLen && isBlank(s.mid(indentOf(s) + len))) {
            m_inFence = false;
            m_candidate = indentOf(s) == 0 ? end : -1;  // a fence inside a list item ends no list
        }
        return;
    }
    if (isBlank(s)) {
        m_candidate = end;
        return;
    }
    // A line with text: it confirms the cut before it when it starts a block of its own.
    if (m_candidate >= 0 && indentOf(s) == 0 && !isListMarker(s)) m_stable = m_candidate;
    m_candidate = -1;
    if (fence) {
        m_inFence = true;
        m_fenceChar = ch;
        m_fenceLen = len;
    }
}

}  // namespace kvs::ui
