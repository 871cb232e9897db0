#pragma once
// Reading back what a widget shows: how far apart two colours are (a grabbed pixel
// against the colour a view should paint), and the character format a text view gives a
// piece of its text. Header only: the test support library has no Qt GUI.
#include <QColor>
#include <QString>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QTextDocument>
#include <algorithm>
#include <cstdlib>

namespace kvs::test {

// The largest difference of one channel (red, green or blue) between a and b.
inline int color_distance(const QColor& a, const QColor& b) {
    return std::max({std::abs(a.red() - b.red()), std::abs(a.green() - b.green()), std::abs(a.blue() - b.blue())});
}

// The same colour, give or take tol per channel (antialiasing, blending, rounding).
inline bool colors_near(const QColor& a, const QColor& b, int tol) { return color_distance(a, b) <= tol; }

// The character format at the first occurrence of `text` (case-sensitive) in the document;
// a default format when it does not occur.
inline QTextCharFormat format_of(QTextDocument* doc, const QString& text) {
    const QTextCursor found = doc->find(text, 0, QTextDocument::FindCaseSensitively);
    if (found.isNull()) return {};
    QTextCursor at(doc);
    at.setPosition(found.selectionStart() + 1);  // the format of the character before the cursor
    return at.charFormat();
}

}  // namespace kvs::test
