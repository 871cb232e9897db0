// ctest-labels: model
// Gemma 3's SentencePiece vocabulary (262144 tokens, byte fallback, no space prefix, <bos>
// added, thousands of user-defined tokens) against llama.cpp: the ids of
// tests/fixtures/gemma3_reference.json's "tokenizer" texts (multilingual, emoji, whitespace
// runs, control characters, special tokens with and without parse_special), written by
// tests/tools/make_gemma3_reference.py; decoding gives the text back; the chat format is
// detected from the vocabulary (the GGUF has no chat template) and renders Gemma's turns as
// the fixture's chat prompts were written. Skips when the model is not installed.
#include <QtTest>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_paths.h"

using nlohmann::json;

class TestGemma3Tokenizer : public QObject {
    Q_OBJECT
    json m_fixture;
    std::shared_ptr<kvs::Model> m_model;
    std::optional<kvs::Tokenizer> m_tok;

    static std::string ids_str(const std::vector<int32_t>& ids) {
        std::string s;
        for (int32_t id : ids) s += std::to_string(id) + " ";
        return s;
    }

private Q_SLOTS:
    void initTestCase() {
        const std::string path = kvs::test::gemma3_model_path();
        if (path.empty()) QSKIP("Gemma 3 270M not installed (installer/fetch_model.sh gemma3-270m)");
        std::ifstream f(kvs::test::fixture_path("gemma3_reference.json"));
        QVERIFY(f.good());
        m_fixture = json::parse(f);
        auto m = kvs::load_model(path);
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = m.value();
        QCOMPARE(m_model->config.arch, std::string("gemma3"));
        auto tok = kvs::Tokenizer::create(m_model->vocab);
        QVERIFY2(tok.is_ok(), tok.message().c_str());
        m_tok.emplace(std::move(tok.value()));
    }

    void idsMatchLlamaCpp_data() {
        QTest::addColumn<int>("index");
        if (m_fixture.is_null()) return;
        for (size_t i = 0; i < m_fixture["tokenizer"].size(); ++i)
            QTest::newRow(m_fixture["tokenizer"][i]["name"].get<std::string>().c_str()) << int(i);
    }
    void idsMatchLlamaCpp() {
        QFETCH(int, index);
        const json& e = m_fixture["tokenizer"][size_t(index)];
        const std::string text = e["text"].get<std::string>();
        const auto want = e["ids"].get<std::vector<int32_t>>();
        const auto got = m_tok->encode(text, true, true);
        QVERIFY2(got == want, qPrintable(QString("ours [%1] llama.cpp [%2]")
                                             .arg(QString::fromStdString(ids_str(got)))
                                             .arg(QString::fromStdString(ids_str(want)))));
        if (e.contains("ids_no_special")) {
            const auto want_plain = e["ids_no_special"].get<std::vector<int32_t>>();
            const auto got_plain = m_tok->encode(text, true, false);
            QVERIFY2(got_plain == want_plain, qPrintable(QString("parse_special=false: ours [%1] llama.cpp [%2]")
                                                             .arg(QString::fromStdString(ids_str(got_plain)))
                                                             .arg(QString::fromStdString(ids_str(want_plain)))));
        }
        // <bos> first (add_bos), and the ids without it decode to the text (specials as text)
        QVERIFY(!got.empty() && got[0] == m_model->vocab.bos_id);
        const std::vector<int32_t> body(got.begin() + 1, got.end());
        QCOMPARE(m_tok->decode(body), text);
    }

    void chatPromptsMatchFixture() {
        if (m_fixture.is_null()) QSKIP("no fixture");
        QCOMPARE(kvs::detect_chat_format(m_model->vocab.chat_template, m_model->vocab), kvs::ChatFormat::Gemma);
        QVERIFY(m_model->vocab.eot_id >= 0);
        QCOMPARE(m_model->vocab.tokens[size_t(m_model->vocab.eot_id)], std::string("<end_of_turn>"));
        const std::map<std::string, std::vector<kvs::ChatMessage>> convs{
            {"chat_factual", {{"user", "What is the capital of Australia, and why was it chosen?"}}},
            {"chat_multi_turn",
             {{"user", "Give me a one-word name for a grey cat."},
              {"assistant", "Smokey"},
              {"user", "Now suggest a name for its sister, who is white, and explain why."}}},
        };
        int checked = 0;
        for (const json& c : m_fixture["cases"]) {
            auto it = convs.find(c["name"].get<std::string>());
            if (it == convs.end()) continue;
            const std::string text = kvs::apply_chat_template(kvs::ChatFormat::Gemma, it->second, true, "");
            QCOMPARE(text, c["prompt"].get<std::string>());
            QCOMPARE(m_tok->encode(text, true, true), c["prompt_ids"].get<std::vector<int32_t>>());
            ++checked;
        }
        QCOMPARE(checked, 2);
        // a system message becomes the first user turn's prefix
        const std::string sys =
            kvs::apply_chat_template(kvs::ChatFormat::Gemma, {{"system", "Be brief."}, {"user", " Hi "}}, true, "");
        QCOMPARE(sys, std::string("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"));
    }
};

QTEST_GUILESS_MAIN(TestGemma3Tokenizer)
#include "tst_gemma3_tokenizer.moc"
