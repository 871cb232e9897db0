#pragma once
// Text <-> token ids for a loaded model. Built from VocabData (GGUF tokenizer.ggml.* or a
// Hugging Face tokenizer.json); picks byte-level BPE ("gpt2") or SentencePiece BPE ("llama").
//
//   encode: [BOS] + for each fragment between special tokens: pre-tokenize -> BPE (or
//           SPM with the ▁ space marker) ; special tokens in the text become single ids
//           when parse_special is set (user-defined tokens always do, as in llama.cpp).
//   decode: concatenation of token_to_piece, minus SentencePiece's added leading space.
//
// A Tokenizer is cheap to copy (shared immutable state) and safe to use from several
// threads at once.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"
#include "engine/tokenizer/vocab_data.h"

namespace kvs {

class Tokenizer {
public:
    static Result<Tokenizer> create(const VocabData& vocab);

    // add_special: prepend BOS when the vocabulary asks for it (vocab.add_bos).
    // parse_special: recognise control tokens such as <|im_start|> written in the text.
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
    std::string decode(const std::vector<int32_t>& ids) const;
    // The raw bytes of one token (may be an incomplete UTF-8 character; see utf8_stream.h).
    // Control tokens give their text ("<|im_end|>"); an out-of-range id gives "".
    std::string token_to_piece(int32_t id) const;
    // The token's text as the vocabulary stores it (GPT-2 unicode form / with ▁).
    const std::string& token_text(int32_t id) const;
    // Id of a token by its vocabulary text, or -1.
    int32_t find_token(std::string_view text) const;

    int32_t n_vocab() const;
    int32_t bos() const;
    int32_t eos() const;
    int32_t eot() const;  // end of turn (<|im_end|>, <|eot_id|>), -1 when none
    bool add_bos() const;
    // End of generation: eos, eot, or another end-of-text control token of this vocabulary.
    bool is_eog(int32_t id) const;
    bool is_control(int32_t id) const;
    const std::string& model() const;               // "gpt2" or "llama"
    const std::string& pre() const;                 // pre-tokenizer in use ("smollm", "llama3", ...)
    const std::vector<std::string>& notes() const;  // warnings from create() (e.g. unknown pre)

private:
    struct State;
    explicit Tokenizer(std::shared_ptr<const State> state) : m_state(std::move(state)) {}
    void encode_fragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
    std::shared_ptr<const State> m_state;
};

}  // namespace kvs
