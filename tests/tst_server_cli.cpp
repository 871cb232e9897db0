// ctest-labels: net
// `kvscope serve` as a program: it prints its URL and model, answers greedy requests with
// exactly the text `kvscope generate` prints for the same prompt and settings (plain and
// --chat), takes its key from --api-key-file, and on SIGTERM ends a stream in flight
// well-formed (finish_reason "abort", then [DONE]) and exits 0. Uses the installed default
// model, or the tiny test model when that is missing.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <thread>

#include "tests/support/live_server.h"
#include "tests/support/run_kvscope.h"
#include "tests/support/serve_process.h"

using namespace kvs;
using json = nlohmann::json;

namespace {

std::string model_path() {
    const std::string m = test::default_model_path();
    return m.empty() ? test::tiny_server_model() : m;
}

}  // namespace

class TestServerCli : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void greedyEqualsGenerate() {
        const std::string model = model_path();
        test::ServeProcess s;
        QVERIFY2(s.start({"--model", QString::fromStdString(model), "--served-model-name", "m1"}),
                 qPrintable(s.out + QString::fromUtf8(s.p.readAllStandardError())));
        QVERIFY(s.out.contains("model m1"));
        const QString prompt = "The three primary colours are";
        for (bool chat : {false, true}) {
            QStringList args = {
                "generate", "-m", QString::fromStdString(model), "-p", prompt, "--temp", "0", "-n", "32", "--no-stats"};
            if (chat) args << "--chat";
            const test::KvscopeRun g = test::run_kvscope(args);
            QCOMPARE(g.exit_code, 0);
            QString want = g.out;
            QVERIFY(want.endsWith('\n'));
            want.chop(1);  // generate ends its output with a newline
            QVERIFY(!want.isEmpty());
            json body = {{"model", "m1"}, {"max_tokens", 32}, {"temperature", 0}};
            if (chat) body["messages"] = json::array({{{"role", "user"}, {"content", prompt.toStdString()}}});
            else
                body["prompt"] = prompt.toStdString();
            auto r =
                s.client()->Post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump(), "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 200);
            const json j = test::body_json(r->body);
            const json& c = j["choices"][0];
            const std::string got = chat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
            QCOMPARE(QString::fromStdString(got), want);
        }
    }

    void apiKeyFile() {
        QTemporaryDir dir;
        const QString key = dir.filePath("key.txt");
        QFile f(key);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("sk-from-file\n");
        f.close();
        test::ServeProcess s;
        QVERIFY(s.start({"--model", QString::fromStdString(test::tiny_server_model()), "--api-key-file", key}));
        auto no = s.client()->Get("/v1/models");
        QVERIFY(no && no->status == 401);
        auto yes = s.client()->Get("/v1/models", {{"Authorization", "Bearer sk-from-file"}});
        QVERIFY(yes && yes->status == 200);
    }

    // SIGTERM with a stream in flight: the stream ends with an abort chunk and [DONE], the
    // program says it stopped and exits 0.
    void sigtermEndsCleanly() {
        test::ServeProcess s;
        QVERIFY(s.start({"--model", QString::fromStdString(test::tiny_server_model())}));
        std::atomic<int> chunks{0};
        std::string body;
        std::thread client([&] {
            httplib::Request req;
            req.method = "POST";
            req.path = "/v1/completions";
            req.set_header("Content-Type", "application/json");
            req.body = json{{"prompt", "go"}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}}.dump();
            req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
                body.append(d, n);
                ++chunks;
                return true;
            };
            auto c = s.client();
            (void)c->send(req);
        });
        for (int i = 0; i < 200 && chunks < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        QVERIFY(chunks >= 3);
        s.p.terminate();  // SIGTERM
        QVERIFY(s.p.waitForFinished(20000));
        client.join();
        QCOMPARE(s.p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(s.p.exitCode(), 0);
        const QString out = s.out + QString::fromUtf8(s.p.readAllStandardOutput());
        QVERIFY2(out.contains("stopped"), qPrintable(out));
        const test::SseBody sse = test::parse_sse(body);
        QVERIFY(sse.bad_lines.empty());
        QVERIFY(sse.done);
        QVERIFY(!sse.chunks.empty());
        QCOMPARE(sse.chunks.back()["choices"][0]["finish_reason"], json("abort"));
    }
};

QTEST_GUILESS_MAIN(TestServerCli)
#include "tst_server_cli.moc"
