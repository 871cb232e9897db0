// ctest-labels: ui
// The real main window, offscreen: load a tiny generated model, send a prompt, watch the
// reply stream in, stop a long reply, and survive a bad model file. Saves screenshots
// under the build tree (tests/output/).
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include "app/main_window.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"

class TestMainWindow : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;

    static void send(kvs::app::MainWindow& w, const QString& text) {
        auto* prompt = w.findChild<QPlainTextEdit*>("chatPrompt");
        auto* button = w.findChild<QPushButton*>("sendButton");
        QVERIFY(prompt && button);
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled(), 20000);
        prompt->setPlainText(text);
        QTest::mouseClick(button, Qt::LeftButton);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        m_model = m_dir.filePath("tiny.gguf");
        kvs::test::TinyModelSpec spec;
        spec.n_layer = 2;
        spec.n_embd = 64;
        spec.weight_type = kvs::DType::Q8_0;
        const auto st = kvs::test::write_tiny_gguf(m_model.toStdString(), spec);
        QVERIFY2(st.is_ok(), st.message().c_str());
    }

    void sendPromptStreamsReply() {
        kvs::app::MainWindow w(m_model);
        w.resize(900, 600);
        w.show();
        send(w, "Hello there");
        auto* transcript = w.findChild<QTextBrowser*>("chatTranscript");
        auto* button = w.findChild<QPushButton*>("sendButton");
        QTRY_VERIFY_WITH_TIMEOUT(transcript->toPlainText().contains("Hello there"), 5000);
        // The reply finishes (Send is enabled again) with a summary footer in the transcript.
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled() && transcript->toPlainText().contains("tok/s"), 60000);
        const QString text = transcript->toPlainText();
        const int reply_at = text.indexOf("Assistant");
        QVERIFY2(reply_at >= 0 && text.size() > reply_at + 20, qPrintable(text));
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_chat.png"))));
    }

    void stopEndsGenerationAtOnce() {
        kvs::app::MainWindow w(m_model);
        w.show();
        send(w, "Tell me a very long story");
        // Stop right away, before the engine thread has even picked the request up: the
        // reply must still end as cancelled, and Stop must be disabled again.
        auto* stop = w.findChild<QPushButton*>("stopButton");
        auto* transcript = w.findChild<QTextBrowser*>("chatTranscript");
        QVERIFY(stop->isEnabled());
        QTest::mouseClick(stop, Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(transcript->toPlainText().contains("cancelled"), 10000);
        QVERIFY(!stop->isEnabled());
        QVERIFY2(!transcript->toPlainText().contains("max tokens"), qPrintable(transcript->toPlainText()));
    }

    void badModelShowsErrorAndKeepsRunning() {
        const QString bad = m_dir.filePath("broken.gguf");
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("GGUF\x03\x00\x00\x00garbage", 15);
        f.close();
        kvs::app::MainWindow w(bad);
        w.show();
        auto* hint = w.findChild<QLabel*>("chatHint");
        QTRY_VERIFY_WITH_TIMEOUT(hint->text().contains("Could not load the model"), 10000);
        QVERIFY2(hint->text().contains("broken.gguf"), qPrintable(hint->text()));
        QVERIFY(!w.findChild<QPushButton*>("sendButton")->isEnabled());
        QVERIFY(w.grab().save(QString::fromStdString(kvs::test::output_path("main_window_bad_model.png"))));
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
