// ctest-labels: net model
// logprobs over HTTP against llama.cpp: for each prompt of tests/fixtures/smollm2_reference.json
// (llama.cpp's logits of the default model, made by tests/tools/make_llama_reference.py),
// /v1/completions with the prompt's token ids, greedy, logprobs 20. While our greedy tokens
// follow llama.cpp's, each token's logprob must equal llama.cpp's log-softmax at that token
// (its logit minus the full-vocabulary logsumexp) and each listed alternative that llama.cpp
// also ranks in its top 20 must too, within the logit tolerance tst_llama_reference uses
// (1.5); the worst differences are printed. The log-probabilities are the raw model
// distribution (vLLM's default), so temperature must not change them: a request at
// temperature 0.5 with a seed reports, for the tokens it draws, the same values as the
// greedy request for the same prefix (checked on the first token). Skips without the model.
// TGI's prefill log-probabilities (POST /generate with decoder_input_details) against
// llama.cpp too: the prompt followed by llama.cpp's greedy text, teacher-forced, must give at
// each of those positions llama.cpp's log-softmax of its greedy token. Completions'
// text_offset counts characters of the UTF-8 decoded text (OpenAI's and vLLM's), checked on
// the multilingual prompt whose reply holds "ñ" against Qt's own UTF-8 decoding.
#include <QString>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/live_server.h"

using namespace kvs;
using json = nlohmann::json;

