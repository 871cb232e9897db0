#pragma once
// What the op tests of kernels/backend.h share (tst_backend_ops, tst_attention_ops): the
// backends by name (created once per process, skipped with the reason when this machine
// lacks one), random inputs, and the normalized error check. Header-only: the QtTest
// macros expand in the test that includes it.
// kernels headers first: Qt defines `slots` as a macro.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"

#include <QtTest>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "tests/support/device_buffer.h"

namespace kvs::test {

inline const char* const kBackends[] = {"scalar", "avx2", "cuda"};

struct BackendEntry {
    std::unique_ptr<Backend> backend;
    QString why;  // why it is missing
};

// Backends are created once per process; nullptr (and *why) when this machine lacks one.
inline Backend* backend_for(const QString& name, QString* why) {
    static std::map<QString, BackendEntry> cache;
    auto it = cache.find(name);
    if (it == cache.end()) {
        BackendEntry e;
        if (name == "scalar") {
            e.backend = make_cpu_backend(2, "scalar");
        } else if (name == "avx2") {
            if (cpu::detect_simd() >= cpu::SimdLevel::Avx2) e.backend = make_cpu_backend(2, "avx2");
            else
                e.why = "this CPU lacks AVX2/FMA/F16C";
        } else {
            std::string w;
            e.backend = make_cuda_backend(&w);
            e.why = QString::fromStdString(w);
        }
        it = cache.emplace(name, std::move(e)).first;
    }
    *why = it->second.why;
    return it->second.backend.get();
}

inline bool is_cpu(const QString& name) { return name == "scalar" || name == "avx2"; }

inline std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f, float mean = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(mean, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

// max|got - ref| / max(1, max|ref|); infinity when got holds a NaN or Inf.
inline double normalized_error(const std::vector<float>& got, const std::vector<double>& ref) {
    double max_diff = 0.0, max_ref = 1.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        max_diff = std::max(max_diff, std::fabs(got[i] - ref[i]));
        max_ref = std::max(max_ref, std::fabs(ref[i]));
    }
    return max_diff / max_ref;
}

inline void check_error(const std::vector<float>& got, const std::vector<double>& ref, double tol) {
    QCOMPARE(got.size(), ref.size());
    const double err = normalized_error(got, ref);
    if (!(err < tol)) {
        size_t worst = 0;
        for (size_t i = 0; i < ref.size(); ++i)
            if (!(std::fabs(got[i] - ref[i]) <= std::fabs(got[worst] - ref[worst]))) worst = i;
        QFAIL(qPrintable(QString("normalized error %1 >= %2 (worst at %3: got %4, reference %5)")
                             .arg(err)
                             .arg(tol)
                             .arg(worst)
                             .arg(got[worst])
                             .arg(ref[worst])));
    }
}

#define FETCH_BACKEND(var)                             \
    QFETCH(QString, backend);                          \
    QString why_missing;                               \
    Backend* var = backend_for(backend, &why_missing); \
    if (!var) QSKIP(qPrintable(backend + ": " + why_missing))

// GPU kernels may round intermediates (float rope angles, fp16 products) differently.
inline double tol_for(const QString& backend, double cpu_tol, double gpu_tol) {
    return is_cpu(backend) ? cpu_tol : gpu_tol;
}

inline const DType kWeightTypes[] = {DType::F32,  DType::F16,    DType::BF16,    DType::Q4_0,  DType::Q4_1,
                                     DType::Q5_0, DType::Q5_1,   DType::Q8_0,    DType::Q4_K,  DType::Q5_K,
                                     DType::Q6_K, DType::I8_ROW, DType::I4_G128, DType::I4_G64};

}  // namespace kvs::test
