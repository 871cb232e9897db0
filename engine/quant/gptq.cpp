// GPTQ of one matrix: the Hessian, its inverse's Cholesky factor, and the column loop with
// error feedback in lazy blocks (engine/quant/gptq.h has the algorithm in words).
#include "engine/quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/quant/rtn.h"
#include "kernels/cpu/quant_formats.h"

namespace kvs {

namespace {

// Scale and zero of one group of one row, AutoGPTQ's Quantizer.find_params (per channel)
// with the scale rounded to fp16.
struct GroupParams {
    double scale = 1.0;
    int zero = 0;
};

double fp16_scale(double s) {
    float h = cpu::fp16_to_fp32(cpu::fp32_to_fp16(float(s)));
    if (!(h > 0.0f)) h = cpu::fp16_to_fp32(1);  // the smallest positive fp16
    return double(h);
}

int quantize_value(double w, const GroupParams& p, int maxq) {
    return std::clamp(int(std::nearbyint(w / p.scale)) + p.zero, 0, maxq);
}

// The min/max grid of [xmin, xmax] (xmin <= 0 <= xmax), scale rounded to fp16.
GroupParams grid_params(double xmin, double xmax, int maxq, bool sym) {
    GroupParams p;
    p.scale = fp16_scale((xmax - xmin) / maxq);
    p.zero = sym ? (maxq + 1) / 2 : std::clamp(int(std::nearbyint(-xmin / p.scale)), 0, maxq);
    return p;
}

// With opt.mse (GPTQModel's / the GPTQ repository's Quantizer mse option): the range shrunk
// by p = 1 - k / mse_grid, k = 0 .. mse_maxshrink * mse_grid - 1, keeping the p whose
// sum |w - w_hat|^mse_norm over the group is the least (the first on ties).
GroupParams find_params(const double* w, int n, int maxq, const GptqOptions& opt) {
    const bool sym = opt.sym;
    double xmin = 0.0, xmax = 0.0;
    for (int i = 0; i < n; ++i) xmin = std::min(xmin, w[i]), xmax = std::max(xmax, w[i]);
    if (sym) {
        xmax = std::max(std::fabs(xmin), xmax);
        if (xmin < 0) xmin = -xmax;
    }
    if (xmin == 0.0 && xmax == 0.0) xmin = -1.0, xmax = 1.0;
    GroupParams best = grid_params(xmin, xmax, maxq, sym);
    if (!opt.mse) return best;
    double best_err = std::numeric_limits<double>::infinity();
    const int steps = int(opt.mse_maxshrink * opt.mse_grid);
    for (int k = 0; k < steps; ++k) {
        const double p = 1.0 - double(k) / opt.mse_grid;
        const GroupParams g = grid_params(p * xmin, p * xmax, maxq, sym);
        double err = 0.0;  // the sum only grows: stop once it is no better than the best
        for (int i = 0; i < n && err < best_err; ++i)
            err += std::pow(std::fabs(w[i] - g.scale * double(quantize_value(w[i], g, maxq) - g.zero)), opt.mse_norm);
        if (err < best_err) best_err = err, best = g;
    }
    return best;
}

// In-place Cholesky of a symmetric positive definite a [n, n] (row-major): the lower
// factor L (a = L L^T) in the lower triangle. False when a pivot is not positive.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
        double* aj = a.data() + j * n;
        double d = aj[j];
        for (int64_t k = 0; k < j; ++k) d -= aj[k] * aj[k];
        if (!(d > 0.0)) return false;
        d = std::sqrt(d);
        aj[j] = d;
        for (int64_t i = j + 1; i < n; ++i) {
            double* ai = a.data() + i * n;
            double s = ai[j];
            for (int64_t k = 0; k < j; ++k) s -= ai[k] * aj[k];
            ai[j] = s / d;
        }
    }
    return true;
}

