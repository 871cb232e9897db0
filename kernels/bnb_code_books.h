#pragma once
// bitsandbytes' 4-bit code books, one copy for the CPU reference (kernels/cpu/
// quant_formats_bnb.cpp) and the CUDA decoders (kernels/cuda/device_blocks.cuh): NF4's 16
// NormalFloat values and FP4's 16 signed e2m1 values, indexed by the 4-bit code. Under nvcc
// the functions are __host__ __device__ (the tables, function-local statics, live in device
// memory there), so device and host read the same numbers.
#if defined(__CUDACC__)
#define KVS_HOST_DEVICE __host__ __device__
#else
#define KVS_HOST_DEVICE
#endif

namespace kvs {

KVS_HOST_DEVICE inline float nf4_code(int q) {
    static constexpr float kCode[16] = {-1.0f,
                                        -0.6961928009986877f,
                                        -0.5250730514526367f,
                                        -0.39491748809814453f,
                                        -0.28444138169288635f,
                                        -0.18477343022823334f,
                                        -0.09105003625154495f,
                                        0.0f,
                                        0.07958029955625534f,
                                        0.16093020141124725f,
                                        0.24611230194568634f,
                                        0.33791524171829224f,
                                        0.44070982933044434f,
                                        0.5626170039176941f,
                                        0.7229568362236023f,
                                        1.0f};
    return kCode[q];
}

// Index bit 3 is the sign; bits 0-2 select the magnitude (bitsandbytes' dDequantizeFP4Tree).
KVS_HOST_DEVICE inline float fp4_code(int q) {
    static constexpr float kCode[16] = {
        0.0f,  5.208333333e-03f,  0.66666667f,  1.0f,  0.33333333f,  0.5f,  0.16666667f,  0.25f,
        -0.0f, -5.208333333e-03f, -0.66666667f, -1.0f, -0.33333333f, -0.5f, -0.16666667f, -0.25f};
    return kCode[q];
}

}  // namespace kvs
