// ctest-labels: unit
// Tokenizer and chat templates against independent references: hand-computed values, the
// Hugging Face `tokenizers` package and jinja2 (fixtures written by
// tests/tools/make_tokenizer_fixtures.py). Rows that need the default model QSKIP without it.
// Engine headers first: Qt's `slots` macro would otherwise mangle kernels/backend.h.
#include "engine/model/model.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/hf_tokenizer_json.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/spm.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8_stream.h"
#include "tests/support/test_paths.h"

#include <QtTest>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

using json = nlohmann::json;
using Ids = std::vector<int32_t>;
Q_DECLARE_METATYPE(Ids)
Q_DECLARE_METATYPE(std::string)

namespace {

json load_fixture(const std::string& name) {
    std::ifstream in(kvs::test::fixture_path(name));
    if (!in) return json();
    return json::parse(in);
}

Ids ids_of(const json& array) { return array.get<Ids>(); }

QString show(const Ids& ids) {
    QStringList parts;
    for (int32_t id : ids) parts << QString::number(id);
    return "[" + parts.join(",") + "]";
}

// Synthetic tokenizers are loaded once per process.
const kvs::Tokenizer* synthetic_tokenizer(const std::string& name, std::string* error) {
    static std::map<std::string, std::unique_ptr<kvs::Tokenizer>> cache;
    auto it = cache.find(name);
    if (it != cache.end()) return it->second.get();
    auto vocab = kvs::vocab_from_tokenizer_json(kvs::test::fixture_path("tokenizer_" + name + "_synth.json"),
                                                kvs::test::fixture_path("tokenizer_" + name + "_synth_config.json"));
    if (!vocab) {
        *error = vocab.message();
        return nullptr;
    }
    auto tok = kvs::Tokenizer::create(vocab.value());
    if (!tok) {
        *error = tok.message();
        return nullptr;
    }
    return cache.emplace(name, std::make_unique<kvs::Tokenizer>(tok.value())).first->second.get();
}

// The default model's tokenizer (from its GGUF via load_model), or null when not installed.
const kvs::Tokenizer* default_model_tokenizer(std::string* error) {
    static std::unique_ptr<kvs::Tokenizer> tok;
    static std::string load_error;
    static bool tried = false;
    if (!tried) {
        tried = true;
        const std::string path = kvs::test::default_model_path();
        if (path.empty()) {
            load_error = "default model not installed";
        } else if (auto model = kvs::load_model(path); !model) {
            load_error = "load_model: " + model.message();
        } else if (auto t = kvs::Tokenizer::create(model.value()->vocab); !t) {
            load_error = "Tokenizer::create: " + t.message();
        } else {
            tok = std::make_unique<kvs::Tokenizer>(t.value());
        }
    }
    *error = load_error;
    return tok.get();
}

// A tiny byte-level vocabulary: the 256 byte tokens, then merges a+b, ab+c, b+c.
kvs::VocabData tiny_bpe_vocab() {
    kvs::VocabData v;
    v.model = "gpt2";
    v.pre = "gpt-2";
    for (const std::string& t : kvs::byte_to_unicode_text()) v.tokens.push_back(t);  // ids 0..255
    v.tokens.push_back("ab");                                                        // 256
    v.tokens.push_back("abc");                                                       // 257
    v.tokens.push_back("bc");                                                        // 258
    v.tokens.push_back("Ġa");                                                        // 259
    v.tokens.push_back("<|im_end|>");                                                // 260
    v.token_types.assign(v.tokens.size(), kvs::TokenType::Normal);
    v.token_types[260] = kvs::TokenType::Control;
    v.merges = {"a b", "ab c", "b c", "Ġ a"};
    v.eos_id = 260;
    return v;
}

// A tiny SentencePiece vocabulary with scores and byte fallback.
kvs::VocabData tiny_spm_vocab() {
    kvs::VocabData v;
    v.model = "llama";
    v.add_space_prefix = true;
    v.tokens = {"<unk>", "<s>", "</s>"};
    v.token_types = {kvs::TokenType::Unknown, kvs::TokenType::Control, kvs::TokenType::Control};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        v.tokens.push_back(name);
        v.token_types.push_back(kvs::TokenType::Byte);
    }
    // ids 259..: pieces with scores (higher merges first)
    const std::vector<std::pair<std::string, float>> pieces = {{"\xE2\x96\x81", -1},
                                                               {"a", -2},
                                                               {"b", -3},
                                                               {"c", -4},
                                                               {"ab", -10},
                                                               {"bc", -5},
                                                               {"\xE2\x96\x81"
                                                                "a",
                                                                -6},
                                                               {"\xE2\x96\x81"
                                                                "ab",
                                                                -7},
                                                               {"abc", -20}};
    v.scores.assign(v.tokens.size(), 0.0f);
    for (const auto& [text, score] : pieces) {
        v.tokens.push_back(text);
        v.token_types.push_back(kvs::TokenType::Normal);
        v.scores.push_back(score);
    }
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
    v.add_bos = true;
    return v;
}

