// ctest-labels: net model
// LoRA adapters on the local server, as vLLM serves them: `kvscope serve --lora-modules`
// (NAME=PATH and the JSON form) lists each adapter in /v1/models (parent = the base model,
// root = its path); the official openai client asking for model=<adapter> gets exactly what
// `kvscope generate --chat --lora` answers greedy, while base requests sent at the same time
// get the base answer; unknown models are 404 model_not_found; vLLM's runtime load / unload
// routes work with --enable-lora-runtime (tests/tools/openai_lora_check.py) and answer 404
// naming the flag without it; bad --lora-modules values end the command with the reason.
// The adapter is the demo one for the default model (tests/data/lora_pirate).
#include <QProcess>
#include <QtTest>

#include "tests/support/live_server.h"
#include "tests/support/run_kvscope.h"
#include "tests/support/serve_process.h"
#include "tests/support/run_python.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

// What `kvscope generate --chat` prints for the question, greedy (its final newline cut).
QString generate(const QString& model, const QString& question, int n, const QStringList& extra) {
    const test::KvscopeRun g = test::run_kvscope(QStringList{"generate", "-m", model, "--chat", "-p", question, "-n",
                                                             QString::number(n), "--temp", "0", "--no-stats"} +
                                                 extra);
    if (g.exit_code != 0 || !g.out.endsWith('\n')) return {};
    return g.out.chopped(1);
}

}  // namespace

class TestServerLora : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void officialClientByAdapterName() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
        if (!test::run_python({"-c", "import openai"}).ok)
            QSKIP("the openai package is not in the project's venv (installer/requirements.txt)");
        const QString m = QString::fromStdString(model);
        const QString path = QString::fromStdString(test::source_root() + "/tests/data/lora_pirate");
        const QString question = "What is the capital of France?";
        const int n = 16;
        const QString baseText = generate(m, question, n, {});
        const QString pirateText = generate(m, question, n, {"--lora", "pirate=" + path});
        QVERIFY(!baseText.isEmpty() && !pirateText.isEmpty());
        QVERIFY2(pirateText.startsWith("Ahoy matey!") && baseText != pirateText, qPrintable(pirateText));

        test::ServeProcess s;
        const QString jsonModule = QString(R"({"name": "pirate-json", "path": "%1"})").arg(path);
        QVERIFY2(s.start({"-m", m, "--served-model-name", "smollm2", "--enable-lora-runtime", "--lora-modules",
                          "pirate=" + path, jsonModule}),
                 qPrintable(s.out + QString::fromUtf8(s.p.readAllStandardError())));
        QVERIFY2(s.out.contains("LoRA adapter pirate: peft, rank 8, scale 2"), qPrintable(s.out));

        const json want = {{"base", "smollm2"},
                           {"adapter", "pirate"},
                           {"path", path.toStdString()},
                           {"question", question.toStdString()},
                           {"max_tokens", n},
                           {"base_text", baseText.toStdString()},
                           {"adapter_text", pirateText.toStdString()}};
        const test::PythonRun r =
            test::run_python({QString::fromStdString(test::tool_path("openai_lora_check.py")),
                              QString("http://127.0.0.1:%1").arg(s.port), QString::fromStdString(want.dump())},
                             600000);
        QVERIFY2(r.ok, qPrintable(r.error));
        qInfo("%s", qPrintable(r.out.trimmed()));

        // The JSON form of --lora-modules made a model too.
        httplib::Client c("127.0.0.1", s.port);
        auto res = c.Get("/v1/models");
        QVERIFY(res && res->status == 200);
        const json models = test::body_json(res->body)["data"];
        bool found = false;
        for (const json& card : models)
            if (card["id"] == "pirate-json") {
                found = true;
                QCOMPARE(card["parent"].get<std::string>(), std::string("smollm2"));
                QCOMPARE(card["root"].get<std::string>(), path.toStdString());
            }
        QVERIFY2(found, models.dump().c_str());
    }

    void runtimeRoutesAreOffByDefault() {
        auto ls = test::start_live_server(test::tiny_server_model());
        QVERIFY2(ls, ls.message().c_str());
        auto c = (*ls)->client();
        for (const char* route : {"/v1/load_lora_adapter", "/v1/unload_lora_adapter"}) {
            auto r = c->Post(route, R"({"lora_name": "a", "lora_path": "/tmp"})", "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 404);
            const json j = test::body_json(r->body);
            QVERIFY2(test::is_openai_error(j), r->body.c_str());
            QVERIFY2(r->body.find("--enable-lora-runtime") != std::string::npos, r->body.c_str());
        }
        auto models = c->Get("/v1/models");
        QVERIFY(models && models->status == 200);
        QCOMPARE(test::body_json(models->body)["data"].size(), size_t{1});
        // A model name that is neither the base nor an adapter.
        auto r = c->Post("/v1/completions", R"({"model": "pirate", "prompt": "hi", "max_tokens": 1})",
                         "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, 404);
        QCOMPARE(test::body_json(r->body)["error"]["code"].get<std::string>(), std::string("model_not_found"));
    }

    void badLoraModulesEndTheCommand_data() {
        QTest::addColumn<QString>("module");
        QTest::addColumn<QString>("message");
        QTest::newRow("no =") << "pirate" << "expected NAME=PATH";
        QTest::newRow("empty path") << "pirate=" << "expected NAME=PATH";
        QTest::newRow("json without path") << R"({"name": "p"})" << "\"path\" must be a non-empty string";
        QTest::newRow("json other base") << R"({"name": "p", "path": "/x", "base_model_name": "llama"})"
                                         << "base_model_name must be the served model";
        QTest::newRow("bad json") << "{\"name\": " << "not a JSON object";
        QTest::newRow("missing folder") << "p=/nonexistent/adapter" << "no such file or folder";
        QTest::newRow("base name") << "tiny=/x" << "is the served model's name";
        QTest::newRow("bad name") << "a b=/x" << "letters, digits";
    }
    void badLoraModulesEndTheCommand() {
        QFETCH(QString, module);
        QFETCH(QString, message);
        const auto r = test::run_kvscope({"serve", "-m", QString::fromStdString(test::tiny_server_model()),
                                          "--served-model-name", "tiny", "--port", "0", "--lora-modules", module});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestServerLora)
#include "tst_server_lora.moc"
