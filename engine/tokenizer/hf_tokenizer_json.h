#pragma once
// Reads a Hugging Face tokenizer.json (+ tokenizer_config.json) into VocabData, for models
// loaded from a safetensors folder.
//
// Supported: model.type "BPE" with vocab and merges (either "a b" strings or ["a", "b"]
// pairs) and added_tokens, as
//   - byte-level BPE (a ByteLevel pre-tokenizer): `pre` from the pre-tokenizer —
//     ByteLevel alone -> "gpt-2"; Split with Llama-3's regex -> "llama3"; Split with
//     Qwen2's regex -> "qwen2"; Digits(individual_digits) + ByteLevel -> "smollm";
//     anything else -> "custom" (the Tokenizer falls back to gpt-2 and says so);
//   - SentencePiece-style BPE (Metaspace pre-tokenizer or Prepend/Replace "▁" normalizer,
//     byte_fallback): model "llama"; scores derived from merge ranks (the piece made by
//     merge r scores -r), so score order is merge order.
// tokenizer_config.json gives chat_template (a string, or a list of {name, template}),
// bos_token / eos_token / pad_token (a string or {"content": ...}) and add_bos_token.
// Pass "" as tokenizer_config_path when the folder has none.
#include <string>

#include "engine/core/status.h"
#include "engine/tokenizer/vocab_data.h"

namespace kvs {

Result<VocabData> vocab_from_tokenizer_json(const std::string& tokenizer_json_path,
                                            const std::string& tokenizer_config_path);

}  // namespace kvs
