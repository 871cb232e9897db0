// The one exported symbol of libkvscope_cuda.so: kernels/backend.cpp dlopen()s the
// library and calls kvscope_create_cuda_backend(). It checks, in order, that the CUDA
// runtime finds a driver, that there is a GPU, that the GPU can run this library's
// kernels (compute capability 8.0+) and that cuBLAS starts; the first thing missing is
// written to `err` and nullptr returned. No exception leaves the library.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"

namespace kvs::cuda {
namespace {

constexpr int kDevice = 0;
constexpr int kMinMajor = 8;  // CUDA_ARCHITECTURES "80;90" in kernels/cuda/CMakeLists.txt

std::string error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// "13.0" from CUDA's 13000 encoding.
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Why the runtime cannot list GPUs, as a user would want to read it.
std::string device_count_error(cudaError_t e) {
    if (e == cudaErrorInsufficientDriver) {
        int driver = 0;
        cudaDriverGetVersion(&driver);
        if (driver == 0) return "no NVIDIA driver (the CUDA runtime found no libcuda.so.1; " + error_text(e) + ")";
        return "NVIDIA driver too old: it supports CUDA " + cuda_version_text(driver) + ", this build needs CUDA " +
               cuda_version_text(CUDART_VERSION) + " (" + error_text(e) + ")";
    }
    if (e == cudaErrorNoDevice) return "no CUDA GPU found (" + error_text(e) + ")";
    return "the CUDA runtime could not list GPUs (" + error_text(e) + ")";
}

Backend* create_backend(std::string* why) {
    int n_devices = 0;
    cudaError_t e = cudaGetDeviceCount(&n_devices);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = device_count_error(e);
        return nullptr;
    }
    if (n_devices == 0) {
        *why = "no CUDA GPU found (cudaGetDeviceCount returned 0)";
        return nullptr;
    }
    cudaDeviceProp prop{};
    e = cudaGetDeviceProperties(&prop, kDevice);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = "cannot read the properties of GPU 0 (" + error_text(e) + ")";
        return nullptr;
    }
    const std::string gpu = "GPU 0 (" + std::string(prop.name) + ", compute capability " + std::to_string(prop.major) +
                            "." + std::to_string(prop.minor) + ")";
    if (prop.major < kMinMajor) {
        *why = gpu + " is older than this build's kernels support (compute capability 8.0 and newer)";
        return nullptr;
    }
    e = cudaSetDevice(kDevice);
    if (e == cudaSuccess) e = launch_probe(nullptr);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = gpu + " cannot run this library's kernels (" + error_text(e) + ")";
        return nullptr;
    }
    cublasHandle_t cublas = nullptr;
    const cublasStatus_t s = cublasCreate(&cublas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        *why = "cuBLAS could not start on " + gpu + " (" + cublasGetStatusString(s) + ")";
        return nullptr;
    }
    return new CudaBackend(kDevice, "cuda:" + std::string(prop.name), cublas);
}

void write_error(const std::string& message, char* err, size_t err_len) {
    if (!err || err_len == 0) return;
    std::snprintf(err, err_len, "%s", message.c_str());
}

}  // namespace
}  // namespace kvs::cuda

// The GPU's name (in text) and its free and total memory; 0, or 1 with the reason in text.
extern "C" __attribute__((visibility("default"))) int kvscope_cuda_device_memory(int64_t* free_bytes,
                                                                                 int64_t* total_bytes, char* text,
                                                                                 size_t text_len) {
    int n = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0) {
        kvs::cuda::write_error(e != cudaSuccess ? kvs::cuda::device_count_error(e) : "no CUDA device", text, text_len);
        return 1;
    }
    cudaDeviceProp prop{};
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaGetDeviceProperties(&prop, kvs::cuda::kDevice);
    if (e == cudaSuccess) e = cudaSetDevice(kvs::cuda::kDevice);
    if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        kvs::cuda::write_error("cannot read the GPU's memory: " + kvs::cuda::error_text(e), text, text_len);
        return 1;
    }
    *free_bytes = static_cast<int64_t>(free_b);
    *total_bytes = static_cast<int64_t>(total_b);
    kvs::cuda::write_error(prop.name, text, text_len);
    return 0;
}

// The backend, or nullptr with a one-line reason in err (NUL-terminated, cut to err_len).
extern "C" __attribute__((visibility("default"))) kvs::Backend* kvscope_create_cuda_backend(char* err, size_t err_len) {
    try {
        std::string why;
        kvs::Backend* b = kvs::cuda::create_backend(&why);
        if (!b) kvs::cuda::write_error(why, err, err_len);
        return b;
    } catch (const std::exception& ex) {
        kvs::cuda::write_error(std::string("CUDA backend failed to start: ") + ex.what(), err, err_len);
    } catch (...) {
        kvs::cuda::write_error("CUDA backend failed to start: unknown exception", err, err_len);
    }
    return nullptr;
}
