// ctest-labels: ui unit
// app/cli/progress_line: ProgressLine writes plain lines (no carriage return, one per new
// stage, and the one reaching 100%) to a file or pipe, and one line rewritten in place
// with a bar on a terminal, ended by a newline; SigintCancel turns the first SIGINT into
// its cancel flag without ending the process and puts the previous handler back. (Labelled
// ui only because app/ code links with the window's library.)
#include <QtTest>

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "app/cli/progress_line.h"
#include "engine/core/progress.h"

using namespace kvs;

namespace {
std::string slurp(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    char buf[512];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    return s;
}
}  // namespace

class TstProgressLine : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void progressLineOnAFileAndATerminal() {
        std::FILE* f = std::tmpfile();
        QVERIFY(f);
        {
            app::ProgressLine plain("int4-gptq", f, false);
            Progress p = plain.progress();
            p.report("GPTQ: layer 1 / 2", 0.1);
            p.report("GPTQ: layer 1 / 2", 0.3);  // same words: no new line
            p.report("int4-gptq: done", 1.0);
        }
        const std::string text = slurp(f);
        std::fclose(f);
        QVERIFY2(text.find('\r') == std::string::npos, text.c_str());
        QCOMPARE(int(std::count(text.begin(), text.end(), '\n')), 2);
        QVERIFY2(text.find("int4-gptq   10%  GPTQ: layer 1 / 2") != std::string::npos, text.c_str());
        QVERIFY2(text.find("100%  int4-gptq: done") != std::string::npos, text.c_str());

        std::FILE* t = std::tmpfile();
        {
            app::ProgressLine tty("q4_0", t, true);
            Progress p = tty.progress();
            p.report("q4_0: layer 1 / 2", 0.5);
            p.report("q4_0: done", 1.0);
        }
        const std::string ttext = slurp(t);
        std::fclose(t);
        QVERIFY2(ttext.rfind("\rq4_0  [##########..........]   50%  q4_0: layer 1 / 2", 0) == 0, ttext.c_str());
        QVERIFY2(ttext.find("\rq4_0  [####################]  100%  q4_0: done") != std::string::npos, ttext.c_str());
        QCOMPARE(ttext.back(), '\n');
        QCOMPARE(int(std::count(ttext.begin(), ttext.end(), '\n')), 1);
    }

    void sigintRaisesTheFlag() {
        struct sigaction before {};
        sigaction(SIGINT, nullptr, &before);
        {
            app::SigintCancel sigint;
            QVERIFY(!sigint.cancelled());
            Progress p({}, sigint.flag());
            QVERIFY(!p.cancelled());
            std::raise(SIGINT);  // the process keeps running
            QVERIFY(sigint.cancelled());
            QVERIFY(p.cancelled());
        }
        struct sigaction after {};
        sigaction(SIGINT, nullptr, &after);
        QVERIFY(after.sa_handler == before.sa_handler);  // the previous handler is back
    }
};

QTEST_APPLESS_MAIN(TstProgressLine)
#include "tst_progress_line.moc"
