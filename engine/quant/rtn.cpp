// Round-to-nearest quantization of whole matrices, and AWQ's float pseudo-quantizer.
#include "engine/quant/rtn.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace {

// The smallest fp16 value >= x (x >= 0, finite), as a float.
float fp16_at_least(float x) {
    uint16_t h = cpu::fp32_to_fp16(x);
    if (cpu::fp16_to_fp32(h) < x) ++h;  // positive halves order like their bit patterns
    return cpu::fp16_to_fp32(h);
}

}  // namespace

int int4_group_for(int64_t n_in, int preferred) {
    if (preferred > 0 && n_in % preferred == 0) return preferred;
    return n_in % 64 == 0 ? 64 : 0;
}

void fake_quant_int4(const float* w, float* out, int64_t n, int group) {
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const float* x = w + g0;
        float* y = out + g0;
        float lo = 0.0f, hi = 0.0f;
        for (int i = 0; i < group; ++i) {
            lo = std::min(lo, x[i]);
            hi = std::max(hi, x[i]);
        }
        const float d = fp16_at_least((hi - lo) / 15.0f);
        if (d == 0.0f) {
            std::fill(y, y + group, 0.0f);
            continue;
        }
        const int z = std::clamp(static_cast<int>(std::nearbyint(-lo / d)), 0, 15);
        for (int i = 0; i < group; ++i) {
            const int q = std::clamp(static_cast<int>(std::nearbyint(x[i] / d)) + z, 0, 15);
            y[i] = d * static_cast<float>(q - z);
        }
    }
}

void parallel_ranges(int64_t n, int n_threads, const std::function<void(int64_t, int64_t)>& fn) {
    n_threads = static_cast<int>(std::clamp<int64_t>(n_threads, 1, std::max<int64_t>(1, n)));
    std::vector<std::thread> helpers;
    for (int t = 0; t + 1 < n_threads; ++t) helpers.emplace_back(fn, n * t / n_threads, n * (t + 1) / n_threads);
    fn(n * (n_threads - 1) / n_threads, n);
    for (auto& h : helpers) h.join();
}

std::vector<float> dequantize_matrix(const WeightView& w, int n_threads) {
    std::vector<float> out(static_cast<size_t>(w.n_out * w.n_in));  // [n_out, n_in]
    const size_t src_row = row_bytes(w.dtype, w.n_in);
    const auto* src = static_cast<const uint8_t*>(w.data);
    if (w.dtype == DType::NF4_DQ) {  // a row's absmax codes need the tensor's tail: decode it whole
        cpu::dequantize_nf4_dq(src, w.n_in, w.n_out, out.data());
    } else {
        parallel_ranges(w.n_out, n_threads, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r)
                cpu::dequantize_row(w.dtype, src + static_cast<size_t>(r) * src_row, out.data() + r * w.n_in, w.n_in);
        });
    }
    if (w.in_perm) {  // stored column p is input column in_perm[p]
        parallel_ranges(w.n_out, n_threads, [&](int64_t r0, int64_t r1) {
            std::vector<float> row(static_cast<size_t>(w.n_in));  // [n_in] as stored
            for (int64_t r = r0; r < r1; ++r) {
                float* dst = out.data() + r * w.n_in;
                std::copy(dst, dst + w.n_in, row.begin());
                for (int64_t p = 0; p < w.n_in; ++p) dst[w.in_perm[p]] = row[size_t(p)];
            }
        });
    }
    return out;
}

std::vector<uint8_t> quantize_matrix(const float* w, int64_t n_out, int64_t n_in, DType to, int n_threads) {
    const size_t dst_row = row_bytes(to, n_in);
    std::vector<uint8_t> out(dst_row * static_cast<size_t>(n_out));  // [n_out, row_bytes(to, n_in)]
    parallel_ranges(n_out, n_threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
            cpu::quantize_row(to, w + r * n_in, out.data() + static_cast<size_t>(r) * dst_row, n_in);
    });
    return out;
}

}  // namespace kvs
