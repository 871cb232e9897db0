// AWQ's two searches on float weights: the per-channel scale (alpha grid) of a group of
// linears, scored by any loss (the linears' outputs here, the block's output in awq.cpp),
// and the per-group clipping range of one linear. Both use the pseudo-quantizer
// fake_quant_int4 (the exact values quantize_row(I4_G128) stores).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "engine/quant/awq.h"
#include "engine/quant/rtn.h"

namespace kvs {

namespace {

// mean |x| per channel; x [n_rows, n]
std::vector<float> mean_abs(const float* x, int n_rows, int64_t n) {
    std::vector<double> acc(static_cast<size_t>(n), 0.0);  // [n]
    for (int r = 0; r < n_rows; ++r)
        for (int64_t i = 0; i < n; ++i) acc[static_cast<size_t>(i)] += std::fabs(x[r * n + i]);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        out[static_cast<size_t>(i)] = static_cast<float>(acc[static_cast<size_t>(i)] / std::max(1, n_rows));
    return out;
}

// s = max(x_mean^alpha / (w_mean^(1 - alpha) + 1e-4), 1e-4) (w_mean empty: max(x_mean^alpha, 1e-4)),
// normalised by sqrt(max(s) * min(s)) (AutoAWQ's _compute_best_scale)
std::vector<float> scales_for(const std::vector<float>& x_mean, const std::vector<float>& w_mean, float alpha) {
    std::vector<float> s(x_mean.size());
    float lo = std::numeric_limits<float>::max(), hi = 0.0f;
    for (size_t i = 0; i < s.size(); ++i) {
        const float xs = std::pow(x_mean[i], alpha);
        s[i] = std::max(w_mean.empty() ? xs : xs / (std::pow(w_mean[i], 1.0f - alpha) + 1e-4f), 1e-4f);
        if (!std::isfinite(s[i])) s[i] = 1.0f;
        lo = std::min(lo, s[i]);
        hi = std::max(hi, s[i]);
    }
    const float norm = std::sqrt(hi * lo);
    for (float& v : s) v /= norm;
    return s;
}

double sum_squares(const float* y, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; ++i) acc += static_cast<double>(y[i]) * y[i];
    return acc;
}

}  // namespace

std::vector<float> awq_channel_mean_abs(const float* x, int n_rows, int64_t n) { return mean_abs(x, n_rows, n); }

std::vector<float> awq_weight_mean(const std::vector<const float*>& linears, const std::vector<int64_t>& n_out,
                                   int64_t n_in, int group) {
    std::vector<double> acc(static_cast<size_t>(n_in), 0.0);  // [n_in]
    int64_t n_rows = 0;
    for (size_t li = 0; li < linears.size(); ++li)
        for (int64_t r = 0; r < n_out[li]; ++r, ++n_rows)
            for (int64_t g0 = 0; g0 < n_in; g0 += group) {
                const float* w = linears[li] + r * n_in + g0;
                float amax = 0.0f;
                for (int i = 0; i < group; ++i) amax = std::max(amax, std::fabs(w[i]));
                for (int i = 0; i < group; ++i) acc[static_cast<size_t>(g0 + i)] += std::fabs(w[i]) / (amax + 1e-6f);
            }
    std::vector<float> out(static_cast<size_t>(n_in));
    for (int64_t i = 0; i < n_in; ++i)
        out[static_cast<size_t>(i)] = static_cast<float>(acc[static_cast<size_t>(i)] / std::max<int64_t>(1, n_rows));
    return out;
}

std::vector<float> awq_quant_dequant(const float* w, int64_t n_out, int64_t n_in, const float* s, int group) {
    std::vector<float> out(static_cast<size_t>(n_out * n_in));  // [n_out, n_in]
    for (int64_t r = 0; r < n_out; ++r) {
        const float* wr = w + r * n_in;
        float* o = out.data() + r * n_in;
        for (int64_t i = 0; i < n_in; ++i) o[i] = s ? wr[i] * s[i] : wr[i];
        fake_quant_int4(o, o, n_in, group);
        if (s)
            for (int64_t i = 0; i < n_in; ++i) o[i] /= s[i];
    }
    return out;
}