std::string write_temp(const std::string& name, const std::string& text) {
    const std::string path = kvs::test::output_path(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

}  // namespace

class TstTokenizer : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void byte_to_unicode_data();
    void byte_to_unicode();
    void pre_tokenizer_split_data();
    void pre_tokenizer_split();
    void unknown_pre_falls_back();
    void bpe_tiny_vocab_data();
    void bpe_tiny_vocab();
    void spm_tiny_vocab_data();
    void spm_tiny_vocab();
    void utf8_stream_data();
    void utf8_stream();
    void create_rejects_bad_vocab_data();
    void create_rejects_bad_vocab();
    void hf_json_errors_data();
    void hf_json_errors();
    void hf_json_shapes_data();
    void hf_json_shapes();
    void hf_json_metaspace_pair_merges();
    void synthetic_matches_hf_data();
    void synthetic_matches_hf();
    void default_model_matches_hf_data();
    void default_model_matches_hf();
    void default_model_special_tokens();
    void chat_template_matches_jinja_data();
    void chat_template_matches_jinja();
    void detect_chat_format_data();
    void detect_chat_format();
    void default_system_prompt();
};

void TstTokenizer::byte_to_unicode_data() {
    QTest::addColumn<int>("byte");
    QTest::addColumn<uint>("codepoint");
    // GPT-2's table: printable bytes map to themselves, the rest to U+0100.. in byte order.
    QTest::newRow("A") << 0x41 << 0x41u;
    QTest::newRow("nul") << 0x00 << 0x100u;
    QTest::newRow("newline") << 0x0A << 0x10Au;
    QTest::newRow("space") << 0x20 << 0x120u;
    QTest::newRow("del") << 0x7F << 0x121u;
    QTest::newRow("0x80") << 0x80 << 0x122u;
    QTest::newRow("nbsp") << 0xA0 << 0x142u;
    QTest::newRow("soft hyphen") << 0xAD << 0x143u;
    QTest::newRow("inverted !") << 0xA1 << 0xA1u;
    QTest::newRow("0xFF") << 0xFF << 0xFFu;
}

void TstTokenizer::byte_to_unicode() {
    QFETCH(int, byte);
    QFETCH(uint, codepoint);
    QCOMPARE(kvs::byte_to_codepoint(static_cast<uint8_t>(byte)), codepoint);
    const std::string raw(1, static_cast<char>(byte));
    QCOMPARE(kvs::unicode_to_bytes(kvs::bytes_to_unicode(raw)), raw);
}

void TstTokenizer::pre_tokenizer_split_data() {
    QTest::addColumn<QString>("pre");
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("words");
    QTest::newRow("gpt2 words") << "gpt-2"
                                << "Hello world's  12" << QStringList{"Hello", " world", "'s", " ", " 12"};
    QTest::newRow("gpt2 numbers") << "gpt-2"
                                  << "x 12345" << QStringList{"x", " 12345"};
    QTest::newRow("gpt2 trailing space") << "gpt-2"
                                         << "a  " << QStringList{"a", "  "};
    QTest::newRow("smollm digits") << "smollm"
                                   << "a 123" << QStringList{"a", " ", "1", "2", "3"};
    QTest::newRow("llama3 digits") << "llama3"
                                   << "12345" << QStringList{"123", "45"};
    QTest::newRow("llama3 newlines") << "llama3"
                                     << "Hi\n\nyou" << QStringList{"Hi", "\n\n", "you"};
    QTest::newRow("llama3 case-insensitive 's") << "llama3"
                                                << "IT'S" << QStringList{"IT", "'S"};
    QTest::newRow("qwen2 digits") << "qwen2"
                                  << "v12" << QStringList{"v", "1", "2"};
    QTest::newRow("korean") << "gpt-2" << QString::fromUtf8("안녕 세계")
                            << QStringList{QString::fromUtf8("안녕"), QString::fromUtf8(" 세계")};
}

