#include "engine/tokenizer/spm.h"

#include <cstdio>
#include <queue>

#include "engine/tokenizer/utf8_stream.h"

namespace kvs {

std::string spm_escape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size() + text.size() / 4);
    for (char c : text) {
        if (c == ' ') out.append(kSpmSpace);
        else
            out.push_back(c);
    }
    return out;
}

Result<std::shared_ptr<SpmModel>> SpmModel::create(const std::vector<std::string>& tokens,
                                                   const std::vector<float>& scores,
                                                   const std::vector<TokenType>& types, int32_t unk_id) {
    if (!scores.empty() && scores.size() != tokens.size())
        return Result<std::shared_ptr<SpmModel>>::error("tokenizer scores: expected " + std::to_string(tokens.size()) +
                                                        " entries (one per token), got " +
                                                        std::to_string(scores.size()));
    auto model = std::make_shared<SpmModel>();
    model->m_token_to_id.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
        model->m_token_to_id.emplace(tokens[i], static_cast<int32_t>(i));
        model->m_max_token_bytes = std::max(model->m_max_token_bytes, tokens[i].size());
    }
    model->m_scores = scores.empty() ? std::vector<float>(tokens.size(), 0.0f) : scores;
    model->m_unk_id = unk_id;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        int32_t id = model->find(name);
        const bool is_byte_type = id >= 0 && (types.empty() || types[id] == TokenType::Byte ||
                                              types[id] == TokenType::Normal || types[id] == TokenType::Undefined);
        if (!is_byte_type) id = -1;
        if (id < 0) id = model->find(std::string(1, static_cast<char>(b)));
        model->m_byte_ids[b] = id >= 0 ? id : unk_id;
    }
    return model;
}

int32_t SpmModel::find(std::string_view text) const {
    auto it = m_token_to_id.find(text);
    return it == m_token_to_id.end() ? -1 : it->second;
}

void SpmModel::emit_symbol(std::string_view text, std::vector<int32_t>& out) const {
    const int32_t id = find(text);
    if (id >= 0) {
        out.push_back(id);
        return;
    }
    for (char c : text) {  // byte fallback
        const int32_t b = m_byte_ids[static_cast<unsigned char>(c)];
        if (b >= 0) out.push_back(b);
    }
}

void SpmModel::encode(std::string_view escaped, std::vector<int32_t>& out) const {
    struct Symbol {
        size_t begin;  // byte offset into `escaped`
        size_t n;      // bytes; 0 once merged into its left neighbour
        int prev;
        int next;
    };
    std::vector<Symbol> symbols;  // [n_chars]
    symbols.reserve(escaped.size());
    for (size_t i = 0; i < escaped.size();) {
        int len = utf8_sequence_length(static_cast<unsigned char>(escaped[i]));
        size_t n = len > 0 ? std::min(static_cast<size_t>(len), escaped.size() - i) : 1;
        const int idx = static_cast<int>(symbols.size());
        symbols.push_back({i, n, idx - 1, idx + 1});
        i += n;
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;

    struct Bigram {
        int left;
        int right;
        float score;
        size_t size;  // bytes of the concatenation when proposed: stale when a side changed
    };
    auto worse = [](const Bigram& a, const Bigram& b) {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const size_t size = symbols[left].n + symbols[right].n;
        if (size > m_max_token_bytes) return;
        const int32_t id = find(escaped.substr(symbols[left].begin, size));
        if (id < 0) return;
        queue.push({left, right, m_scores[id], size});
    };
    for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

    while (!queue.empty()) {
        const Bigram bg = queue.top();
        queue.pop();
        Symbol& left = symbols[bg.left];
        Symbol& right = symbols[bg.right];
        if (left.n == 0 || right.n == 0 || left.n + right.n != bg.size || left.next != bg.right) continue;
        left.n += right.n;
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = bg.left;
        try_add(left.prev, bg.left);
        try_add(bg.left, left.next);
    }
    for (int i = 0; i >= 0; i = symbols[i].next) emit_symbol(escaped.substr(symbols[i].begin, symbols[i].n), out);
}

}  // namespace kvs