class TestServerLogprobs : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void againstLlamaCpp() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        std::ifstream f(test::fixture_path("smollm2_reference.json"));
        QVERIFY(f.good());
        const json fx = json::parse(f);
        auto ls = test::start_live_server(model);
        QVERIFY2(ls, ls.message().c_str());
        const Tokenizer& tok = (*ls)->session->tokenizer();
        double worst_chosen = 0, worst_alt = 0;
        int n_chosen = 0, n_alt = 0, n_cases = 0;
        for (const json& c : fx["cases"]) {
            const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
            const auto ref_ids = c["greedy_ids"].get<std::vector<int32_t>>();
            const json& steps = c["steps"];
            const int n = static_cast<int>(steps.size());
            auto r = (*ls)->client(300)->Post("/v1/completions",
                                              json{{"prompt", prompt},
                                                   {"max_tokens", n},
                                                   {"temperature", 0},
                                                   {"ignore_eos", true},
                                                   {"logprobs", 20},
                                                   {"return_token_ids", true}}
                                                  .dump(),
                                              "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 200);
            const json j = test::body_json(r->body);
            const json& ch = j["choices"][0];
            const auto ours = ch["token_ids"].get<std::vector<int32_t>>();
            const json& lp = ch["logprobs"];
            QCOMPARE(lp["token_logprobs"].size(), ours.size());
            ++n_cases;
            for (int p = 0; p < n && p < static_cast<int>(ours.size()); ++p) {
                if (ours[size_t(p)] != ref_ids[size_t(p)]) break;  // past a near-tie flip the contexts differ
                const json& st = steps[size_t(p)];
                const auto top_ids = st["top_ids"].get<std::vector<int32_t>>();
                const auto top_logits = st["top_logits"].get<std::vector<double>>();
                const double lse = st["logsumexp"].get<double>();
                std::map<std::string, double> ref_lp;  // token string -> llama.cpp's log-softmax
                double ref_chosen = NAN;
                for (size_t k = 0; k < top_ids.size(); ++k) {
                    ref_lp[tok.token_to_piece(top_ids[k])] = top_logits[k] - lse;
                    if (top_ids[k] == ours[size_t(p)]) ref_chosen = top_logits[k] - lse;
                }
                QVERIFY2(!std::isnan(ref_chosen), "llama.cpp's greedy token is in its own top 20");
                const double d = std::abs(lp["token_logprobs"][size_t(p)].get<double>() - ref_chosen);
                worst_chosen = std::max(worst_chosen, d);
                ++n_chosen;
                QVERIFY2(d < 1.5, qPrintable(QString("case %1 position %2: logprob %3 vs llama.cpp %4")
                                                 .arg(QString::fromStdString(c["name"].get<std::string>()))
                                                 .arg(p)
                                                 .arg(lp["token_logprobs"][size_t(p)].get<double>())
                                                 .arg(ref_chosen)));
                const json& alts = lp["top_logprobs"][size_t(p)];
                QVERIFY(alts.size() >= 20);
                for (auto it = alts.begin(); it != alts.end(); ++it) {
                    auto ref = ref_lp.find(it.key());
                    if (ref == ref_lp.end()) continue;
                    const double da = std::abs(it.value().get<double>() - ref->second);
                    worst_alt = std::max(worst_alt, da);
                    ++n_alt;
                    QVERIFY2(da < 1.5, qPrintable(QString("alternative '%1': %2 vs llama.cpp %3")
                                                      .arg(QString::fromStdString(it.key()))
                                                      .arg(it.value().get<double>())
                                                      .arg(ref->second)));
                }
            }
        }
        QVERIFY(n_chosen >= 5 * n_cases);
        QVERIFY(n_alt > n_chosen);
        qInfo("logprobs vs llama.cpp log-softmax: %d sampled tokens (max |delta| %.4f), %d alternatives (max |delta| "
              "%.4f), %d prompts",
              n_chosen, worst_chosen, n_alt, worst_alt, n_cases);
    }

    // Teacher forcing llama.cpp's greedy reply through TGI's prefill: each position's logprob
    // against llama.cpp's log-softmax of that (its greedy) token, where our encoding of
    // prompt + reply text gives llama.cpp's ids.
    void tgiPrefillAgainstLlamaCpp() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        std::ifstream f(test::fixture_path("smollm2_reference.json"));
        QVERIFY(f.good());
        const json fx = json::parse(f);
        auto ls = test::start_live_server(model);
        QVERIFY2(ls, ls.message().c_str());
        double worst = 0, sum = 0;
        int n_checked = 0, n_cases = 0;
        for (const json& c : fx["cases"]) {
            const std::string text = c["prompt"].get<std::string>() + c["greedy_text"].get<std::string>();
            std::vector<int32_t> want = c["prompt_ids"].get<std::vector<int32_t>>();
            const size_t n_prompt = want.size();
            const auto greedy = c["greedy_ids"].get<std::vector<int32_t>>();
            want.insert(want.end(), greedy.begin(), greedy.end());
            const std::vector<int32_t> ours = (*ls)->session->encode_text(text);
            size_t same = 0;
            while (same < ours.size() && same < want.size() && ours[same] == want[same]) ++same;
            if (same <= n_prompt + 4) continue;  // our encoding of the text is not llama.cpp's ids here
            auto r = (*ls)->client(300)->Post(
                "/generate",
                json{{"inputs", text},
                     {"parameters", {{"max_new_tokens", 1}, {"details", true}, {"decoder_input_details", true}}}}
                    .dump(),
                "application/json");
            QVERIFY(r);
            QCOMPARE(r->status, 200);
            const json prefill = test::body_json(r->body)["details"]["prefill"];
            QCOMPARE(prefill.size(), ours.size());
            ++n_cases;
            const json& steps = c["steps"];
            for (size_t j = 0; j < steps.size() && n_prompt + j < same; ++j) {
                const auto top_ids = steps[j]["top_ids"].get<std::vector<int32_t>>();
                const auto top_logits = steps[j]["top_logits"].get<std::vector<double>>();
                const double lse = steps[j]["logsumexp"].get<double>();
                double ref = NAN;
                for (size_t k = 0; k < top_ids.size(); ++k)
                    if (top_ids[k] == greedy[j]) ref = top_logits[k] - lse;
                QVERIFY2(!std::isnan(ref), "llama.cpp's greedy token is in its own top list");
                const json& e = prefill[n_prompt + j];
                QCOMPARE(e["id"].get<int32_t>(), greedy[j]);
                const double d = std::abs(e["logprob"].get<double>() - ref);
                worst = std::max(worst, d);
                sum += d;
                ++n_checked;
                QVERIFY2(d < 1.5, qPrintable(QString("case %1 reply position %2: prefill logprob %3 vs llama.cpp %4")
                                                 .arg(QString::fromStdString(c["name"].get<std::string>()))
                                                 .arg(j)
                                                 .arg(e["logprob"].get<double>())
                                                 .arg(ref)));
            }
        }
        QVERIFY2(n_cases >= 3, qPrintable(QString("only %1 cases encode as llama.cpp's ids").arg(n_cases)));
        QVERIFY(n_checked >= 8 * n_cases);  // the fixture details 16 steps a prompt
        qInfo("TGI prefill logprobs vs llama.cpp log-softmax: %d positions of %d prompts, max |delta| %.4f, mean %.4f",
              n_checked, n_cases, worst, sum / n_checked);
    }

    // text_offset in characters: where each token starts in the decoded reply.
    void textOffsetCountsCharacters() {
        const std::string model = test::default_model_path();
        if (model.empty()) QSKIP("default model not installed (installer/fetch_model.sh)");
        std::ifstream f(test::fixture_path("smollm2_reference.json"));
        const json fx = json::parse(f);
        std::vector<int32_t> prompt;
        for (const json& c : fx["cases"])
            if (c["name"] == "multilingual") prompt = c["prompt_ids"].get<std::vector<int32_t>>();
        QVERIFY(!prompt.empty());
        auto ls = test::start_live_server(model);
        QVERIFY2(ls, ls.message().c_str());
        json body = {{"prompt", prompt}, {"max_tokens", 10}, {"temperature", 0}, {"logprobs", 0}, {"ignore_eos", true}};
        auto r = (*ls)->client(300)->Post("/v1/completions", body.dump(), "application/json");
        QVERIFY(r && r->status == 200);
        const json ch = test::body_json(r->body)["choices"][0];
        const std::string text = ch["text"].get<std::string>();
        const QList<uint> cps = QString::fromStdString(text).toUcs4();  // code points, decoded by Qt
        QVERIFY2(std::any_of(cps.begin(), cps.end(), [](uint cp) { return cp > 0x7f; }),
                 qPrintable("the reply has no character beyond ASCII: " + QString::fromStdString(text)));
        const json& lp = ch["logprobs"];
        const auto offsets = lp["text_offset"].get<std::vector<int64_t>>();
        const auto tokens = lp["tokens"].get<std::vector<std::string>>();
        QCOMPARE(offsets.size(), tokens.size());
        QCOMPARE(offsets[0], int64_t(0));
        int64_t bytes = 0;
        bool differs_from_bytes = false;
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (i > 0) QVERIFY(offsets[i] >= offsets[i - 1]);
            QVERIFY(offsets[i] <= int64_t(cps.size()));
            differs_from_bytes |= offsets[i] != bytes;
            if (tokens[i].rfind("bytes:", 0) == 0) {  // part of a character: its bytes, not text
                bytes += int64_t((tokens[i].size() - 6) / 4);
                continue;
            }
            bytes += int64_t(tokens[i].size());
            const QString rest =
                QString::fromUcs4(reinterpret_cast<const char32_t*>(cps.data()) + offsets[i], cps.size() - offsets[i]);
            QVERIFY2(rest.startsWith(QString::fromStdString(tokens[i])),
                     qPrintable(QString("token %1 '%2' at character %3 of '%4'")
                                    .arg(i)
                                    .arg(QString::fromStdString(tokens[i]))
                                    .arg(offsets[i])
                                    .arg(QString::fromStdString(text))));
        }
        QVERIFY2(differs_from_bytes, "every offset equals the byte count: the reply tests nothing here");
        // Streamed: the same offsets, chunk by chunk.
        body["stream"] = true;
        auto s = (*ls)->client(300)->Post("/v1/completions", body.dump(), "application/json");
        QVERIFY(s && s->status == 200);
        std::vector<int64_t> streamed;
        for (const json& chunk : test::parse_sse(s->body).chunks)
            for (const json& c : chunk["choices"])
                if (c["logprobs"].is_object())
                    for (const json& o : c["logprobs"]["text_offset"]) streamed.push_back(o.get<int64_t>());
        QCOMPARE(streamed, offsets);
        qInfo("reply '%s': text_offset %s", text.c_str(), lp["text_offset"].dump().c_str());
    }

    // Raw model distribution: temperature and penalties do not change the reported values.
    void rawDistribution() {
        const std::string model = test::default_model_path().empty() ? test::tiny_server_model()
                                                                      : test::default_model_path();
        auto ls = test::start_live_server(model);
        QVERIFY2(ls, ls.message().c_str());
        auto ask = [&](const json& extra) {
            json body = {{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"logprobs", 5}, {"ignore_eos", true}};
            body.update(extra);
            auto r = (*ls)->client()->Post("/v1/completions", body.dump(), "application/json");
            return r && r->status == 200 ? test::body_json(r->body)["choices"][0]["logprobs"] : json();
        };
        const json greedy = ask({{"temperature", 0}});
        const json hot = ask({{"temperature", 0.5}, {"seed", 3}, {"repetition_penalty", 1.3}});
        QVERIFY(greedy.is_object() && hot.is_object());
        // Every alternative both list has the same value; so has the sampled token wherever greedy listed it.
        int common = 0;
        for (auto it = greedy["top_logprobs"][0].begin(); it != greedy["top_logprobs"][0].end(); ++it)
            if (hot["top_logprobs"][0].contains(it.key())) {
                QCOMPARE(hot["top_logprobs"][0][it.key()].get<double>(), it.value().get<double>());
                ++common;
            }
        QVERIFY(common >= 5);
    }
};

QTEST_GUILESS_MAIN(TestServerLogprobs)
#include "tst_server_logprobs.moc"
