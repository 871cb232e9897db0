#include "engine/tokenizer/bpe.h"

#include <queue>

#include "engine/tokenizer/utf8_stream.h"

namespace kvs {

namespace {

void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

// Decodes the code point at text[i] (advancing i); invalid bytes decode as themselves.
uint32_t next_codepoint(std::string_view text, size_t& i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const int n = utf8_sequence_length(c);
    if (n <= 1 || i + static_cast<size_t>(n) > text.size()) {
        ++i;
        return c;
    }
    uint32_t cp = c & (0xFF >> (n + 1));
    for (int j = 1; j < n; ++j) cp = (cp << 6) | (static_cast<unsigned char>(text[i + j]) & 0x3F);
    i += static_cast<size_t>(n);
    return cp;
}

struct ByteTables {
    uint32_t byte_to_cp[256];
    std::vector<std::string> byte_text;  // [256]
    std::unordered_map<uint32_t, uint8_t> cp_to_byte;
    ByteTables() : byte_text(256) {
        uint32_t n_extra = 0;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            byte_to_cp[b] = printable ? b : 256 + n_extra++;
            append_utf8(byte_to_cp[b], byte_text[b]);
            cp_to_byte[byte_to_cp[b]] = static_cast<uint8_t>(b);
        }
    }
};

const ByteTables& byte_tables() {
    static const ByteTables tables;
    return tables;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) { return byte_tables().byte_to_cp[byte]; }

const std::vector<std::string>& byte_to_unicode_text() { return byte_tables().byte_text; }

std::string bytes_to_unicode(std::string_view raw) {
    const auto& text = byte_tables().byte_text;
    std::string out;
    out.reserve(raw.size() * 2);
    for (char c : raw) out += text[static_cast<unsigned char>(c)];
    return out;
}

std::string unicode_to_bytes(std::string_view text) {
    const auto& cp_to_byte = byte_tables().cp_to_byte;
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const size_t start = i;
        const uint32_t cp = next_codepoint(text, i);
        auto it = cp_to_byte.find(cp);
        if (it != cp_to_byte.end()) {
            out.push_back(static_cast<char>(it->second));
        } else {
            out.append(text.substr(start, i - start));
        }
    }
    return out;
}

Result<std::shared_ptr<BpeModel>> BpeModel::create(const std::vector<std::string>& tokens,
                                                   const std::vector<std::string>& merges, bool ignore_merges,
                                                   int32_t unk_id) {
    auto model = std::make_shared<BpeModel>();
    model->m_token_to_id.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) model->m_token_to_id.emplace(tokens[i], static_cast<int32_t>(i));
    const auto& byte_text = byte_to_unicode_text();
    for (int b = 0; b < 256; ++b) {
        auto it = model->m_token_to_id.find(byte_text[b]);
        model->m_byte_ids[b] = it == model->m_token_to_id.end() ? -1 : it->second;
    }
    model->m_merges.reserve(merges.size());
    std::string merged;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const std::string& m = merges[rank];
        const size_t space = m.find(' ', 1);  // a token may itself start with ' ' in odd vocabularies
        if (space == std::string::npos)
            return Result<std::shared_ptr<BpeModel>>::error("tokenizer merges[" + std::to_string(rank) + "] = '" + m +
                                                            "': expected two tokens separated by a space");
        const std::string_view left(m.data(), space);
        const std::string_view right(m.data() + space + 1, m.size() - space - 1);
        merged.assign(left);
        merged.append(right);
        auto l = model->m_token_to_id.find(std::string(left));
        auto r = model->m_token_to_id.find(std::string(right));
        auto t = model->m_token_to_id.find(merged);
        if (l == model->m_token_to_id.end() || r == model->m_token_to_id.end() || t == model->m_token_to_id.end()) {
            ++model->m_n_skipped;
            continue;
        }
        // The first (highest priority) listing of a pair wins.
        model->m_merges.try_emplace(pair_key(l->second, r->second), Merge{static_cast<int32_t>(rank), t->second});
    }
    model->m_ignore_merges = ignore_merges;
    model->m_unk_id = unk_id;
    return model;
}

void BpeModel::merge_symbols(std::vector<int32_t>& ids) const {
    const int n = static_cast<int>(ids.size());
    if (n < 2) return;
    std::vector<int> next(n);  // [n] index of the next live symbol, n at the end
    std::vector<int> prev(n);  // [n] index of the previous live symbol, -1 at the start
    for (int i = 0; i < n; ++i) {
        next[i] = i + 1;
        prev[i] = i - 1;
    }
    struct Candidate {
        int32_t rank;
        int pos;       // left symbol
        int32_t left;  // ids when the candidate was made: stale when either changed
        int32_t right;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto push_pair = [&](int pos) {
        if (pos < 0 || next[pos] >= n) return;
        const int32_t a = ids[pos];
        const int32_t b = ids[next[pos]];
        if (a < 0 || b < 0) return;
        auto it = m_merges.find(pair_key(a, b));
        if (it != m_merges.end()) heap.push({it->second.rank, pos, a, b});
    };
    for (int i = 0; i + 1 < n; ++i) push_pair(i);
    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        const int right = next[c.pos];
        if (ids[c.pos] != c.left || right >= n || ids[right] != c.right) continue;  // stale
        ids[c.pos] = m_merges.at(pair_key(c.left, c.right)).merged;
        ids[right] = -2;  // dead
        next[c.pos] = next[right];
        if (next[right] < n) prev[next[right]] = c.pos;
        push_pair(prev[c.pos]);
        push_pair(c.pos);
    }
    size_t out = 0;
    for (int i = 0; i < n; i = next[i]) ids[out++] = ids[i];
    ids.resize(out);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    if (cacheable) {
        std::lock_guard lock(m_cache_mutex);
        auto it = m_cache.find(std::string(word));
        if (it != m_cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<int32_t> ids;  // [n_symbols]
    if (m_ignore_merges) {
        auto it = m_token_to_id.find(bytes_to_unicode(word));
        if (it != m_token_to_id.end()) ids.push_back(it->second);
    }
    if (ids.empty()) {
        ids.reserve(word.size());
        for (char c : word) ids.push_back(m_byte_ids[static_cast<unsigned char>(c)]);
        merge_symbols(ids);
        // A byte with no token of its own becomes <unk>, or is dropped when there is none.
        size_t kept = 0;
        for (int32_t id : ids) {
            if (id >= 0) ids[kept++] = id;
            else if (m_unk_id >= 0)
                ids[kept++] = m_unk_id;
        }
        ids.resize(kept);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    if (cacheable) {
        std::lock_guard lock(m_cache_mutex);
        if (m_cache.size() >= kMaxCacheEntries) m_cache.clear();
        m_cache.emplace(std::string(word), std::move(ids));
    }
}

}  // namespace kvs
