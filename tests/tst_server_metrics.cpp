// ctest-labels: net
// app/server's /metrics read by prometheus_client's own parser (an independent
// implementation of the text format) and compared with vLLM's definitions as
// tests/tools/make_vllm_metrics.py transcribes them: families, types, histogram buckets,
// the model_name label, counts that follow the requests sent
// (tests/tools/server_metrics_check.py; skipped without prometheus_client).
#include <QtTest>

#include "tests/support/live_server.h"
#include "tests/support/run_python.h"

using namespace kvs;

class TestServerMetrics : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void parsedByPrometheusClient() {
        const test::PythonRun probe = test::run_python({"-c", "import prometheus_client.parser"});
        if (!probe.ok) QSKIP("prometheus_client is not in the project's venv (installer/requirements.txt)");
        server::ServerOptions so;
        so.served_model_name = "org/model-name";
        auto started = test::start_live_server(test::tiny_server_model(), so);
        QVERIFY2(started, started.message().c_str());
        test::LiveServer& ls = **started;
        const test::PythonRun r = test::run_python({QString::fromStdString(test::tool_path("server_metrics_check.py")),
                                                    QString::fromStdString(ls.server->url()), "org/model-name",
                                                    QString::number(ls.server->max_model_len())});
        QVERIFY2(r.ok, qPrintable(r.error));
        qInfo("%s", qPrintable(r.out.trimmed()));
    }
};

QTEST_GUILESS_MAIN(TestServerMetrics)
#include "tst_server_metrics.moc"