double awq_group_loss(Backend& backend, const std::vector<const float*>& linears, const std::vector<int64_t>& n_out,
                      int64_t n_in, const float* x, int n_rows, const float* s, int group) {
    double err = 0.0;
    int64_t n_total = 0;
    for (size_t li = 0; li < linears.size(); ++li) {
        const float* w = linears[li];
        const int64_t rows = n_out[li];
        // E = W - Q(W diag(s)) diag(1/s): the error the quantized layer adds to W
        std::vector<float> e = awq_quant_dequant(w, rows, n_in, s, group);  // [rows, n_in]
        for (size_t k = 0; k < e.size(); ++k) e[k] = w[k] - e[k];
        std::vector<float> y(static_cast<size_t>(rows) * n_rows);  // [n_rows, rows] = x E^T
        backend.matmul(WeightView{DType::F32, e.data(), n_in, rows}, x, y.data(), n_rows);
        err += sum_squares(y.data(), y.size());
        n_total += rows * n_rows;
    }
    return n_total ? err / static_cast<double>(n_total) : 0.0;
}

std::vector<float> awq_search_scale_by(const std::vector<float>& x_mean, const std::vector<float>& w_mean, int n_grid,
                                       const AwqScaleLoss& loss, AwqGroupStats* stats) {
    // s = 1 (plain RTN) is a candidate too, so the chosen scales never do worse than RTN
    // on the calibration rows (with duo scaling alpha = 0 is not s = 1)
    std::vector<float> best(x_mean.size(), 1.0f);
    const double rtn_loss = loss(nullptr);
    double best_loss = rtn_loss;
    float best_alpha = -1.0f;
    for (int k = 0; k < n_grid; ++k) {
        const float alpha = static_cast<float>(k) / static_cast<float>(n_grid);
        std::vector<float> s = scales_for(x_mean, w_mean, alpha);
        const double l = loss(s.data());
        if (l < best_loss) {
            best_loss = l;
            best_alpha = alpha;
            best = std::move(s);
        }
    }
    if (stats) *stats = AwqGroupStats{best_alpha, rtn_loss, best_loss};
    return best;
}

std::vector<float> awq_search_scale(Backend& backend, const std::vector<const float*>& linears,
                                    const std::vector<int64_t>& n_out, int64_t n_in, const float* x, int n_rows,
                                    int n_grid, AwqGroupStats* stats, int group, bool duo_scaling) {
    const std::vector<float> w_mean = duo_scaling ? awq_weight_mean(linears, n_out, n_in, group) : std::vector<float>{};
    return awq_search_scale_by(
        mean_abs(x, n_rows, n_in), w_mean, n_grid,
        [&](const float* s) { return awq_group_loss(backend, linears, n_out, n_in, x, n_rows, s, group); }, stats);
}

