#pragma once
// SentencePiece-style BPE, as llama.cpp's llm_tokenizer_spm runs it for Llama-2 /
// TinyLlama / Mistral GGUF files: the text (spaces already replaced by U+2581 "▁") is split
// into UTF-8 characters, then the adjacent pair whose concatenation is a vocabulary token
// with the highest score is merged (ties: leftmost) until no pair forms a token. A
// character that is not a token is emitted as byte tokens <0xNN> (byte fallback), else <unk>.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/core/status.h"
#include "engine/tokenizer/vocab_data.h"

namespace kvs {

// Hash for unordered maps keyed by std::string that accept std::string_view look-ups.
struct TransparentStringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Replaces every ' ' with U+2581.
std::string spm_escape_spaces(std::string_view text);

class SpmModel {
public:
    // tokens/scores/types: [n_vocab] (scores and types may be empty: all 0 / Normal).
    static Result<std::shared_ptr<SpmModel>> create(const std::vector<std::string>& tokens,
                                                    const std::vector<float>& scores,
                                                    const std::vector<TokenType>& types, int32_t unk_id);

    // Appends the ids of `escaped` (already space-escaped) to `out`.
    void encode(std::string_view escaped, std::vector<int32_t>& out) const;

    int32_t byte_token(uint8_t byte) const { return m_byte_ids[byte]; }

private:
    int32_t find(std::string_view text) const;
    void emit_symbol(std::string_view text, std::vector<int32_t>& out) const;

    std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>> m_token_to_id;
    std::vector<float> m_scores;   // [n_vocab]
    int32_t m_byte_ids[256] = {};  // <0xNN> token per byte (else the 1-byte token, else unk)
    int32_t m_unk_id = -1;
    size_t m_max_token_bytes = 0;  // longest token text: longer concatenations cannot be tokens
};

}  // namespace kvs
