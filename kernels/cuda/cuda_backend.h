#pragma once
// CudaBackend: the Backend interface on one NVIDIA GPU (kernels in this folder,
// multi-token matmul through cuBLAS). Created by cuda_entry.cpp once it has checked
// the driver and the device.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/backend.h"

namespace kvs::cuda {

// A device buffer that only grows; its contents do not survive a growth.
class DeviceScratch {
public:
    DeviceScratch() = default;
    ~DeviceScratch();
    DeviceScratch(const DeviceScratch&) = delete;
    DeviceScratch& operator=(const DeviceScratch&) = delete;
    // At least `bytes` of device memory; aborts with a message when the GPU is out of memory.
    void* get(size_t bytes);

private:
    void* m_ptr = nullptr;
    size_t m_bytes = 0;
};

class CudaBackend final : public Backend {
public:
    // Takes ownership of `cublas`. All work runs on the legacy default stream of `device`,
    // so ops, copies and cuBLAS calls are ordered without explicit events.
    CudaBackend(int device, std::string name, cublasHandle_t cublas);
    ~CudaBackend() override;

    std::string name() const override { return m_name; }

    bool host_visible() const override { return false; }
    void* alloc(size_t bytes) override;
    void release(void* ptr) override;
    void copy_to_device(void* dst, const void* src, size_t bytes) override;
    void copy_to_host(void* dst, const void* src, size_t bytes) override;
    void synchronize() override;

    bool supports(DType weight_type) const override;
    // in_perm is a device pointer like the weights (LlamaForward uploads it with them).
    bool supports_input_permutation() const override { return true; }
    void matmul(const WeightView& w, const float* x, float* y, int n_tokens) override;
    void embedding(const WeightView& table, const int32_t* ids, int n_tokens, float* out) override;
    void rms_norm(const float* x, const float* weight, float* y, int n_rows, int n, float eps) override;
    void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, int n_rot, float freq_base,
              RopeStyle style) override;
    void softmax(float* x, int n_rows, int n_cols) override;
    void swiglu(const float* gate, const float* up, float* y, int64_t n) override;
    void add(const float* a, const float* b, float* y, int64_t n) override;
    void add_bias(const float* x, const float* bias, float* y, int n_rows, int n) override;
    void kv_store(const KvStoreArgs& a) override;
    void paged_attention(const PagedAttentionArgs& a) override;

private:
    // Multi-token matmul: weights dequantized to fp16 in row chunks, cublasGemmEx.
    void matmul_gemm(const WeightView& w, const float* x, float* y, int n_tokens);

    int m_device;
    std::string m_name;
    cublasHandle_t m_cublas;
    cudaStream_t m_stream = nullptr;  // the legacy default stream
    DeviceScratch m_w16;              // [rows of one chunk, n_in] fp16 weights
    DeviceScratch m_x16;              // [n_tokens, n_in] fp16 activations
    DeviceScratch m_xperm;            // [n_tokens, n_in] activations gathered by WeightView::in_perm
};

// Aborts the process with "kvscope CUDA backend: <what>: <CUDA error>" when e is an
// error: a failed kernel launch or copy is a programming error or a GPU fault, after
// which the results could only be garbage.
void check_cuda(cudaError_t e, const char* what);

}  // namespace kvs::cuda
