#pragma once
// Byte-level BPE (GPT-2 style, as Llama-3, Qwen2 and SmolLM2 use): a word's bytes are
// mapped to printable code points (GPT-2's bytes_to_unicode), split into characters, and
// adjacent pairs are merged lowest merge rank first until no listed merge applies.
//
// Speed: symbols are token ids from the start, merges live in a hash map keyed by the
// pair of ids, the merge loop is a heap over a linked list (O(n log n) per word), and
// finished words are cached.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/core/status.h"

namespace kvs {

// GPT-2's reversible byte <-> code point mapping: printable Latin-1 bytes map to
// themselves, the other 68 bytes to U+0100.. in byte order (space -> U+0120 'Ġ').
uint32_t byte_to_codepoint(uint8_t byte);
// The UTF-8 text of every byte's code point, e.g. byte_to_unicode_text()[' '] == "Ġ".
const std::vector<std::string>& byte_to_unicode_text();  // [256]
// Raw bytes -> GPT-2 unicode form (what byte-level vocabularies store).
std::string bytes_to_unicode(std::string_view raw);
// GPT-2 unicode form -> raw bytes. Code points outside the mapping are copied as UTF-8.
std::string unicode_to_bytes(std::string_view text);

class BpeModel {
public:
    // tokens: [n_vocab] in GPT-2 unicode form; merges: "a b", highest priority first.
    // Merges naming unknown tokens are skipped and counted in n_skipped_merges().
    static Result<std::shared_ptr<BpeModel>> create(const std::vector<std::string>& tokens,
                                                    const std::vector<std::string>& merges, bool ignore_merges,
                                                    int32_t unk_id);

    // Appends the ids of one pre-tokenized word (raw bytes) to `out`.
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;

    int32_t n_merges() const { return static_cast<int32_t>(m_merges.size()); }
    int32_t n_skipped_merges() const { return m_n_skipped; }

private:
    struct Merge {
        int32_t rank;    // position in the merges list: lower merges first
        int32_t merged;  // id of the concatenation
    };
    static uint64_t pair_key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }
    void merge_symbols(std::vector<int32_t>& ids) const;

    std::unordered_map<std::string, int32_t> m_token_to_id;
    std::unordered_map<uint64_t, Merge> m_merges;  // (left id, right id) -> merge
    int32_t m_byte_ids[256] = {};                  // id of each byte's single-character token, -1 if none
    bool m_ignore_merges = false;                  // a word that is itself a token is used whole (Llama-3)
    int32_t m_unk_id = -1;
    int32_t m_n_skipped = 0;

    static constexpr size_t kMaxCachedWordBytes = 128;
    static constexpr size_t kMaxCacheEntries = 1 << 16;
    mutable std::mutex m_cache_mutex;
    mutable std::unordered_map<std::string, std::vector<int32_t>> m_cache;  // word bytes -> ids
};

}  // namespace kvs
