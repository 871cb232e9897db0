// ctest-labels: unit
// engine/runtime/text_stream: what a reply shows. A reply cut (max tokens) between the
// bytes of one character must not end in a stray U+FFFD: the incomplete character is
// dropped at the end, and complete characters split over tokens come out whole.
#include <QTemporaryDir>
#include <QtTest>

#include "engine/runtime/session.h"
#include "engine/runtime/text_stream.h"
#include "tests/support/tiny_session.h"

using namespace kvs;

class TestTextStream : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void cutCharacterIsDropped() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("tiny.gguf").toStdString();
        auto session = test::open_tiny_session(path);
        QVERIFY2(session, session.message().c_str());
        const Tokenizer& tok = (*session)->tokenizer();
        const std::string word = "caf\xC3\xA9";  // "café": é is two bytes, two byte tokens in the tiny vocabulary
        const std::vector<int32_t> ids = tok.encode(word, false, false);
        QVERIFY(ids.size() >= 2);
        QCOMPARE(tok.token_to_piece(ids.back()), std::string("\xA9"));

        SamplingParams p;
        TextStream whole(&tok, p);
        std::string text;
        for (int32_t id : ids) text += whole.push(id).text;
        text += whole.flush();
        QCOMPARE(text, word);

        TextStream cut(&tok, p);  // the reply ends after the first byte of é
        text.clear();
        for (size_t i = 0; i + 1 < ids.size(); ++i) text += cut.push(ids[i]).text;
        text += cut.flush();
        QCOMPARE(text, std::string("caf"));
        QVERIFY(!QString::fromStdString(text).contains(QChar(0xFFFD)));
    }
};

QTEST_GUILESS_MAIN(TestTextStream)
#include "tst_text_stream.moc"
