// ctest-labels: net
// TGI's routes of app/server: huggingface_hub's InferenceClient (the project's venv) runs the
// course's text_generation(...) calls unchanged, plain / details / stream, seeded sampling,
// GET /info, and watermarked replies score z > 4 at /watermark/detect while plain ones stay
// under |z| 2 (tests/tools/tgi_client_check.py; skipped when huggingface_hub is missing).
// The route shapes and TGI's {"error", "error_type"} errors are checked from C++ too.
#include <QtTest>

#include "tests/support/live_server.h"
#include "tests/support/run_python.h"

using namespace kvs;
using json = nlohmann::json;

class TestServerTgi : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void routeShapes() {
        auto started = test::start_live_server(test::tiny_server_model());
        QVERIFY2(started, started.message().c_str());
        test::LiveServer& ls = **started;
        auto c = ls.client();
        const json body = {{"inputs", "Hello"}, {"parameters", {{"max_new_tokens", 5}, {"details", true}}}};
        auto g = c->Post("/generate", body.dump(), "application/json");
        QVERIFY(g && g->status == 200);
        const json gj = test::body_json(g->body);
        QVERIFY(gj["generated_text"].is_string());
        QCOMPARE(gj["details"]["generated_tokens"].get<int>(), int(gj["details"]["tokens"].size()));
        QVERIFY(gj["details"]["seed"].is_null());                     // greedy: TGI reports no seed
        auto compat = c->Post("/", body.dump(), "application/json");  // TGI's compat route: a list
        QVERIFY(compat && compat->status == 200);
        const json cj = test::body_json(compat->body);
        QVERIFY(cj.is_array() && cj.size() == 1);
        QCOMPARE(cj[0]["generated_text"], gj["generated_text"]);
        auto s = c->Post("/generate_stream", body.dump(), "application/json");
        QVERIFY(s && s->status == 200);
        std::string joined;
        json last;
        int n = 0;
        for (size_t pos = 0; (pos = s->body.find("data:", pos)) != std::string::npos; pos += 5) {
            const size_t end = s->body.find("\n\n", pos);
            last = test::body_json(s->body.substr(pos + 5, end - pos - 5));
            QVERIFY(last.contains("token"));
            QCOMPARE(last["index"].get<int>(), ++n);
            joined += last["token"]["text"].get<std::string>();
        }
        QCOMPARE(json(joined), gj["generated_text"]);
        QCOMPARE(last["generated_text"], gj["generated_text"]);
        QCOMPARE(last["details"]["generated_tokens"].get<int>(), n);
        auto info = c->Get("/info");
        QVERIFY(info && info->status == 200);
        QCOMPARE(test::body_json(info->body)["max_total_tokens"].get<int>(), ls.server->max_model_len());
        for (const char* bad :
             {"{", "{\"inputs\": 3}", "{\"inputs\": \"\"}", "{\"inputs\": \"x\", \"parameters\": {\"temperature\": 0}}",
              "{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": -2}}",
              "{\"inputs\": \"x\", \"parameters\": {\"top_n_tokens\": 3}}"}) {
            auto r = c->Post("/generate", bad, "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 422);
            const json e = test::body_json(r->body);
            QVERIFY2(e["error"].is_string() && e["error_type"] == "validation", r->body.c_str());
        }
        QCOMPARE(ls.server->requests_in_flight(), 0);
    }

    void inferenceClient() {
        const test::PythonRun probe = test::run_python({"-c", "import huggingface_hub"});
        if (!probe.ok) QSKIP("huggingface_hub is not in the project's venv (installer/requirements.txt)");
        std::string model = test::default_model_path();
        if (model.empty()) model = test::tiny_server_model();
        auto started = test::start_live_server(model);
        QVERIFY2(started, started.message().c_str());
        const QString url = QString::fromStdString((*started)->server->url());
        const test::PythonRun r =
            test::run_python({QString::fromStdString(test::tool_path("tgi_client_check.py")), url}, 600000);
        QVERIFY2(r.ok, qPrintable(r.error));
        qInfo("%s", qPrintable(r.out.trimmed()));
    }
};

QTEST_GUILESS_MAIN(TestServerTgi)
#include "tst_server_tgi.moc"
