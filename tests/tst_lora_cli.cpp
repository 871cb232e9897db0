// ctest-labels: unit model
// `kvscope generate` with the LoRA and beam options on the default model: the demo adapter
// (tests/data/lora_pirate) changes a chat answer so it opens with its greeting, a bad
// adapter ends the command with exit code 1 and the reason, and --beams prints its
// hypotheses (--length-penalty, --min-new-tokens accepted and applied).
#include <QtTest>

#include "tests/support/run_kvscope.h"
#include "tests/support/test_paths.h"

using namespace kvs;

class TstLoraCli : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() {
        m_model = QString::fromStdString(test::default_model_path());
        m_adapter = QString::fromStdString(test::source_root() + "/tests/data/lora_pirate");
    }

    void adapter_changes_the_answer() {
        if (m_model.isEmpty()) QSKIP("the default model is not installed (installer/setup.sh)");
        const QStringList base = {"generate", "-m", m_model,  "--chat", "-p", "What is the capital of France?",
                                  "-n",       "12", "--temp", "0"};
        const auto plain = test::run_kvscope(base + QStringList{"--no-stats"});
        QCOMPARE(plain.exit_code, 0);
        const auto with = test::run_kvscope(base + QStringList{"--lora", "pirate=" + m_adapter});
        QCOMPARE(with.exit_code, 0);
        qInfo("without: %s | with: %s", qPrintable(plain.out.trimmed()), qPrintable(with.out.trimmed()));
        QVERIFY2(!plain.out.startsWith("Ahoy matey!"), qPrintable(plain.out));
        QVERIFY2(with.out.startsWith("Ahoy matey!"), qPrintable(with.out));
        QVERIFY2(with.err.contains("LoRA adapter 'pirate': peft, rank 8, alpha 16, scale 2"), qPrintable(with.err));
        // --lora-scale 0 turns it off: the base model's answer again.
        const auto off = test::run_kvscope(base + QStringList{"--no-stats", "--lora", m_adapter, "--lora-scale", "0"});
        QCOMPARE(off.exit_code, 0);
        QCOMPARE(off.out, plain.out);
    }

    void bad_adapter_fails() {
        if (m_model.isEmpty()) QSKIP("the default model is not installed (installer/setup.sh)");
        const auto r = test::run_kvscope(
            {"generate", "-m", m_model, "-p", "hi", "-n", "2", "--lora", "x=" + m_adapter + "/does_not_exist"});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("no such file or folder"), qPrintable(r.err));
    }

    void beams_print_hypotheses() {
        if (m_model.isEmpty()) QSKIP("the default model is not installed (installer/setup.sh)");
        const auto r = test::run_kvscope({"generate", "-m", m_model, "--chat", "-p", "Name a color.", "-n", "6",
                                          "--beams", "3", "--length-penalty", "0.5", "--min-new-tokens", "3"});
        QCOMPARE(r.exit_code, 0);
        QCOMPARE(int(r.err.count("beam: score")), 3);
        QVERIFY(!r.out.trimmed().isEmpty());
    }

private:
    QString m_model, m_adapter;
};

QTEST_GUILESS_MAIN(TstLoraCli)
#include "tst_lora_cli.moc"
