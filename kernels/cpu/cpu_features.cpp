#include "kernels/cpu/cpu_features.h"

namespace kvs::cpu {

SimdLevel detect_simd() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        return SimdLevel::Avx2;
#endif
    return SimdLevel::Scalar;
}

const char* simd_level_names() { return "auto, scalar, avx2"; }

std::optional<SimdLevel> parse_simd(const std::string& name, std::string* error) {
    const SimdLevel best = detect_simd();
    if (name == "auto") return best;
    if (name == "scalar") return SimdLevel::Scalar;
    if (name == "avx2") return best >= SimdLevel::Avx2 ? SimdLevel::Avx2 : best;
    if (error) {
        const std::string levels = std::string(" (levels: ") + simd_level_names() + ")";
        if (name.rfind("avx512", 0) == 0)
            *error = "SIMD level '" + name + "': this build has no AVX-512 kernels" + levels;
        else
            *error = "unknown SIMD level '" + name + "'" + levels;
    }
    return std::nullopt;
}

const char* simd_name(SimdLevel l) { return l == SimdLevel::Avx2 ? "avx2" : "scalar"; }

}  // namespace kvs::cpu
