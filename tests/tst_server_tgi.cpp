// ctest-labels: net
// TGI's routes of app/server: huggingface_hub's InferenceClient (the project's venv) runs the
// course's text_generation(...) calls unchanged, plain / details / stream, seeded sampling,
// GET /info, and watermarked replies score z > 4 at /watermark/detect while plain ones stay
// under |z| 2 (tests/tools/tgi_client_check.py; skipped when huggingface_hub is missing).
// The route shapes and TGI's {"error", "error_type"} errors are checked from C++ too, and the
// details' log-probabilities (each token's, top_n_tokens, decoder_input_details' prefill)
// against an independent single-sequence pass (SequenceRunner: every position's logits, log-
// softmax in the test) and against the OpenAI route's logprobs for the same request.
#include <QtTest>

#include <cmath>

#include "engine/runtime/sequence_runner.h"
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
              "{\"inputs\": \"x\", \"parameters\": {\"top_n_tokens\": 21}}"}) {
            auto r = c->Post("/generate", bad, "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 422);
            const json e = test::body_json(r->body);
            QVERIFY2(e["error"].is_string() && e["error_type"] == "validation", r->body.c_str());
        }
        auto streamed_prefill =
            c->Post("/generate_stream", R"({"inputs": "x", "parameters": {"decoder_input_details": true}})",
                    "application/json");
        QVERIFY(streamed_prefill && streamed_prefill->status == 422);
        QCOMPARE(ls.server->requests_in_flight(), 0);
    }

    // details=true, decoder_input_details=true, top_n_tokens=3 on a greedy request: the prefill
    // lists the prompt's ids with the first logprob null and every other one the log-softmax
    // of the previous position's logits at that id, as a single SequenceRunner pass over the
    // prompt computes them; each generated token's logprob likewise, and the top 3 best first
    // with the greedy token first. The same request again (its prompt's blocks now in the
    // prefix cache) gives the same prefill: such a request computes its whole prompt. The
    // stream gives the same logprobs and top tokens; the OpenAI route's logprobs for the same
    // greedy request are the same numbers.
    void detailsLogprobs() {
        auto started = test::start_live_server(test::tiny_server_model());
        QVERIFY2(started, started.message().c_str());
        test::LiveServer& ls = **started;
        auto c = ls.client();
        const std::string inputs =
            "Once upon a time there was a small village by the sea, and every morning the fishermen went out "
            "before the sun rose over the hills";
        const int n = 6;
        const json body = {
            {"inputs", inputs},
            {"parameters",
             {{"max_new_tokens", n}, {"details", true}, {"decoder_input_details", true}, {"top_n_tokens", 3}}}};
        auto g = c->Post("/generate", body.dump(), "application/json");
        QVERIFY(g && g->status == 200);
        const json d = test::body_json(g->body)["details"];
        const json& prefill = d["prefill"];
        const std::vector<int32_t> prompt = ls.session->encode_text(inputs);
        QVERIFY(prompt.size() > 32);  // two full blocks for the prefix cache
        QCOMPARE(prefill.size(), prompt.size());
        QVERIFY(prefill[0]["logprob"].is_null());
        QVERIFY(!prefill[0].contains("special"));   // TGI's PrefillToken has none
        const int n_gen = int(d["tokens"].size());  // n, or fewer after an end-of-generation token
        QVERIFY(n_gen >= 1 && n_gen <= n);
        QCOMPARE(d["top_tokens"].size(), size_t(n_gen));

        // The independent pass: prompt + generated tokens through one sequence, all logits.
        std::vector<int32_t> all = prompt;
        for (const json& t : d["tokens"]) all.push_back(t["id"].get<int32_t>());
        auto runner = ls.session->make_runner(RunnerOptions{});
        QVERIFY(runner);
        std::vector<float> logits;  // [all.size() - 1, n_vocab]
        QVERIFY((*runner)->eval(std::vector<int32_t>(all.begin(), all.end() - 1), true, &logits).is_ok());
        const int n_vocab = ls.session->model().config.n_vocab;
        auto ref = [&](size_t pos) {  // log p(all[pos] | all[0..pos)) in double
            const float* row = logits.data() + (pos - 1) * size_t(n_vocab);
            double mx = row[0], sum = 0;
            for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, double(row[v]));
            for (int v = 0; v < n_vocab; ++v) sum += std::exp(double(row[v]) - mx);
            return double(row[all[pos]]) - mx - std::log(sum);
        };
        double worst = 0;
        for (size_t i = 1; i < prompt.size(); ++i) {
            QCOMPARE(prefill[i]["id"].get<int32_t>(), prompt[i]);
            const double got = prefill[i]["logprob"].get<double>();
            worst = std::max(worst, std::abs(got - ref(i)));
            QVERIFY2(std::abs(got - ref(i)) < 1e-3,
                     qPrintable(QString("prefill %1: %2 vs %3").arg(i).arg(got).arg(ref(i))));
        }
        for (int j = 0; j < n_gen; ++j) {
            const json& t = d["tokens"][size_t(j)];
            const json& top = d["top_tokens"][size_t(j)];
            const double got = t["logprob"].get<double>();
            worst = std::max(worst, std::abs(got - ref(prompt.size() + size_t(j))));
            QVERIFY2(std::abs(got - ref(prompt.size() + size_t(j))) < 1e-3, qPrintable(QString::number(j)));
            QCOMPARE(top.size(), size_t(3));
            QCOMPARE(top[0]["id"], t["id"]);  // greedy: the most likely token
            QCOMPARE(top[0]["logprob"], t["logprob"]);
            QVERIFY(top[0]["logprob"].get<double>() >= top[1]["logprob"].get<double>() &&
                    top[1]["logprob"].get<double>() >= top[2]["logprob"].get<double>());
            QVERIFY(top[1].contains("special"));
        }
        qInfo("prefill and token logprobs vs one sequence's log-softmax: max |delta| %.2e over %zu positions", worst,
              prompt.size() - 1 + n_gen);

        auto again = c->Post("/generate", body.dump(), "application/json");
        QVERIFY(again && again->status == 200);
        QCOMPARE(test::body_json(again->body)["details"]["prefill"], prefill);

        auto s = c->Post("/generate_stream",
                         json{{"inputs", inputs}, {"parameters", {{"max_new_tokens", n}, {"top_n_tokens", 3}}}}.dump(),
                         "application/json");
        QVERIFY(s && s->status == 200);
        int k = 0;
        for (size_t pos = 0; (pos = s->body.find("data:", pos)) != std::string::npos; pos += 5, ++k) {
            const size_t end = s->body.find("\n\n", pos);
            const json e = test::body_json(s->body.substr(pos + 5, end - pos - 5));
            QVERIFY(k < n_gen);
            QCOMPARE(e["token"]["logprob"], d["tokens"][size_t(k)]["logprob"]);
            QCOMPARE(e["top_tokens"], d["top_tokens"][size_t(k)]);
        }
        QCOMPARE(k, n_gen);

        auto o = c->Post(
            "/v1/completions",
            json{{"prompt", inputs}, {"max_tokens", n}, {"temperature", 0}, {"logprobs", 3}, {"ignore_eos", true}}
                .dump(),
            "application/json");
        QVERIFY(o && o->status == 200);
        const json lp = test::body_json(o->body)["choices"][0]["logprobs"];
        for (int j = 0; j < n_gen; ++j)
            QCOMPARE(lp["token_logprobs"][size_t(j)].get<double>(), d["tokens"][size_t(j)]["logprob"].get<double>());
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
