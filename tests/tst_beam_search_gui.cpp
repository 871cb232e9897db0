// ctest-labels: ui
// The Sampling dock's beam search row (app/beam_search_form): beams, the length penalty
// (greyed out without beams) and min new tokens load from and store into a chat's settings.
// A chat sent with 3 beams, length penalty 2 and at least 4 new tokens on a tiny model gets,
// as its reply, the best hypothesis of the engine's beam search run here through a Session
// on the same templated prompt; the settings are saved with the chat and come back in the
// form when the window opens again. The dock is saved as beam_search_form.png.
#include <QDoubleSpinBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include "app/chat_store.h"
#include "app/main_window.h"
#include "app/sampling_form.h"
#include "engine/runtime/session.h"
#include "tests/support/test_paths.h"
#include "tests/support/tiny_model.h"
#include "ui/chat_view.h"

using kvs::app::ChatSettings;
using kvs::app::SamplingForm;

class TestBeamSearchGui : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_model;

    static QSpinBox* beams(QWidget* w) { return w->findChild<QSpinBox*>("beamWidth"); }
    static QDoubleSpinBox* penalty(QWidget* w) { return w->findChild<QDoubleSpinBox*>("lengthPenalty"); }
    static QSpinBox* minNew(QWidget* w) { return w->findChild<QSpinBox*>("minNewTokens"); }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_DATA_HOME", m_dir.filePath("data").toUtf8());
        QStandardPaths::setTestModeEnabled(true);
        m_model = m_dir.filePath("tiny.gguf");
        QVERIFY(kvs::test::write_tiny_gguf(m_model.toStdString(), kvs::test::TinyModelSpec{}).is_ok());
    }

    void formLoadsAndStores() {
        SamplingForm f;
        QVERIFY(beams(&f) && penalty(&f) && minNew(&f));
        ChatSettings s;
        f.load(s);
        QCOMPARE(beams(&f)->value(), 1);
        QCOMPARE(beams(&f)->text(), QString("off"));
        QVERIFY(!penalty(&f)->isEnabled());  // the penalty ranks hypotheses: nothing to rank without beams
        s.beams = 3;
        s.lengthPenalty = -0.5;
        s.minNewTokens = 5;
        f.load(s);
        QCOMPARE(beams(&f)->value(), 3);
        QCOMPARE(penalty(&f)->value(), -0.5);
        QCOMPARE(minNew(&f)->value(), 5);
        QVERIFY(penalty(&f)->isEnabled());
        beams(&f)->setValue(1);
        QVERIFY(!penalty(&f)->isEnabled());
        beams(&f)->setValue(8);
        penalty(&f)->setValue(2.0);
        minNew(&f)->setValue(7);
        ChatSettings out;
        f.store(&out);
        QCOMPARE(out.beams, 8);
        QCOMPARE(out.lengthPenalty, 2.0);
        QCOMPARE(out.minNewTokens, 7);
    }

    void chatReplyIsTheBestHypothesis() {
        const QString chats = m_dir.filePath("chats.json");
        const QString text = "Tell me about the sea";
        QString reply;
        {
            kvs::app::MainWindow w(m_model, nullptr, chats);
            w.resize(1200, 800);
            w.show();
            auto* send = w.chatView()->findChild<QPushButton*>("sendButton");
            QTRY_VERIFY_WITH_TIMEOUT(send->isEnabled(), 20000);
            auto* form = w.findChild<SamplingForm*>();
            QVERIFY(form);
            beams(form)->setValue(3);
            penalty(form)->setValue(2.0);
            minNew(form)->setValue(4);
            QVERIFY(form->grab().save(QString::fromStdString(kvs::test::output_path("beam_search_form.png"))));
            w.chatView()->findChild<QPlainTextEdit*>("chatPrompt")->setPlainText(text);
            QTest::mouseClick(send, Qt::LeftButton);
            auto* transcript = w.findChild<QTextBrowser*>("chatTranscript");
            QTRY_VERIFY_WITH_TIMEOUT(send->isEnabled() && transcript->toPlainText().contains("tok/s"), 120000);
            QCOMPARE(w.store().conversations().size(), 1);
            const auto& turns = w.store().conversations()[0].turns;
            QCOMPARE(turns.size(), 2);
            reply = turns[1].content;
        }
        // The same request through the Session: the chat template of one user message, the
        // chat's max tokens (512), 3 beams, penalty 2, at least 4 tokens.
        auto session = kvs::Session::open(m_model.toStdString());
        QVERIFY2(session.is_ok(), session.message().c_str());
        kvs::EngineOptions o;
        o.backend = "cpu";
        auto e = (*session)->make_engine(o);
        QVERIFY2(e.is_ok(), e.message().c_str());
        kvs::GenerationRequest g;
        g.prompt = (*session)->encode_chat({{"user", text.toStdString()}});
        g.params.max_tokens = ChatSettings{}.maxTokens;
        g.params.length_penalty = 2.0f;
        g.params.min_new_tokens = 4;
        g.beam_width = 3;
        auto id = (*e)->submit(g);
        QVERIFY2(id.is_ok(), id.message().c_str());
        QVERIFY((*e)->run_until_idle().is_ok());
        const auto hyps = (*e)->beam_hypotheses(*id);
        QVERIFY(!hyps.empty());
        QVERIFY(hyps[0].tokens.size() >= 4);
        const QString want = QString::fromStdString((*session)->tokenizer().decode(hyps[0].tokens));
        qInfo("best of %zu hypotheses: %zu tokens, score %.4f", hyps.size(), hyps[0].tokens.size(), hyps[0].score);
        QCOMPARE(reply.trimmed(), want.trimmed());

        // Saved with the chat: the form shows them again in a new window.
        kvs::app::MainWindow w(m_model, nullptr, chats);
        w.show();
        QCOMPARE(w.conversationCount(), 1);
        auto* form = w.findChild<SamplingForm*>();
        QTRY_COMPARE(beams(form)->value(), 3);
        QCOMPARE(penalty(form)->value(), 2.0);
        QCOMPARE(minNew(form)->value(), 4);
    }
};

QTEST_MAIN(TestBeamSearchGui)
#include "tst_beam_search_gui.moc"
