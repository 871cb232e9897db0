// ctest-labels: ui remote llamacpp
// The remote chat window against a real llama-server (built from the llama-cpp-python
// source package by tests/tools/bench_llamacpp.sh with LLAMACPP_EXTRA_TARGETS=llama-server
// into $LLAMACPP_BUILD, default /tmp/llamacpp-build; skipped with the reason when it or the
// default model is absent): a chat streams into the transcript while another client keeps
// the second slot busy, the /metrics tab draws both slots of -np 2 as processing with the
// tokens each holds, Stop ends the reply (the partial reply kept), and the slots go idle.
// Saves docs' screenshot (tests/output/remote_llama_server_slots.png).
#include <httplib.h>
#include <QFileInfo>
#include <QProcess>
#include <QTabWidget>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <thread>

#include "app/remote/gui/remote_chat_window.h"
#include "tests/support/llama_server_process.h"
#include "tests/support/loopback_port.h"
#include "tests/support/test_paths.h"
#include "ui/chat_view.h"
#include "ui/remote_metrics_view.h"

using namespace kvs;
using namespace kvs::remote;

class TestRemoteLlamaWindow : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void chatSlotsAndStop() {
        const QString exe = test::llama_server_exe();
        if (exe.isEmpty()) QSKIP(test::llama_server_missing());
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("the default model is not installed (installer/setup.sh)");
        const int port = test::closed_loopback_port();
        QVERIFY(port > 0);
        QProcess p;
        QString log;
        QVERIFY2(test::start_llama_server(p, exe, model, port, &log), qPrintable(log));

        QTemporaryDir dir;
        auto secrets = std::make_shared<SecretStore>(dir.filePath(QStringLiteral("keys.json")), false);
        ConnectionStore store(dir.filePath(QStringLiteral("remote.ini")), secrets);
        RemoteConnection c;
        c.name = QStringLiteral("llama-server (2 slots)");
        c.baseUrl = QStringLiteral("http://127.0.0.1:%1").arg(port);
        c.kind = QStringLiteral("llama-server");
        QString error, id;
        QVERIFY2(store.save(c, {}, &error, &id), qPrintable(error));
        RemoteChatWindow w(&store);
        w.useConnection(id);
        w.resize(1500, 900);
        w.show();
        // llama-server has no telemetry stream: only the /metrics tab, shown.
        QVERIFY(!w.engineTabs()->isTabVisible(0));
        QCOMPARE(w.engineTabs()->currentWidget(), static_cast<QWidget*>(w.metricsView()));

        // Another client holds the second slot while the window's chat streams.
        struct Joined {
            std::thread t;
            ~Joined() {
                if (t.joinable()) t.join();
            }
        } other;
        other.t = std::thread([port] {
            httplib::Client h("127.0.0.1", port);
            h.set_read_timeout(120, 0);
            const nlohmann::json body = {
                {"messages", {{{"role", "user"}, {"content", "Write a long story about a lighthouse keeper."}}}},
                {"max_tokens", 100},
                {"temperature", 0}};
            h.Post("/v1/chat/completions", body.dump(), "application/json");
        });
        RemoteSampling s = w.sampling();
        s.temperature = 0;
        s.maxTokens = 300;
        w.setSampling(s);
        const QString prompt = QStringLiteral("Write a long story about a dragon who learns to share.");
        w.send(prompt);
        const int asked = int(w.chatView()->transcriptText().size());
        // Both slots busy, drawn as such, while the reply streams: the screenshot.
        QTRY_VERIFY_WITH_TIMEOUT(w.metricsView()->slotsText().count(QStringLiteral("processing")) == 2 &&
                                     w.chatView()->transcriptText().size() > asked + 60 && w.generating(),
                                 90000);
        const QString shot = QString::fromStdString(test::output_path("remote_llama_server_slots.png"));
        QVERIFY(w.grab().save(shot));
        qInfo("screenshot: %s", qPrintable(shot));
        qInfo("%s", qPrintable(w.metricsView()->slotsText()));
        // Stop: the reply ends at once, its text kept.
        const QString partial = w.chatView()->transcriptText();
        w.stop();
        QTRY_VERIFY_WITH_TIMEOUT(!w.generating(), 20000);
        QVERIFY(w.chatView()->transcriptText().startsWith(partial.left(partial.size() - 2)));
        other.t.join();
        // The server let go of it: both slots idle.
        QTRY_VERIFY_WITH_TIMEOUT(w.metricsView()->slotsText().count(QStringLiteral("idle")) == 2, 30000);
        p.terminate();
        p.waitForFinished(10000);
    }
};

QTEST_MAIN(TestRemoteLlamaWindow)
#include "tst_remote_llama_window.moc"
