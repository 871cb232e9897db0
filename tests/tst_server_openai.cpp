// ctest-labels: net
// The official `openai` Python package (the project's venv) against app/server on
// 127.0.0.1: models, chat and completions, streaming and not (joined deltas = the
// non-streamed greedy text, usage in the last chunk), a stop string, n = 3 with a seed,
// and the refusals it must see as BadRequestError / NotFoundError
// (tests/tools/openai_client_check.py). Skips when the package is not installed. Runs on
// the installed default model, or on the tiny test model when that is missing.
#include <QtTest>

#include "tests/support/live_server.h"
#include "tests/support/run_python.h"

using namespace kvs;

class TestServerOpenai : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void officialClient() {
        const test::PythonRun probe = test::run_python({"-c", "import openai"});
        if (!probe.ok) QSKIP("the openai package is not in the project's venv (installer/requirements.txt)");
        std::string model = test::default_model_path();
        if (model.empty()) model = test::tiny_server_model();
        server::ServerOptions so;
        so.served_model_name = "kvscope-test";
        auto ls = test::start_live_server(model, so);
        QVERIFY2(ls, ls.message().c_str());
        const QString url = QString::fromStdString((*ls)->server->url());
        const test::PythonRun r = test::run_python(
            {QString::fromStdString(test::tool_path("openai_client_check.py")), url, "kvscope-test"}, 300000);
        QVERIFY2(r.ok, qPrintable(r.error));
        qInfo("%s", qPrintable(r.out.trimmed()));
        QCOMPARE((*ls)->server->requests_in_flight(), 0);
    }
};

QTEST_GUILESS_MAIN(TestServerOpenai)
#include "tst_server_openai.moc"