// U upper triangular with H^-1 = U^T U, for H [n, n] symmetric positive definite.
// With J the reversal, J H J = L L^T gives H = R R^T for the upper R = J L J, so
// H^-1 = R^-T R^-1 and U = R^-1 (upper, positive diagonal: the Cholesky factor).
bool inverse_cholesky_upper(const std::vector<double>& h, int64_t n, std::vector<double>& u) {
    std::vector<double> a(static_cast<size_t>(n * n));  // J H J
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) a[size_t(i * n + j)] = h[size_t((n - 1 - i) * n + (n - 1 - j))];
    if (!cholesky_lower(a, n)) return false;
    // R[i][j] = L[n-1-i][n-1-j], so U = R^-1 = J L^-1 J. L^-1 column by column (forward
    // substitution, each column a contiguous vector): xt[j][i] = (L^-1)[i][j].
    std::vector<double> xt(static_cast<size_t>(n * n), 0.0);  // [n, n] (L^-1)^T
    parallel_ranges(n, 2, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
            double* x = xt.data() + j * n;
            x[j] = 1.0 / a[size_t(j * n + j)];
            for (int64_t i = j + 1; i < n; ++i) {
                const double* li = a.data() + i * n;
                double s = 0.0;
                for (int64_t k = j; k < i; ++k) s += li[k] * x[k];
                x[i] = -s / li[i];
            }
        }
    });
    u.assign(static_cast<size_t>(n * n), 0.0);
    for (int64_t r = 0; r < n; ++r)  // U[r][c] = (L^-1)[n-1-r][n-1-c] = xt[n-1-c][n-1-r]
        for (int64_t c = r; c < n; ++c) u[size_t(r * n + c)] = xt[size_t((n - 1 - c) * n + (n - 1 - r))];
    return true;
}

Status check_options(int64_t n_in, int group, const GptqOptions& opt) {
    if (opt.bits != 4 && opt.bits != 8)
        return Status::error("GPTQ: bits must be 4 or 8, got " + std::to_string(opt.bits));
    if (group != 32 && group != 64 && group != 128)
        return Status::error("GPTQ: group size must be 32, 64 or 128, got " + std::to_string(group));
    if (n_in % group != 0)
        return Status::error("GPTQ: a row of " + std::to_string(n_in) +
                             " weights is not a multiple of the group size " + std::to_string(group));
    if (opt.block_size < 1) return Status::error("GPTQ: block_size must be at least 1");
    if (!(opt.damp_percent >= 0.0)) return Status::error("GPTQ: damp_percent must be at least 0");
    if (opt.mse &&
        (opt.mse_grid < 1 || !(opt.mse_maxshrink > 0.0 && opt.mse_maxshrink <= 1.0) || !(opt.mse_norm > 0.0)))
        return Status::error("GPTQ: the mse search needs mse_grid >= 1, 0 < mse_maxshrink <= 1 and mse_norm > 0");
    return Status::ok();
}

}  // namespace

std::vector<double> gptq_hessian(const float* x, int n_rows, int64_t n_in) {
    std::vector<double> h(size_t(n_in * n_in), 0.0);  // [n_in, n_in]
    parallel_ranges(n_in, 2, [&](int64_t i0, int64_t i1) {
        std::vector<double> row(static_cast<size_t>(n_in));
        for (int r = 0; r < n_rows; ++r) {
            const float* xs = x + int64_t(r) * n_in;
            for (int64_t j = 0; j < n_in; ++j) row[size_t(j)] = xs[j];
            for (int64_t i = i0; i < i1; ++i) {
                const double xi = row[size_t(i)];
                if (xi == 0.0) continue;
                double* hi = h.data() + i * n_in;
                for (int64_t j = 0; j <= i; ++j) hi[j] += xi * row[size_t(j)];
            }
        }
    });
    const double f = n_rows > 0 ? 2.0 / n_rows : 0.0;
    for (int64_t i = 0; i < n_in; ++i)
        for (int64_t j = 0; j <= i; ++j) {
            const double v = h[size_t(i * n_in + j)] * f;
            h[size_t(i * n_in + j)] = v;
            h[size_t(j * n_in + i)] = v;
        }
    return h;
}

