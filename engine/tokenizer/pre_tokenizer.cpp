#include "engine/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/core/quote.h"
#include "engine/tokenizer/utf8_stream.h"

namespace kvs {

class CompiledRegex {
public:
    static Result<std::shared_ptr<const CompiledRegex>> compile(const std::string& pattern) {
        int error_code = 0;
        PCRE2_SIZE error_offset = 0;
        // UTF + UCP: \s, \p{L}, \p{N} and (?i) follow Unicode. MATCH_INVALID_UTF: invalid
        // bytes in the text never match and end up in the gaps instead of failing the match.
        const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                                         &error_code, &error_offset, nullptr);
        if (!code) {
            PCRE2_UCHAR buffer[256];
            pcre2_get_error_message(error_code, buffer, sizeof(buffer));
            return Result<std::shared_ptr<const CompiledRegex>>::error("pre-tokenizer regex '" + pattern +
                                                                       "': " + reinterpret_cast<const char*>(buffer) +
                                                                       " at offset " + std::to_string(error_offset));
        }
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
        return std::shared_ptr<const CompiledRegex>(new CompiledRegex(code));
    }

    ~CompiledRegex() { pcre2_code_free(m_code); }
    CompiledRegex(const CompiledRegex&) = delete;
    CompiledRegex& operator=(const CompiledRegex&) = delete;

    // Appends to `out` the matches of the regex in `text` and the non-empty gaps between them.
    void split(std::string_view text, pcre2_match_data* match_data, std::vector<std::string_view>& out) const {
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
        size_t offset = 0;   // where the next search starts
        size_t emitted = 0;  // text[0, emitted) is already in `out`
        while (offset < text.size()) {
            const int rc = pcre2_match(m_code, subject, text.size(), offset, 0, match_data, nullptr);
            if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (or a resource limit): the rest is one gap
            const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
            const size_t begin = ovector[0];
            const size_t end = ovector[1];
            if (begin > emitted) out.push_back(text.substr(emitted, begin - emitted));
            if (end > begin) {
                out.push_back(text.substr(begin, end - begin));
                emitted = end;
                offset = end;
            } else {  // empty match: step over one character
                const int n = utf8_sequence_length(static_cast<unsigned char>(text[begin]));
                offset = begin + (n > 0 ? static_cast<size_t>(n) : 1);
                emitted = begin;
            }
        }
        if (emitted < text.size()) out.push_back(text.substr(emitted));
    }

    pcre2_code* code() const { return m_code; }

private:
    explicit CompiledRegex(pcre2_code* code) : m_code(code) {}
    pcre2_code* m_code;
};

namespace {

struct MatchData {
    explicit MatchData(const CompiledRegex& re) : md(pcre2_match_data_create_from_pattern(re.code(), nullptr)) {}
    ~MatchData() { pcre2_match_data_free(md); }
    MatchData(const MatchData&) = delete;
    MatchData& operator=(const MatchData&) = delete;
    pcre2_match_data* md;
};

// The regex sequence llama.cpp (src/llama-vocab.cpp) and the models' tokenizer.json use.
bool regexes_for(const std::string& pre, std::vector<std::string>& regexes, std::string& name) {
    if (pre == "gpt-2" || pre == "gpt2" || pre == "default") {
        regexes = {std::string(kGpt2Regex)};
        name = "gpt-2";
    } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") {
        regexes = {std::string(kLlama3Regex)};
        name = "llama3";
    } else if (pre == "smollm") {
        // tokenizer.json: Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]
        regexes = {std::string(kDigitRegex), std::string(kGpt2Regex)};
        name = "smollm";
    } else if (pre == "qwen2") {
        regexes = {std::string(kQwen2Regex)};
        name = "qwen2";
    } else {
        return false;
    }
    return true;
}

}  // namespace

Result<PreTokenizer> PreTokenizer::create(const std::string& pre) {
    std::vector<std::string> regexes;
    std::string name;
    std::string note;
    if (!regexes_for(pre, regexes, name)) {
        regexes_for("gpt-2", regexes, name);
        note = "unknown pre-tokenizer " + quote_untrusted(pre) +
               " (tokenizer.ggml.pre); using the GPT-2 regex, "
               "so token ids may differ from the model's own tokenizer";
    }
    auto result = from_regexes(regexes, name);
    if (result) result->m_note = note;
    return result;
}

Result<PreTokenizer> PreTokenizer::from_regexes(const std::vector<std::string>& regexes, std::string name) {
    PreTokenizer p;
    for (const std::string& pattern : regexes) {
        auto re = CompiledRegex::compile(pattern);
        if (!re) return re.status();
        p.m_regexes.push_back(std::move(re.value()));
    }
    p.m_name = std::move(name);
    return p;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
    std::vector<std::string_view> words;
    split(text, words);
    return words;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
    words.clear();
    if (text.empty()) return;
    if (m_regexes.empty()) {
        words.push_back(text);
        return;
    }
    std::vector<std::string_view> pieces{text};
    std::vector<std::string_view> next;
    for (size_t r = 0; r < m_regexes.size(); ++r) {
        const CompiledRegex& re = *m_regexes[r];
        MatchData match_data(re);
        auto& out = (r + 1 == m_regexes.size()) ? words : next;
        out.clear();
        for (std::string_view piece : pieces) re.split(piece, match_data.md, out);
        if (&out == &next) pieces.swap(next);
    }
}

}  // namespace kvs
