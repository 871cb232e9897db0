#pragma once
// Regex pre-tokenization for byte-level BPE: splits text into "words" that BPE merges
// never cross. Each pre-tokenizer is a sequence of regexes; every regex splits each piece
// produced by the previous one, keeping both the matches and the text between them (the
// "Isolated" behaviour of Hugging Face's Split, and llama.cpp's unicode_regex_split).
// Regexes are PCRE2 in UTF + Unicode-property mode, JIT-compiled once.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

// The regex texts, exactly as the models' tokenizer.json files spell them.
inline constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kDigitRegex = R"(\p{N})";  // each digit on its own

class CompiledRegex;  // a JIT-compiled PCRE2 pattern (pre_tokenizer.cpp)

class PreTokenizer {
public:
    // `pre` is VocabData::pre: "gpt-2"/"gpt2"/"default", "llama3"/"llama-bpe", "smollm",
    // "qwen2". An unknown name falls back to gpt-2 and records a note saying so.
    static Result<PreTokenizer> create(const std::string& pre);
    // Builds one from explicit regexes (applied in order).
    static Result<PreTokenizer> from_regexes(const std::vector<std::string>& regexes, std::string name);

    // Splits `text` into words; the views point into `text` and cover it exactly, in order.
    std::vector<std::string_view> split(std::string_view text) const;
    void split(std::string_view text, std::vector<std::string_view>& words) const;

    const std::string& name() const { return m_name; }  // the pre-tokenizer actually used
    const std::string& note() const { return m_note; }  // "" or a warning (unknown name)

private:
    std::vector<std::shared_ptr<const CompiledRegex>> m_regexes;
    std::string m_name;
    std::string m_note;
};

}  // namespace kvs
