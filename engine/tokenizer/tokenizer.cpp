#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "engine/core/quote.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/spm.h"

namespace kvs {

namespace {

// Texts of control tokens that end generation in the families we run (llama.cpp's list).
constexpr std::string_view kEogTexts[] = {"<|eot_id|>",    "<|im_end|>", "<|end|>",         "<end_of_turn>",
                                          "<|endoftext|>", "<|eom_id|>", "<|end_of_text|>", "<EOT>"};
// End-of-turn candidates, most specific first.
constexpr std::string_view kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>"};

struct SpecialToken {
    std::string text;
    int32_t id;
    bool always;  // user-defined: matched even without parse_special
};

struct Fragment {
    std::string_view text;  // raw text when id < 0
    int32_t id = -1;        // a special token
};

}  // namespace

struct Tokenizer::State {
    VocabData vocab;
    bool byte_level = false;             // "gpt2"
    std::vector<std::string> pieces;     // [n_vocab] raw bytes of each token
    std::vector<uint8_t> eog;            // [n_vocab] 1 = ends generation
    std::vector<uint8_t> control;        // [n_vocab] 1 = control token
    std::vector<SpecialToken> specials;  // longest text first
    std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>> token_to_id;
    std::shared_ptr<BpeModel> bpe;
    std::shared_ptr<SpmModel> spm;
    std::shared_ptr<PreTokenizer> pre;
    std::string pre_name;
    std::vector<std::string> notes;
};

namespace {

TokenType type_of(const VocabData& v, size_t id) {
    return v.token_types.empty() ? TokenType::Normal : v.token_types[id];
}

Status check_id(const VocabData& v, int32_t id, const char* field) {
    if (id < -1 || id >= static_cast<int32_t>(v.tokens.size()))
        return Status::error(std::string("tokenizer ") + field + " = " + std::to_string(id) +
                             ": expected -1 or an id below n_vocab " + std::to_string(v.tokens.size()));
    return Status::ok();
}

// SentencePiece piece -> bytes: ▁ is a space, <0xNN> is byte NN.
std::string spm_piece(const std::string& text, TokenType type) {
    if (type == TokenType::Byte && text.size() == 6 && text.rfind("<0x", 0) == 0 && text[5] == '>' &&
        std::isxdigit(static_cast<unsigned char>(text[3])) && std::isxdigit(static_cast<unsigned char>(text[4]))) {
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
    }
    if (type != TokenType::Normal && type != TokenType::Undefined && type != TokenType::Unused) return text;
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
            out.push_back(' ');
            i += kSpmSpace.size();
        } else {
            out.push_back(text[i++]);
        }
    }
    return out;
}

// Splits `text` around special tokens: llama.cpp's tokenizer_st_partition, longest token first.
std::vector<Fragment> partition(std::string_view text, const std::vector<SpecialToken>& specials, bool parse_special) {
    std::vector<Fragment> fragments{{text, -1}};
    std::vector<Fragment> next;
    for (const SpecialToken& st : specials) {
        if (!st.always && !parse_special) continue;
        next.clear();
        for (const Fragment& f : fragments) {
            if (f.id >= 0 || f.text.size() < st.text.size()) {
                next.push_back(f);
                continue;
            }
            size_t start = 0;
            for (size_t pos; (pos = f.text.find(st.text, start)) != std::string_view::npos;) {
                if (pos > start) next.push_back({f.text.substr(start, pos - start), -1});
                next.push_back({{}, st.id});
                start = pos + st.text.size();
            }
            if (start < f.text.size()) next.push_back({f.text.substr(start), -1});
        }
        fragments.swap(next);
    }
    return fragments;
}

}  // namespace

