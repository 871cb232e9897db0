#pragma once
// The CPU swap tier's bookkeeping: which host blocks are free. A preempted request's KV
// blocks are copied into host blocks (the engine holds the bytes, engine/runtime/engine.cpp)
// and back into fresh device blocks when it resumes.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace kvs {

class SwapSpace {
public:
    explicit SwapSpace(int n_blocks) : m_n_blocks(n_blocks) {
        for (int i = n_blocks - 1; i >= 0; --i) m_free.push_back(i);  // pop_back gives 0, 1, 2, ...
    }
    int n_blocks() const { return m_n_blocks; }
    int n_free() const { return static_cast<int>(m_free.size()); }
    // n host blocks, or nothing (and no change) when fewer are free.
    std::optional<std::vector<int32_t>> allocate(int n) {
        if (n > n_free()) return std::nullopt;
        std::vector<int32_t> out(m_free.end() - n, m_free.end());
        std::reverse(out.begin(), out.end());
        m_free.resize(m_free.size() - static_cast<size_t>(n));
        return out;
    }
    void release(const std::vector<int32_t>& blocks) { m_free.insert(m_free.end(), blocks.rbegin(), blocks.rend()); }

private:
    int m_n_blocks;
    std::vector<int32_t> m_free;
};

}  // namespace kvs