void TstTokenizer::pre_tokenizer_split() {
    QFETCH(QString, pre);
    QFETCH(QString, text);
    QFETCH(QStringList, words);
    auto p = kvs::PreTokenizer::create(pre.toStdString());
    QVERIFY2(p.is_ok(), p.message().c_str());
    QVERIFY(p->note().empty());
    const std::string utf8 = text.toStdString();
    QStringList got;
    for (std::string_view w : p->split(utf8)) got << QString::fromUtf8(w.data(), static_cast<int>(w.size()));
    QCOMPARE(got, words);
}

void TstTokenizer::unknown_pre_falls_back() {
    auto p = kvs::PreTokenizer::create("no-such-pre");
    QVERIFY(p.is_ok());
    QCOMPARE(p->name(), std::string("gpt-2"));
    QVERIFY(p->note().find("no-such-pre") != std::string::npos);
    kvs::VocabData v = tiny_bpe_vocab();
    v.pre = "no-such-pre";
    auto tok = kvs::Tokenizer::create(v);
    QVERIFY(tok.is_ok());
    QCOMPARE(tok->notes().size(), size_t(1));
}

void TstTokenizer::bpe_tiny_vocab_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<Ids>("ids");
    const int a = 'a', c = 'c';
    QTest::newRow("abc: a+b first, then ab+c") << "abc" << Ids{257};
    QTest::newRow("bca: b+c") << "bca" << Ids{258, a};
    QTest::newRow("abab") << "abab" << Ids{256, 256};
    QTest::newRow("cab") << "cab" << Ids{c, 256};
    // " ab": a+b (rank 0) beats Ġ+a (rank 3), and Ġ+ab is no merge.
    QTest::newRow("space ab") << "x ab" << Ids{'x', ' ', 256};
    QTest::newRow("space a") << "x a" << Ids{'x', 259};
    QTest::newRow("special parsed") << "ab<|im_end|>" << Ids{256, 260};
    QTest::newRow("newline byte") << "a\n" << Ids{a, 10};  // byte 0x0A is token 10
}

void TstTokenizer::bpe_tiny_vocab() {
    QFETCH(QString, text);
    QFETCH(Ids, ids);
    auto tok = kvs::Tokenizer::create(tiny_bpe_vocab());
    QVERIFY2(tok.is_ok(), tok.message().c_str());
    const std::string utf8 = text.toStdString();
    const Ids got = tok->encode(utf8, true, true);
    QVERIFY2(got == ids, qPrintable(show(got) + " != " + show(ids)));
    QCOMPARE(tok->decode(got), utf8);
}

void TstTokenizer::spm_tiny_vocab_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<Ids>("ids");
    const int sp = 259, a = 260, b = 261, c = 262, ab = 263, bc = 264, sp_a = 265, sp_ab = 266;
    // "▁abc": bc (-5) beats ▁a (-6); then ▁ a bc: ▁a; "abc" (-20) is never formed from ▁a + bc.
    QTest::newRow("abc") << "abc" << Ids{1, sp_a, bc};
    // "▁ab": ▁a (-6) then ▁a+b = ▁ab (-7).
    QTest::newRow("ab") << "ab" << Ids{1, sp_ab};
    QTest::newRow("ba c") << "ba c" << Ids{1, sp, b, a, sp, c};
    QTest::newRow("byte fallback") << QString::fromUtf8("aé") << Ids{1, sp_a, 3 + 0xC3, 3 + 0xA9};
    QTest::newRow("after special") << "a</s>a" << Ids{1, sp_a, 2, sp_a};
    (void)ab;
}

