// LLM.int8(): int8 weights per output row, activations split per token into outliers (float)
// and the rest (int8 with one scale per token). Scalar; the reference for DType::I8_LLM.
// Row layout: float threshold, float scale, n int8 (kI8LlmRowHeader, quant_blocks.h).
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::cpu {

float llm_int8_threshold(const void* w_row) {
    float t;
    std::memcpy(&t, w_row, sizeof(float));
    return t;
}

void quantize_llm_int8_row(const float* w, int64_t n, float threshold, void* dst) {
    auto* out = static_cast<uint8_t*>(dst);
    std::memcpy(out, &threshold, sizeof(float));
    quantize_i8_row(w, n, out + sizeof(float));  // the I8_ROW row: scale, then the quants
}

float llm_int8_dot(const void* w_row, const float* x, int64_t n) {
    const auto* row = static_cast<const uint8_t*>(w_row);
    const float threshold = llm_int8_threshold(row);
    float scale_w;
    std::memcpy(&scale_w, row + sizeof(float), sizeof(float));
    const auto* q = reinterpret_cast<const int8_t*>(row + kI8LlmRowHeader);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i)
        if (std::fabs(x[i]) <= threshold) amax = std::fmax(amax, std::fabs(x[i]));
    const float scale_a = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int64_t acc = 0;
    float outliers = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        if (std::fabs(x[i]) > threshold) {
            outliers += x[i] * (static_cast<float>(q[i]) * scale_w);
        } else {
            acc += static_cast<int64_t>(q[i]) * static_cast<int64_t>(std::nearbyint(x[i] * inv));
        }
    }
    return scale_w * scale_a * static_cast<float>(acc) + outliers;
}

float dot_llm_int8(const void* w, const float* a, int64_t n) { return llm_int8_dot(w, a, n); }

}  // namespace kvs::cpu
