// A GptqMatrix in the storage formats the kernels run: 4-bit groups of 128 / 64 as
// I4_G128 / I4_G64 (d, z, nibbles: bit-exact), groups of 32 as Q4_1 (d, m = fp16(-d * z)),
// 8-bit symmetric as Q8_0 (d per block of 32, q - 128); act-order g_idx through an input
// permutation that sorts the columns by group.
#include "engine/quant/gptq.h"

#include <algorithm>
#include <numeric>

#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace {

// The storage group: the largest of 128 / 64 / 32 dividing the GPTQ group (several storage
// groups then share one scale and zero), 0 when none does.
int storage_group(const GptqMatrix& m) {
    for (int s : {128, 64, 32})
        if (m.group % s == 0 && m.n_in % s == 0) return s;
    return 0;
}

}  // namespace

Result<std::vector<int32_t>> gptq_group_permutation(const GptqMatrix& m) {
    using R = Result<std::vector<int32_t>>;
    if (m.trivial_g_idx()) return std::vector<int32_t>();
    const int64_t n_groups = m.n_groups();
    std::vector<int64_t> count(static_cast<size_t>(n_groups), 0);
    for (int32_t g : m.g_idx) {
        if (g < 0 || g >= n_groups)
            return R::error("GPTQ: g_idx holds group " + std::to_string(g) + ", outside 0.." +
                            std::to_string(n_groups - 1));
        ++count[size_t(g)];
    }
    for (int64_t g = 0; g < n_groups; ++g)
        if (count[size_t(g)] != m.group)
            return R::error("GPTQ: g_idx gives group " + std::to_string(g) + " " + std::to_string(count[size_t(g)]) +
                            " input columns, expected group_size = " + std::to_string(m.group) +
                            " (act-order groups are runs of group_size columns in the permuted order)");
    std::vector<int32_t> perm(static_cast<size_t>(m.n_in));  // [n_in] position -> original column
    std::iota(perm.begin(), perm.end(), 0);
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int32_t a, int32_t b) { return m.g_idx[size_t(a)] < m.g_idx[size_t(b)]; });
    return perm;
}

GptqMatrix gptq_permute_columns(const GptqMatrix& m, const std::vector<int32_t>& perm) {
    GptqMatrix r = m;
    for (int64_t o = 0; o < m.n_out; ++o)
        for (int64_t p = 0; p < m.n_in; ++p) r.q[size_t(o * m.n_in + p)] = m.q[size_t(o * m.n_in + perm[size_t(p)])];
    for (int64_t p = 0; p < m.n_in; ++p) r.g_idx[size_t(p)] = m.g_idx[size_t(perm[size_t(p)])];
    return r;
}

GptqMatrix gptq_unpermute_columns(const GptqMatrix& m, const std::vector<int32_t>& perm) {
    GptqMatrix r = m;
    for (int64_t o = 0; o < m.n_out; ++o)
        for (int64_t p = 0; p < m.n_in; ++p) r.q[size_t(o * m.n_in + perm[size_t(p)])] = m.q[size_t(o * m.n_in + p)];
    for (int64_t p = 0; p < m.n_in; ++p) r.g_idx[size_t(perm[size_t(p)])] = m.g_idx[size_t(p)];
    return r;
}

Result<DType> gptq_storage_type(const GptqMatrix& m) {
    using R = Result<DType>;
    if (!m.trivial_g_idx())
        return R::error(
            "GPTQ: g_idx is not contiguous (act-order without static groups): no storage format keeps "
            "its groups");
    const int s = storage_group(m);
    if (s == 0)
        return R::error("GPTQ: groups of " + std::to_string(m.group) +
                        " are not a multiple of 32, 64 or 128 (the storage groups)");
    if (m.bits == 4) return s == 128 ? DType::I4_G128 : s == 64 ? DType::I4_G64 : DType::Q4_1;
    if (m.bits == 8) {
        for (int32_t z : m.zeros)
            if (z != 128)
                return R::error(
                    "GPTQ: 8-bit weights with zero points other than 128 (asymmetric) have no storage "
                    "format here (Q8_0 is symmetric)");
        return DType::Q8_0;
    }
    return R::error("GPTQ: " + std::to_string(m.bits) + "-bit weights have no storage format (4 or 8)");
}

Result<std::vector<uint8_t>> gptq_encode(const GptqMatrix& m_in, DType* type, std::vector<int32_t>* in_perm) {
    if (in_perm) in_perm->clear();
    GptqMatrix permuted;
    if (in_perm && !m_in.trivial_g_idx()) {
        auto perm = gptq_group_permutation(m_in);
        if (!perm) return perm.status();
        permuted = gptq_permute_columns(m_in, perm.value());
        *in_perm = std::move(perm).value();
    }
    const GptqMatrix& m = in_perm && !in_perm->empty() ? permuted : m_in;
    auto t = gptq_storage_type(m);
    if (!t) return t.status();
    *type = t.value();
    const size_t rb = row_bytes(*type, m.n_in);
    std::vector<uint8_t> out(rb * size_t(m.n_out));  // [n_out, row_bytes]
    const int64_t G = m.group, S = storage_group(m);
    std::vector<float> d(static_cast<size_t>(m.n_in / S));  // per storage group

    std::vector<int> z(d.size());
    std::vector<int8_t> q8(static_cast<size_t>(m.n_in));  // [n_in] Q8_0 quants
    for (int64_t o = 0; o < m.n_out; ++o) {
        uint8_t* dst = out.data() + size_t(o) * rb;
        const uint8_t* q = m.q.data() + o * m.n_in;
        for (int64_t k = 0; k < m.n_in / S; ++k) {
            const int64_t g = k * S / G;
            d[size_t(k)] = m.scales[size_t(g * m.n_out + o)];
            z[size_t(k)] = m.zeros[size_t(g * m.n_out + o)];
        }
        bool ok;
        if (*type == DType::I4_G128 || *type == DType::I4_G64) {
            ok = cpu::pack_i4_row(*type, d.data(), z.data(), q, m.n_in, dst);
        } else if (*type == DType::Q4_1) {
            ok = cpu::pack_q4_1_row(d.data(), z.data(), q, m.n_in, int(S), dst);
        } else {  // Q8_0: q - 128
            for (int64_t i = 0; i < m.n_in; ++i) q8[size_t(i)] = int8_t(int(q[i]) - 128);
            ok = cpu::pack_q8_0_row(d.data(), q8.data(), m.n_in, int(S), dst);
        }
        if (!ok)
            return Result<std::vector<uint8_t>>::error("GPTQ: row " + std::to_string(o) +
                                                       " has a scale, zero or quant out of range");
    }
    return out;
}

}  // namespace kvs
