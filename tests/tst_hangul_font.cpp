// ctest-labels: ui
// Korean must render as Hangul, not as empty boxes: the course this program teaches is
// written in Korean, and a fresh Debian has no CJK font until installer/setup.sh installs
// fonts-noto-cjk. Lays out a Korean line with the chat view's own font (font fallback
// included, as the widget draws it) and checks that no glyph is the missing-glyph box.
#include <QApplication>
#include <QFontDatabase>
#include <QTextLayout>
#include <QtTest>

#include "ui/chat_view.h"

class TestHangulFont : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void chatFontCoversHangul() {
        QVERIFY2(!QFontDatabase::families(QFontDatabase::Korean).isEmpty(),
                 "no font on this machine covers Korean (installer/setup.sh installs fonts-noto-cjk)");
        kvs::ui::ChatView view;
        const QString text = QStringLiteral("안녕하세요, 페이지드 어텐션 수업입니다");
        QTextLayout layout(text, view.font());
        layout.beginLayout();
        layout.createLine();
        layout.endLayout();
        int glyphs = 0;
        for (const QGlyphRun& run : layout.glyphRuns()) {
            const QRawFont raw = run.rawFont();
            for (quint32 g : run.glyphIndexes()) {
                QVERIFY2(g != 0, qPrintable("missing glyph in " + raw.familyName()));
                ++glyphs;
            }
        }
        QVERIFY(glyphs >= text.size() - 4);  // spaces and commas may merge; Hangul syllables each get a glyph
    }
};

QTEST_MAIN(TestHangulFont)
#include "tst_hangul_font.moc"
