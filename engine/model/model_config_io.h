#pragma once
// Model hyper-parameters and tokenizer data from model-file metadata: the GGUF keys
// ({arch}.block_count, tokenizer.ggml.*, ...) and a Hugging Face config.json. Used by
// the model loader; every value is range-checked and errors name the file and key.
#include <string>

#include "engine/core/status.h"
#include "engine/model/gguf_reader.h"
#include "engine/model/model.h"

namespace kvs {

// general.architecture ("llama" or "qwen2") and its {arch}.* keys. rope_style is
// Normal for llama (Q/K permuted by the converter) and Neox for qwen2. n_vocab is
// {arch}.vocab_size, else the token count, else token_embd's row count.
Result<ModelConfig> read_gguf_config(const GgufFile& f);
// tokenizer.ggml.* and tokenizer.chat_template; n_vocab tokens expected.
Result<VocabData> read_gguf_vocab(const GgufFile& f, int n_vocab);

// config.json of a Hugging Face checkpoint (model_type llama, mistral or qwen2); rope
// style Neox (HF checkpoints are not permuted).
Result<ModelConfig> read_hf_config(const std::string& config_json_path);
// Pads a tokenizer.json vocabulary up to n_vocab with "[PAD<i>]" unused tokens (as the
// GGUF converter does), finds eot_id when unset; errors when it has more than n_vocab.
Status finish_hf_vocab(VocabData& v, int n_vocab, const std::string& tokenizer_json_path);

// The id of "<|im_end|>", "<|eot_id|>" or "<|end|>", -1 when none is in the vocabulary.
int32_t find_eot_token(const std::vector<std::string>& tokens);

}  // namespace kvs