std::vector<float> GptqMatrix::dequantize() const {
    std::vector<float> out(static_cast<size_t>(n_out * n_in));  // [n_out, n_in]
    for (int64_t o = 0; o < n_out; ++o)
        for (int64_t i = 0; i < n_in; ++i) out[size_t(o * n_in + i)] = dequant(o, i);
    return out;
}

bool GptqMatrix::trivial_g_idx() const {
    for (int64_t i = 0; i < n_in; ++i)
        if (g_idx[size_t(i)] != i / group) return false;
    return true;
}

GptqMatrix gptq_rtn_matrix(const float* w, int64_t n_out, int64_t n_in, int group, const GptqOptions& opt) {
    const int maxq = (1 << opt.bits) - 1;
    GptqMatrix m;
    m.n_out = n_out, m.n_in = n_in, m.group = group, m.bits = opt.bits;
    m.scales.resize(size_t(n_in / group * n_out));
    m.zeros.resize(m.scales.size());
    m.q.resize(size_t(n_out * n_in));
    m.g_idx.resize(size_t(n_in));
    for (int64_t i = 0; i < n_in; ++i) m.g_idx[size_t(i)] = int32_t(i / group);
    std::vector<double> row(static_cast<size_t>(n_in));
    for (int64_t o = 0; o < n_out; ++o) {
        for (int64_t i = 0; i < n_in; ++i) row[size_t(i)] = w[o * n_in + i];
        for (int64_t g = 0; g < n_in / group; ++g) {
            const GroupParams p = find_params(row.data() + g * group, group, maxq, opt);
            m.scales[size_t(g * n_out + o)] = float(p.scale);
            m.zeros[size_t(g * n_out + o)] = p.zero;
            for (int64_t i = g * group; i < (g + 1) * group; ++i)
                m.q[size_t(o * n_in + i)] = uint8_t(quantize_value(row[size_t(i)], p, maxq));
        }
    }
    return m;
}

