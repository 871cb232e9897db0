#pragma once
// Chat prompts: which conversation format a model expects, detected from its own Jinja
// chat template, and a renderer for each format that produces exactly what that Jinja
// template renders (checked against jinja2 in tests/tst_tokenizer.cpp).
//
//   ChatML  <|im_start|>role\ncontent<|im_end|>\n ...            (SmolLM2, Qwen2)
//   Llama3  [bos]<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ...
//   Llama2  [bos][INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] answer </s>[bos][INST] ...
//   Gemma   [bos]<start_of_turn>user\ncontent<end_of_turn>\n<start_of_turn>model\n ...  (Gemma 3)
//   Plain   the contents, one per line (base models without a template)
//
// BOS: the Llama templates write bos_token themselves. ChatSpecialTokens::bos_token is
// empty by default so that the prompt is encoded with add_special=true (the tokenizer adds
// BOS once, as llama.cpp does); pass the BOS text to get the template's literal output.
#include <string>
#include <vector>

#include "engine/tokenizer/vocab_data.h"

namespace kvs {

enum class ChatFormat { ChatML, Llama3, Llama2, Gemma, Plain };

struct ChatMessage {
    std::string role;  // "system", "user", "assistant"
    std::string content;
};

struct ChatSpecialTokens {
    std::string bos_token;           // written where the template writes bos_token ("" = leave to the tokenizer)
    std::string eos_token = "</s>";  // Llama2: closes each assistant answer
};

const char* chat_format_name(ChatFormat format);

// By what the template text contains: "<|im_start|>" -> ChatML, "<|start_header_id|>" ->
// Llama3, "[INST]" -> Llama2, "<start_of_turn>" -> Gemma; no template -> ChatML when the
// vocabulary has <|im_start|>, Gemma when it has <start_of_turn> and <end_of_turn>, else Plain.
ChatFormat detect_chat_format(const std::string& jinja_template, const VocabData& vocab);

// The system prompt a ChatML template inserts when the conversation has none (SmolLM2:
// "You are a helpful AI assistant named SmolLM, trained by Hugging Face"), or "".
std::string default_system_prompt(const std::string& jinja_template);

// Renders the conversation. `default_system` is inserted as a system message when the
// first message is not one (and is not empty). With add_generation_prompt the prompt ends
// where the assistant's answer begins (the Llama-2 template has no such header).
std::string apply_chat_template(ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                const std::string& default_system, const ChatSpecialTokens& special = {});

}  // namespace kvs
