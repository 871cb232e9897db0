// GGML rows built from given group-wise integers (GPTQ checkpoints and quantizers): the
// quants unchanged, the group's scale repeated in every block of 32 it covers.
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::cpu {

bool pack_q4_1_row(const float* d, const int* z, const uint8_t* q, int64_t n, int group, void* dst) {
    if (group < kQK32 || group % kQK32 != 0 || n % group != 0) return false;
    for (int64_t g = 0; g < n / group; ++g)
        if (!std::isfinite(d[g]) || z[g] < 0 || z[g] > 15) return false;
    for (int64_t i = 0; i < n; ++i)
        if (q[i] > 15) return false;
    auto* b = static_cast<BlockQ4_1*>(dst);
    for (int64_t k = 0; k < n / kQK32; ++k) {
        const int64_t g = k * kQK32 / group;
        b[k].d = fp32_to_fp16(d[g]);
        b[k].m = fp32_to_fp16(-fp16_to_fp32(b[k].d) * static_cast<float>(z[g]));
        const uint8_t* qb = q + kQK32 * k;
        for (int j = 0; j < 16; ++j) b[k].qs[j] = static_cast<uint8_t>(qb[j] | (qb[j + 16] << 4));
    }
    return true;
}

bool pack_q8_0_row(const float* d, const int8_t* q, int64_t n, int group, void* dst) {
    if (group < kQK32 || group % kQK32 != 0 || n % group != 0) return false;
    for (int64_t g = 0; g < n / group; ++g)
        if (!std::isfinite(d[g])) return false;
    auto* b = static_cast<BlockQ8_0*>(dst);
    for (int64_t k = 0; k < n / kQK32; ++k) {
        b[k].d = fp32_to_fp16(d[k * kQK32 / group]);
        std::memcpy(b[k].qs, q + kQK32 * k, kQK32);
    }
    return true;
}

}  // namespace kvs::cpu
