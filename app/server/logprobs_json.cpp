#include "app/server/logprobs_json.h"

#include <cmath>
#include <cstdio>

#include "engine/tokenizer/tokenizer.h"

namespace kvs::server {

using json = nlohmann::json;

namespace {

bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + static_cast<size_t>(n) > s.size()) return false;
        for (int k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0xC0) != 0x80) return false;
        i += static_cast<size_t>(n);
    }
    return true;
}

// JSON has no -inf: a token the model gives no mass to is reported as -9999.0, like vLLM.
double finite(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

}  // namespace

void TextOffset::advance(const std::string& bytes) {
    for (unsigned char c : bytes) {
        if (pending > 0 && (c & 0xC0) == 0x80) {  // continues the character
            if (--pending == 0) ++chars;
            continue;
        }
        if (pending > 0) ++chars;  // a broken sequence: one replacement character
        pending = 0;
        const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
        if (n == 1) ++chars;  // ASCII, or a stray byte decoded as one replacement character
        else
            pending = n - 1;
    }
}

std::string LogprobsJson::token_string(int32_t id) const {
    const std::string piece = m_tok.token_to_piece(id);
    if (valid_utf8(piece)) return piece;
    std::string out = "bytes:";
    for (unsigned char c : piece) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        out += buf;
    }
    return out;
}

json LogprobsJson::entry(int32_t id, float logprob) const {
    json bytes = json::array();
    for (unsigned char c : m_tok.token_to_piece(id)) bytes.push_back(static_cast<int>(c));
    return {{"token", token_string(id)}, {"logprob", finite(logprob)}, {"bytes", std::move(bytes)}};
}

json LogprobsJson::chat_content(const std::vector<int32_t>& tokens, const std::vector<TokenLogprobs>& lps) const {
    json content = json::array();
    for (size_t i = 0; i < tokens.size() && i < lps.size(); ++i) {
        json e = entry(tokens[i], lps[i].logprob);
        json top = json::array();
        for (size_t k = 0; k < lps[i].top.size() && static_cast<int>(k) < m_top_k; ++k)
            top.push_back(entry(lps[i].top[k].id, lps[i].top[k].logprob));
        e["top_logprobs"] = std::move(top);
        content.push_back(std::move(e));
    }
    return content;
}

json LogprobsJson::completion(const std::vector<int32_t>& tokens, const std::vector<TokenLogprobs>& lps,
                              TextOffset* text_offset) const {
    json strs = json::array(), lp = json::array(), tops = json::array(), offsets = json::array();
    for (size_t i = 0; i < tokens.size() && i < lps.size(); ++i) {
        const std::string s = token_string(tokens[i]);
        strs.push_back(s);
        lp.push_back(finite(lps[i].logprob));
        json top = json::object();
        for (size_t k = 0; k < lps[i].top.size() && static_cast<int>(k) < m_top_k; ++k)
            top[token_string(lps[i].top[k].id)] = finite(lps[i].top[k].logprob);
        top[s] = finite(lps[i].logprob);  // the sampled token is always there (vLLM)
        tops.push_back(std::move(top));
        offsets.push_back(text_offset->chars);
        text_offset->advance(m_tok.token_to_piece(tokens[i]));
    }
    return {{"tokens", strs}, {"token_logprobs", lp}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json LogprobsJson::tgi_token(int32_t id, float logprob, bool prefill) const {
    json t = {{"id", id},
              {"text", m_tok.token_to_piece(id)},
              {"logprob", std::isnan(logprob) ? json(nullptr) : json(finite(logprob))}};
    if (!prefill) t["special"] = id >= 0 && m_tok.is_control(id);
    return t;
}

json LogprobsJson::tgi_top_tokens(const TokenLogprobs& lp) const {
    json top = json::array();
    for (size_t k = 0; k < lp.top.size() && static_cast<int>(k) < m_top_k; ++k)
        top.push_back(tgi_token(lp.top[k].id, lp.top[k].logprob));
    return top;
}

}  // namespace kvs::server
