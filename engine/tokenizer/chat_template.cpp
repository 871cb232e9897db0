#include "engine/tokenizer/chat_template.h"

#include <algorithm>
#include <cstdint>

namespace kvs {

namespace {

// Python's str.isspace() code points (what Jinja's trim and str.strip() remove).
bool is_python_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

// Decodes the code point starting at s[i]; sets `len` to its byte length (1 for invalid bytes).
uint32_t decode_at(const std::string& s, size_t i, size_t& len) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
    if (n <= 1 || i + n > s.size()) {
        len = 1;
        return c;
    }
    uint32_t cp = c & (0xFF >> (n + 1));
    for (int j = 1; j < n; ++j) cp = (cp << 6) | (static_cast<unsigned char>(s[i + j]) & 0x3F);
    len = static_cast<size_t>(n);
    return cp;
}

// Python's str.strip(): removes Unicode whitespace from both ends.
std::string py_strip(const std::string& s) {
    size_t begin = 0;
    size_t end = s.size();
    while (begin < end) {
        size_t len = 0;
        if (!is_python_space(decode_at(s, begin, len))) break;
        begin += len;
    }
    while (end > begin) {
        size_t start = end - 1;  // back up to the lead byte of the last character
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t len = 0;
        const uint32_t cp = decode_at(s, start, len);
        if (start + len != end || !is_python_space(cp)) break;
        end = start;
    }
    return s.substr(begin, end - begin);
}

std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const ChatSpecialTokens& special) {
    std::string out;
    for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out += special.bos_token;
        out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + py_strip(messages[i].content) +
               "<|eot_id|>";
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

// Meta's Llama-2 chat template: the system prompt is folded into the first user turn.
std::string render_llama2(const std::vector<ChatMessage>& messages, const ChatSpecialTokens& special) {
    size_t first = 0;
    const std::string* system = nullptr;
    if (!messages.empty() && messages[0].role == "system") {
        system = &messages[0].content;
        first = 1;
    }
    std::string out;
    for (size_t i = first; i < messages.size(); ++i) {
        std::string content = messages[i].content;
        if (i == first && system) content = "<<SYS>>\n" + *system + "\n<</SYS>>\n\n" + content;
        if (messages[i].role == "user") {
            out += special.bos_token + "[INST] " + py_strip(content) + " [/INST]";
        } else if (messages[i].role == "assistant") {
            out += " " + py_strip(content) + " " + special.eos_token;
        }
    }
    return out;
}

// Gemma 3's template: bos, then <start_of_turn>role\n content|trim <end_of_turn>\n per turn,
// the assistant's role named "model"; a system message becomes the prefix of the first
// turn ("system text\n\n", untrimmed).
std::string render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const ChatSpecialTokens& special) {
    std::string out = special.bos_token, prefix;
    size_t first = 0;
    if (!messages.empty() && messages[0].role == "system") {
        prefix = messages[0].content + "\n\n";
        first = 1;
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const std::string role = messages[i].role == "assistant" ? "model" : messages[i].role;
        out += "<start_of_turn>" + role + "\n" + (i == first ? prefix : std::string()) + py_strip(messages[i].content) +
               "<end_of_turn>\n";
    }
    if (add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
}

std::string render_plain(const std::vector<ChatMessage>& messages) {
    std::string out;
    for (const ChatMessage& m : messages) out += m.content + "\n";
    return out;
}

// Un-escapes the Jinja string-literal escapes a system prompt may contain.
std::string unescape_literal(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
            const char c = s[++i];
            out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

}  // namespace

const char* chat_format_name(ChatFormat format) {
    switch (format) {
        case ChatFormat::ChatML: return "chatml";
        case ChatFormat::Llama3: return "llama3";
        case ChatFormat::Llama2: return "llama2";
        case ChatFormat::Gemma: return "gemma";
        case ChatFormat::Plain: return "plain";
    }
    return "plain";
}

ChatFormat detect_chat_format(const std::string& jinja_template, const VocabData& vocab) {
    if (jinja_template.find("<|im_start|>") != std::string::npos) return ChatFormat::ChatML;
    if (jinja_template.find("<|start_header_id|>") != std::string::npos) return ChatFormat::Llama3;
    if (jinja_template.find("[INST]") != std::string::npos) return ChatFormat::Llama2;
    if (jinja_template.find("<start_of_turn>") != std::string::npos) return ChatFormat::Gemma;
    auto has = [&](const char* text) { return std::find(vocab.tokens.begin(), vocab.tokens.end(), text) != vocab.tokens.end(); };
    if (has("<|im_start|>")) return ChatFormat::ChatML;
    if (has("<start_of_turn>") && has("<end_of_turn>")) return ChatFormat::Gemma;  // Gemma files without a template
    return ChatFormat::Plain;
}

std::string default_system_prompt(const std::string& jinja_template) {
    static const std::string kHeader = "<|im_start|>system";
    for (size_t pos = jinja_template.find(kHeader); pos != std::string::npos;
         pos = jinja_template.find(kHeader, pos + 1)) {
        size_t begin = pos + kHeader.size();
        if (jinja_template.compare(begin, 1, "\n") == 0) begin += 1;
        else if (jinja_template.compare(begin, 2, "\\n") == 0)
            begin += 2;
        else
            continue;
        const size_t end = jinja_template.find("<|im_end|>", begin);
        if (end == std::string::npos) continue;
        const std::string text = jinja_template.substr(begin, end - begin);
        // Only a literal inside one string: an expression ('+ message[...]') is not a default.
        if (text.empty() || text.find_first_of("'\"{}") != std::string::npos) continue;
        return unescape_literal(text);
    }
    return {};
}

std::string apply_chat_template(ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                const std::string& default_system, const ChatSpecialTokens& special) {
    const std::vector<ChatMessage>* conversation = &messages;
    std::vector<ChatMessage> with_system;
    if (!default_system.empty() && !messages.empty() && messages[0].role != "system") {
        with_system.reserve(messages.size() + 1);
        with_system.push_back({"system", default_system});
        with_system.insert(with_system.end(), messages.begin(), messages.end());
        conversation = &with_system;
    }
    switch (format) {
        case ChatFormat::ChatML: return render_chatml(*conversation, add_generation_prompt);
        case ChatFormat::Llama3: return render_llama3(*conversation, add_generation_prompt, special);
        case ChatFormat::Llama2: return render_llama2(*conversation, special);
        case ChatFormat::Gemma: return render_gemma(*conversation, add_generation_prompt, special);
        case ChatFormat::Plain: return render_plain(*conversation);
    }
    return {};
}

}  // namespace kvs
