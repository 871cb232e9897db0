#include "engine/lora/lora_apply.h"

#include <cassert>

namespace kvs {

LoraBatch LoraBatch::group(const std::vector<const LoraAdapter*>& adapters, const std::vector<int32_t>& token_adapter) {
    LoraBatch b;
    std::vector<int> slot(adapters.size(), -1);  // adapters index -> b.adapters index
    for (size_t t = 0; t < token_adapter.size(); ++t) {
        const int32_t i = token_adapter[t];
        if (i < 0 || static_cast<size_t>(i) >= adapters.size() || !adapters[static_cast<size_t>(i)]) continue;
        int& s = slot[static_cast<size_t>(i)];
        if (s < 0) {
            s = static_cast<int>(b.adapters.size());
            b.adapters.push_back(adapters[static_cast<size_t>(i)]);
            b.rows.emplace_back();
        }
        b.rows[static_cast<size_t>(s)].push_back(static_cast<int32_t>(t));
    }
    return b;
}

namespace {
// sum_i a[i] * b[i] with 8 partial sums (vectorizable, one fixed order).
float dot(const float* a, const float* b, int n) {
    float acc[8] = {};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}
}  // namespace

void apply_lora(const LoraBatch& batch, int layer, LoraTarget target, const float* x, int n_in, float* y, int n_out,
                std::vector<float>& scratch) {
    for (size_t g = 0; g < batch.adapters.size(); ++g) {
        const LoraPair& p = batch.adapters[g]->pair(layer, target);
        if (!p.present()) continue;
        assert(p.n_in == n_in && p.n_out == n_out);
        const auto& rows = batch.rows[g];
        const int r = p.rank;
        scratch.resize(rows.size() * static_cast<size_t>(r));
        // shrink: t[i, k] = A[k, :] . x[row_i, :]     t: [n_rows, r]
        for (size_t i = 0; i < rows.size(); ++i) {
            const float* xr = x + static_cast<int64_t>(rows[i]) * n_in;
            for (int k = 0; k < r; ++k)
                scratch[i * static_cast<size_t>(r) + static_cast<size_t>(k)] =
                    dot(p.a.data() + static_cast<int64_t>(k) * n_in, xr, n_in);
        }
        // expand: y[row_i, o] += s * B[o, :] . t[i, :]
        for (size_t i = 0; i < rows.size(); ++i) {
            float* yr = y + static_cast<int64_t>(rows[i]) * n_out;
            const float* tr = scratch.data() + i * static_cast<size_t>(r);
            for (int o = 0; o < n_out; ++o) yr[o] += p.scale * dot(p.b.data() + static_cast<int64_t>(o) * r, tr, r);
        }
    }
}

}  // namespace kvs