Result<GptqMatrix> gptq_quantize_matrix(const float* w, int64_t n_out, int64_t n_in, const std::vector<double>& h_in,
                                        int group, const GptqOptions& opt) {
    using R = Result<GptqMatrix>;
    KVS_RETURN_IF_ERROR(check_options(n_in, group, opt));
    if (int64_t(h_in.size()) != n_in * n_in)
        return R::error("GPTQ: the Hessian has " + std::to_string(h_in.size()) + " entries, expected " +
                        std::to_string(n_in) + "^2");
    const int maxq = (1 << opt.bits) - 1;
    const int64_t n_groups = n_in / group;

    std::vector<double> h = h_in;
    std::vector<char> dead(size_t(n_in), 0);
    for (int64_t i = 0; i < n_in; ++i)
        if (h[size_t(i * n_in + i)] == 0.0) dead[size_t(i)] = 1, h[size_t(i * n_in + i)] = 1.0;

    std::vector<int64_t> perm(static_cast<size_t>(n_in));  // position -> original column
    std::iota(perm.begin(), perm.end(), 0);
    if (opt.act_order)
        std::stable_sort(perm.begin(), perm.end(),
                         [&](int64_t a, int64_t b) { return h[size_t(a * n_in + a)] > h[size_t(b * n_in + b)]; });
    std::vector<double> hp(static_cast<size_t>(n_in * n_in));  // H[perm][:, perm]
    double mean_diag = 0.0;
    for (int64_t i = 0; i < n_in; ++i) {
        for (int64_t j = 0; j < n_in; ++j)
            hp[size_t(i * n_in + j)] = h[size_t(perm[size_t(i)] * n_in + perm[size_t(j)])];
        mean_diag += hp[size_t(i * n_in + i)];
    }
    const double damp = opt.damp_percent * mean_diag / double(n_in);
    for (int64_t i = 0; i < n_in; ++i) hp[size_t(i * n_in + i)] += damp;
    std::vector<double> u;  // [n_in, n_in] upper: H^-1 = U^T U
    if (!inverse_cholesky_upper(hp, n_in, u))
        return R::error("GPTQ: the Hessian is not positive definite after dampening by " +
                        std::to_string(opt.damp_percent) + " of its mean diagonal (raise damp_percent)");

    GptqMatrix m;
    m.n_out = n_out, m.n_in = n_in, m.group = group, m.bits = opt.bits;
    m.scales.resize(size_t(n_groups * n_out));
    m.zeros.resize(m.scales.size());
    m.q.resize(size_t(n_out * n_in));
    m.g_idx.resize(size_t(n_in));
    // group of the column at position p: static groups keep the original column's group
    // (contiguous in original order); otherwise groups are runs of positions
    for (int64_t p = 0; p < n_in; ++p)
        m.g_idx[size_t(perm[size_t(p)])] = int32_t(opt.static_groups ? perm[size_t(p)] / group : p / group);

    const int64_t bs = opt.block_size;
    parallel_ranges(n_out, opt.n_threads, [&](int64_t r0, int64_t r1) {
        std::vector<double> orig(static_cast<size_t>(n_in)), wr(static_cast<size_t>(n_in)),
            start(static_cast<size_t>(n_in)), err(static_cast<size_t>(bs));
        std::vector<GroupParams> statics(static_cast<size_t>(n_groups));
        for (int64_t o = r0; o < r1; ++o) {
            for (int64_t i = 0; i < n_in; ++i) orig[size_t(i)] = dead[size_t(i)] ? 0.0 : double(w[o * n_in + i]);
            if (opt.static_groups)
                for (int64_t g = 0; g < n_groups; ++g)
                    statics[size_t(g)] = find_params(orig.data() + g * group, group, maxq, opt);
            for (int64_t p = 0; p < n_in; ++p) wr[size_t(p)] = orig[size_t(perm[size_t(p)])];
            GroupParams cur;
            for (int64_t i1 = 0; i1 < n_in; i1 += bs) {
                const int64_t i2 = std::min(i1 + bs, n_in);
                std::copy(wr.begin() + i1, wr.end(), start.begin() + i1);  // the block-start state
                for (int64_t p = i1; p < i2; ++p) {
                    const GroupParams* gp;
                    if (opt.static_groups) {
                        gp = &statics[size_t(perm[size_t(p)] / group)];
                    } else {
                        if (p % group == 0) {
                            cur = find_params(start.data() + p, group, maxq, opt);
                            m.scales[size_t((p / group) * n_out + o)] = float(cur.scale);
                            m.zeros[size_t((p / group) * n_out + o)] = cur.zero;
                        }
                        gp = &cur;
                    }
                    const double x = wr[size_t(p)];
                    const int q = quantize_value(x, *gp, maxq);
                    m.q[size_t(o * n_in + perm[size_t(p)])] = uint8_t(q);
                    const double e = (x - gp->scale * double(q - gp->zero)) / u[size_t(p * n_in + p)];
                    err[size_t(p - i1)] = e;
                    const double* up = u.data() + p * n_in;
                    for (int64_t j = p + 1; j < i2; ++j) wr[size_t(j)] -= e * up[j];
                }
                for (int64_t k = i1; k < i2; ++k) {  // the lazy update of every later column
                    const double e = err[size_t(k - i1)];
                    const double* uk = u.data() + k * n_in;
                    for (int64_t j = i2; j < n_in; ++j) wr[size_t(j)] -= e * uk[j];
                }
            }
        }
    });
    if (opt.static_groups)
        for (int64_t o = 0; o < n_out; ++o) {
            std::vector<double> orig(static_cast<size_t>(group));
            for (int64_t g = 0; g < n_groups; ++g) {
                for (int64_t i = 0; i < group; ++i)
                    orig[size_t(i)] = dead[size_t(g * group + i)] ? 0.0 : double(w[o * n_in + g * group + i]);
                const GroupParams p = find_params(orig.data(), group, maxq, opt);
                m.scales[size_t(g * n_out + o)] = float(p.scale);
                m.zeros[size_t(g * n_out + o)] = p.zero;
            }
        }
    return m;
}

}  // namespace kvs