Result<Tokenizer> Tokenizer::create(const VocabData& vocab) {
    const size_t n_vocab = vocab.tokens.size();
    if (n_vocab == 0) return Result<Tokenizer>::error("tokenizer tokens: expected at least one token, got none");
    if (!vocab.token_types.empty() && vocab.token_types.size() != n_vocab)
        return Result<Tokenizer>::error("tokenizer token_type: expected " + std::to_string(n_vocab) +
                                        " entries (one per token), got " + std::to_string(vocab.token_types.size()));
    KVS_RETURN_IF_ERROR(check_id(vocab, vocab.bos_id, "bos_token_id"));
    KVS_RETURN_IF_ERROR(check_id(vocab, vocab.eos_id, "eos_token_id"));
    KVS_RETURN_IF_ERROR(check_id(vocab, vocab.eot_id, "eot_token_id"));
    KVS_RETURN_IF_ERROR(check_id(vocab, vocab.unk_id, "unknown_token_id"));
    KVS_RETURN_IF_ERROR(check_id(vocab, vocab.pad_id, "padding_token_id"));

    auto state = std::make_shared<State>();
    state->vocab = vocab;
    if (vocab.model == "gpt2") {
        state->byte_level = true;
        if (vocab.merges.empty())
            return Result<Tokenizer>::error("tokenizer merges: expected BPE merges for model 'gpt2', got none");
        auto bpe = BpeModel::create(vocab.tokens, vocab.merges, vocab.pre == "llama3" || vocab.pre == "llama-bpe",
                                    vocab.unk_id);
        if (!bpe) return bpe.status();
        state->bpe = std::move(bpe.value());
        if (state->bpe->n_skipped_merges() > 0)
            state->notes.push_back(std::to_string(state->bpe->n_skipped_merges()) +
                                   " tokenizer merges name tokens that are not in the vocabulary; skipped");
        auto pre = PreTokenizer::create(vocab.pre.empty() ? "gpt-2" : vocab.pre);
        if (!pre) return pre.status();
        if (!pre->note().empty()) state->notes.push_back(pre->note());
        state->pre_name = pre->name();
        state->pre = std::make_shared<PreTokenizer>(std::move(pre.value()));
    } else if (vocab.model == "llama") {
        auto spm = SpmModel::create(vocab.tokens, vocab.scores, vocab.token_types, vocab.unk_id);
        if (!spm) return spm.status();
        state->spm = std::move(spm.value());
        state->pre_name = "spm";
    } else {
        return Result<Tokenizer>::error("tokenizer model = " + quote_untrusted(vocab.model) +
                                        ": expected 'gpt2' (byte-level BPE) or 'llama' (SentencePiece BPE)");
    }

    state->pieces.resize(n_vocab);
    state->eog.assign(n_vocab, 0);
    state->control.assign(n_vocab, 0);
    state->token_to_id.reserve(n_vocab);
    for (size_t id = 0; id < n_vocab; ++id) {
        const std::string& text = vocab.tokens[id];
        const TokenType type = type_of(vocab, id);
        state->token_to_id.emplace(text, static_cast<int32_t>(id));
        const bool special_type = type == TokenType::Control || type == TokenType::UserDefined;
        if (state->byte_level) state->pieces[id] = special_type ? text : unicode_to_bytes(text);
        else
            state->pieces[id] = spm_piece(text, type);
        state->control[id] = type == TokenType::Control;
        if ((special_type || type == TokenType::Unknown) && !text.empty())
            state->specials.push_back({text, static_cast<int32_t>(id), type == TokenType::UserDefined});
        if (special_type && std::find(std::begin(kEogTexts), std::end(kEogTexts), text) != std::end(kEogTexts))
            state->eog[id] = 1;
    }
    for (int32_t id : {vocab.bos_id, vocab.eos_id}) {
        if (id >= 0) state->control[id] = 1;
    }
    if (state->vocab.eot_id < 0) {
        for (std::string_view t : kEotTexts) {
            auto it = state->token_to_id.find(t);
            if (it != state->token_to_id.end() && type_of(vocab, it->second) != TokenType::Normal) {
                state->vocab.eot_id = it->second;
                break;
            }
        }
    }
    if (state->vocab.eos_id >= 0) state->eog[state->vocab.eos_id] = 1;
    if (state->vocab.eot_id >= 0) state->eog[state->vocab.eot_id] = 1;
    std::stable_sort(state->specials.begin(), state->specials.end(),
                     [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
    return Tokenizer(std::move(state));
}

void Tokenizer::encode_fragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
    const State& s = *m_state;
    if (s.byte_level) {
        thread_local std::vector<std::string_view> words;
        s.pre->split(text, words);
        for (std::string_view w : words) s.bpe->encode_word(w, out);
        return;
    }
    std::string escaped;
    if (s.vocab.add_space_prefix && after_special) escaped.append(kSpmSpace);
    escaped += spm_escape_spaces(text);
    s.spm->encode(escaped, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    const State& s = *m_state;
    std::vector<int32_t> out;  // [n_tokens]
    out.reserve(text.size() / 3 + 2);
    if (add_special && s.vocab.add_bos && s.vocab.bos_id >= 0) out.push_back(s.vocab.bos_id);
    bool after_special = true;  // SentencePiece adds its space prefix at the start and after a special token
    for (const Fragment& f : partition(text, s.specials, parse_special)) {
        if (f.id >= 0) {
            out.push_back(f.id);
            after_special = true;
        } else if (!f.text.empty()) {  // empty text gets no SentencePiece space prefix either
            encode_fragment(f.text, after_special, out);
            after_special = false;
        }
    }
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
    if (id < 0 || id >= n_vocab()) return {};
    return m_state->pieces[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string text;
    for (int32_t id : ids) {
        if (id >= 0 && id < n_vocab()) text += m_state->pieces[id];
    }
    // SentencePiece: drop the space that add_space_prefix put in front of the text.
    if (!m_state->byte_level && m_state->vocab.add_space_prefix && !text.empty() && text[0] == ' ') text.erase(0, 1);
    return text;
}

const std::string& Tokenizer::token_text(int32_t id) const {
    static const std::string kNone;
    return id >= 0 && id < n_vocab() ? m_state->vocab.tokens[id] : kNone;
}

int32_t Tokenizer::find_token(std::string_view text) const {
    auto it = m_state->token_to_id.find(text);
    return it == m_state->token_to_id.end() ? -1 : it->second;
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(m_state->vocab.tokens.size()); }
int32_t Tokenizer::bos() const { return m_state->vocab.bos_id; }
int32_t Tokenizer::eos() const { return m_state->vocab.eos_id; }
int32_t Tokenizer::eot() const { return m_state->vocab.eot_id; }
bool Tokenizer::add_bos() const { return m_state->vocab.add_bos; }
bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && m_state->eog[id]; }
bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < n_vocab() && m_state->control[id]; }
const std::string& Tokenizer::model() const { return m_state->vocab.model; }
const std::string& Tokenizer::pre() const { return m_state->pre_name; }
const std::vector<std::string>& Tokenizer::notes() const { return m_state->notes; }

}  // namespace kvs