void awq_clip(Backend& backend, float* w, int64_t n_out, int64_t n_in, const float* x, int n_rows, int n_grid,
              float max_shrink, int group, bool asymmetric) {
    const int G = group;
    const int n_cand = std::max(1, static_cast<int>(max_shrink * static_cast<float>(n_grid)));
    const int n_slots = n_cand + 1;                                  // a pass tries at most n_cand + 1 clamps per row
    std::vector<float> xt(static_cast<size_t>(G) * n_rows);          // [G, n_rows] the group's inputs, transposed
    std::vector<float> gram(static_cast<size_t>(G) * G);             // [G, G] X_g^T X_g
    std::vector<float> e(static_cast<size_t>(n_slots * n_out) * G);  // [n_slots * n_out, G] error of each candidate
    std::vector<float> eg(e.size());                                 // [n_slots * n_out, G] E G
    std::vector<float> lo_c(static_cast<size_t>(n_slots * n_out));   // [n_slots, n_out] the candidate's clamp
    std::vector<float> hi_c(lo_c.size());
    std::vector<float> lo(static_cast<size_t>(n_out)), hi(lo.size());  // [n_out] the clamp chosen so far
    std::vector<float> w_lo(lo.size()), w_hi(lo.size());               // [n_out] the group's min(w, 0), max(w, 0)
    std::vector<float> tmp(G);
    auto shrink = [&](int c) { return 1.0f - static_cast<float>(c) / static_cast<float>(n_grid); };
    // One pass: candidate k of row r clamps to [lo_c, hi_c] = bounds(r, k) for k < n_k; each row
    // keeps its candidate with the least error over the group's inputs, e^T (X_g^T X_g) e.
    auto pass = [&](int64_t g0, int n_k, const std::function<std::pair<float, float>(int64_t, int)>& bounds) {
        for (int64_t r = 0; r < n_out; ++r) {
            const float* wr = w + r * n_in + g0;
            for (int k = 0; k < n_k; ++k) {
                const auto [l, h] = bounds(r, k);
                lo_c[static_cast<size_t>(k * n_out + r)] = l;
                hi_c[static_cast<size_t>(k * n_out + r)] = h;
                for (int i = 0; i < G; ++i) tmp[i] = std::clamp(wr[i], l, h);
                fake_quant_int4(tmp.data(), tmp.data(), G, G);
                float* er = e.data() + static_cast<size_t>(k * n_out + r) * G;
                for (int i = 0; i < G; ++i) er[i] = wr[i] - tmp[i];
            }
        }
        backend.matmul(WeightView{DType::F32, gram.data(), G, G}, e.data(), eg.data(), static_cast<int>(n_k * n_out));
        for (int64_t r = 0; r < n_out; ++r) {
            double best_err = std::numeric_limits<double>::infinity();
            for (int k = 0; k < n_k; ++k) {
                const size_t off = static_cast<size_t>(k * n_out + r) * G;
                double err = 0.0;
                for (int i = 0; i < G; ++i) err += static_cast<double>(e[off + i]) * eg[off + i];
                if (err < best_err) {
                    best_err = err;
                    lo[static_cast<size_t>(r)] = lo_c[static_cast<size_t>(k * n_out + r)];
                    hi[static_cast<size_t>(r)] = hi_c[static_cast<size_t>(k * n_out + r)];
                }
            }
        }
    };
    for (int64_t g0 = 0; g0 < n_in; g0 += G) {
        for (int r = 0; r < n_rows; ++r)
            for (int i = 0; i < G; ++i) xt[static_cast<size_t>(i) * n_rows + r] = x[r * n_in + g0 + i];
        // gram[i, j] = sum_r x[r, g0 + i] x[r, g0 + j]: then e^T G e = sum_r (x_g . e)^2
        backend.matmul(WeightView{DType::F32, xt.data(), n_rows, G}, xt.data(), gram.data(), G);
        // each row's largest / smallest weight in the group, on either side of 0 (max|w| is the larger magnitude)
        for (int64_t r = 0; r < n_out; ++r) {
            const float* wr = w + r * n_in + g0;
            float top = 0.0f, bottom = 0.0f;
            for (int i = 0; i < G; ++i) top = std::max(top, wr[i]), bottom = std::min(bottom, wr[i]);
            w_hi[static_cast<size_t>(r)] = top;
            w_lo[static_cast<size_t>(r)] = bottom;
        }
        // symmetric clamps +-max|w| * shrink (AutoAWQ's search)
        pass(g0, n_cand, [&](int64_t r, int k) {
            const float m = std::max(w_hi[static_cast<size_t>(r)], -w_lo[static_cast<size_t>(r)]) * shrink(k);
            return std::pair{-m, m};
        });
        if (asymmetric) {
            // then the upper end alone, then the lower end alone (candidate 0: the clamp so far)
            pass(g0, n_slots, [&](int64_t r, int k) {
                const size_t i = static_cast<size_t>(r);
                return k == 0 ? std::pair{lo[i], hi[i]} : std::pair{lo[i], w_hi[i] * shrink(k - 1)};
            });
            pass(g0, n_slots, [&](int64_t r, int k) {
                const size_t i = static_cast<size_t>(r);
                return k == 0 ? std::pair{lo[i], hi[i]} : std::pair{w_lo[i] * shrink(k - 1), hi[i]};
            });
        }
        for (int64_t r = 0; r < n_out; ++r) {
            float* wr = w + r * n_in + g0;
            for (int i = 0; i < G; ++i)
                wr[i] = std::clamp(wr[i], lo[static_cast<size_t>(r)], hi[static_cast<size_t>(r)]);
        }
    }
}

}  // namespace kvs