void TstTokenizer::spm_tiny_vocab() {
    QFETCH(QString, text);
    QFETCH(Ids, ids);
    auto tok = kvs::Tokenizer::create(tiny_spm_vocab());
    QVERIFY2(tok.is_ok(), tok.message().c_str());
    const std::string utf8 = text.toStdString();
    const Ids got = tok->encode(utf8, true, true);
    QVERIFY2(got == ids, qPrintable(show(got) + " != " + show(ids)));
    if (utf8.find("</s>") == std::string::npos) {
        QCOMPARE(tok->decode(Ids(got.begin() + 1, got.end())), utf8);
    }
}

void TstTokenizer::utf8_stream_data() {
    QTest::addColumn<QString>("text");
    QTest::newRow("ascii") << "hello";
    QTest::newRow("accents") << QString::fromUtf8("café naïve");
    QTest::newRow("cjk") << QString::fromUtf8("机器学习");
    QTest::newRow("emoji zwj") << QString::fromUtf8("👨‍👩‍👧 😺");
}

void TstTokenizer::utf8_stream() {
    QFETCH(QString, text);
    const std::string utf8 = text.toStdString();
    kvs::Utf8Stream stream;
    std::string out;
    for (char c : utf8) {
        const std::string piece = stream.push(std::string_view(&c, 1));
        // Every piece handed out is whole characters: it is valid UTF-8 on its own.
        QCOMPARE(QString::fromUtf8(piece.data(), static_cast<int>(piece.size())).toStdString(), piece);
        out += piece;
    }
    QVERIFY(stream.empty());
    QCOMPARE(out, utf8);
    // A cut character is held back, then released when complete.
    const std::string euro = "\xE2\x82\xAC";
    QCOMPARE(stream.push(euro.substr(0, 2)), std::string());
    QCOMPARE(stream.push(euro.substr(2)), euro);
    QCOMPARE(stream.push("\xE2\x82"), std::string());
    QCOMPARE(stream.flush(), std::string("\xE2\x82"));
}

void TstTokenizer::create_rejects_bad_vocab_data() {
    QTest::addColumn<int>("which");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown model") << 0 << "tokenizer model = 'wordpiece'";
    QTest::newRow("types size") << 1 << "token_type";
    QTest::newRow("bos out of range") << 2 << "bos_token_id = 9999";
    QTest::newRow("no tokens") << 3 << "tokens";
    QTest::newRow("malformed merge") << 4 << "merges[4]";
}

void TstTokenizer::create_rejects_bad_vocab() {
    QFETCH(int, which);
    QFETCH(QString, expected);
    kvs::VocabData v = tiny_bpe_vocab();
    if (which == 0) v.model = "wordpiece";
    if (which == 1) v.token_types.pop_back();
    if (which == 2) v.bos_id = 9999;
    if (which == 3) v.tokens.clear();
    if (which == 4) v.merges.push_back("abc");
    auto tok = kvs::Tokenizer::create(v);
    QVERIFY(!tok.is_ok());
    QVERIFY2(tok.message().find(expected.toStdString()) != std::string::npos, tok.message().c_str());
}

void TstTokenizer::hf_json_errors_data() {
    QTest::addColumn<QString>("tokenizer_json");
    QTest::addColumn<QString>("config_json");
    QTest::addColumn<QString>("expected");
    const QString ok_model = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
                                 "pre_tokenizer": {"type": "ByteLevel"}})";
    QTest::newRow("missing file") << ""
                                  << ""
                                  << "cannot open";
    QTest::newRow("bad json") << "{\"model\": "
                              << ""
                              << "not valid JSON";
    QTest::newRow("unigram") << R"({"model": {"type": "Unigram", "vocab": []}})"
                             << ""
                             << "model.type = 'Unigram'";
    QTest::newRow("bad merge")
        << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}, "pre_tokenizer": {"type": "ByteLevel"}})"
        << ""
        << "model.merges[0]";
    QTest::newRow("no pre-tokenizer") << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})"
                                      << ""
                                      << "pre_tokenizer";
    QTest::newRow("unknown bos") << ok_model << R"({"bos_token": "<s>"})"
                                 << "field 'bos_token' = '<s>'";
    QTest::newRow("bad add_bos") << ok_model << R"({"add_bos_token": "yes"})"
                                 << "add_bos_token";
}

