#include "kernels/cpu/cpu_features.h"

namespace kvs::cpu {

SimdLevel detect_simd() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512vnni");
    // No kernel is written for AVX-512 yet: such a CPU runs the AVX2 kernels, and the
    // backend's name says so (it used to say "avx512" while running AVX2 code).
    (void)avx512;
    if (avx2) return SimdLevel::Avx2;
#endif
    return SimdLevel::Scalar;
}

SimdLevel parse_simd(const std::string& name) {
    const SimdLevel best = detect_simd();
    SimdLevel want = best;
    if (name == "scalar") want = SimdLevel::Scalar;
    else if (name == "avx2") want = SimdLevel::Avx2;
    else if (name == "avx512") want = SimdLevel::Avx512;
    return want < best ? want : best;
}

const char* simd_name(SimdLevel l) {
    switch (l) {
        case SimdLevel::Avx512: return "avx512";
        case SimdLevel::Avx2: return "avx2";
        default: return "scalar";
    }
}

}  // namespace kvs::cpu
