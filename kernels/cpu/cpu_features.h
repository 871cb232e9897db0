#pragma once
// Run-time CPU feature detection: which SIMD kernels this machine may run.
#include <optional>
#include <string>

namespace kvs::cpu {

// The kernel levels this build has. There are no AVX-512 kernels: an AVX-512 CPU runs
// the AVX2 ones, and parse_simd refuses "avx512" by name.
enum class SimdLevel { Scalar = 0, Avx2 = 1 };

// Best level the CPU supports: Avx2 needs AVX2+FMA+F16C, else Scalar.
SimdLevel detect_simd();

// The names a user may ask for (--simd, RunnerOptions::simd), as "auto, scalar, avx2".
const char* simd_level_names();

// A requested level: "auto" -> detect_simd(); "scalar" / "avx2" are capped at what the CPU
// supports (avx2 on a CPU without it runs the scalar reference; the backend's name says so).
// Any other name is an error, nullopt with *error set (when given), e.g. for "avx512":
// "SIMD level 'avx512': this build has no AVX-512 kernels (levels: auto, scalar, avx2)".
std::optional<SimdLevel> parse_simd(const std::string& name, std::string* error = nullptr);

const char* simd_name(SimdLevel l);

}  // namespace kvs::cpu
