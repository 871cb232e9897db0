// NF4 with bitsandbytes' double quantization (DType::NF4_DQ; layout in quant_blocks.h):
// the 8-bit signed dynamic map, whole-tensor encode / decode, and the per-row pieces the
// matmul kernels use (the decoded absmax of a range of blocks, a row's dot product).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs::cpu {
namespace {

// create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8) as bitsandbytes'
// functional.py builds it: for each exponent i in 0..6, the 2^i midpoints of linspace(0.1, 1,
// 2^i + 1) times 10^(i - 6), with both signs; then 0 and 1; sorted. 127 * 2 + 2 = 256 values.
std::array<float, 256> make_dynamic_map() {
    std::vector<float> v;
    for (int i = 0; i < 7; ++i) {
        const int n = (1 << i) + 1;
        for (int j = 0; j + 1 < n; ++j) {
            const float b0 = static_cast<float>(0.1 + 0.9 * j / (n - 1));
            const float b1 = static_cast<float>(0.1 + 0.9 * (j + 1) / (n - 1));
            const float mean = (b0 + b1) / 2.0f;
            const float x = static_cast<float>(std::pow(10.0, i - 6) * mean);
            v.push_back(x);
            v.push_back(-x);
        }
    }
    v.push_back(0.0f);
    v.push_back(1.0f);
    std::sort(v.begin(), v.end());
    std::array<float, 256> out{};
    std::copy(v.begin(), v.end(), out.begin());
    return out;
}

const std::array<float, 256> kDynamic = make_dynamic_map();

// The index of the map value nearest to x (ties: the lower value); the map is sorted.
uint8_t nearest_dynamic(float x) {
    const auto it = std::lower_bound(kDynamic.begin(), kDynamic.end(), x);
    if (it == kDynamic.begin()) return 0;
    if (it == kDynamic.end()) return 255;
    const auto hi = static_cast<int>(it - kDynamic.begin());
    return static_cast<uint8_t>(x - kDynamic[size_t(hi - 1)] <= kDynamic[size_t(hi)] - x ? hi - 1 : hi);
}

struct Tail {
    const uint8_t* scale2;  // [ceil(n_blocks / 256)] floats, not necessarily aligned
    float offset;
};
Tail tail_of(const void* tensor, int64_t n_in, int64_t n_out) {
    const auto* p = static_cast<const uint8_t*>(tensor) + row_bytes(DType::NF4_DQ, n_in) * size_t(n_out);
    const int64_t n_groups = (n_in / kQKBnb * n_out + kDqGroup - 1) / kDqGroup;
    Tail t{p, 0.0f};
    std::memcpy(&t.offset, p + size_t(n_groups) * sizeof(float), sizeof(float));
    return t;
}

}  // namespace

const float* dynamic_map8() { return kDynamic.data(); }

void quantize_nf4_dq(const float* w, int64_t n_in, int64_t n_out, void* dst) {
    const int64_t nb_row = n_in / kQKBnb, n_blocks = nb_row * n_out;
    const int64_t n_groups = (n_blocks + kDqGroup - 1) / kDqGroup;
    const size_t rb = row_bytes(DType::NF4_DQ, n_in);
    auto* out = static_cast<uint8_t*>(dst);
    // 1. NF4 quants with each block's exact absmax (quantize_4bit before compressing the statistics)
    std::vector<float> absmax(static_cast<size_t>(n_blocks));  // [n_blocks]
    std::vector<BlockBnb4> row(static_cast<size_t>(nb_row));   // [nb_row]
    for (int64_t r = 0; r < n_out; ++r) {
        quantize_row(DType::NF4, w + r * n_in, row.data(), n_in);
        auto* blk = reinterpret_cast<BlockNf4Dq*>(out + size_t(r) * rb);
        for (int64_t b = 0; b < nb_row; ++b) {
            absmax[size_t(r * nb_row + b)] = row[size_t(b)].absmax;
            std::memcpy(blk[b].qs, row[size_t(b)].qs, sizeof(blk[b].qs));
        }
    }
    // 2. offset = mean absmax; the centred absmax quantized blockwise (256) with the dynamic map
    double sum = 0.0;
    for (float a : absmax) sum += a;
    const float offset = n_blocks ? static_cast<float>(sum / static_cast<double>(n_blocks)) : 0.0f;
    uint8_t* scale2 = out + rb * size_t(n_out);  // the tail: [n_groups] floats, then the offset
    for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t k0 = g * kDqGroup, k1 = std::min(n_blocks, k0 + kDqGroup);
        float a2 = 0.0f;
        for (int64_t k = k0; k < k1; ++k) a2 = std::max(a2, std::fabs(absmax[size_t(k)] - offset));
        const float inv = a2 > 0.0f ? 1.0f / a2 : 0.0f;
        for (int64_t k = k0; k < k1; ++k) {
            auto* blk = reinterpret_cast<BlockNf4Dq*>(out + size_t(k / nb_row) * rb) + k % nb_row;
            blk->qabsmax = nearest_dynamic((absmax[size_t(k)] - offset) * inv);
        }
        std::memcpy(scale2 + size_t(g) * sizeof(float), &a2, sizeof(float));
    }
    std::memcpy(scale2 + size_t(n_groups) * sizeof(float), &offset, sizeof(float));
}

