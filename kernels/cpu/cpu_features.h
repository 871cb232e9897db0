#pragma once
// Run-time CPU feature detection: which SIMD kernels this machine may run.
#include <string>

namespace kvs::cpu {

enum class SimdLevel { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// Best level the CPU supports: Avx2 needs AVX2+FMA+F16C; Avx512 needs F/BW/VL/DQ/VNNI.
SimdLevel detect_simd();
// "auto" -> detect_simd(); "avx512" / "avx2" / "scalar" are capped at what the CPU supports.
SimdLevel parse_simd(const std::string& name);
const char* simd_name(SimdLevel l);

}  // namespace kvs::cpu