void TstTokenizer::hf_json_errors() {
    QFETCH(QString, tokenizer_json);
    QFETCH(QString, config_json);
    QFETCH(QString, expected);
    const std::string tok_path = tokenizer_json.isEmpty() ? kvs::test::output_path("does_not_exist.json")
                                                          : write_temp("hf_tok.json", tokenizer_json.toStdString());
    const std::string cfg_path = config_json.isEmpty() ? "" : write_temp("hf_cfg.json", config_json.toStdString());
    auto vocab = kvs::vocab_from_tokenizer_json(tok_path, cfg_path);
    QVERIFY(!vocab.is_ok());
    QVERIFY2(vocab.message().find(expected.toStdString()) != std::string::npos, vocab.message().c_str());
    const std::string& named = config_json.isEmpty() ? tok_path : cfg_path;  // the message names the file
    QVERIFY2(vocab.message().find(named) != std::string::npos, vocab.message().c_str());
}

void TstTokenizer::hf_json_shapes_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("pre");
    QTest::addColumn<bool>("add_bos");
    QTest::addColumn<QString>("bos");
    QTest::addColumn<QString>("eos");
    QTest::newRow("llama3") << "llama3"
                            << "gpt2"
                            << "llama3" << true << "<|begin_of_text|>"
                            << "<|end_of_text|>";
    QTest::newRow("qwen2") << "qwen2"
                           << "gpt2"
                           << "qwen2" << false << ""
                           << "<|im_end|>";
    QTest::newRow("spm") << "spm"
                         << "llama"
                         << "default" << true << "<s>"
                         << "</s>";
}

void TstTokenizer::hf_json_shapes() {
    QFETCH(QString, name);
    QFETCH(QString, model);
    QFETCH(QString, pre);
    QFETCH(bool, add_bos);
    QFETCH(QString, bos);
    QFETCH(QString, eos);
    const std::string n = name.toStdString();
    auto v = kvs::vocab_from_tokenizer_json(kvs::test::fixture_path("tokenizer_" + n + "_synth.json"),
                                            kvs::test::fixture_path("tokenizer_" + n + "_synth_config.json"));
    QVERIFY2(v.is_ok(), v.message().c_str());
    QCOMPARE(QString::fromStdString(v->model), model);
    QCOMPARE(QString::fromStdString(v->pre), pre);
    QCOMPARE(v->add_bos, add_bos);
    QCOMPARE(QString::fromStdString(v->bos_id >= 0 ? v->tokens[v->bos_id] : ""), bos);
    QCOMPARE(QString::fromStdString(v->tokens.at(v->eos_id)), eos);
    QVERIFY(!v->chat_template.empty());
    if (model == "llama") {
        QVERIFY(v->add_space_prefix);
        QCOMPARE(v->scores.size(), v->tokens.size());
        QCOMPARE(int(v->token_types.at(3 + 0x41)), int(kvs::TokenType::Byte));  // <0x41>
    }
}

void TstTokenizer::hf_json_metaspace_pair_merges() {
    // Newer Llama-style tokenizer.json: Metaspace pre-tokenizer, merges as [a, b] pairs.
    const std::string path = write_temp("hf_metaspace.json", R"({
        "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                  {"Sequence": {"id": "A", "type_id": 0}}]},
        "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
                  "vocab": {"<unk>": 0, "<s>": 1, "\u2581": 2, "a": 3, "b": 4, "ab": 5, "\u2581ab": 6},
                  "merges": [["a", "b"], ["\u2581", "ab"]]}})");
    auto v = kvs::vocab_from_tokenizer_json(path, "");
    QVERIFY2(v.is_ok(), v.message().c_str());
    QCOMPARE(v->model, std::string("llama"));
    QVERIFY(v->add_space_prefix);
    QVERIFY(v->add_bos);  // from the TemplateProcessing post-processor
    QCOMPARE(v->bos_id, 1);
    QCOMPARE(v->unk_id, 0);
    QCOMPARE(v->scores.at(5), -1.0f);  // made by merge 0
    QCOMPARE(v->scores.at(6), -2.0f);  // made by merge 1
    auto tok = kvs::Tokenizer::create(v.value());
    QVERIFY2(tok.is_ok(), tok.message().c_str());
    QVERIFY(tok->encode("ab ab", true, false) == (Ids{1, 6, 6}));
    QVERIFY(tok->encode("ba", false, false) == (Ids{2, 4, 3}));
    QCOMPARE(tok->decode(Ids{6, 6}), std::string("ab ab"));
}