void nf4_dq_absmax(const void* tensor, int64_t n_in, int64_t n_out, int64_t b0, int64_t b1, float* out) {
    const Tail t = tail_of(tensor, n_in, n_out);
    const int64_t nb_row = n_in / kQKBnb;
    const size_t rb = row_bytes(DType::NF4_DQ, n_in);
    const auto* base = static_cast<const uint8_t*>(tensor);
    for (int64_t k = b0; k < b1; ++k) {
        const auto* blk = reinterpret_cast<const BlockNf4Dq*>(base + size_t(k / nb_row) * rb) + k % nb_row;
        float s2;
        std::memcpy(&s2, t.scale2 + size_t(k / kDqGroup) * sizeof(float), sizeof(float));
        float a = kDynamic[blk->qabsmax] * s2;  // dequantize_blockwise, then += offset (two float steps)
        a += t.offset;
        out[k - b0] = a;
    }
}

void dequantize_nf4_dq_rows(const void* src, int64_t n_in, int64_t n_out, int64_t r0, int64_t r1, float* dst) {
    const float* code = bnb_code_book(DType::NF4);
    const int64_t nb_row = n_in / kQKBnb;
    const size_t rb = row_bytes(DType::NF4_DQ, n_in);
    std::vector<float> absmax(static_cast<size_t>(nb_row));  // [nb_row]
    for (int64_t r = r0; r < r1; ++r) {
        nf4_dq_absmax(src, n_in, n_out, r * nb_row, (r + 1) * nb_row, absmax.data());
        const auto* blk = reinterpret_cast<const BlockNf4Dq*>(static_cast<const uint8_t*>(src) + size_t(r) * rb);
        float* y = dst + (r - r0) * n_in;
        for (int64_t b = 0; b < nb_row; ++b, y += kQKBnb)
            for (int j = 0; j < kQKBnb / 2; ++j) {
                y[2 * j] = absmax[size_t(b)] * code[blk[b].qs[j] >> 4];
                y[2 * j + 1] = absmax[size_t(b)] * code[blk[b].qs[j] & 0xF];
            }
    }
}

void dequantize_nf4_dq(const void* src, int64_t n_in, int64_t n_out, float* dst) {
    dequantize_nf4_dq_rows(src, n_in, n_out, 0, n_out, dst);
}

float dot_nf4_dq_f32(const void* w_row, const float* absmax, const float* a, int64_t n) {
    const float* code = bnb_code_book(DType::NF4);
    const auto* b = static_cast<const BlockNf4Dq*>(w_row);
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQKBnb; ++k, a += kQKBnb) {
        float s = 0.0f;
        for (int j = 0; j < kQKBnb / 2; ++j)
            s += code[b[k].qs[j] >> 4] * a[2 * j] + code[b[k].qs[j] & 0xF] * a[2 * j + 1];
        sum += absmax[k] * s;
    }
    return sum;
}

}  // namespace kvs::cpu
