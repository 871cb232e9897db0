// A GptqMatrix in the storage formats the kernels run: 4-bit groups of 128 / 64 as
// I4_G128 / I4_G64 (d, z, nibbles: bit-exact), groups of 32 as Q4_1 (d, m = fp16(-d * z)),
// 8-bit symmetric as Q8_0 (d per block of 32, q - 128).
#include "engine/quant/gptq.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

Result<DType> gptq_storage_type(const GptqMatrix& m) {
    using R = Result<DType>;
    if (!m.trivial_g_idx())
        return R::error(
            "GPTQ: g_idx is not contiguous (act-order without static groups): no storage format keeps "
            "its groups");
    if (m.bits == 4) {
        if (m.group == 128) return DType::I4_G128;
        if (m.group == 64) return DType::I4_G64;
        if (m.group == 32) return DType::Q4_1;
        return R::error("GPTQ: 4-bit groups of " + std::to_string(m.group) + " have no storage format (32, 64, 128)");
    }
    if (m.bits == 8) {
        if (m.group % 32 != 0)
            return R::error("GPTQ: 8-bit groups of " + std::to_string(m.group) + " are not a multiple of 32");
        for (int32_t z : m.zeros)
            if (z != 128)
                return R::error(
                    "GPTQ: 8-bit weights with zero points other than 128 (asymmetric) have no storage "
                    "format here (Q8_0 is symmetric)");
        return DType::Q8_0;
    }
    return R::error("GPTQ: " + std::to_string(m.bits) + "-bit weights have no storage format (4 or 8)");
}

Result<std::vector<uint8_t>> gptq_encode(const GptqMatrix& m, DType* type) {
    auto t = gptq_storage_type(m);
    if (!t) return t.status();
    *type = t.value();
    const size_t rb = row_bytes(*type, m.n_in);
    std::vector<uint8_t> out(rb * size_t(m.n_out));  // [n_out, row_bytes]
    const int64_t G = m.group;
    std::vector<float> d(static_cast<size_t>(m.n_in / G));
    std::vector<int> z(d.size());
    std::vector<int8_t> q8(static_cast<size_t>(m.n_in));  // [n_in] Q8_0 quants
    for (int64_t o = 0; o < m.n_out; ++o) {
        uint8_t* dst = out.data() + size_t(o) * rb;
        const uint8_t* q = m.q.data() + o * m.n_in;
        for (int64_t g = 0; g < m.n_in / G; ++g) {
            d[size_t(g)] = m.scales[size_t(g * m.n_out + o)];
            z[size_t(g)] = m.zeros[size_t(g * m.n_out + o)];
        }
        bool ok;
        if (*type == DType::I4_G128 || *type == DType::I4_G64) {
            ok = cpu::pack_i4_row(*type, d.data(), z.data(), q, m.n_in, dst);
        } else if (*type == DType::Q4_1) {
            ok = cpu::pack_q4_1_row(d.data(), z.data(), q, m.n_in, int(G), dst);
        } else {  // Q8_0: q - 128
            for (int64_t i = 0; i < m.n_in; ++i) q8[size_t(i)] = int8_t(int(q[i]) - 128);
            ok = cpu::pack_q8_0_row(d.data(), q8.data(), m.n_in, int(G), dst);
        }
        if (!ok)
            return Result<std::vector<uint8_t>>::error("GPTQ: row " + std::to_string(o) +
                                                       " has a scale, zero or quant out of range");
    }
    return out;
}

}  // namespace kvs