void TstTokenizer::synthetic_matches_hf_data() {
    QTest::addColumn<std::string>("tokenizer");
    QTest::addColumn<std::string>("text");
    QTest::addColumn<Ids>("ids");
    QTest::addColumn<std::string>("decoded");
    for (const char* name : {"llama3", "qwen2", "spm"}) {
        const json fixture = load_fixture(std::string("tokenizer_") + name + "_synth_expected.json");
        QVERIFY2(fixture.contains("cases"), "fixture missing: run tests/tools/make_tokenizer_fixtures.py");
        for (const json& row : fixture["cases"]) {
            const std::string tag = std::string(name) + "/" + row["name"].get<std::string>();
            QTest::newRow(tag.c_str()) << std::string(name) << row["text"].get<std::string>() << ids_of(row["ids"])
                                       << row["decoded"].get<std::string>();
        }
    }
}

void TstTokenizer::synthetic_matches_hf() {
    QFETCH(std::string, tokenizer);
    QFETCH(std::string, text);
    QFETCH(Ids, ids);
    QFETCH(std::string, decoded);
    std::string error;
    const kvs::Tokenizer* tok = synthetic_tokenizer(tokenizer, &error);
    QVERIFY2(tok, error.c_str());
    QVERIFY(tok->notes().empty());
    const Ids got = tok->encode(text, false, true);
    QVERIFY2(got == ids, qPrintable(show(got) + "\n  expected " + show(ids)));
    QCOMPARE(tok->decode(got), decoded);
}

void TstTokenizer::default_model_matches_hf_data() {
    QTest::addColumn<std::string>("text");
    QTest::addColumn<Ids>("ids");
    QTest::addColumn<std::string>("decoded");
    const json fixture = load_fixture("tokenizer_smollm2.json");
    QVERIFY2(fixture.contains("cases"), "fixture missing: run tests/tools/make_tokenizer_fixtures.py");
    for (const json& row : fixture["cases"]) {
        QTest::newRow(row["name"].get<std::string>().c_str())
            << row["text"].get<std::string>() << ids_of(row["ids"]) << row["decoded"].get<std::string>();
    }
}

void TstTokenizer::default_model_matches_hf() {
    QFETCH(std::string, text);
    QFETCH(Ids, ids);
    QFETCH(std::string, decoded);
    std::string error;
    const kvs::Tokenizer* tok = default_model_tokenizer(&error);
    if (!tok && error == "default model not installed") QSKIP("default model not installed");
    QVERIFY2(tok, error.c_str());
    QCOMPARE(tok->pre(), std::string("smollm"));
    const Ids got = tok->encode(text, true, true);  // SmolLM2 adds no BOS
    QVERIFY2(got == ids, qPrintable(show(got) + "\n  expected " + show(ids)));
    QCOMPARE(tok->decode(got), decoded);
    QCOMPARE(decoded, text);
}

void TstTokenizer::default_model_special_tokens() {
    std::string error;
    const kvs::Tokenizer* tok = default_model_tokenizer(&error);
    if (!tok && error == "default model not installed") QSKIP("default model not installed");
    QVERIFY2(tok, error.c_str());
    // SmolLM2-135M-Instruct: <|endoftext|> = 0, <|im_start|> = 1, <|im_end|> = 2 (eos).
    QCOMPARE(tok->n_vocab(), 49152);
    QCOMPARE(tok->eos(), 2);
    QCOMPARE(tok->eot(), 2);
    QVERIFY(tok->is_eog(2));
    QVERIFY(tok->is_eog(0));
    QVERIFY(!tok->is_eog(1));
    QVERIFY(tok->is_control(1));
    QVERIFY(!tok->add_bos());
    const Ids plain = tok->encode("<|im_start|>", false, false);  // not parsed: ordinary text
    QVERIFY(plain.size() > 1);
    QCOMPARE(tok->decode(plain), std::string("<|im_start|>"));
    QCOMPARE(tok->token_to_piece(tok->find_token("Ġthe")), std::string(" the"));
}

