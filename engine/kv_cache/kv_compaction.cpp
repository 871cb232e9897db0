#include "engine/kv_cache/kv_compaction.h"

#include <cstring>
#include <string>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

void rerotate_key(float* k, int n_kv_head, int head_dim, int n_rot, float freq_base, RopeStyle style, int delta) {
    if (delta == 0) return;
    std::vector<float> cs(static_cast<size_t>(n_rot));  // [n_rot / 2, 2] (cos, sin)
    cpu::rope_angles(delta, n_rot, freq_base, cs.data());
    const int half = n_rot / 2;
    for (int h = 0; h < n_kv_head; ++h) {
        float* v = k + static_cast<size_t>(h) * head_dim;  // [head_dim]
        for (int i = 0; i < half; ++i) {
            const float c = cs[2 * static_cast<size_t>(i)], s = cs[2 * static_cast<size_t>(i) + 1];
            const int i0 = style == RopeStyle::Normal ? 2 * i : i;
            const int i1 = style == RopeStyle::Normal ? 2 * i + 1 : i + half;
            const float a = v[i0], b = v[i1];
            v[i0] = a * c - b * s;
            v[i1] = a * s + b * c;
        }
    }
}

namespace {
void load_row(DType t, const uint8_t* src, float* dst, int n) {
    if (t == DType::F16) {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        for (int i = 0; i < n; ++i) dst[i] = cpu::fp16_to_fp32(h[i]);
    } else {
        cpu::dequantize_row(t, src, dst, n);
    }
}
void store_row(DType t, const float* src, uint8_t* dst, int n) {
    if (t == DType::F16) {
        auto* h = reinterpret_cast<uint16_t*>(dst);
        for (int i = 0; i < n; ++i) h[i] = cpu::fp32_to_fp16(src[i]);
    } else {
        cpu::quantize_row(t, src, dst, n);
    }
}
}  // namespace

Status apply_compaction(KvTensors& kv, bool host_visible, const ModelConfig& c, const std::vector<int32_t>& table,
                        const CompactionPlan& plan) {
    if (!host_visible) return Status::error("KV eviction moves cache rows in place: it runs on the CPU backend only");
    const int bs = kv.block_size();
    const int kv_dim = c.n_kv_head * c.head_dim;
    const DType t = kv.kv_type();
    const size_t rb = row_bytes(t, kv_dim);  // one cache position of one layer's K (or V)
    const int n_old = static_cast<int>(table.size()) * bs;
    auto slot = [&](int i) { return static_cast<size_t>(table[static_cast<size_t>(i / bs)]) * bs + i % bs; };
    for (const auto& src : plan.entries)
        for (int32_t i : src)
            if (i < 0 || i >= n_old)
                return Status::error("KV compaction: entry " + std::to_string(i) + " is outside the " +
                                     std::to_string(n_old) + " slots of the request's blocks");
    if (static_cast<int>(plan.entries.size()) > n_old)
        return Status::error("KV compaction: " + std::to_string(plan.entries.size()) + " entries for " +
                             std::to_string(n_old) + " slots");
    std::vector<float> a(static_cast<size_t>(kv_dim)), acc(static_cast<size_t>(kv_dim));  // [kv_dim]
    for (int j = plan.first_changed(); j < static_cast<int>(plan.entries.size()); ++j) {
        const auto& src = plan.entries[static_cast<size_t>(j)];
        if (src.size() == 1 && src[0] == j) continue;
        for (int il = 0; il < kv.n_layer(); ++il) {
            auto* kc = static_cast<uint8_t*>(kv.k(il));
            auto* vc = static_cast<uint8_t*>(kv.v(il));
            if (src.size() == 1) {
                const size_t from = slot(src[0]) * rb, to = slot(j) * rb;
                if (plan.reposition) {
                    load_row(t, kc + from, a.data(), kv_dim);
                    rerotate_key(a.data(), c.n_kv_head, c.head_dim, c.n_rot, c.rope_base(il), c.rope_style, j - src[0]);
                    store_row(t, a.data(), kc + to, kv_dim);
                } else {
                    std::memmove(kc + to, kc + from, rb);
                }
                std::memmove(vc + to, vc + from, rb);
                continue;
            }
            const auto& w = plan.weights[static_cast<size_t>(j)];
            for (uint8_t* cache : {kc, vc}) {
                std::fill(acc.begin(), acc.end(), 0.0f);
                for (size_t s = 0; s < src.size(); ++s) {
                    load_row(t, cache + slot(src[s]) * rb, a.data(), kv_dim);
                    const float ws = s < w.size() ? w[s] : 1.0f / static_cast<float>(src.size());
                    for (int d = 0; d < kv_dim; ++d) acc[static_cast<size_t>(d)] += ws * a[static_cast<size_t>(d)];
                }
                store_row(t, acc.data(), cache + slot(j) * rb, kv_dim);
            }
        }
    }
    return Status::ok();
}

}  // namespace kvs
