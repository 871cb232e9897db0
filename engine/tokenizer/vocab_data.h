#pragma once
// Everything a tokenizer is built from, as read from a GGUF file's tokenizer.ggml.*
// metadata or from a Hugging Face tokenizer.json (+ tokenizer_config.json). The model
// loader fills it; engine/tokenizer/tokenizer.h turns it into a Tokenizer.
#include <cstdint>
#include <string>
#include <vector>

namespace kvs {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6
};

struct VocabData {
    std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE)
    std::string pre;    // pre-tokenizer name: "default", "llama3"/"llama-bpe", "smollm", "qwen2", "gpt-2", ...
    std::vector<std::string>
        tokens;                 // [n_vocab] token text (byte-level BPE: GPT-2 byte-to-unicode form; SPM: with U+2581)
    std::vector<float> scores;  // [n_vocab] SentencePiece scores (empty for BPE)
    std::vector<TokenType> token_types;  // [n_vocab] (may be empty: all Normal)
    std::vector<std::string> merges;     // BPE merges "a b", highest priority first
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t eot_id = -1;  // end of turn (<|im_end|>, <|eot_id|>), -1 when none
    int32_t unk_id = -1;
    int32_t pad_id = -1;
    bool add_bos = false;           // prepend BOS when encoding a prompt
    bool add_space_prefix = false;  // SentencePiece: prepend a space to the text
    std::string chat_template;      // the model's Jinja chat template text ("" when absent)
};

}  // namespace kvs