void TstTokenizer::chat_template_matches_jinja_data() {
    QTest::addColumn<std::string>("format");
    QTest::addColumn<std::string>("messages");
    QTest::addColumn<bool>("add_generation_prompt");
    QTest::addColumn<std::string>("bos");
    QTest::addColumn<std::string>("eos");
    QTest::addColumn<std::string>("rendered");
    const json fixture = load_fixture("chat_templates.json");
    QVERIFY2(fixture.contains("cases"), "fixture missing: run tests/tools/make_tokenizer_fixtures.py");
    for (const json& row : fixture["cases"]) {
        const std::string tag = row["format"].get<std::string>() + "/" + row["name"].get<std::string>() +
                                (row["add_generation_prompt"].get<bool>() ? "/gen" : "") +
                                (row["bos_token"].get<std::string>().empty() ? "" : "/bos");
        QTest::newRow(tag.c_str()) << row["format"].get<std::string>() << row["messages"].dump()
                                   << row["add_generation_prompt"].get<bool>() << row["bos_token"].get<std::string>()
                                   << row["eos_token"].get<std::string>() << row["rendered"].get<std::string>();
    }
}

void TstTokenizer::chat_template_matches_jinja() {
    QFETCH(std::string, format);
    QFETCH(std::string, messages);
    QFETCH(bool, add_generation_prompt);
    QFETCH(std::string, bos);
    QFETCH(std::string, eos);
    QFETCH(std::string, rendered);
    const json fixture = load_fixture("chat_templates.json");
    const std::string jinja = fixture["templates"][format].get<std::string>();
    const kvs::ChatFormat chat_format = kvs::detect_chat_format(jinja, kvs::VocabData{});
    QCOMPARE(std::string(kvs::chat_format_name(chat_format)), format == "ChatML"   ? std::string("chatml")
                                                              : format == "Llama3" ? std::string("llama3")
                                                                                   : std::string("llama2"));
    std::vector<kvs::ChatMessage> conversation;
    for (const json& m : json::parse(messages))
        conversation.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    kvs::ChatSpecialTokens special;
    special.bos_token = bos;
    special.eos_token = eos;
    const std::string got = kvs::apply_chat_template(chat_format, conversation, add_generation_prompt,
                                                     kvs::default_system_prompt(jinja), special);
    QCOMPARE(got, rendered);
}

void TstTokenizer::detect_chat_format_data() {
    QTest::addColumn<QString>("jinja");
    QTest::addColumn<bool>("vocab_has_im_start");
    QTest::addColumn<int>("format");
    QTest::newRow("chatml") << "{{'<|im_start|>' + message['role']}}" << false << int(kvs::ChatFormat::ChatML);
    QTest::newRow("llama3") << "{{'<|start_header_id|>'}}" << false << int(kvs::ChatFormat::Llama3);
    QTest::newRow("llama2") << "{{ bos_token + '[INST] ' }}" << false << int(kvs::ChatFormat::Llama2);
    QTest::newRow("none, vocab chatml") << "" << true << int(kvs::ChatFormat::ChatML);
    QTest::newRow("none, plain") << "" << false << int(kvs::ChatFormat::Plain);
}

void TstTokenizer::detect_chat_format() {
    QFETCH(QString, jinja);
    QFETCH(bool, vocab_has_im_start);
    QFETCH(int, format);
    kvs::VocabData v;
    v.tokens = {"a", vocab_has_im_start ? "<|im_start|>" : "b"};
    QCOMPARE(int(kvs::detect_chat_format(jinja.toStdString(), v)), format);
}

void TstTokenizer::default_system_prompt() {
    const json fixture = load_fixture("chat_templates.json");
    QVERIFY(fixture.contains("templates"));
    QCOMPARE(kvs::default_system_prompt(fixture["templates"]["ChatML"].get<std::string>()),
             std::string("You are a helpful AI assistant named SmolLM, trained by Hugging Face"));
    // Qwen2-style, with the newline written as an escape inside the Jinja string.
    QCOMPARE(kvs::default_system_prompt("{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"),
             std::string("You are a helpful assistant."));
    QCOMPARE(kvs::default_system_prompt("{{'<|im_start|>system\\n' + message['content'] + '<|im_end|>'}}"),
             std::string());
    QCOMPARE(kvs::default_system_prompt(fixture["templates"]["Llama3"].get<std::string>()), std::string());
}

QTEST_GUILESS_MAIN(TstTokenizer)
#include "tst_tokenizer.moc"
